"""The full view in DOT: one box per value (name, data, grad), one circle per op, each stage a titled cluster.

Optionally each edge carries its local derivative d node / d child (:func:`microgradnorm.local_grads`), the
gradient paths colour their edges, and a highlight fades what it does not keep. Invisible edges keep each
stage's title above its nodes and nodes that share a name (x[0], x[1], ...) in index order.
"""

from __future__ import annotations

from microgradnorm.engine import local_grads
from microgradnorm.viz.graph import Drawing, Focus
from microgradnorm.viz.names import op_symbol, split_index
from microgradnorm.viz.paths import GradientPaths
from microgradnorm.viz.style import (
    FADED_LINE,
    FADED_TEXT,
    GRAD_TEXT,
    HIGHLIGHT,
    PATH_COLOURS,
    data_word,
    dot_id,
    edge_attrs,
    esc,
    grad_word,
    id_attr,
    num,
    path_colours,
    quote,
    stage_colours,
    stage_formula,
    stage_order,
    stage_title,
)


def _stage_members(d: Drawing, stages: list[str]) -> dict[str | None, list[int]]:
    """Positions of the nodes of each stage (None: nodes without one), in drawing order."""
    members: dict[str | None, list[int]] = {s: [] for s in stages}
    members[None] = []
    for k, node in enumerate(d.order):
        members[node.stage].append(k)
    return members


def full_view(
    d: Drawing,
    *,
    grad: bool,
    paths: GradientPaths | None,
    focus: Focus | None,
    edge_labels: bool,
    rankdir: str,
    ids: bool,
) -> list[str]:
    """One box per value and one circle per op, each stage a titled cluster, then the edges."""
    start = d.pos(d.graph["x"][paths.index]) if (paths is not None and d.graph is not None) else None
    strong = {k for k in (start, focus.start if focus else None) if k is not None}
    shown = focus.shown if focus is not None else None
    stacked = rankdir in ("TB", "BT")

    def node_lines(k: int, indent: str) -> list[str]:
        node = d.order[k]
        faded = shown is not None and k not in shown
        label = _value_label(
            d.display_name(k), node.data, node.grad if grad else None, faded=faded, strong=k in strong, stacked=stacked
        )
        out = [f"{indent}v{k} [shape=plain, label={label}{id_attr(ids, f'v{k}')}];"]
        if node.children:
            style = f', fontcolor="{FADED_TEXT}", color="{FADED_LINE}"' if faded else ""
            out.append(
                f"{indent}op{k} [shape=circle, label={quote(op_symbol(node.op))}, "
                f"margin=0.02, width=0.3, height=0.3, style=filled, fillcolor=white{style}{id_attr(ids, f'op{k}')}];"
            )
        return out

    stages = stage_order(d)
    members = _stage_members(d, stages)
    lines: list[str] = []
    for position, stage in enumerate(stages):
        lines.append(f"  subgraph cluster_{dot_id(stage)} {{")
        fill, line = stage_colours(stage, position)
        own_id = f"; id={dot_id('cluster_' + stage)}" if ids else ""
        lines.append(f'    label=""; style="rounded,filled"; fillcolor="{fill}"; color="{line}"{own_id};')
        lines.append(
            f"    t_{dot_id(stage)} [shape=plain, label={_cluster_label(d, stage)}{id_attr(ids, 't_' + stage)}];"
        )
        for k in members[stage]:
            lines += node_lines(k, "    ")
        lines += _layout_hints(d, stage, members[stage], bottom_up=rankdir in ("LR", "RL"))
        lines.append("  }")
    for k in members[None]:
        lines += node_lines(k, "  ")
    return lines + _full_edges(d, paths=paths, shown=shown, edge_labels=edge_labels, ids=ids)


def _index_key(name: str) -> tuple[int, ...]:
    """``"xhat[1,2]"`` -> ``(1, 2)``."""
    return tuple(int(i) for i in split_index(name)[1].strip("[]").split(","))


