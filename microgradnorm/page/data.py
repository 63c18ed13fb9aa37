"""The data of the step-through page: every number it shows, computed here by the engine.

The page's script never computes a value, a gradient or a derivative; it shows
the entries of this data one step at a time. The data holds

* one entry per drawn node, in the order the forward pass created them
  (position ``k`` is the node ``v{k}`` of the SVG, as :func:`microgradnorm.viz.drawing`
  numbers it): its value, final gradient, how it was computed and each local
  derivative with the numbers plugged in;
* one entry per backward contribution ``into.grad += local × grad``, in the
  order ``backward()`` makes them (:func:`microgradnorm.trace.trace_backward`),
  with the running total and k/m, m being how many contributions the node
  receives in all (its gradient is final at m/m, as lesson 4's tables count);
* for the inputs x_i, the gradient paths of :func:`microgradnorm.viz.gradient_paths`
  as SVG edge ids, with each path's share of dL/dx_i;
* for a built norm, the closed form and the finite difference of every named
  node, computed by :func:`microgradnorm.check.check_norm` as ``microgradnorm check`` does.

Numbers travel as ``repr(float)`` strings (exact; JSON has no inf or nan) next
to the short form the drawing uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from microgradnorm import viz
from microgradnorm.engine import Value, local_grads
from microgradnorm.i18n import _
from microgradnorm.i18n.errors import localize
from microgradnorm.inputs import nest
from microgradnorm.norms import NormGraph
from microgradnorm.registry import spec_for
from microgradnorm.trace import Trace, trace_backward
from microgradnorm.viz.names import expression, local_symbol, op_symbol

__all__ = ["CHECK_LIMIT", "FD_ENTRIES", "PATH_INPUTS", "WHAT_IF", "Subject", "forward_order", "page_data", "subject_of"]

PATH_INPUTS = 64  # inputs x_i whose gradient paths the page carries (each costs O(n) edge ids)
CHECK_LIMIT = 512  # entries of x up to which the page runs the three-way check (as microgradnorm check)
FD_ENTRIES = 32  # finite differences per named node, microgradnorm check's default


@dataclass
class Subject:
    """What a page shows: ``obj`` drawn (named by ``graph``), backpropagated from ``root`` if there is one."""

    obj: Any
    graph: NormGraph | None
    root: Value | None


def subject_of(obj: Any, graph: NormGraph | None = None) -> Subject:
    """The graph behind ``obj`` and the scalar backward starts from.

    A Value is its own root. A built norm (or its NormGraph) whose outputs hold
    gradients is backpropagated from ``L = Σ y · dy`` with dy = those gradients,
    the loss whose backward() leaves them there; without gradients it is shown
    forward only, as is a list of several Values.
    """
    if isinstance(obj, Value):
        return Subject(obj, graph, obj)
    own = obj if isinstance(obj, NormGraph) else getattr(obj, "graph", None)
    if isinstance(own, NormGraph):
        ys = own["y"]
        if not any(y.grad for y in ys):
            return Subject(own, own, None)
        loss = own.loss(nest([y.grad for y in ys], own.shape))
        return Subject(loss, own, loss)
    if isinstance(obj, (list, tuple)) and len(obj) == 1 and isinstance(obj[0], Value):
        return Subject(obj[0], graph, obj[0])
    return Subject(obj, graph, None)


@contextmanager
def _grads_kept(nodes: list[Value]) -> Iterator[None]:
    """Leave every node's grad as it was: tracing runs backward() again on the learner's graph."""
    saved = [node.grad for node in nodes]
    try:
        yield
    finally:
        for node, grad in zip(nodes, saved):
            node.grad = grad


def _exact(v: float) -> str:
    return repr(float(v))


def derivative_lines(node: Value, out: str, kids: Sequence[str]) -> list[tuple[str, float]]:
    """One ``∂out/∂kid = symbol = number`` line per input of ``node``: the symbol from
    :func:`microgradnorm.names.local_symbol`, the number from the engine (:func:`microgradnorm.local_grads`), so
    what a learner reads is the derivative backward() really used."""
    lines = []
    for slot, (kid, d) in enumerate(zip(kids, local_grads(node))):
        symbol = local_symbol(node.op, out, kids, slot)
        head = f"∂{out}/∂{kid}"
        if symbol is None or symbol in ("1", "−1"):
            lines.append((f"{head} = {symbol or viz.num(d)}", d))
        else:
            lines.append((f"{head} = {symbol} = {viz.num(d)}", d))
    return lines


def page_data(subject: Subject, d: viz.Drawing) -> dict[str, Any]:
    """Everything the page shows about ``subject`` drawn as ``d``, as JSON-ready data (see the module docstring)."""
    drawn = {id(node) for node in d.order}
    unreached = [v for v in viz.drawing(subject.graph).order if id(v) not in drawn] if subject.graph else []
    with _grads_kept(d.order + unreached):
        for node in unreached:  # parts of the norm the root does not depend on: their gradient is 0
            node.grad = 0.0
        trace = trace_backward(subject.root) if subject.root is not None else None
        checks, check_summary = _checks(subject, d) if trace is not None else ({}, None)
        return {
            "nodes": _nodes(d, trace, checks),
            "forward": forward_order(d),
            "stages": _stages(d),
            "backward": _backward(d, trace) if trace is not None else [],
            "seed": _seed(d, trace),
            "paths": _paths(d, amounts=trace is not None),
            "check": check_summary,
        }


def forward_order(d: viz.Drawing) -> list[int]:
    """The order the page makes the nodes in: each op right after the leaves it is the first to use.

    The drawing's topological order puts every leaf first (gamma and beta before any
    x is used); a learner follows the forward pass better when x comes first and each
    parameter or constant appears at the step that uses it. Every node still comes
    after its inputs.
    """
    order: list[int] = []
    made: set[int] = set()
    for k, node in enumerate(d.order):
        if not node.children:
            continue
        for child in node.children:
            c = d.pos(child)
            if c not in made and not child.children:
                made.add(c)
                order.append(c)
        made.add(k)
        order.append(k)
    order += [k for k in range(len(d.order)) if k not in made]  # leaves no op uses (a lone root)
    return order


def _incoming(d: viz.Drawing, trace: Trace | None) -> list[int]:
    return [trace.incoming.get(id(node), 0) if trace else 0 for node in d.order]


def _nodes(d: viz.Drawing, trace: Trace | None, checks: dict[int, dict]) -> list[dict[str, Any]]:
    names = [d.display_name(k) for k in range(len(d.order))]
    incoming = _incoming(d, trace)
    out = []
    for k, node in enumerate(d.order):
        kids = [names[d.pos(c)] for c in node.children]
        partials = derivative_lines(node, names[k], kids) if node.children else []
        out.append(
            {
                "name": names[k],
                "op": op_symbol(node.op) if node.children else "",
                "stage": node.stage or "",
                "stageTitle": viz.stage_title(node.stage) if node.stage else "",
                "label": node.label or "",
                "value": _exact(node.data),
                "valueText": viz.num(node.data),
                "grad": _exact(node.grad) if trace else None,
                "gradText": viz.num(node.grad) if trace else None,
                "inputs": [d.pos(c) for c in node.children],
                "raw": node.op if node.children else "",  # the engine's op, replayed by the page's what-if
                "edit": _editable(d, k),
                "forward": expression(node, names[k], kids),
                "partials": [_partial(text, v) for text, v in partials],
                "m": incoming[k],
                "check": checks.get(k),
            }
        )
    return out


WHAT_IF = ("x", "gamma", "beta", "eps", "dy")  # the leaves of a norm's page the learner may change


def _editable(d: viz.Drawing, k: int) -> str:
    """The what-if group of leaf ``k`` (``x`` for x[2]): one of WHAT_IF for a norm, any labelled leaf of a plain
    graph; "" for an op's output and for a constant such as 1/n."""
    node = d.order[k]
    if node.children:
        return ""
    base = d.display_name(k).partition("[")[0]
    if d.graph is None:
        return base if node.label else ""
    return base if base in WHAT_IF else ""


