"""A small graph drawn as text: each node with its value, what it is computed from, and its gradient.

For the graph a step talks about, on the step's own screen (the ``g`` key
draws the whole graph as an SVG). Stage by stage, one line per node::

      node          value   from                   grad
    mean
      mean      =     2.5 ← sum(x[0..3])·1/n      0.25
    center
      xshift[0] =    -1.5 ← x[0] − mean        -0.1297

What a node is computed from is written with the nodes that have names
(``x[2]``, ``mean``, ``rstd``) and the labelled constants (``1/n``, ``eps``);
nodes without a name in between (``xshift[0]²``, ``var + eps``) are written
out as part of the expression, and a run of inputs that differ only in one
index is shortened to a range (``x[0..3]``). Plain text, no colour needed, at
most :data:`WIDTH` columns, and refused (with a ValueError that says what to
do) when it would take more than :data:`MAX_LINES` lines.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.text import Text

from microgradnorm.engine import Value, topological_order
from microgradnorm.i18n import pgettext
from microgradnorm.norms import NormGraph
from microgradnorm.numfmt import fmt

__all__ = ["MAX_LINES", "WIDTH", "text_graph"]

WIDTH = 60  # the narrowest terminal the lessons support
MAX_LINES = 30  # a drawing takes at most this much of a step's 40-line screen
GraphLike = NormGraph | Value | Sequence[Value]

_SUPERSCRIPT = {2.0: "²", 3.0: "³", -1.0: "⁻¹", -2.0: "⁻²", 0.5: "^½"}
_INDEX = re.compile(r"\[(\d+(?:,\d+)*)\]")


def text_graph(
    graph: GraphLike, *, stages: Iterable[str] | None = None, grads: bool = True, width: int = WIDTH
) -> Text:
    """The nodes of ``graph`` in the chosen ``stages`` (default: all), with values and (``grads``) gradients.

    ``graph`` is a :class:`~microgradnorm.norms.NormGraph` (its named nodes are shown,
    by stage: ``input``, then the norm's own stages) or a Value / list of Values (every
    labelled node and every leaf they depend on, grouped by their stage tags).
    """
    if width < 40:
        raise ValueError(f"width: expected at least 40 columns, got {width}")
    names, order = _nodes(graph)
    chosen = _choose(order, stages)
    rows = [(stage, names[id(v)], v) for stage, v in chosen]
    stage_count = len({stage for stage, _name, _node in rows})
    if not rows:
        raise ValueError("text_graph: nothing to draw in the stages chosen")
    if len(rows) + stage_count + 1 > MAX_LINES:
        raise ValueError(
            f"text_graph: {len(rows)} nodes in {stage_count} stages take more than {MAX_LINES} lines; "
            "choose fewer stages (stages=(...)) or a smaller dim"
        )
    return _layout(rows, lambda v: _formula(v, names), grads, width)


# ---- which nodes, named how ----------------------------------------------------------------------------


def _nodes(graph: GraphLike) -> tuple[dict[int, str], list[tuple[str, Value]]]:
    """The name of every named node (by id), and the (stage, node) pairs to show, in order."""
    if isinstance(graph, NormGraph):
        return _norm_nodes(graph)
    roots = [graph] if isinstance(graph, Value) else list(graph) if isinstance(graph, (list, tuple)) else []
    if not roots or not all(isinstance(v, Value) for v in roots):
        raise TypeError(f"graph: expected a NormGraph, a Value or a list of Values, got {type(graph).__name__}")
    shown = [v for v in topological_order(roots) if v.label or not v.children]
    names = _unique_names([v.label or f"#{v.id}" for v in shown])
    return {id(v): n for v, n in zip(shown, names)}, [(v.stage or "", v) for v in shown]


def _norm_nodes(graph: NormGraph) -> tuple[dict[int, str], list[tuple[str, Value]]]:
    stage_rank = {stage: k for k, stage in enumerate(("input", *graph.stages))}
    names: dict[int, str] = {}
    pairs = []
    for name, values in graph.nodes.items():
        for k, v in enumerate(values):
            if id(v) in names:  # one node under two names (y is xhat without gamma and beta): the first
                continue
            names[id(v)] = graph.index_label(name, k)
            stage = "input" if name == "x" else (v.stage or graph.stages[-1])
            pairs.append((stage, v))
    pairs.sort(key=lambda pair: (stage_rank.get(pair[0], len(stage_rank)), pair[1].id))
    return names, pairs


def _unique_names(labels: list[str]) -> list[str]:
    """Labels as names; a label used by several nodes gets #1, #2, ... in creation order."""
    counts = {label: labels.count(label) for label in labels}
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if counts[label] == 1 else f"{label}#{seen[label]}")
    return out


def _choose(order: list[tuple[str, Value]], stages: Iterable[str] | None) -> list[tuple[str, Value]]:
    if stages is None:
        return order
    wanted = [stages] if isinstance(stages, str) else list(stages)
    known = list(dict.fromkeys(stage for stage, _node in order))
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ValueError(f"stages: {', '.join(map(repr, unknown))} not in this graph; its stages: {', '.join(known)}")
    return [(stage, v) for stage, v in order if stage in wanted]


# ---- what a node is computed from ------------------------------------------------------------------------


