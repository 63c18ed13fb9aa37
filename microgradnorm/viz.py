"""Computation-graph diagrams: DOT source for a Value graph or a built norm, and its rendering.

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
:func:`pipe` runs the system ``dot`` program on it (through the ``graphviz``
Python package); writing files and notebook output is :mod:`microgradnorm.output`'s
job, the module above both this one and the HTML page.

Sizes: every n-ary ``sum`` is one node, so a full LayerNorm graph has about
13 drawn nodes per feature and ``dot`` lays out d = 64 in well under a second.
(micrograd-style chains of binary additions would make the layout quadratic.)
"""

from __future__ import annotations

import html
import itertools
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from microgradnorm.engine import Value, local_grads, topological_order
from microgradnorm.i18n import N_, _, lazy_gettext, pgettext
from microgradnorm.names import display_names, op_symbol, split_index
from microgradnorm.norms import GROUP_NODES, PARAM_NODES, NormGraph
from microgradnorm.registry import spec_for

__all__ = [
    "FULL_VIEW_LIMIT",
    "INSTALL_HINT",
    "LARGE_GRAPH",
    "LAYOUT_LIMIT",
    "Drawing",
    "DrawingError",
    "GradientPath",
    "GradientPaths",
    "GraphvizNotFoundError",
    "OptionError",
    "RenderError",
    "data_word",
    "default_title",
    "dot_id",
    "drawing",
    "grad_word",
    "gradient_paths",
    "graph_size",
    "has_dot",
    "num",
    "pipe",
    "stage_formula",
    "stage_order",
    "stage_title",
    "to_dot",
]

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

INSTALL_HINT = lazy_gettext(
    "install Graphviz (Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install graphviz; "
    "conda: conda install -c conda-forge graphviz)"
)

DOT_HEADER = "// microgradnorm computation graph"


class DrawingError(RuntimeError):
    """The picture could not be made; the DOT source can still be written (see :func:`draw`)."""


class GraphvizNotFoundError(DrawingError):
    """The Graphviz ``dot`` program is not on PATH; the message says how to install it."""


class RenderError(DrawingError):
    """``dot`` ran but failed; the message carries the first line of what it printed."""