def _partial(text: str, value: float) -> dict[str, Any]:
    """A line ``∂out/∂kid = symbol = number``: its text, its exact number, and the text before the number
    (``head``, None when the line has no number: a derivative of 1 or −1), for the what-if to redo."""
    head, _sep, tail = text.rpartition(" = ")
    fixed = tail in ("1", "−1")
    return {"text": text, "value": _exact(value), "head": None if fixed else head}


def _stages(d: viz.Drawing) -> list[dict[str, Any]]:
    """Each stage (in the norm's order), its formula and its nodes' positions."""
    stages = viz.stage_order(d)
    members: dict[str, list[int]] = {s: [] for s in stages}
    for k, node in enumerate(d.order):
        if node.stage in members:
            members[node.stage].append(k)
    return [
        {
            "name": s,
            "shown": viz.stage_title(s),
            "formula": viz.stage_formula(d, s),
            "nodes": members[s],
            "cluster": viz.dot_id("cluster_" + s),  # the SVG ids of its cluster, title and collapsed box
            "title": viz.dot_id("t_" + s),
            "box": viz.dot_id("s_" + s),
        }
        for s in stages
    ]


def _seed(d: viz.Drawing, trace: Trace | None) -> dict[str, Any] | None:
    if trace is None:
        return None
    k = d.pos(trace.root)
    name = d.display_name(k)
    return {"node": k, "text": _("{name}.grad = 1: dL/dL, where backward() starts").format(name=name)}


