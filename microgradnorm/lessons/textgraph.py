"""A small graph drawn as text: each node with its value, what it is computed from, and its gradient.

For the graph a step talks about, on the step's own screen (the ``g`` key
draws the whole graph as an SVG). Stage by stage, one line per node::

      node          value   from                   grad
    mean
      mean      =     2.5 ← sum(x[0..3])·1/n      0.25
    center
      xshift[0] =    -1.5 ← x[0] − mean        -0.1297

Names and formulas are the drawings' own (:mod:`microgradnorm.viz.names`):
what a node is computed from is written with the nodes shown (``x[2]``,
``mean``, ``rstd``) and the labelled constants (``1/n``, ``eps``); the nodes
in between (``xshift[0]²``, ``var + eps``) are written out as part of the
formula, and a run of inputs that differ only in one index is shortened to a
range (``x[0..3]``). Plain text, no colour needed, at
most :data:`WIDTH` columns, and refused (with a ValueError that says what to
do) when it would take more than :data:`MAX_LINES` lines.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.text import Text

from microgradnorm.engine import Value, topological_order
from microgradnorm.i18n import pgettext
from microgradnorm.norms import NormGraph
from microgradnorm.numfmt import fmt
from microgradnorm.viz.names import display_names, formula

__all__ = ["MAX_LINES", "WIDTH", "text_graph"]

WIDTH = 60  # the narrowest terminal the lessons support
MAX_LINES = 30  # a drawing takes at most this much of a step's 40-line screen
GraphLike = NormGraph | Value | Sequence[Value]


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
    return _layout(rows, lambda v: formula(v, names), grads, width)


# ---- which nodes, named how ----------------------------------------------------------------------------


def _nodes(graph: GraphLike) -> tuple[dict[int, str], list[tuple[str, Value]]]:
    """The names a formula may use (the shown nodes and the leaves, by id), and the (stage, node) pairs to show.

    The names are the drawings' own (:func:`microgradnorm.viz.names.display_names`); a node not shown is
    written out in the formulas that use it.
    """
    norm = graph if isinstance(graph, NormGraph) else None
    if norm is not None:
        roots = norm.roots()
    elif isinstance(graph, Value):
        roots = [graph]
    elif isinstance(graph, (list, tuple)) and graph and all(isinstance(v, Value) for v in graph):
        roots = list(graph)
    else:
        raise TypeError(f"graph: expected a NormGraph, a Value or a list of Values, got {type(graph).__name__}")
    order = topological_order(roots)
    shown = _norm_nodes(norm) if norm is not None else [(v.stage or "", v) for v in order if v.label or not v.children]
    drawn = {id(v) for _stage, v in shown}
    names = {id(v): n for v, n in zip(order, display_names(order, norm)) if id(v) in drawn or not v.children}
    return names, shown


def _norm_nodes(graph: NormGraph) -> list[tuple[str, Value]]:
    """The named nodes of ``graph`` by stage: ``input``, then the norm's own stages."""
    stage_rank = {stage: k for k, stage in enumerate(("input", *graph.stages))}
    pairs, seen = [], set()
    for name, values in graph.nodes.items():
        for v in values:
            if id(v) in seen:  # one node under two names (y is xhat without gamma and beta): the first
                continue
            seen.add(id(v))
            pairs.append(("input" if name == "x" else (v.stage or graph.stages[-1]), v))
    pairs.sort(key=lambda pair: (stage_rank.get(pair[0], len(stage_rank)), pair[1].id))
    return pairs


def _choose(order: list[tuple[str, Value]], stages: Iterable[str] | None) -> list[tuple[str, Value]]:
    if stages is None:
        return order
    wanted = [stages] if isinstance(stages, str) else list(stages)
    known = list(dict.fromkeys(stage for stage, _node in order))
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ValueError(f"stages: {', '.join(map(repr, unknown))} not in this graph; its stages: {', '.join(known)}")
    return [(stage, v) for stage, v in order if stage in wanted]


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