class OptionError(ValueError):
    """A drawing option asks for something the graph does not have (a node name, an input index).

    ``option`` is the keyword of :func:`to_dot` at fault and ``message`` what was
    expected and what was given, so that a command can name its own flag instead.
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message


# ---- appearance -------------------------------------------------------------------

# a CSS-style list: SVGs in browsers fall back in order, to a Simplified Chinese face for a Chinese drawing
FONT = "Helvetica,Arial,Noto Sans CJK SC,Source Han Sans SC,PingFang SC,Microsoft YaHei,sans-serif"

# pale fills for the stage clusters, a darker outline of the same hue
_STAGE_COLOURS: dict[str, tuple[str, str]] = {
    "input": ("#f4f4f4", "#9a9a9a"),
    "mean": ("#e6f0fa", "#6f9fd8"),
    "center": ("#e8f5e6", "#6dae62"),
    "var": ("#fdf0e0", "#e0a050"),
    "meansq": ("#fdf0e0", "#e0a050"),
    "sqrt": ("#f5e9f7", "#b07cc0"),
    "divide": ("#fdf8d8", "#c8b040"),
    "affine": ("#e4f4f2", "#55a89c"),
    "scale": ("#e4f4f2", "#55a89c"),
    "loss": ("#f4f4f4", "#9a9a9a"),
}
_OTHER_COLOURS = (("#eef0f4", "#8890a0"), ("#f6eeee", "#a08888"), ("#eef6ee", "#88a088"))

# the gradient paths (ColorBrewer Dark2: distinguishable in colour-blind vision and in grey)
PATH_COLOURS = {"direct": "#1b9e77", "mean": "#d95f02", "var": "#7570b3"}
HIGHLIGHT = "#e7298a"
FADED_TEXT = "#b0b0b0"
FADED_LINE = "#d8d8d8"
EDGE = "#606060"
GRAD_TEXT = "#b2182b"

# What each stage computes, shown under the cluster's title; ("rms", stage) first for a norm
# that subtracts no mean, then stage.
_FORMULAS: dict[tuple[str, str] | str, str] = {
    "input": "x",
    "mean": "mean = Σ x / n",
    "center": "xshift = x − mean",
    "var": "var = Σ xshift² / n",
    ("naive", "var"): "var = Σ x² / n − mean²",
    "sqrt": "std = √(var + eps)",
    ("rms", "sqrt"): "rms = √(ms + eps)",
    "divide": "rstd = 1 / std,   xhat = xshift · rstd",
    ("rms", "divide"): "rrms = 1 / rms,   xhat = x · rrms",
    "affine": "y = gamma · xhat + beta",
    "meansq": "ms = Σ x² / n",
    "scale": "y = gamma · xhat",
    "loss": "L = Σ y · dy",
}


def num(v: float) -> str:
    """A compact number: 4 significant digits, no exponent for ordinary magnitudes."""
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if v == 0.0:
        return "0"
    return f"{v:.4g}"


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_id(name: str) -> str:
    """``name`` as a DOT (and SVG) identifier: every character that is not a letter, digit or _ becomes _."""
    return re.sub(r"\W", "_", name, flags=re.ASCII)


# ---- what to draw ---------------------------------------------------------------------


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
    order = topological_order(roots)
    return len(order) + sum(1 for node in order if node.children)


# ---- the gradient paths into x_i ----------------------------------------------------


@dataclass
class GradientPath:
    """One route from x_i to the loss, as a set of drawn edges, and its share of dL/dx_i."""

    key: str  # "direct", "mean" or "var" (the colour)
    title: str
    route: str
    formula: str
    edges: set[tuple[int, int]]  # (child position, parent position)
    amount: float | None = None  # from the closed forms, once backward has run


@dataclass
class GradientPaths:
    """The gradient paths into the input x_i at flat index ``index``, with a note under the legend."""

    index: int
    paths: list[GradientPath]
    note: str


@dataclass
class Focus:
    """A highlighted node (``start``, a position) and the positions kept dark with it."""

    start: int
    shown: set[int]


def _group_of(graph: NormGraph, i: int) -> list[int]:
    for g in graph.groups:
        if i in g:
            return g
    raise OptionError("path_input", _("x has {size} entries, got index {i}").format(size=len(graph["x"]), i=i))


def _resolve_input(graph: NormGraph, which: int | str) -> int:
    size = len(graph["x"])
    if isinstance(which, bool) or not isinstance(which, (int, str)):
        raise TypeError(f"path_input: expected a flat index or a name like 'x[1]', got {type(which).__name__}")
    if isinstance(which, str):
        names = [graph.index_label("x", k) for k in range(size)]
        cleaned = which.replace(" ", "")
        if cleaned not in names:
            shown = f"{', '.join(names[:6])}{', …' if size > 6 else ''}"
            message = _("expected one of {shown}, got {which!r}")
            raise OptionError("path_input", message.format(shown=shown, which=which))
        return names.index(cleaned)
    if not 0 <= which < size:
        raise OptionError(
            "path_input", _("expected a flat index of x in [0, {last}], got {which}").format(last=size - 1, which=which)
        )
    return which


def _segment(d: Drawing, a: set[int], b: set[int]) -> set[tuple[int, int]]:
    """Edges on the routes from a node in ``a`` to a node in ``b`` through unnamed nodes only.

    Named nodes (x, mean, xshift, ...) are the waypoints of a path, so a route
    that passes through another named node belongs to a different segment.
    """
    forward = set(a)
    stack = list(a)
    while stack:
        u = stack.pop()
        for p in d.parents[u]:
            if p not in b and p not in forward and d.name(p) is None:
                forward.add(p)
                stack.append(p)
    backward = set(b)
    stack = list(b)
    while stack:
        v = stack.pop()
        for child in d.order[v].children:
            c = d.pos(child)
            if c not in a and c not in backward and d.name(c) is None:
                backward.add(c)
                stack.append(c)
    middle = (forward & backward) - a - b
    edges = set()
    for u in a | middle:
        for p in d.parents[u]:
            if p in b or p in middle:
                edges.add((u, p))
    return edges


@dataclass
class _Stops:
    """Where the paths into x_i run: the named nodes of x_i's group, as drawn positions."""

    d: Drawing
    graph: NormGraph
    i: int  # flat index of x_i
    group: list[int]  # flat indices of x_i's normalization group
    r: int  # the group's number

    def at(self, name: str, ks: Iterable[int] | None = None) -> set[int]:
        """Positions of ``graph[name][k]`` (default: k = the group's number); nodes not drawn are left out."""
        ks = [self.r] if ks is None else ks
        return {self.d.index[id(v)] for v in (self.graph[name][k] for k in ks) if id(v) in self.d.index}

    def route(self, *stops: set[int]) -> set[tuple[int, int]]:
        edges: set[tuple[int, int]] = set()
        for a, b in itertools.pairwise(stops):
            edges |= _segment(self.d, a, b)
        return edges


