"""The LayerNorm that lessons 3 to 6 work on: its problem, a short name for every node, the paths into x.

Not a demo: the demos of those lessons build on it. :func:`ln_problem` draws x, gamma, beta and dy from the
lesson's seed (rounded, so the tables stay narrow), :func:`build_ln` builds the scalar graph and its loss,
:func:`ln_names` names the nodes the graph leaves unnamed (``Σx``, ``xshift[2]²``), and
:func:`ln_path_tagger` tags each backward contribution with the path it took into x (direct, via the mean,
via the variance: the three terms of :func:`microgradnorm.formulas.dx_paths`), which :func:`traced` records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from microgradnorm.check import random_problem
from microgradnorm.engine import Value, topological_order
from microgradnorm.lessons.demo_tools import num
from microgradnorm.lessons.demos import LessonParams
from microgradnorm.norms import NormGraph, layer_norm
from microgradnorm.registry import get_norm
from microgradnorm.trace import EdgeTagger, Trace, trace_backward


def ln_problem(p: LessonParams, rows: int | None = None) -> tuple[np.ndarray, ...]:
    """x, gamma, beta, dy for the lesson: :func:`check.random_problem` rounded to 2 decimals.

    Rounding keeps the inputs readable; everything downstream is computed from
    the rounded numbers, so nothing is lost.
    """
    spec = get_norm("layernorm")
    shape = (p.dim,) if rows is None else (rows, p.dim)
    x, gamma, beta, dy = (np.round(a, 2) for a in random_problem(spec, shape, p.seed))
    # A row that rounding made constant has no spread (LayerNorm of it is 0/0 at
    # eps = 0): give it a small ramp instead, so every seed teaches something.
    flat = x.reshape(-1, p.dim)
    for row in flat:
        if p.dim > 1 and np.ptp(row) == 0.0:
            row += np.round(0.01 * np.arange(p.dim), 2)
    return flat.reshape(shape), gamma, beta, dy


@dataclass
class LNBuilt:
    """A LayerNorm built on the lesson's problem, its loss, and names for every node."""

    x: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    dy: np.ndarray
    graph: NormGraph
    loss: Value
    names: dict[int, str]
    constants: frozenset[int]

    def name(self, node: Value) -> str:
        return self.names.get(id(node), f"#{node.id}")


def build_ln(p: LessonParams, rows: int | None = None) -> LNBuilt:
    x, gamma, beta, dy = ln_problem(p, rows)
    graph = layer_norm(x.tolist(), gamma.tolist(), beta.tolist(), p.eps).graph
    loss = graph.loss(dy.tolist())
    names = ln_names(graph, loss)
    constants = frozenset(id(n) for n in topological_order(loss) if not n.children and n.label in ("1/n", "eps", "dy"))
    return LNBuilt(x, gamma, beta, dy, graph, loss, names, constants)


def _split_name(name: str) -> tuple[str, tuple[str, ...]]:
    if name.endswith("]") and "[" in name:
        base, _bracket, idx = name[:-1].partition("[")
        return base, tuple(idx.split(","))
    return name, ()


def ln_names(graph: NormGraph, root: Value) -> dict[int, str]:
    """A short readable name for every node: the graph's names (``xhat[2]``), and for the rest
    names derived from their inputs (``Σx``, ``xshift[2]²``, ``γ·xhat[2]``, ``var+eps``)."""
    names: dict[int, str] = {}
    order = topological_order(root)
    for node in order:
        name = graph.name_of(node)
        if name is None:
            name = _derived_name(node, names)
        names[id(node)] = name
    for node in order:  # dy leaves take the index of the y they multiply
        if node.stage == "loss" and node.op == "*" and len(node.children) == 2:
            y, d = node.children
            _base, idx = _split_name(names[id(y)])
            suffix = f"[{','.join(idx)}]" if idx else ""
            names[id(d)] = f"dy{suffix}"
            names[id(node)] = f"y{suffix}·dy"
    return names


def _derived_name(node: Value, names: dict[int, str]) -> str:
    label = node.label or ""
    kids = [names.get(id(c), "?") for c in node.children]
    if label == "loss":
        return "loss"
    if not node.children:
        return label or num(node.data)
    if node.op == "sum":
        bases = {_split_name(k)[0] for k in kids}
        idxs = [_split_name(k)[1] for k in kids]
        if len(bases) == 1:
            base = bases.pop()
            prefix = idxs[0][:-1] if idxs[0] else ()
            if all(i[:-1] == prefix for i in idxs):
                return f"Σ{base}" + (f"[{','.join(prefix)}]" if prefix else "")
            return f"Σ{base}"
    if node.op == "**2":
        base, idx = _split_name(kids[0])
        return f"{base}²" + (f"[{','.join(idx)}]" if idx else "")
    if label == "gamma*xhat":
        return f"γ·{kids[1]}"
    if label == "var+eps":
        return f"{kids[0]}+eps"
    return f"{label or node.op}#{node.id}"


def ln_path_tagger(graph: NormGraph) -> EdgeTagger:
    """Tag the edges where a gradient enters one of the three paths into x (two-pass graph).

    direct: xhat_i -> xshift_i (the numerator of xhat);
    var:    xshift_i² -> xshift_i (the variance's use of xshift);
    mean:   the mean's sum -> x_i.
    Everything upstream of a tagged edge keeps its tag, so x's gradient ends
    split into exactly the three terms of :func:`formulas.dx_paths`.
    """
    xhat = {id(v) for v in graph["xhat"]}
    xshift = {id(v) for v in graph["xshift"]}
    xs = {id(v) for v in graph["x"]}
    mean_sums = {id(m.children[0]) for m in graph["mean"]}

    def tag(out: Value, child: Value) -> str | None:
        if id(child) in xshift:
            if id(out) in xhat:
                return "direct"
            if out.stage == "var":
                return "var"
        if id(child) in xs and id(out) in mean_sums:
            return "mean"
        return None

    return tag


def node_values(built: LNBuilt, name: str, attr: str = "data") -> np.ndarray:
    return np.array([getattr(v, attr) for v in built.graph[name]], dtype=np.float64)


def backprop(built: LNBuilt) -> None:
    """Run the engine's backward() on the lesson's loss (from zero)."""
    built.loss.zero_grad()
    built.loss.backward()


def traced(p: LessonParams, rows: int | None = None) -> tuple[LNBuilt, Trace]:
    built = build_ln(p, rows)
    return built, trace_backward(built.loss, ln_path_tagger(built.graph))
