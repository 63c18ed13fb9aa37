"""The graph a drawing shows: its nodes numbered by topological position, named, linked both ways.

Every view (:mod:`.dot`'s full and collapsed DOT, the HTML page of :mod:`microgradnorm.page`) reads the same
:class:`Drawing`, so the page's data and the SVG that Graphviz lays out agree on every node (``v12`` is
position 12). Positions, not the engine's global ids, number the nodes: the same graph gives the same numbers
in any process. A highlight (what one node is computed from, or what is computed from it) is a set of these
positions too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from microgradnorm.engine import Value, topological_order
from microgradnorm.i18n import _
from microgradnorm.norms import NormGraph
from microgradnorm.viz.names import display_names


class OptionError(ValueError):
    """A drawing option asks for something the graph does not have (a node name, an input index).

    ``option`` is the keyword of :func:`~microgradnorm.viz.to_dot` at fault and ``message`` what was
    expected and what was given, so that a command can name its own flag instead.
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message


@dataclass
class Drawing:
    """The graph to draw, indexed by topological position (the stable node numbers): see :func:`drawing`."""

    order: list[Value]
    index: dict[int, int]  # id(node) -> position in order
    parents: list[list[int]]  # position -> positions of the nodes that use it (one per edge)
    graph: NormGraph | None
    names: list[str]  # position -> the name drawn on the node (see microgradnorm.names.display_names)

    def name(self, k: int) -> str | None:
        """The norm's own name for the node (``xhat[2]``), None for the nodes between them."""
        return self.graph.name_of(self.order[k]) if self.graph is not None else None

    def display_name(self, k: int) -> str:
        return self.names[k]

    def pos(self, node: Value) -> int:
        return self.index[id(node)]

    def children(self, k: int) -> list[int]:
        """Positions of the nodes that node k is computed from (one per edge)."""
        return [self.pos(c) for c in self.order[k].children]

    def parents_of(self, k: int) -> list[int]:
        """Positions of the nodes that use node k (one per edge)."""
        return self.parents[k]


def _flatten_values(obj: Any, what: str) -> list[Value]:
    out: list[Value] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, Value):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        else:
            raise TypeError(
                f"{what}: expected a Value, a list of Values, a built norm or a NormGraph, "
                f"found a {type(item).__name__} ({item!r})"
            )
    if not out:
        raise ValueError(f"{what}: expected at least one Value, got an empty {type(obj).__name__}")
    return out


def _resolve(obj: Any, graph: NormGraph | None) -> tuple[list[Value], NormGraph | None]:
    """The roots to draw from, and the NormGraph that names their nodes (if any)."""
    if isinstance(obj, NormGraph):
        return obj.roots(), obj
    own = getattr(obj, "graph", None)
    if isinstance(own, NormGraph):  # what layer_norm & co. return
        return own.roots(), graph or own
    return _flatten_values(obj, "to_dot(obj)"), graph


def drawing(obj: Any, graph: NormGraph | None = None) -> Drawing:
    """The nodes :func:`to_dot` draws for ``obj``, numbered, named and linked both ways.

    The HTML step-through page reads the same numbering, so its data and the
    SVG that Graphviz lays out agree on every node (``v12`` is position 12).
    """
    roots, graph = _resolve(obj, graph)
    order = topological_order(roots)
    index = {id(node): k for k, node in enumerate(order)}
    parents: list[list[int]] = [[] for _ in order]
    for k, node in enumerate(order):
        for child in node.children:
            parents[index[id(child)]].append(k)
    return Drawing(order, index, parents, graph, display_names(order, graph))


def graph_size(obj: Any, *, graph: NormGraph | None = None) -> int:
    """How many nodes the full view draws: one per Value plus one per op."""
    roots, _ = _resolve(obj, graph)
    return drawn_nodes(topological_order(roots))


def drawn_nodes(order: list[Value]) -> int:
    """How many nodes the full view draws for the Values in ``order``: one per Value plus one per op."""
    return len(order) + sum(1 for node in order if node.children)


# ---- highlighting --------------------------------------------------------------------


@dataclass
class Focus:
    """A highlighted node (``start``, a position) and the positions kept dark with it."""

    start: int
    shown: set[int]


def highlighted(d: Drawing, highlight: Value | str, mode: str) -> Focus:
    """The node ``highlight`` names, with its ancestors (``mode='ancestors'``) or descendants kept dark."""
    start = find_node(d, highlight)
    return Focus(start, related(d, start, mode))


def find_node(d: Drawing, which: Value | str) -> int:
    if isinstance(which, Value):
        if id(which) not in d.index:
            raise OptionError("highlight", _("{which!r} is not part of this graph").format(which=which))
        return d.pos(which)
    if not isinstance(which, str):
        raise TypeError(f"highlight: expected a Value or a node name like 'xhat[1]', got {type(which).__name__}")
    wanted = which.replace(" ", "")
    if d.graph is not None:
        for name, values in d.graph.nodes.items():
            for k, v in enumerate(values):
                label = d.graph.index_label(name, k)
                if (wanted == label or (wanted == name and len(values) == 1)) and id(v) in d.index:
                    return d.pos(v)
        choices = ", ".join(d.graph.index_label(name, 0) for name in d.graph.nodes)
        raise OptionError(
            "highlight", _("expected a node name such as {choices}, got {which!r}").format(choices=choices, which=which)
        )
    matches = [k for k, node in enumerate(d.order) if node.label == wanted]
    if len(matches) != 1:
        if matches:
            message = _("expected the label of exactly one node, got {which!r} ({n} nodes carry it)")
        else:
            message = _("expected the label of exactly one node, got {which!r} (no node carries it)")
        raise OptionError("highlight", message.format(which=which, n=len(matches)))
    return matches[0]


def related(d: Drawing, start: int, mode: str) -> set[int]:
    """``start`` and its ancestors (what it is computed from) or descendants (what uses it)."""
    if mode not in ("ancestors", "descendants"):
        raise OptionError("highlight_mode", _("expected 'ancestors' or 'descendants', got {mode!r}").format(mode=mode))
    return reachable({start}, d.children if mode == "ancestors" else d.parents_of)


def reachable(
    starts: set[int], step: Callable[[int], Iterable[int]], may_pass: Callable[[int], bool] = lambda k: True
) -> set[int]:
    """``starts`` and every position reached from them by ``step`` (:meth:`Drawing.children` or
    :meth:`Drawing.parents_of`) through positions that ``may_pass``."""
    seen = set(starts)
    stack = list(seen)
    while stack:
        for j in step(stack.pop()):
            if j not in seen and may_pass(j):
                seen.add(j)
                stack.append(j)
    return seen