def _rms_paths(s: _Stops, xi: str) -> tuple[list[GradientPath], str]:
    x_i, xhat_all = s.at("x", [s.i]), s.at("xhat", s.group)
    paths = [
        GradientPath("direct", N_("direct"), f"{xi} → xhat", "dxhat_i · rrms", s.route(x_i, s.at("xhat", [s.i]))),
        GradientPath(
            "var",
            N_("via the mean square"),
            # Translators: a route through the graph; keep the node names and arrows
            _("{xi} → x² → ms → rms → rrms → every xhat_j").format(xi=xi),
            "dL/dms · 2 x_i / n",
            s.route(x_i, s.at("ms"), s.at("rms"), s.at("rrms"), xhat_all),
        ),
    ]
    return paths, N_("RMSNorm subtracts no mean, so there are two paths, not three.")


def _mean_var_paths(s: _Stops, xi: str) -> tuple[list[GradientPath], str]:
    two_pass = s.graph.variance == "two_pass"
    x_i, xshift_i, xhat_all = s.at("x", [s.i]), s.at("xshift", [s.i]), s.at("xhat", s.group)
    var_first = [x_i, xshift_i] if two_pass else [x_i]
    squares = "xshift → xshift²" if two_pass else "x²"
    paths = [
        GradientPath(
            "direct",
            N_("direct"),
            f"{xi} → xshift → xhat",
            "dxhat_i · rstd",
            s.route(x_i, xshift_i, s.at("xhat", [s.i])),
        ),
        GradientPath(
            "mean",
            N_("via the mean"),
            # Translators: a route through the graph; keep the node names and arrows
            _("{xi} → Σ → mean → every xshift_j → xhat_j").format(xi=xi),
            "−rstd · Σ_j dxhat_j / n",
            s.route(x_i, s.at("mean"), s.at("xshift", s.group), xhat_all),
        ),
        GradientPath(
            "var",
            N_("via the variance"),
            # Translators: a route through the graph; {squares} is "xshift → xshift²" or "x²"
            _("{xi} → {squares} → var → std → rstd → every xhat_j").format(xi=xi, squares=squares),
            "dL/dvar · 2 xshift_i / n",
            s.route(*var_first, s.at("var"), s.at("std"), s.at("rstd"), xhat_all),
        ),
    ]
    if two_pass:
        return paths, N_("The mean also feeds the variance, but that route adds 0: Σ_j xshift_j = 0.")
    return paths, N_("Naive variance: mean² feeds var too, so the numbers are left out.")