def _backward(d: viz.Drawing, trace: Trace) -> list[dict[str, Any]]:
    """Every contribution child.grad += local × out.grad, in the order backward() makes them."""
    names = [d.display_name(k) for k in range(len(d.order))]
    total: dict[int, float] = {}  # position -> grad so far
    slots: dict[int, int] = {}  # op position -> inputs handled so far (x * x has two edges into x)
    out = []
    for c in trace.contributions:
        k, into = d.pos(c.out), d.pos(c.child)
        slot = slots.get(k, 0)
        slots[k] = slot + 1
        before = total.get(into, 0.0)
        total[into] = c.total
        m = trace.incoming.get(id(c.child), 1)
        kids = [names[d.pos(child)] for child in c.out.children]
        why = derivative_lines(c.out, names[k], kids)[slot][0]
        out.append(
            {
                "into": into,
                "from": k,
                "edge": f"e{k}_{slot}",
                "slot": slot,
                "stage": c.out.stage or "",
                "before": _exact(before),
                "beforeText": viz.num(before),
                "total": _exact(c.total),
                "totalText": viz.num(c.total),
                "k": c.count,
                "m": m,
                # Translators: one backward step, e.g. "rstd.grad += -0.6337 × -1.035 (= 0.6556); total 0.1687 (2/4)"
                "text": _("{name}.grad += {local} × {grad} (= {product}); total {total} ({k}/{m})").format(
                    name=names[into],
                    local=viz.num(c.local),
                    grad=viz.num(c.out_grad),
                    product=viz.num(c.amount),
                    total=viz.num(c.total),
                    k=c.count,
                    m=m,
                ),
                "why": f"{why}; {names[k]}.grad = {viz.num(c.out_grad)}",
            }
        )
    return out


def _edge_ids(d: viz.Drawing, edges: set[tuple[int, int]]) -> list[str]:
    """SVG ids of the drawn edges (child position, op position): each input edge and the op's output."""
    ids: set[str] = set()
    for c, k in edges:
        for slot, child in enumerate(d.order[k].children):
            if d.pos(child) == c:
                ids.add(f"e{k}_{slot}")
        ids.add(f"o{k}")
    return sorted(ids)


