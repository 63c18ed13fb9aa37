"""The LayerNorm that lessons 3 to 6 work on: its problem, a short name for every node, the paths into x.

Not a demo: the demos of those lessons build on it. :func:`ln_problem` draws x, gamma, beta and dy from the
lesson's seed (rounded, so the tables stay narrow), :func:`build_ln` builds the scalar graph and its loss,
names every node as the drawings do (:func:`microgradnorm.viz.names.display_names`: ``Σx``, ``γ·xhat[2]``), and
:func:`traced` records the backward pass with each contribution tagged with the path it took into x (direct,
via the mean, via the variance: the three terms of :func:`microgradnorm.formulas.dx_paths`), the paths the
drawings colour (:func:`microgradnorm.viz.paths.path_tagger`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from microgradnorm.check import random_problem
from microgradnorm.engine import Value, topological_order
from microgradnorm.lessons.demos import LessonParams
from microgradnorm.norms import NormGraph, layer_norm
from microgradnorm.registry import get_norm
from microgradnorm.trace import Trace, trace_backward
from microgradnorm.viz.names import display_names
from microgradnorm.viz.paths import path_tagger


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


def build_ln(p: LessonParams, rows: int | None = None, backward: bool = False) -> LNBuilt:
    """The lesson's LayerNorm and its loss, every node named; with ``backward``, after the engine's backward()."""
    x, gamma, beta, dy = ln_problem(p, rows)
    graph = layer_norm(x.tolist(), gamma.tolist(), beta.tolist(), p.eps).graph
    loss = graph.loss(dy.tolist())
    order = topological_order(loss)
    names = {id(node): name for node, name in zip(order, display_names(order, graph))}
    constants = frozenset(id(n) for n in order if not n.children and n.label in ("1/n", "eps", "dy"))
    built = LNBuilt(x, gamma, beta, dy, graph, loss, names, constants)
    if backward:
        backprop(built)
    return built


def node_values(built: LNBuilt, name: str, attr: str = "data") -> np.ndarray:
    return np.array([getattr(v, attr) for v in built.graph[name]], dtype=np.float64)


def backprop(built: LNBuilt) -> None:
    """Run the engine's backward() on the lesson's loss (from zero)."""
    built.loss.zero_grad()
    built.loss.backward()


def traced(p: LessonParams, rows: int | None = None) -> tuple[LNBuilt, Trace]:
    built = build_ln(p, rows)
    return built, trace_backward(built.loss, path_tagger(built.graph))