def gradient_paths(d: Drawing, which: int | str) -> GradientPaths:
    """The gradient paths into x_i (``which``: a flat index or a name like ``'x[1]'``) as drawn edges,
    with each path's share of dL/dx_i from the closed forms once backward has run."""
    graph = d.graph
    if graph is None:
        raise ValueError("paths: the gradient paths need a built norm (what layer_norm returns, or its .graph)")
    i = _resolve_input(graph, which)
    group = _group_of(graph, i)
    stops = _Stops(d, graph, i, group, graph.groups.index(group))
    xi = graph.index_label("x", i)
    paths, note = (_mean_var_paths if spec_for(graph).centered else _rms_paths)(stops, xi)
    _path_amounts(graph, i, group, stops.r, paths)
    if len(group) == 1:
        note = N_("A group of one value: xhat is 0 whatever x is, so every path carries 0.")
    return GradientPaths(i, paths, note)


def _path_amounts(graph: NormGraph, i: int, group: list[int], r: int, paths: list[GradientPath]) -> None:
    """Each path's share of dL/dx_i, from the closed forms, once backward has run."""
    xhat = graph["xhat"]
    if graph.variance != "two_pass" or not any(xhat[k].grad for k in group):
        return
    import numpy as np

    from microgradnorm import formulas

    dxhat = np.array([xhat[k].grad for k in group])  # n
    local = group.index(i)
    if spec_for(graph).centered:
        xshift = np.array([graph["xshift"][k].data for k in group])  # n
        parts = formulas.dx_paths(dxhat, xshift, graph["std"][r].data, graph["rstd"][r].data, (0,))
    else:
        x = np.array([graph["x"][k].data for k in group])  # n
        parts = formulas.rms_dx_paths(dxhat, x, graph["rms"][r].data, graph["rrms"][r].data, (0,))
    for path, part in zip(paths, parts):
        path.amount = float(part[local])


def _legend(d: Drawing, info: GradientPaths) -> str:
    graph = d.graph
    assert graph is not None
    xi = graph.index_label("x", info.index)
    head = _("gradient paths into {name}").format(name=xi)
    rows = [f'<tr><td colspan="4" align="left"><b>{_esc(head)}</b></td></tr>']
    for p in info.paths:
        amount = f"{num(p.amount)}" if p.amount is not None else ""
        rows.append(
            f'<tr><td bgcolor="{PATH_COLOURS[p.key]}" width="22"> </td>'
            f'<td align="left"><font color="{PATH_COLOURS[p.key]}"><b>{_esc(_(p.title))}</b></font></td>'
            f'<td align="left" balign="left">{_esc(p.route)}<br/><font point-size="9">{_esc(p.formula)}</font></td>'
            f'<td align="right">{amount}</td></tr>'
        )
    if all(p.amount is not None for p in info.paths):
        total = sum(p.amount for p in info.paths)  # type: ignore[misc]
        auto = graph["x"][info.index].grad
        # Translators: the last row of the gradient paths legend, whose amounts it adds up
        sum_word = pgettext("graph page", "sum")
        accumulated = _("autograd accumulated {name}.grad = {grad}").format(name=xi, grad=num(auto))
        rows.append(
            f'<tr><td></td><td align="left"><b>{_esc(sum_word)}</b></td>'
            f'<td align="left">{_esc(accumulated)}</td>'
            f'<td align="right"><b>{num(total)}</b></td></tr>'
        )
    rows.append(f'<tr><td colspan="4" align="left"><font point-size="9">{_esc(_(info.note))}</font></td></tr>')
    table = (
        '<table border="1" cellborder="0" cellspacing="2" cellpadding="3" bgcolor="white" color="#999999">'
        + "".join(rows)
        + "</table>"
    )
    return f"  legend [shape=plain, label=<{table}>];"


# ---- highlighting --------------------------------------------------------------------


def _find_node(d: Drawing, which: Value | str) -> int:
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


def _related(d: Drawing, start: int, mode: str) -> set[int]:
    """``start`` and its ancestors (what it is computed from) or descendants (what uses it)."""
    if mode not in ("ancestors", "descendants"):
        raise OptionError("highlight_mode", _("expected 'ancestors' or 'descendants', got {mode!r}").format(mode=mode))
    seen = {start}
    stack = [start]
    while stack:
        k = stack.pop()
        nxt = [d.pos(c) for c in d.order[k].children] if mode == "ancestors" else d.parents[k]
        for j in nxt:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


