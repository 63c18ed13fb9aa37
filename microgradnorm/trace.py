"""Backpropagation replayed one contribution at a time, for the lessons and the HTML page.

:meth:`Value.backward` applies the chain rule at every node,
``child.grad += (d node / d child) * node.grad``, for every node in reverse
topological order and every child in argument order. :func:`trace_backward`
does exactly that, one contribution at a time, and records each one (which
node, which input, the local derivative, the amounts, and how many of the
contributions a node receives have arrived), then checks that it ended with
exactly the gradients ``backward()`` gives: the numbers a lesson table or the
step-through page shows are the engine's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from microgradnorm.engine import Value, local_grads, topological_order

__all__ = ["Contribution", "EdgeTagger", "Trace", "trace_backward"]


@dataclass
class Contribution:
    """One step of backpropagation: ``child.grad += local × out.grad``."""

    out: Value
    child: Value
    local: float
    out_grad: float
    amount: float
    total: float  # child.grad right after this contribution
    count: int  # this is the count-th contribution into child
    parts: dict[str, float] = field(default_factory=dict)  # amount split by path tag
    tag: str | None = None  # the path tag of this edge, if it has one


@dataclass
class Trace:
    """A whole backward pass, contribution by contribution (see :func:`trace_backward`)."""

    root: Value
    order: list[Value]
    contributions: list[Contribution]
    parts: dict[int, dict[str, float]]  # id(node) -> its final gradient split by path tag
    incoming: dict[int, int]  # id(node) -> how many contributions it receives in all

    def parts_of(self, node: Value) -> dict[str, float]:
        return self.parts.get(id(node), {})


EdgeTagger = Callable[[Value, Value], "str | None"]


def trace_backward(root: Value, edge_tag: EdgeTagger | None = None) -> Trace:
    """Backpropagate from ``root`` one contribution at a time and record every one.

    The arithmetic and the order are exactly those of :meth:`Value.backward`
    (reverse topological order; for each node, its children in argument order),
    and the result is checked against ``backward()`` itself, so the numbers a
    lesson shows are the engine's. ``edge_tag(out, child)`` may name the path
    an edge belongs to; every gradient is then also kept split by those names
    (a contribution inherits the split of ``out.grad`` unless its edge has a
    tag of its own, which relabels all of it).
    """
    order = topological_order(root)
    for node in order:
        node.grad = 0.0
    root.grad = 1.0
    parts: dict[int, dict[str, float]] = {id(root): {"": 1.0}}
    counts: dict[int, int] = {}  # id(node) -> contributions so far; at the end, all it receives
    contributions: list[Contribution] = []
    for node in reversed(order):
        if not node.children:
            continue
        g = node.grad
        source = parts.get(id(node), {"": g})
        for child, d in zip(node.children, local_grads(node)):
            amount = d * g
            child.grad += amount
            tag = edge_tag(node, child) if edge_tag else None
            split = {tag: amount} if tag else {k: d * s for k, s in source.items()}
            into = parts.setdefault(id(child), {})
            for k, s in split.items():
                into[k] = into.get(k, 0.0) + s
            counts[id(child)] = counts.get(id(child), 0) + 1
            contributions.append(Contribution(node, child, d, g, amount, child.grad, counts[id(child)], split, tag))
    replayed = [n.grad for n in order]
    root.zero_grad()
    root.backward()  # the engine's own pass: it must agree exactly with the replay
    for node, expected in zip(order, replayed):
        if node.grad != expected:
            raise AssertionError(
                f"trace_backward disagrees with Value.backward at node #{node.id} ({node.label}): "
                f"{expected!r} vs {node.grad!r}"
            )
    return Trace(root, order, contributions, parts, counts)