def _paths(d: viz.Drawing, *, amounts: bool) -> dict[str, Any]:
    """The gradient paths into each of the first PATH_INPUTS inputs x_i (a built norm only);
    with ``amounts``, each path's share of dL/dx_i once backward has run."""
    graph = d.graph
    if graph is None or not any(id(v) in d.index for v in graph["x"]):
        return {"inputs": [], "note": "", "byNode": {}}
    xs = [i for i, v in enumerate(graph["x"]) if id(v) in d.index]
    note = ""
    if len(xs) > PATH_INPUTS:
        note = _("Paths are listed for the first {n} of the {total} inputs.").format(n=PATH_INPUTS, total=len(xs))
    by_node = {}
    for i in xs[:PATH_INPUTS]:
        info = viz.gradient_paths(d, i)
        if not amounts:
            for p in info.paths:
                p.amount = None
        k = d.pos(graph["x"][i])
        paths = [
            {
                "key": p.key,
                "title": _(p.title),  # marked in viz, where the drawing's legend shows it in English
                "route": p.route,
                "formula": p.formula,
                "amount": None if p.amount is None else _exact(p.amount),
                "amountText": None if p.amount is None else viz.num(p.amount),
                "edges": _edge_ids(d, p.edges),
            }
            for p in info.paths
        ]
        shares = [p.amount for p in info.paths]
        total = sum(shares) if None not in shares else None  # type: ignore[arg-type]
        by_node[k] = {
            "paths": paths,
            "note": _(info.note),
            "sumText": None if total is None else viz.num(total),
            "gradText": viz.num(d.order[k].grad) if amounts else None,
        }
    return {"inputs": [d.pos(graph["x"][i]) for i in xs[:PATH_INPUTS]], "note": note, "byNode": by_node}


def _check_is_valid(subject: Subject, d: viz.Drawing) -> bool:
    """Whether the root reaches the norm only through its outputs y, so that dy = y.grad recreates its gradients."""
    graph = subject.graph
    if graph is None or not any(id(y) in d.index for y in graph["y"]):
        return False
    inside = {id(v) for v in viz.drawing(graph).order}
    ys = {id(y) for y in graph["y"]}
    return all(id(node) in inside or all(id(c) not in inside or id(c) in ys for c in node.children) for node in d.order)


def _checks(subject: Subject, d: viz.Drawing) -> tuple[dict[int, dict], dict[str, Any] | None]:
    """The closed form and the finite difference of every named node, from microgradnorm.check."""
    graph = subject.graph
    if not _check_is_valid(subject, d):
        return {}, None
    assert graph is not None
    if len(graph["x"]) > CHECK_LIMIT:
        text = _("x has more than {limit} entries: the three-way check was left out.").format(limit=CHECK_LIMIT)
        return {}, {"text": text, "ok": None}
    from microgradnorm.check import check_norm

    def values(name: str) -> list[float] | None:
        return [v.data for v in graph[name]] if name in graph else None

    dy = [y.grad if id(y) in d.index else 0.0 for y in graph["y"]]
    x = nest(values("x"), graph.shape)  # type: ignore[arg-type]
    try:
        report = check_norm(
            spec_for(graph),
            x,
            values("gamma"),
            values("beta"),
            graph.eps,
            nest(dy, graph.shape),
            variance=graph.variance,
            fd_max_entries=FD_ENTRIES,
        )
    except (ValueError, ArithmeticError) as exc:
        return {}, {"text": _("The three-way check could not run: {error}").format(error=localize(exc)), "ok": None}
    return _check_rows(graph, d, report)


def _check_rows(graph: NormGraph, d: viz.Drawing, report: Any) -> tuple[dict[int, dict], dict[str, Any]]:
    rows: dict[int, dict] = {}
    for node in report.nodes:
        for k, value in enumerate(graph[node.name]):
            if id(value) not in d.index:
                continue
            fd = node.finite_diff[k]
            rows[d.pos(value)] = {
                "closed": _exact(node.closed_form[k]),
                "closedText": viz.num(node.closed_form[k]),
                "fd": None if fd != fd else _exact(fd),
                "fdText": None if fd != fd else viz.num(fd),
                "closedOk": bool(node.closed_form_ok),
                "fdOk": bool(node.fd_ok),
            }
    if report.passed:
        message = _(
            "Autograd, the closed forms and finite differences agree at the {n} named nodes (finite differences "
            "at up to {fd} entries each), as microgradnorm check reports them."
        )
    else:
        message = _(
            "Autograd, the closed forms and finite differences do not all agree at the {n} named nodes (finite "
            "differences at up to {fd} entries each), as microgradnorm check reports them."
        )
    text = message.format(n=len(report.nodes), fd=FD_ENTRIES)
    return rows, {"text": text, "ok": report.passed}