# ---- DOT --------------------------------------------------------------------------------


def stage_order(d: Drawing) -> list[str]:
    """Stages in the order of the norm (input first, loss last), then any others as met."""
    present: list[str] = []
    for node in d.order:
        if node.stage is not None and node.stage not in present:
            present.append(node.stage)
    known = ["input", *(d.graph.stages if d.graph is not None else ()), "loss"]
    first = [s for s in known if s in present]
    return first + [s for s in present if s not in first]


def _stage_colours(stage: str, position: int) -> tuple[str, str]:
    return _STAGE_COLOURS.get(stage) or _OTHER_COLOURS[position % len(_OTHER_COLOURS)]


def stage_formula(d: Drawing, stage: str) -> str:
    graph = d.graph
    if graph is None:
        return ""
    if stage == "var" and graph.variance == "naive":
        return _FORMULAS[("naive", "var")]
    if stage in ("affine", "scale"):
        if "gamma" not in graph and "beta" not in graph:
            return ""
        scaled = "gamma · xhat" if "gamma" in graph else "xhat"
        return f"y = {scaled} + beta" if "beta" in graph else f"y = {scaled}"
    own = None if spec_for(graph).centered else _FORMULAS.get(("rms", stage))
    return own or _FORMULAS.get(stage, "")  # type: ignore[return-value]


def stage_title(stage: str) -> str:
    """A stage's name as the drawing and the page show it, in the current language (``var`` stays ``var`` in
    English)."""
    titles = {
        "input": pgettext("norm stage", "input"),
        "mean": pgettext("norm stage", "mean"),
        "center": pgettext("norm stage", "center"),
        "var": pgettext("norm stage", "var"),
        "meansq": pgettext("norm stage", "meansq"),
        "sqrt": pgettext("norm stage", "sqrt"),
        "divide": pgettext("norm stage", "divide"),
        "affine": pgettext("norm stage", "affine"),
        "scale": pgettext("norm stage", "scale"),
        "loss": pgettext("norm stage", "loss"),
    }
    return titles.get(stage, stage)


def _cluster_label(d: Drawing, stage: str) -> str:
    formula = stage_formula(d, stage)
    sub = f'<font point-size="10">{_esc(formula)}</font><br align="left"/>' if formula else ""
    return f'<<b>{_esc(stage_title(stage))}</b><br align="left"/>{sub}>'


def default_title(d: Drawing, title: str | None, grad: bool) -> str | None:
    if title is not None:
        return title
    graph = d.graph
    if graph is None:
        return None
    what = spec_for(graph).title
    shape = "×".join(map(str, graph.shape))
    # Translators: the title of a drawing, e.g. "LayerNorm of x (2×4), eps = 1e-05"; (2×4) is x's shape
    text = _("{norm} of x ({shape}), eps = {eps}").format(norm=what, shape=shape, eps=f"{graph.eps:g}")
    if graph.variance != "two_pass":
        text = _("{title}, {variance} variance").format(title=text, variance=graph.variance)
    if grad:
        text = _("{title} · grad = dL/d(node) after backward()").format(title=text)
    return text


def _value_label(name: str, data: float, grad: float | None, *, faded: bool, strong: bool, stacked: bool) -> str:
    """A node's name, data and grad side by side (left-to-right graphs) or stacked (top-down)."""

    def cell(text: str, colour: str | None = None) -> str:
        colour = FADED_TEXT if faded else colour
        return f'<td><font color="{colour}">{text}</font></td>' if colour else f"<td>{text}</td>"

    cells = [cell(f"<b>{_esc(name)}</b>")] if name else []
    cells.append(cell(f"{_esc(data_word())} {num(data)}"))
    if grad is not None:
        cells.append(cell(f"{_esc(grad_word())} {num(grad)}", GRAD_TEXT))
    line = HIGHLIGHT if strong else (FADED_LINE if faded else "#777777")
    rows = "".join(f"<tr>{c}</tr>" for c in cells) if stacked else f"<tr>{''.join(cells)}</tr>"
    return (
        f'<<table border="{2 if strong else 0}" cellborder="1" cellspacing="0" cellpadding="2" '
        f'bgcolor="white" color="{line}">{rows}</table>>'
    )


