"""The three-way gradient check: autograd, closed form and finite difference, per node.

For one norm, one input and a random upstream gradient ``dy``, the loss is
``L = sum(y * dy)``, so dL/dy = dy. (``L = sum(y)`` would be the obvious choice
and the wrong one: with gamma = 1 the LayerNorm input gradient of ``sum(y)`` is
exactly zero, and a backward pass that forgets a term still "passes".)

At every named node of the built graph (x, mean, xshift, var, std, rstd, xhat,
y, gamma, beta) three numbers are compared:

1. the gradient ``backward()`` accumulated on the node;
2. the closed form of :mod:`microgradnorm.formulas`, computed in NumPy from the
   inputs alone, never from the graph;
3. a central finite difference: the graph is rebuilt with that one node's value
   moved by +h and -h right after it is computed, everything downstream is
   recomputed, and (L+ - L-) / 2h is taken, all in float64. Taken at h and h/2
   and combined (Richardson extrapolation), its error shrinks from order h^2 to
   order h^4, which matters where the loss curves sharply (tiny var + eps).

The result is a :class:`CheckReport` (data, not prints); :mod:`microgradnorm.present`
turns it into a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from microgradnorm import tolerances as tol
from microgradnorm.registry import NormSpec, get_norm

__all__ = ["CheckReport", "NodeCheck", "check_norm", "random_problem"]


@dataclass
class NodeCheck:
    """The three gradients of one named node (flat arrays, C order) and how well they agree."""

    name: str
    stage: str
    labels: list[str]
    autograd: np.ndarray
    closed_form: np.ndarray
    finite_diff: np.ndarray  # NaN where no finite difference was taken
    closed_form_abs: float
    closed_form_rel: float
    fd_abs: float
    fd_rel: float
    closed_form_ok: bool
    fd_ok: bool
    fd_count: int

    @property
    def passed(self) -> bool:
        return self.closed_form_ok and self.fd_ok

    @property
    def closed_form_scale(self) -> float:
        """max|closed form|: what the closed-form verdict scales its relative tolerance by."""
        return float(np.max(np.abs(self.closed_form))) if self.closed_form.size else 0.0

    @property
    def fd_scale(self) -> float:
        """max|finite difference| over the entries where one was taken."""
        taken = self.finite_diff[~np.isnan(self.finite_diff)]
        return float(np.max(np.abs(taken))) if taken.size else 0.0

    @property
    def worst(self) -> int:
        """Index of the entry where autograd and the closed form differ most."""
        return int(np.argmax(np.abs(self.autograd - self.closed_form)))


@dataclass
class CheckReport:
    """The outcome of :func:`check_norm`: one :class:`NodeCheck` per named node."""

    norm: str
    title: str
    shape: tuple[int, ...]
    eps: float
    variance: str
    seed: int | None
    loss: float
    nodes: list[NodeCheck]
    tolerances: dict[str, float] = field(
        default_factory=lambda: {
            "closed_form_rtol": tol.CLOSED_FORM_RTOL,
            "closed_form_atol": tol.CLOSED_FORM_ATOL,
            "fd_rtol": tol.FD_RTOL,
            "fd_atol": tol.FD_ATOL,
            "fd_step": tol.FD_STEP,
        }
    )

    @property
    def passed(self) -> bool:
        return all(node.passed for node in self.nodes)

    @property
    def failures(self) -> list[NodeCheck]:
        return [node for node in self.nodes if not node.passed]

    def node(self, name: str) -> NodeCheck:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node named {name!r}; the report has {[n.name for n in self.nodes]}")


def random_problem(
    spec: NormSpec, shape: tuple[int, ...], seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """A random input x, gamma (not 1), beta (not 0) and upstream gradient dy, in float64.

    gamma is drawn around 1 but away from it, so that forgetting gamma shows;
    x has a nonzero mean and a spread that is not 1, so that forgetting the
    centering or the scaling shows too.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(0.5, 2.0, size=shape)
    p = spec.param_size(shape)
    gamma = rng.uniform(0.5, 1.5, size=p) * rng.choice([-1.0, 1.0], size=p)
    beta = rng.normal(0.0, 1.0, size=p) if spec.has_beta else None
    dy = rng.normal(0.0, 1.0, size=shape)
    return x, gamma, beta, dy


