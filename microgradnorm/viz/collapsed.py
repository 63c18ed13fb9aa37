"""The collapsed view in DOT: one box per stage, with the shapes of its named nodes and their first numbers.

Its size does not grow with d, which is why the CLI, the notebook and the page start with it for a graph too
large to read in full. Edges run between stages and keep the colours of the gradient paths they carry.
"""

from __future__ import annotations

from collections.abc import Sequence

from microgradnorm.engine import Value
from microgradnorm.norms import GROUP_NODES, PARAM_NODES, NormGraph
from microgradnorm.viz.graph import Drawing, Focus
from microgradnorm.viz.names import op_symbol
from microgradnorm.viz.paths import GradientPaths
from microgradnorm.viz.style import (
    FADED_LINE,
    FADED_TEXT,
    GRAD_TEXT,
    HIGHLIGHT,
    PATH_COLOURS,
    dot_id,
    edge_attrs,
    esc,
    grad_word,
    id_attr,
    num,
    path_colours,
    stage_colours,
    stage_formula,
    stage_order,
    stage_title,
)

_FEW = 3  # numbers shown per named node in the collapsed view


def _few(values: Sequence[float]) -> str:
    shown = ", ".join(num(v) for v in values[:_FEW])
    return shown + (", …" if len(values) > _FEW else "")


def _shape_of(graph: NormGraph, name: str) -> str:
    """How many values a named node has, in parentheses: ``x (2×4)``, ``mean (2)``; never ``[1]``, which
    ``microgradnorm check`` and the full view use for one entry (``mean[1]``)."""
    count = len(graph[name])
    if name in GROUP_NODES or name in PARAM_NODES:
        return f"({count})"
    return "(" + "×".join(map(str, graph.shape)) + ")"


def _stage_rows(d: Drawing, stage: str, ks: list[int], *, grad: bool, faded: bool) -> list[str]:
    """The rows of one stage's box: its named nodes (shape, first numbers), its constants, the rest counted."""
    colour = FADED_TEXT if faded else None

    def cell(text: str, grad_cell: bool = False) -> str:
        c = colour or (GRAD_TEXT if grad_cell else None)
        inner = f'<font color="{c}">{text}</font>' if c else text
        return f'<td align="left">{inner}</td>'

    def row(head: str, members: list[Value]) -> str:
        cells = cell(head) + cell(esc(_few([v.data for v in members])))
        if grad:
            cells += cell(esc(grad_word()) + " " + esc(_few([v.grad for v in members])), grad_cell=True)
        return f"<tr>{cells}</tr>"

    rows = []
    named: set[int] = set()
    graph = d.graph
    if graph is not None:
        for name, values in graph.nodes.items():
            mine = [v for v in values if (v.stage or "other") == stage and id(v) in d.index]
            if mine and len(mine) == len(values):
                named.update(d.pos(v) for v in values)
                rows.append(row(f"<b>{esc(name)}</b> {_shape_of(graph, name)}", values))
    counts: dict[str, list[Value]] = {}
    leaves: dict[str, list[Value]] = {}  # constants such as 1/n and eps, and the loss's dy: by label
    for k in ks:
        node = d.order[k]
        if k in named:
            continue
        if not node.children and node.label:
            leaves.setdefault(node.label, []).append(node)
        elif graph is None:
            counts.setdefault(d.display_name(k) or op_symbol(node.op) or "value", []).append(node)
    for label, members in leaves.items():  # one constant: "eps = 1e-05"; many (dy): one row like a named node
        if len(members) == 1:
            rows.append(f"<tr>{cell(esc(label) + ' = ' + num(members[0].data))}</tr>")
        else:
            rows.append(row(f"<b>{esc(label)}</b> ({len(members)})", members))
    rows += [row(f"<b>{esc(label)}</b> ({len(members)})", members) for label, members in counts.items()]
    return rows


def collapsed_view(d: Drawing, *, grad: bool, paths: GradientPaths | None, focus: Focus | None, ids: bool) -> list[str]:
    """One box per stage (its named nodes, shapes and first numbers) and the edges between stages."""
    stages = stage_order(d)
    bucket = [node.stage if node.stage is not None else "other" for node in d.order]
    if "other" in bucket and "other" not in stages:
        stages.append("other")
    members: dict[str, list[int]] = {s: [] for s in stages}
    for k, s in enumerate(bucket):
        members[s].append(k)
    shown = focus.shown if focus is not None else None
    lines: list[str] = []
    for position, stage in enumerate(stages):
        faded = shown is not None and not any(k in shown for k in members[stage])
        strong = focus is not None and bucket[focus.start] == stage
        box = _stage_box(d, stage, position, members[stage], grad=grad, faded=faded, strong=strong)
        lines.append(f"  s_{dot_id(stage)} [shape=plain, label=<{box}>{id_attr(ids, 's_' + stage)}];")
    scalar_colours = path_colours(paths)
    stage_edges: dict[tuple[str, str], list[str]] = {}
    for k, node in enumerate(d.order):
        for child in node.children:
            c = d.pos(child)
            if bucket[c] != bucket[k]:
                got = stage_edges.setdefault((bucket[c], bucket[k]), [])
                got += [colour for colour in scalar_colours.get((c, k), []) if colour not in got]
    for (a, b), colours in stage_edges.items():
        faded = shown is not None and not (any(k in shown for k in members[a]) and any(k in shown for k in members[b]))
        ordered = [c for c in PATH_COLOURS.values() if c in colours]
        attrs = edge_attrs(ordered, faded=faded, strong=False, extra=[f"id=se_{dot_id(a)}_{dot_id(b)}"] if ids else [])
        lines.append(f"  s_{dot_id(a)} -> s_{dot_id(b)}{attrs};")
    return lines


def _stage_box(d: Drawing, stage: str, position: int, ks: list[int], *, grad: bool, faded: bool, strong: bool) -> str:
    """The collapsed view's box for one stage (an HTML-like table): its title and formula over its rows."""
    fill, line = stage_colours(stage, position)
    formula = stage_formula(d, stage)
    sub = f'   <font point-size="10">{esc(formula)}</font>' if formula else ""
    head = f"<b>{esc(stage_title(stage))}</b>" + sub
    if faded:
        head = f'<font color="{FADED_TEXT}">{head}</font>'
    rows = [f'<tr><td colspan="{3 if grad else 2}" align="left">{head}</td></tr>']
    rows += _stage_rows(d, stage, ks, grad=grad, faded=faded)
    border = HIGHLIGHT if strong else (FADED_LINE if faded else line)
    table = (
        f'<table border="{3 if strong else 1}" cellborder="0" cellspacing="0" cellpadding="3" '
        f'bgcolor="{"white" if faded else fill}" color="{border}" style="rounded">' + "".join(rows) + "</table>"
    )
    return table