def data_word() -> str:
    """The word before a node's value in the drawing."""
    # Translators: the word before a node's value in the drawing, e.g. "data 0.5"; keep it short
    return pgettext("graph drawing", "data")


def grad_word() -> str:
    """The word before a node's gradient in the drawing."""
    # Translators: the word before a node's gradient in the drawing, e.g. "grad -0.25"; keep it short
    return pgettext("graph drawing", "grad")


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
        lines.append(f"  label=<{_esc(title)}>;")
    return lines


def _edge_attrs(colours: list[str], *, faded: bool, strong: bool, extra: Sequence[str] = ()) -> str:
    attrs = []
    if colours:
        attrs.append(f'color="{":".join(colours)}", penwidth=2')
    elif strong:
        attrs.append(f'color="{HIGHLIGHT}", penwidth=1.6')
    elif faded:
        attrs.append(f'color="{FADED_LINE}"')
    attrs += extra
    return f" [{', '.join(attrs)}]" if attrs else ""


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
    focus = _focus(d, highlight, highlight_mode) if highlight is not None else None
    if collapse:
        body = _collapsed(d, grad=grad, paths=info, focus=focus, ids=ids)
    else:
        body = _full(d, grad=grad, paths=info, focus=focus, edge_labels=edge_labels, rankdir=rankdir, ids=ids)
    size = 0 if collapse else len(d.order) + sum(1 for node in d.order if node.children)
    lines = _header(default_title(d, title, grad), rankdir, size, clusters_in_order=not collapse)
    lines += body
    if info is not None:
        lines.append(_legend(d, info))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _focus(d: Drawing, highlight: Value | str, mode: str) -> Focus:
    start = _find_node(d, highlight)
    return Focus(start, _related(d, start, mode))


def _path_colours(info: GradientPaths | None) -> dict[tuple[int, int], list[str]]:
    """The colours of the paths each edge (child position, parent position) is on."""
    colours: dict[tuple[int, int], list[str]] = {}
    if info is None:
        return colours
    for p in info.paths:
        for e in sorted(p.edges):
            colours.setdefault(e, []).append(PATH_COLOURS[p.key])
    return colours


def _stage_members(d: Drawing, stages: list[str]) -> dict[str | None, list[int]]:
    """Positions of the nodes of each stage (None: nodes without one), in drawing order."""
    members: dict[str | None, list[int]] = {s: [] for s in stages}
    members[None] = []
    for k, node in enumerate(d.order):
        members[node.stage].append(k)
    return members