def check_norm(
    norm: str | NormSpec,
    x: Any,
    gamma: Any = None,
    beta: Any = None,
    eps: float = 1e-5,
    dy: Any = None,
    *,
    variance: str = "two_pass",
    fd_max_entries: int | None = None,
    seed: int | None = None,
) -> CheckReport:
    """Check every named node of ``norm`` built on ``x`` three ways; see the module docstring.

    ``dy`` defaults to a random upstream gradient drawn with ``seed``.
    ``fd_max_entries`` limits the finite differences to that many evenly spread
    entries per node (each costs two rebuilds of the graph); None takes all.
    """
    spec = norm if isinstance(norm, NormSpec) else get_norm(norm)
    graph = spec.build_graph(x, gamma, beta, eps, variance)
    shape = graph.shape
    xs = np.array([v.data for v in graph["x"]], dtype=np.float64).reshape(shape)
    if dy is None:
        dy = np.random.default_rng(seed).normal(0.0, 1.0, size=shape)
    dy = np.asarray(dy, dtype=np.float64)
    if dy.shape != shape:
        raise ValueError(f"dy: expected shape {list(shape)} (the shape of x), got {list(dy.shape)}")
    gammas = _leaf_array(graph, "gamma")
    betas = _leaf_array(graph, "beta")
    dy_flat = dy.ravel().tolist()

    loss = graph.loss(dy.tolist())
    loss.backward()
    closed = spec.node_grads(xs, gammas, betas, graph.eps, dy, variance)

    def loss_with(name: str, k: int, h: float) -> float:
        nudged = spec.build_graph(x, gamma, beta, eps, variance, nudge=(name, k, h))
        return math.fsum(y.data * g for y, g in zip(nudged["y"], dy_flat))

    nodes = []
    for name in spec.node_names:
        if name not in graph:
            continue
        values = graph[name]
        auto = np.array([v.grad for v in values], dtype=np.float64)
        cf = np.asarray(closed[name], dtype=np.float64).ravel()
        fd = np.full(len(values), np.nan)
        for k in _sample(len(values), fd_max_entries):
            h = tol.FD_STEP * max(1.0, abs(values[k].data))
            wide = (loss_with(name, k, h) - loss_with(name, k, -h)) / (2.0 * h)
            narrow = (loss_with(name, k, h / 2) - loss_with(name, k, -h / 2)) / h
            fd[k] = (4.0 * narrow - wide) / 3.0  # Richardson: cancels the h^2 error term
        taken = ~np.isnan(fd)
        cf_abs, cf_rel = tol.normwise_error(auto, cf)
        fd_abs, fd_rel = tol.normwise_error(auto[taken], fd[taken])
        nodes.append(
            NodeCheck(
                name=name,
                stage=values[0].stage or "",
                labels=[graph.index_label(name, k) for k in range(len(values))],
                autograd=auto,
                closed_form=cf,
                finite_diff=fd,
                closed_form_abs=cf_abs,
                closed_form_rel=cf_rel,
                fd_abs=fd_abs,
                fd_rel=fd_rel,
                closed_form_ok=tol.close(auto, cf, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL),
                fd_ok=tol.close(auto[taken], fd[taken], tol.FD_RTOL, tol.FD_ATOL),
                fd_count=int(taken.sum()),
            )
        )
    return CheckReport(spec.name, spec.title, shape, graph.eps, variance, seed, loss.data, nodes)


def _leaf_array(graph: Any, name: str) -> np.ndarray | None:
    if name not in graph:
        return None
    return np.array([v.data for v in graph[name]], dtype=np.float64)


def _sample(size: int, limit: int | None) -> list[int]:
    if limit is None or size <= limit:
        return list(range(size))
    return sorted({round(i * (size - 1) / (limit - 1)) for i in range(limit)}) if limit > 1 else [0]