def _formula(node: Value, names: dict[int, str]) -> str:
    """What ``node`` is computed from: its op over its children, each a name or written out."""
    if not node.children:
        return ""
    return _expression(node, names, top=True)


def _expression(node: Value, names: dict[int, str], top: bool = False) -> str:
    if not top and id(node) in names:
        return names[id(node)]
    if not node.children:
        return node.label or fmt(node.data, 4)
    args = [_expression(c, names) for c in node.children]
    op = node.op
    if op in ("+", "-"):
        return f"{args[0]} {'+' if op == '+' else '−'} {_wrap(node.children[1], args[1], names)}"
    if op == "*":
        return "·".join(_wrap(c, a, names) for c, a in zip(node.children, args))
    if op.startswith("**"):
        power = float(op[2:])
        return _wrap(node.children[0], args[0], names) + _SUPERSCRIPT.get(power, f"^{power:g}")
    if op == "sum":
        return f"sum({_ranges(args)})"
    if op == "dot":
        half = len(args) // 2
        return f"dot({_ranges(args[:half])}; {_ranges(args[half:])})"
    return f"{op}({', '.join(args)})"


def _wrap(child: Value, text: str, names: dict[int, str]) -> str:
    """``text`` in parentheses when it is a sum or difference written out inside a product or power."""
    compound = id(child) not in names and child.children and child.op in ("+", "-")
    return f"({text})" if compound else text


def _ranges(args: list[str]) -> str:
    """``x[0], x[1], x[2]`` as ``x[0..2]``: inputs that differ only in one index, counting up by one."""
    if len(args) >= 3:
        shortened = _as_range(args)
        if shortened is not None:
            return shortened
    return ", ".join(args) if len(args) <= 4 else f"{args[0]}, {args[1]}, …, {args[-1]}"


def _as_range(args: list[str]) -> str | None:
    matches = [list(_INDEX.finditer(a)) for a in args]
    if not all(len(m) == 1 for m in matches):
        return None
    spans = [m[0].span() for m in matches]
    if len({a[:i] + a[j:] for a, (i, j) in zip(args, spans)}) != 1:  # the same text around the index
        return None
    indices = [tuple(int(k) for k in m[0].group(1).split(",")) for m in matches]
    varying = [k for k in range(len(indices[0])) if len({i[k] if k < len(i) else None for i in indices}) > 1]
    if len(varying) != 1 or len({len(i) for i in indices}) != 1:
        return None
    k = varying[0]
    if any(b[k] - a[k] != 1 for a, b in itertools.pairwise(indices)):
        return None
    shown = [str(i) for i in indices[0]]
    shown[k] = f"{indices[0][k]}..{indices[-1][k]}"
    start, stop = spans[0]
    return f"{args[0][:start]}[{','.join(shown)}]{args[0][stop:]}"


# ---- laying out the lines ------------------------------------------------------------------------------------


def _layout(rows: list[tuple[str, str, Value]], formula, grads: bool, width: int) -> Text:
    """Stage headings, then one line per node: ``name = value ← formula``, the gradient at the right."""
    values = [fmt(v.data, 4) for _stage, _name, v in rows]
    gradients = [fmt(v.grad, 4) for _stage, _name, v in rows]
    formulas = [formula(v) for _stage, _name, v in rows]
    # Translators: the column heads of a graph drawn as text (node = value ← what it is computed from, grad)
    h_node, h_value = pgettext("text graph column", "node"), pgettext("text graph column", "value")
    h_from, h_grad = pgettext("text graph column", "from"), pgettext("text graph column", "grad")
    w_name = max(cell_len(h_node), *(len(name) for _stage, name, _node in rows))  # at least as wide as its heading
    w_value = max(cell_len(h_value), *map(len, values))
    w_grad = max(4, cell_len(h_grad), *map(len, gradients)) if grads else 0
    lead = 2 + w_name + 3 + w_value + 3  # "  name = value ← "
    room = width - lead - (2 + w_grad if grads else 0)
    if room < 12:
        raise ValueError(f"text_graph: the names and numbers leave no room for formulas in {width} columns")
    w_from = min(room, max(4, cell_len(h_from), *map(len, formulas)))
    grad_of = (lambda g: "  " + _pad(g, w_grad, right=True)) if grads else (lambda g: "")
    out = Text(no_wrap=True)
    heading = (
        f"  {_pad(h_node, w_name)}   {_pad(h_value, w_value, right=True)}   {_pad(h_from, w_from)}{grad_of(h_grad)}"
    )
    out.append(heading.rstrip(), "dim")
    stage = None
    for (row_stage, name, _node), value, grad, text in zip(rows, values, gradients, formulas):
        if row_stage != stage:
            stage = row_stage
            out.append("\n" + (stage or pgettext("text graph heading", "nodes")), style="bold")
        lines = textwrap.wrap(text, w_from) or [""]
        arrow = "←" if text else " "
        out.append(f"\n  {name:<{w_name}} = {value:>{w_value}} {arrow} {lines[0]:<{w_from}}{grad_of(grad)}".rstrip())
        for more in lines[1:]:
            out.append("\n" + " " * lead + more)
    return out


def _pad(text: str, width: int, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` terminal cells (a Chinese character takes two)."""
    fill = " " * max(0, width - cell_len(text))
    return fill + text if right else text + fill