def _full(
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
        out = [f"{indent}v{k} [shape=plain, label={label}{_id(ids, f'v{k}')}];"]
        if node.children:
            style = f', fontcolor="{FADED_TEXT}", color="{FADED_LINE}"' if faded else ""
            out.append(
                f"{indent}op{k} [shape=circle, label={_quote(op_symbol(node.op))}, "
                f"margin=0.02, width=0.3, height=0.3, style=filled, fillcolor=white{style}{_id(ids, f'op{k}')}];"
            )
        return out

    stages = stage_order(d)
    members = _stage_members(d, stages)
    lines: list[str] = []
    for position, stage in enumerate(stages):
        lines.append(f"  subgraph cluster_{dot_id(stage)} {{")
        fill, line = _stage_colours(stage, position)
        own_id = f"; id={dot_id('cluster_' + stage)}" if ids else ""
        lines.append(f'    label=""; style="rounded,filled"; fillcolor="{fill}"; color="{line}"{own_id};')
        lines.append(f"    t_{dot_id(stage)} [shape=plain, label={_cluster_label(d, stage)}{_id(ids, 't_' + stage)}];")
        for k in members[stage]:
            lines += node_lines(k, "    ")
        lines += _layout_hints(d, stage, members[stage], bottom_up=rankdir in ("LR", "RL"))
        lines.append("  }")
    for k in members[None]:
        lines += node_lines(k, "  ")
    return lines + _full_edges(d, paths=paths, shown=shown, edge_labels=edge_labels, ids=ids)


def _id(ids: bool, name: str) -> str:
    """The DOT ``id`` attribute (kept in the SVG, where the HTML page's script finds it), if asked for."""
    return f", id={dot_id(name)}" if ids else ""


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
    colours = _path_colours(paths)
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
            extra = [f"label={_quote(num(derivs[slot]))}"] if derivs is not None else []
            extra += [f"id=e{k}_{slot}"] if ids else []
            attrs = _edge_attrs(on_path, faded=faded, strong=shown is not None and not faded, extra=extra)
            lines.append(f"  v{c} -> op{k}{attrs};")
        faded = shown is not None and k not in shown
        into = [colour for colour in PATH_COLOURS.values() if colour in into]
        attrs = _edge_attrs(
            into, faded=faded, strong=shown is not None and not faded, extra=[f"id=o{k}"] if ids else []
        )
        lines.append(f"  op{k} -> v{k}{attrs};")
    return lines


# ---- the collapsed view -----------------------------------------------------------------

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
        cells = cell(head) + cell(_esc(_few([v.data for v in members])))
        if grad:
            cells += cell(_esc(grad_word()) + " " + _esc(_few([v.grad for v in members])), grad_cell=True)
        return f"<tr>{cells}</tr>"

    rows = []
    named: set[int] = set()
    graph = d.graph
    if graph is not None:
        for name, values in graph.nodes.items():
            mine = [v for v in values if (v.stage or "other") == stage and id(v) in d.index]
            if mine and len(mine) == len(values):
                named.update(d.pos(v) for v in values)
                rows.append(row(f"<b>{_esc(name)}</b> {_shape_of(graph, name)}", values))
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
            rows.append(f"<tr>{cell(_esc(label) + ' = ' + num(members[0].data))}</tr>")
        else:
            rows.append(row(f"<b>{_esc(label)}</b> ({len(members)})", members))
    rows += [row(f"<b>{_esc(label)}</b> ({len(members)})", members) for label, members in counts.items()]
    return rows


def _collapsed(d: Drawing, *, grad: bool, paths: GradientPaths | None, focus: Focus | None, ids: bool) -> list[str]:
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
        lines.append(f"  s_{dot_id(stage)} [shape=plain, label=<{box}>{_id(ids, 's_' + stage)}];")
    scalar_colours = _path_colours(paths)
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
        attrs = _edge_attrs(ordered, faded=faded, strong=False, extra=[f"id=se_{dot_id(a)}_{dot_id(b)}"] if ids else [])
        lines.append(f"  s_{dot_id(a)} -> s_{dot_id(b)}{attrs};")
    return lines


def _stage_box(d: Drawing, stage: str, position: int, ks: list[int], *, grad: bool, faded: bool, strong: bool) -> str:
    """The collapsed view's box for one stage (an HTML-like table): its title and formula over its rows."""
    fill, line = _stage_colours(stage, position)
    formula = stage_formula(d, stage)
    sub = f'   <font point-size="10">{_esc(formula)}</font>' if formula else ""
    head = f"<b>{_esc(stage_title(stage))}</b>" + sub
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


# ---- rendering ------------------------------------------------------------------------


def has_dot() -> bool:
    """Whether the Graphviz ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def pipe(dot: str, fmt: str) -> bytes:
    """Run ``dot -T<fmt>`` on ``dot`` and return the output bytes."""
    import graphviz

    try:
        return graphviz.pipe("dot", fmt, dot.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFoundError(
            _("the Graphviz 'dot' program was not found on PATH; {hint}").format(hint=INSTALL_HINT)
        ) from None
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else str(exc.stderr or "")
        first = stderr.strip().splitlines()[0] if stderr.strip() else _("exit code {code}").format(code=exc.returncode)
        raise RenderError(_("dot -T{fmt} failed: {first}").format(fmt=fmt, first=first)) from None
