"""The gradient paths into one input x_i, as sets of drawn edges, and each path's share of dL/dx_i.

x_i reaches the loss along three routes in LayerNorm and BatchNorm (straight through ``xhat_i``, through the
mean that every ``xshift_j`` subtracts, through the variance that every ``xhat_j`` is divided by) and along two
in RMSNorm, which subtracts no mean; the textbook dL/dx_i is the sum of those routes
(:func:`microgradnorm.formulas.dx_paths`). Here each route is found in the drawn graph as the edges between its
named waypoints (x_i, mean, xshift, var, std, rstd, xhat), so a view can colour it, and, once backward has run,
its amount is taken from the closed forms so that a legend can add them up beside what autograd accumulated.
:func:`path_tagger` hands the same routes to :func:`microgradnorm.trace.trace_backward`, which then splits every
dL/dx_i into these paths contribution by contribution (the lessons' backward tables).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from microgradnorm.engine import Value
from microgradnorm.i18n import N_, _
from microgradnorm.norms import NormGraph
from microgradnorm.registry import spec_for
from microgradnorm.viz.graph import Drawing, OptionError, drawing, reachable


@dataclass
class GradientPath:
    """One route from x_i to the loss, as a set of drawn edges, and its share of dL/dx_i."""

    key: str  # "direct", "mean" or "var" (the colour)
    title: str
    route: str
    formula: str
    edges: set[tuple[int, int]]  # (child position, parent position)
    amount: float | None = None  # from the closed forms, once backward has run
    stops: list[set[int]] = field(default_factory=list, repr=False)  # its waypoints, from x_i to every xhat_j


@dataclass
class GradientPaths:
    """The gradient paths into the input x_i at flat index ``index``, with a note under the legend."""

    index: int
    paths: list[GradientPath]
    note: str


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
    forward = reachable(a, d.parents_of, lambda p: p not in b and d.name(p) is None)
    backward = reachable(b, d.children, lambda c: c not in a and d.name(c) is None)
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

    def path(self, key: str, title: str, route: str, formula: str, stops: list[set[int]]) -> GradientPath:
        """The path through ``stops``: the edges of every segment between two of them."""
        edges: set[tuple[int, int]] = set()
        for a, b in itertools.pairwise(stops):
            edges |= _segment(self.d, a, b)
        return GradientPath(key, title, route, formula, edges, stops=list(stops))


def _rms_paths(s: _Stops, xi: str) -> tuple[list[GradientPath], str]:
    x_i, xhat_all = s.at("x", [s.i]), s.at("xhat", s.group)
    paths = [
        s.path("direct", N_("direct"), f"{xi} → xhat", "dxhat_i · rrms", [x_i, s.at("xhat", [s.i])]),
        s.path(
            "var",
            N_("via the mean square"),
            # Translators: a route through the graph; keep the node names and arrows
            _("{xi} → x² → ms → rms → rrms → every xhat_j").format(xi=xi),
            "dL/dms · 2 x_i / n",
            [x_i, s.at("ms"), s.at("rms"), s.at("rrms"), xhat_all],
        ),
    ]
    return paths, N_("RMSNorm subtracts no mean, so there are two paths, not three.")


def _mean_var_paths(s: _Stops, xi: str) -> tuple[list[GradientPath], str]:
    two_pass = s.graph.variance == "two_pass"
    x_i, xshift_i, xhat_all = s.at("x", [s.i]), s.at("xshift", [s.i]), s.at("xhat", s.group)
    var_first = [x_i, xshift_i] if two_pass else [x_i]
    squares = "xshift → xshift²" if two_pass else "x²"
    paths = [
        s.path("direct", N_("direct"), f"{xi} → xshift → xhat", "dxhat_i · rstd", [x_i, xshift_i, s.at("xhat", [s.i])]),
        s.path(
            "mean",
            N_("via the mean"),
            # Translators: a route through the graph; keep the node names and arrows
            _("{xi} → Σ → mean → every xshift_j → xhat_j").format(xi=xi),
            "−rstd · Σ_j dxhat_j / n",
            [x_i, s.at("mean"), s.at("xshift", s.group), xhat_all],
        ),
        s.path(
            "var",
            N_("via the variance"),
            # Translators: a route through the graph; {squares} is "xshift → xshift²" or "x²"
            _("{xi} → {squares} → var → std → rstd → every xhat_j").format(xi=xi, squares=squares),
            "dL/dvar · 2 xshift_i / n",
            [*var_first, s.at("var"), s.at("std"), s.at("rstd"), xhat_all],
        ),
    ]
    if two_pass:
        return paths, N_("The mean also feeds the variance, but that route adds 0: Σ_j xshift_j = 0.")
    return paths, N_("Naive variance: mean² feeds var too, so the numbers are left out.")


def _routes(d: Drawing, which: int | str) -> tuple[_Stops, list[GradientPath], str]:
    """Where the paths into x_i run (``which``: a flat index or a name like ``'x[1]'``), and the legend's note."""
    graph = d.graph
    if graph is None:
        raise ValueError("paths: the gradient paths need a built norm (what layer_norm returns, or its .graph)")
    i = _resolve_input(graph, which)
    group = _group_of(graph, i)
    stops = _Stops(d, graph, i, group, graph.groups.index(group))
    paths, note = (_mean_var_paths if spec_for(graph).centered else _rms_paths)(stops, graph.index_label("x", i))
    return stops, paths, note


