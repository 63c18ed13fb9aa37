"""The LayerNorm Jacobian: from autograd, in closed form, and what its structure implies.

For one vector x of length d,

    dy/dx = (1/sigma) diag(gamma) (I - P),   P = (1/d) (1 1^T + xhat xhat^T).

At eps = 0, 1^T xhat = 0 and |xhat|^2 = d, so P is the orthogonal projection
onto span{1, xhat}: symmetric, P @ P = P, rank 2. Two consequences follow for
the input gradient dx = (1/sigma) (I - P) (gamma * dy): it sums to zero (no
component along 1) and it is orthogonal to xhat (no radial component), which is
the infinitesimal form of LN(c x) = LN(x) for c > 0.

With eps > 0 the formula for the Jacobian stays exact (sigma = sqrt(var + eps)),
but |xhat|^2 = d var / (var + eps) < d, so P is no longer exactly a projection.
:func:`projection_report` measures how far each property is off, and sets each
measurement beside the amount the algebra predicts:

    P @ P - P       = -(1/d) (eps / (var + eps)) xhat xhat^T
    xhat . dx       = rstd (eps / (var + eps)) (xhat . (gamma * dy))
    sum(dx)         = 0            (still exact: 1^T xhat = 0 for any eps)
    LN(c x) - LN(x) != 0           (eps does not scale with x)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from microgradnorm import formulas
from microgradnorm.registry import get_norm

__all__ = ["ProjectionReport", "autograd_jacobian", "projection_report"]


def autograd_jacobian(norm: str, x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5) -> np.ndarray:
    """dy/dx of one vector from the scalar graph: row i is x's gradient after ``y[i].backward()``.

    One graph, d backward passes, zeroing the gradients between them (they
    accumulate otherwise).
    """
    spec = get_norm(norm)
    graph = spec.build_graph(x, gamma, beta, eps)
    if len(graph.shape) != 1:
        raise ValueError(f"x: the Jacobian is taken of one vector [D], got shape {list(graph.shape)}")
    xs, ys = graph["x"], graph["y"]
    rows = []
    for y in ys:
        y.zero_grad()
        y.backward()
        rows.append([v.grad for v in xs])
    ys[-1].zero_grad()
    return np.array(rows, dtype=np.float64)


@dataclass(frozen=True)
class ProjectionReport:
    """Measured properties of the LayerNorm Jacobian of one vector, each with its prediction."""

    d: int
    eps: float
    var: float
    jacobian_error: float  # max |J_autograd - J_closed_form|
    symmetric_error: float  # max |P - P^T|
    idempotent_error: float  # max |P @ P - P|
    idempotent_predicted: float  # max |(1/d) eps/(var+eps) xhat xhat^T|
    rank: int  # numerical rank of P
    singular_values: tuple[float, ...]  # of P, largest first
    xhat_norm_sq: float  # |xhat|^2 (d at eps = 0)
    sum_dx: float  # 1 . dx
    xhat_dot_dx: float  # xhat . dx
    xhat_dot_dx_predicted: float
    dx_norm: float  # |dx|, the scale the two dot products compare with
    scale_c: float
    scale_error: float  # max |LN(c x) - LN(x)|


def projection_report(
    x: Any, gamma: Any = None, eps: float = 1e-5, dy: Any = None, c: float = 3.0, seed: int = 0
) -> ProjectionReport:
    """Measure the projection structure of the LayerNorm Jacobian at ``x`` (one vector).

    The Jacobian is taken from autograd and compared with the closed form;
    everything else is computed from ``x`` with the closed forms in
    :mod:`microgradnorm.formulas`. ``dy`` defaults to a random upstream gradient.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x: expected one vector [D], got shape {list(x.shape)}")
    d = x.shape[0]
    g = None if gamma is None else np.asarray(gamma, dtype=np.float64)
    if dy is None:
        dy = np.random.default_rng(seed).normal(size=d)
    dy = np.asarray(dy, dtype=np.float64)
    axes = (0,)
    m = formulas.moments(x, axes, eps)
    rstd = float(m.rstd[0])
    xhat = m.xhat
    p = formulas.projection(xhat)
    j_closed = formulas.layer_norm_jacobian(xhat, rstd, g)
    j_auto = autograd_jacobian("layernorm", x.tolist(), None if g is None else g.tolist(), None, eps)
    dx = formulas.dx_projection(dy, g, xhat, rstd)
    shrink = eps / (float(m.var[0]) + eps)
    sv = np.linalg.svd(p, compute_uv=False)
    y = formulas.affine(xhat, g, None)
    y_scaled = formulas.affine(formulas.moments(c * x, axes, eps).xhat, g, None)
    return ProjectionReport(
        d=d,
        eps=eps,
        var=float(m.var[0]),
        jacobian_error=float(np.max(np.abs(j_auto - j_closed))),
        symmetric_error=float(np.max(np.abs(p - p.T))),
        idempotent_error=float(np.max(np.abs(p @ p - p))),
        idempotent_predicted=float(np.max(np.abs(np.outer(xhat, xhat))) * shrink / d),
        rank=int(np.linalg.matrix_rank(p)),
        singular_values=tuple(float(s) for s in sv),
        xhat_norm_sq=float(xhat @ xhat),
        sum_dx=float(dx.sum()),
        xhat_dot_dx=float(xhat @ dx),
        xhat_dot_dx_predicted=rstd * shrink * float(xhat @ formulas.dxhat(dy, g)),
        dx_norm=float(np.linalg.norm(dx)),
        scale_c=c,
        scale_error=float(np.max(np.abs(y_scaled - y))),
    )
