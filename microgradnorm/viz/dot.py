"""Computation-graph diagrams: DOT source for a Value graph or a built norm, in one of two views.

Why draw the graph? Because the backward pass of a normalization layer is easy
to state and hard to see: ``x_i`` reaches the loss along three routes (straight
through ``xhat_i``, through the mean that every ``xshift_j`` subtracts, and
through the variance that every ``xhat_j`` is divided by), and the textbook
formula for dL/dx_i is the sum of those three routes. A drawing with the stages
as boxes, the numbers at every node and the routes in colour shows where each
term comes from.

Three views, all produced by :func:`to_dot` as plain DOT text:

* the **full** graph: one box per scalar (its name, ``data`` and, after
  ``backward()``, ``grad``), one circle per op, each stage of the norm (mean,
  center, var, sqrt, divide, affine; RMSNorm: meansq, sqrt, divide, scale) a
  titled cluster; optionally each edge labelled with its local derivative
  ``d node / d child`` (:func:`microgradnorm.local_grads`);
* the **collapsed** view: one box per stage with the shapes of its named
  nodes and their first few numbers; its size does not grow with d;
* either view with the **gradient paths** into one input ``x_i`` in colour
  with a legend (and, after ``backward()``, each path's contribution to
  dL/dx_i from :func:`microgradnorm.formulas.dx_paths`, beside the gradient
  autograd accumulated), or with the **ancestors** (what a node is computed
  from) or **descendants** (what is computed from it) of one node highlighted.

``to_dot`` is pure and deterministic: nodes are numbered by their position in
the topological order, not by the engine's global ids, so the same graph gives
byte-identical DOT in any process (which is what makes golden tests possible).
The drawing's other pieces live beside this module: :mod:`.graph` numbers the
nodes, :mod:`.names` names them, :mod:`.paths` finds the gradient paths,
:mod:`.style` gives colours and words, :mod:`.full` and :mod:`.collapsed` write
the two views; this module puts a view under its header and adds the paths'
legend. :func:`~microgradnorm.viz.pipe` (:mod:`.render`) runs the system ``dot``
program on the result; writing files and notebook output is
:mod:`microgradnorm.output`'s job, the module above both this package and the
HTML page.

Sizes: every n-ary ``sum`` is one node, so a full LayerNorm graph has about
13 drawn nodes per feature and ``dot`` lays out d = 64 in well under a second.
(micrograd-style chains of binary additions would make the layout quadratic.)
"""

from __future__ import annotations

from typing import Any

from microgradnorm.engine import Value
from microgradnorm.i18n import _, pgettext
from microgradnorm.norms import NormGraph
from microgradnorm.viz.collapsed import collapsed_view
from microgradnorm.viz.full import full_view
from microgradnorm.viz.graph import Drawing, drawing, drawn_nodes, highlighted
from microgradnorm.viz.paths import GradientPaths, gradient_paths
from microgradnorm.viz.style import EDGE, FONT, PATH_COLOURS, default_title, esc, num

# Above this many drawn nodes (values + ops) the CLI, the notebook and the HTML page start
# with the collapsed view: a full LayerNorm of d = 16 is 225 nodes and fits a screen; at
# d = 64 (833 nodes, 3871 x 9267 px) no one can read it any more.
FULL_VIEW_LIMIT = 300

# Above this many drawn nodes the full view bounds dot's placement effort (see _header):
# the layout is a little less tidy, and d = 256 takes about 1 s instead of about 4 s.
# It is also where laying out the full view starts to take long enough to warn about.
LARGE_GRAPH = 1500

# Above this many drawn nodes the full view is not laid out at all: measured, d = 512
# (6,673 nodes) takes dot about 26 s and the time grows faster than the size.
LAYOUT_LIMIT = 15000

DOT_HEADER = "// microgradnorm computation graph"