def gradient_paths(d: Drawing, which: int | str) -> GradientPaths:
    """The gradient paths into x_i (``which``: a flat index or a name like ``'x[1]'``) as drawn edges,
    with each path's share of dL/dx_i from the closed forms once backward has run."""
    stops, paths, note = _routes(d, which)
    _path_amounts(stops.graph, stops.i, stops.group, stops.r, paths)
    if len(stops.group) == 1:
        note = N_("A group of one value: xhat is 0 whatever x is, so every path carries 0.")
    return GradientPaths(stops.i, paths, note)


def _branches(d: Drawing, paths: list[GradientPath]) -> dict[tuple[int, int], str]:
    """The edges where each path leaves the waypoints it shares with another, by path.

    x_i → Σx for the mean, xshift_i → xhat_i for the direct path, xshift_i → xshift_i² for the variance
    (x_i → xhat_i and x_i → x_i² in RMSNorm): a gradient that comes back into x_i along one of these edges
    came along that path, whatever it went through before.
    """
    out: dict[tuple[int, int], str] = {}
    for path in paths:
        shared = max(_common_start(path.stops, other.stops) for other in paths if other is not path)
        last = path.stops[shared - 1]
        for child, parent in _segment(d, last, path.stops[shared]):
            if child in last:
                out[(child, parent)] = path.key
    return out


def _common_start(a: list[set[int]], b: list[set[int]]) -> int:
    return next((k for k, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))


def path_tagger(graph: NormGraph) -> Callable[[Value, Value], str | None]:
    """For :func:`microgradnorm.trace.trace_backward`: the path (``direct``, ``mean``, ``var``) whose branching
    edge ``child -> out`` is (see :func:`_branches`), for every x_i of ``graph``; None for any other edge.

    Everything upstream of a tagged edge keeps its tag, so each dL/dx_i ends split by path. With the two-pass
    variance (every norm's default) the parts are exactly the terms of :func:`microgradnorm.formulas.dx_paths`
    (:func:`~microgradnorm.formulas.rms_dx_paths` for RMSNorm); with ``variance="naive"`` the mean feeds the
    variance too (through mean²), so the "mean" and "var" parts differ from those closed forms, as
    :func:`gradient_paths` says when it leaves their numbers out.
    """
    d = drawing(graph)
    tags: dict[tuple[int, int], str] = {}
    for i in range(len(graph["x"])):
        for (child, parent), key in _branches(d, _routes(d, i)[1]).items():
            tags[(id(d.order[parent]), id(d.order[child]))] = key

    def tag(out: Value, child: Value) -> str | None:
        return tags.get((id(out), id(child)))

    return tag


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