def _layout_hints(d: Drawing, stage: str, ks: list[int], *, bottom_up: bool) -> list[str]:
    """Invisible edges that put a stage's title above its first nodes and its nodes in index order.

    dot routes edges around nodes but straight through cluster labels, so the
    title is a node of its own, one rank before every node of the stage that
    has no input inside it. Nodes that share a name (x[0], x[1], ...) share a
    rank and follow each other in index order (left to right, or top to bottom
    when the graph runs left to right, where dot puts the head of such an edge
    above its tail). Nothing is added for a graph without a built norm.
    """
    if d.graph is None:
        return []
    inside = set(ks)
    sources = [f"op{k}" for k in ks if d.order[k].children and not any(d.pos(c) in inside for c in d.order[k].children)]
    sources += [f"v{k}" for k in ks if not d.order[k].children]
    lines = [f"    t_{dot_id(stage)} -> {{{' '.join(sources)}}} [style=invis];"] if sources else []
    by_name: dict[str, list[int]] = {}
    for k in ks:
        base, idx = split_index(d.display_name(k))
        if idx:
            by_name.setdefault(base, []).append(k)
    for same in by_name.values():
        same.sort(key=lambda k: _index_key(d.display_name(k)), reverse=bottom_up)
        for prefix in ("v", "op") if d.order[same[0]].children else ("v",):
            if len(same) > 1:
                lines.append(f"    {{rank=same; {' -> '.join(prefix + str(k) for k in same)} [style=invis]}}")
    return lines


def _full_edges(
    d: Drawing, *, paths: GradientPaths | None, shown: set[int] | None, edge_labels: bool, ids: bool
) -> list[str]:
    """Every input edge (value -> op, labelled with d node / d child if asked) and every op -> value edge."""
    colours = path_colours(paths)
    lines: list[str] = []
    for k, node in enumerate(d.order):
        if not node.children:
            continue
        derivs = local_grads(node) if edge_labels else None
        into: list[str] = []
        for slot, child in enumerate(node.children):
            c = d.pos(child)
            on_path = colours.get((c, k), [])
            into += [colour for colour in on_path if colour not in into]
            faded = shown is not None and not (c in shown and k in shown)
            extra = [f"label={quote(num(derivs[slot]))}"] if derivs is not None else []
            extra += [f"id=e{k}_{slot}"] if ids else []
            attrs = edge_attrs(on_path, faded=faded, strong=shown is not None and not faded, extra=extra)
            lines.append(f"  v{c} -> op{k}{attrs};")
        faded = shown is not None and k not in shown
        into = [colour for colour in PATH_COLOURS.values() if colour in into]
        attrs = edge_attrs(into, faded=faded, strong=shown is not None and not faded, extra=[f"id=o{k}"] if ids else [])
        lines.append(f"  op{k} -> v{k}{attrs};")
    return lines


def _cluster_label(d: Drawing, stage: str) -> str:
    formula = stage_formula(d, stage)
    sub = f'<font point-size="10">{esc(formula)}</font><br align="left"/>' if formula else ""
    return f'<<b>{esc(stage_title(stage))}</b><br align="left"/>{sub}>'


def _value_label(name: str, data: float, grad: float | None, *, faded: bool, strong: bool, stacked: bool) -> str:
    """A node's name, data and grad side by side (left-to-right graphs) or stacked (top-down)."""

    def cell(text: str, colour: str | None = None) -> str:
        colour = FADED_TEXT if faded else colour
        return f'<td><font color="{colour}">{text}</font></td>' if colour else f"<td>{text}</td>"

    cells = [cell(f"<b>{esc(name)}</b>")] if name else []
    cells.append(cell(f"{esc(data_word())} {num(data)}"))
    if grad is not None:
        cells.append(cell(f"{esc(grad_word())} {num(grad)}", GRAD_TEXT))
    line = HIGHLIGHT if strong else (FADED_LINE if faded else "#777777")
    rows = "".join(f"<tr>{c}</tr>" for c in cells) if stacked else f"<tr>{''.join(cells)}</tr>"
    return (
        f'<<table border="{2 if strong else 0}" cellborder="1" cellspacing="0" cellpadding="2" '
        f'bgcolor="white" color="{line}">{rows}</table>>'
    )