def to_dot(
    obj: Any,
    *,
    grad: bool | None = None,
    paths: bool = False,
    path_input: int | str = 0,
    collapse: bool = False,
    edge_labels: bool = False,
    highlight: Value | str | None = None,
    highlight_mode: str = "ancestors",
    graph: NormGraph | None = None,
    title: str | None = None,
    rankdir: str = "LR",
    ids: bool = False,
) -> str:
    """DOT source for ``obj``: a Value, a list of Values, a built norm or its NormGraph.

    ``grad``: show each node's gradient (None: show it when ``backward()`` has left
    any nonzero gradient). ``paths``: colour the gradient paths into ``x_i``
    (``path_input``: a flat index or a name like ``'x[1]'``) and add a legend;
    for LayerNorm and BatchNorm these are the three terms of
    dL/dx_i = dxhat_i·rstd + dL/dmean/n + dL/dvar·2·xshift_i/n
    (:func:`microgradnorm.formulas.dx_paths`). ``collapse``: one box per stage.
    ``edge_labels``: label each edge with d node / d child. ``highlight``: a node
    (Value or name like ``'rstd'``, ``'xhat[1]'``) whose ancestors (what it is
    computed from) or descendants (``highlight_mode='descendants'``) stay dark
    while the rest fades. ``graph`` names the nodes when ``obj`` is a plain
    Value of a norm (for instance the loss). ``ids``: give every node, edge and
    cluster a DOT ``id`` (``v12``, ``op12``, ``e12_0`` for op 12's first input,
    ``o12`` for its output, ``cluster_mean``, ``s_mean`` in the collapsed view),
    kept in the SVG. The output is deterministic.
    """
    if rankdir not in ("LR", "TB", "RL", "BT"):
        raise ValueError(f"rankdir: expected LR, TB, RL or BT, got {rankdir!r}")
    d = drawing(obj, graph)
    if grad is None:
        grad = any(node.grad for node in d.order)
    info = gradient_paths(d, path_input) if paths else None
    focus = highlighted(d, highlight, highlight_mode) if highlight is not None else None
    if collapse:
        body = collapsed_view(d, grad=grad, paths=info, focus=focus, ids=ids)
    else:
        body = full_view(d, grad=grad, paths=info, focus=focus, edge_labels=edge_labels, rankdir=rankdir, ids=ids)
    size = 0 if collapse else drawn_nodes(d.order)
    lines = _header(default_title(d, title, grad), rankdir, size, clusters_in_order=not collapse)
    lines += body
    if info is not None:
        lines.append(_legend(d, info))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _header(title: str | None, rankdir: str, size: int, *, clusters_in_order: bool) -> list[str]:
    # Large graphs: bound dot's node-placement effort (network simplex iterations) at
    # one per node; unbounded, d = 256 takes about 10,000 iterations, most of the time.
    bound = ", nslimit=1" if size > LARGE_GRAPH else ""
    # dot's second crossing-minimisation pass over clusters ignores the index order of
    # _layout_hints (measured: x[0,2] drawn after x[1,0]); without it the order holds.
    if clusters_in_order:
        bound += ", remincross=false"
    lines = [
        DOT_HEADER,
        "digraph microgradnorm {",
        f'  graph [rankdir={rankdir}, fontname="{FONT}", fontsize=12, nodesep=0.12, ranksep=0.35, '
        f"outputorder=edgesfirst, newrank=true, labelloc=t, labeljust=l{bound}];",
        f'  node [fontname="{FONT}", fontsize=10];',
        f'  edge [fontname="{FONT}", fontsize=8, arrowsize=0.6, color="{EDGE}"];',
    ]
    if title:
        lines.append(f"  label=<{esc(title)}>;")
    return lines


def _legend(d: Drawing, info: GradientPaths) -> str:
    graph = d.graph
    assert graph is not None
    xi = graph.index_label("x", info.index)
    head = _("gradient paths into {name}").format(name=xi)
    rows = [f'<tr><td colspan="4" align="left"><b>{esc(head)}</b></td></tr>']
    for p in info.paths:
        amount = f"{num(p.amount)}" if p.amount is not None else ""
        rows.append(
            f'<tr><td bgcolor="{PATH_COLOURS[p.key]}" width="22"> </td>'
            f'<td align="left"><font color="{PATH_COLOURS[p.key]}"><b>{esc(_(p.title))}</b></font></td>'
            f'<td align="left" balign="left">{esc(p.route)}<br/><font point-size="9">{esc(p.formula)}</font></td>'
            f'<td align="right">{amount}</td></tr>'
        )
    if all(p.amount is not None for p in info.paths):
        total = sum(p.amount for p in info.paths)  # type: ignore[misc]
        auto = graph["x"][info.index].grad
        # Translators: the last row of the gradient paths legend, whose amounts it adds up
        sum_word = pgettext("graph page", "sum")
        accumulated = _("autograd accumulated {name}.grad = {grad}").format(name=xi, grad=num(auto))
        rows.append(
            f'<tr><td></td><td align="left"><b>{esc(sum_word)}</b></td>'
            f'<td align="left">{esc(accumulated)}</td>'
            f'<td align="right"><b>{num(total)}</b></td></tr>'
        )
    rows.append(f'<tr><td colspan="4" align="left"><font point-size="9">{esc(_(info.note))}</font></td></tr>')
    table = (
        '<table border="1" cellborder="0" cellspacing="2" cellpadding="3" bgcolor="white" color="#999999">'
        + "".join(rows)
        + "</table>"
    )
    return f"  legend [shape=plain, label=<{table}>];"
