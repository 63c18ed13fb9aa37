"""Closed-form forward and backward formulas of the normalization layers, in NumPy.

Each formula is written once, here, and everything else reuses it: the check
compares the scalar graph against these, the vectorized path calls them for its
reference implementation, and the lessons print their numbers.

The same functions serve LayerNorm and BatchNorm: they differ only in which
axes are reduced. ``axes`` is a tuple of axes of ``x`` to reduce over (LayerNorm:
``(-1,)``; BatchNorm [N, D]: ``(0,)``; BatchNorm [N, C, H, W]: ``(0, 2, 3)``), and
every per-group statistic keeps those axes with size 1 (``keepdims``) so it
broadcasts against ``x``. ``n`` is the number of values in one group.

Notation (the names llm.c uses): ``mean``, ``xshift = x - mean``, ``var`` (biased,
divided by n), ``std = sqrt(var + eps)``, ``rstd = 1 / std``, ``xhat = xshift *
rstd``, ``y = gamma * xhat + beta``; ``dy = dL/dy`` and ``dxhat = dL/dxhat``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

Axes = tuple[int, ...]


class Moments(NamedTuple):
    """The forward intermediates of one normalization (all broadcastable to x)."""

    mean: np.ndarray
    xshift: np.ndarray
    var: np.ndarray
    std: np.ndarray
    rstd: np.ndarray
    xhat: np.ndarray


def group_size(shape: tuple[int, ...], axes: Axes) -> int:
    """n: how many values each statistic is taken over."""
    return int(np.prod([shape[a] for a in axes]))


# ---- forward --------------------------------------------------------------------


def mean(x: np.ndarray, axes: Axes) -> np.ndarray:
    """mu = (1/n) sum_i x_i."""
    return x.mean(axis=axes, keepdims=True)


def variance(xshift: np.ndarray, axes: Axes) -> np.ndarray:
    """sigma^2 = (1/n) sum_i (x_i - mu)^2: the two-pass form, accurate for any mean."""
    return (xshift * xshift).mean(axis=axes, keepdims=True)


def naive_variance(x: np.ndarray, axes: Axes) -> np.ndarray:
    """sigma^2 = E[x^2] - E[x]^2: one pass, but it cancels catastrophically when |mean| >> std."""
    m = x.mean(axis=axes, keepdims=True)
    return (x * x).mean(axis=axes, keepdims=True) - m * m


def moments(x: np.ndarray, axes: Axes, eps: float, variance_form: str = "two_pass") -> Moments:
    """mean, xshift, var, std = sqrt(var + eps), rstd = 1/std and xhat = xshift * rstd."""
    mu = mean(x, axes)
    xshift = x - mu
    var = variance(xshift, axes) if variance_form == "two_pass" else naive_variance(x, axes)
    std = np.sqrt(var + eps)
    rstd = 1.0 / std
    return Moments(mu, xshift, var, std, rstd, xshift * rstd)


def affine(xhat: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None) -> np.ndarray:
    """y = gamma * xhat + beta (gamma and beta already broadcastable; None means 1 and 0)."""
    y = xhat if gamma is None else gamma * xhat
    return y if beta is None else y + beta


# ---- backward: affine -----------------------------------------------------------


def dxhat(dy: np.ndarray, gamma: np.ndarray | None) -> np.ndarray:
    """dL/dxhat_i = gamma_i * dL/dy_i (each y_i depends on its own xhat_i only)."""
    return dy if gamma is None else dy * gamma


def dgamma(dy: np.ndarray, xhat: np.ndarray, param_axes: Axes) -> np.ndarray:
    """dL/dgamma = sum over everything a gamma is shared by of dy * xhat."""
    return (dy * xhat).sum(axis=param_axes)


def dbeta(dy: np.ndarray, param_axes: Axes) -> np.ndarray:
    """dL/dbeta = sum of dy over everything a beta is shared by."""
    return dy.sum(axis=param_axes)


# ---- backward: through the statistics (LayerNorm and BatchNorm) ------------------


def drstd(dxhat_: np.ndarray, xshift: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/drstd = sum_j dxhat_j * xshift_j (xhat_j = xshift_j * rstd)."""
    return (dxhat_ * xshift).sum(axis=axes, keepdims=True)


def dstd(dxhat_: np.ndarray, xshift: np.ndarray, std: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dstd = -(1/std^2) sum_j dxhat_j * xshift_j (rstd = std^-1)."""
    return -drstd(dxhat_, xshift, axes) / (std * std)


def dvar(dxhat_: np.ndarray, xshift: np.ndarray, std: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j * xshift_j (std = sqrt(var + eps))."""
    return dstd(dxhat_, xshift, std, axes) / (2.0 * std)


def dmean(dxhat_: np.ndarray, rstd: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dmean = -rstd * sum_j dxhat_j.

    The mean also reaches the loss through the variance, but that path
    contributes nothing: dvar/dmean = -(2/n) sum_j (x_j - mean) = 0.
    """
    return -rstd * dxhat_.sum(axis=axes, keepdims=True)


def dxshift(dxhat_: np.ndarray, rstd: np.ndarray, dvar_: np.ndarray, xshift: np.ndarray, n: int) -> np.ndarray:
    """dL/dxshift_i = dxhat_i * rstd + dL/dvar * 2 xshift_i / n (it feeds xhat_i and var)."""
    return dxhat_ * rstd + dvar_ * (2.0 / n) * xshift


def dx_paths(
    dxhat_: np.ndarray, xshift: np.ndarray, std: np.ndarray, rstd: np.ndarray, axes: Axes
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three paths from x_i to the loss, separately: (direct, via the mean, via the variance).

    direct:            dxhat_i * dxhat_i/dx_i      = dxhat_i * rstd
    via the mean:      dL/dmean * dmean/dx_i       = dL/dmean / n
    via the variance:  dL/dvar * dvar/dx_i         = dL/dvar * 2 (x_i - mean) / n
    """
    n = group_size(dxhat_.shape, axes)
    direct = dxhat_ * rstd
    via_mean = np.broadcast_to(dmean(dxhat_, rstd, axes) / n, dxhat_.shape)
    via_var = dvar(dxhat_, xshift, std, axes) * (2.0 / n) * xshift
    return direct, via_mean, via_var


def dx_three_path(dxhat_: np.ndarray, xshift: np.ndarray, std: np.ndarray, rstd: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dx as the sum of the three paths (the form the chain rule gives first)."""
    direct, via_mean, via_var = dx_paths(dxhat_, xshift, std, rstd, axes)
    return direct + via_mean + via_var


def dx_simplified(dxhat_: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dx_i = rstd * (dxhat_i - mean_j(dxhat_j) - xhat_i * mean_j(dxhat_j * xhat_j)).

    The three paths after substituting xshift = xhat * std: exact for any eps,
    and the numerically sound form (no large intermediate cancels).
    """
    m1 = dxhat_.mean(axis=axes, keepdims=True)
    m2 = (dxhat_ * xhat).mean(axis=axes, keepdims=True)
    return rstd * (dxhat_ - m1 - xhat * m2)


# ---- the projection form (one vector at a time) ----------------------------------


def projection(xhat: np.ndarray) -> np.ndarray:
    """P = (1/d) (1 1^T + xhat xhat^T), for one normalized vector xhat of length d.

    At eps = 0, 1^T xhat = 0 and |xhat|^2 = d, so P is the orthogonal projection
    onto the plane spanned by 1 and xhat: symmetric, P @ P = P, rank 2.
    """
    d = xhat.shape[-1]
    ones = np.ones(d)
    return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d


def dx_projection(dy: np.ndarray, gamma: np.ndarray | None, xhat: np.ndarray, rstd: float) -> np.ndarray:
    """dL/dx = (1/sigma) (I - P) (gamma * dy), for one vector."""
    g = dxhat(dy, gamma)
    return rstd * (g - projection(xhat) @ g)


def layer_norm_jacobian(xhat: np.ndarray, rstd: float, gamma: np.ndarray | None) -> np.ndarray:
    """dy/dx = (1/sigma) diag(gamma) (I - P), for one vector; exact for any eps."""
    d = xhat.shape[-1]
    j = rstd * (np.eye(d) - projection(xhat))
    return j if gamma is None else gamma[:, None] * j


# ---- RMSNorm ----------------------------------------------------------------------


class RMSMoments(NamedTuple):
    """The forward intermediates of RMSNorm."""

    ms: np.ndarray
    rms: np.ndarray
    rrms: np.ndarray
    xhat: np.ndarray


def rms_moments(x: np.ndarray, axes: Axes, eps: float) -> RMSMoments:
    """ms = mean(x^2), rms = sqrt(ms + eps), rrms = 1/rms, xhat = x * rrms."""
    ms = (x * x).mean(axis=axes, keepdims=True)
    rms = np.sqrt(ms + eps)
    rrms = 1.0 / rms
    return RMSMoments(ms, rms, rrms, x * rrms)


def rms_dx(dxhat_: np.ndarray, xhat: np.ndarray, rrms: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dx_i = rrms * (dxhat_i - xhat_i * mean_j(dxhat_j * xhat_j)).

    The LayerNorm form without the mean term: RMSNorm removes only the radial
    component of the gradient.
    """
    m2 = (dxhat_ * xhat).mean(axis=axes, keepdims=True)
    return rrms * (dxhat_ - xhat * m2)


def rms_jacobian(xhat: np.ndarray, rrms: float, gamma: np.ndarray | None) -> np.ndarray:
    """dy/dx = (1/rms) diag(gamma) (I - xhat xhat^T / d), for one vector."""
    d = xhat.shape[-1]
    j = rrms * (np.eye(d) - np.outer(xhat, xhat) / d)
    return j if gamma is None else gamma[:, None] * j


# ---- every named node of a built norm ---------------------------------------------


def param_axes(ndim: int, param_axis: int) -> Axes:
    """The axes a gamma/beta entry is shared over: all but the feature (or channel) axis."""
    return tuple(a for a in range(ndim) if a != param_axis % ndim)


def param_view(p: np.ndarray | None, ndim: int, param_axis: int) -> np.ndarray | None:
    """Reshape a per-feature parameter so that it broadcasts along ``param_axis``."""
    if p is None:
        return None
    shape = [1] * ndim
    shape[param_axis] = p.shape[0]
    return p.reshape(shape)


def normalization_node_grads(
    x: np.ndarray,
    gamma: np.ndarray | None,
    beta: np.ndarray | None,
    eps: float,
    dy: np.ndarray,
    axes: Axes,
    param_axis: int,
    variance_form: str = "two_pass",
) -> dict[str, np.ndarray]:
    """dL/d(node) for every named node of a LayerNorm or BatchNorm graph, loss = sum(y * dy).

    Keys follow the scalar graph: x, mean, xshift, var, std, rstd, xhat, y, and
    gamma/beta when given. Per-group entries keep ``axes`` with size 1. In the
    naive-variance graph the mean feeds the variance directly (var = E[x^2] - mean^2),
    so dL/dmean and dL/dxshift differ from the two-pass graph; dL/dx does not.
    """
    m = moments(x, axes, eps, variance_form)
    n = group_size(x.shape, axes)
    g = param_view(gamma, x.ndim, param_axis)
    gx = dxhat(dy, g)
    dvar_ = dvar(gx, m.xshift, m.std, axes)
    grads = {
        "x": dx_simplified(gx, m.xhat, m.rstd, axes),
        "var": dvar_,
        "std": dstd(gx, m.xshift, m.std, axes),
        "rstd": drstd(gx, m.xshift, axes),
        "xhat": gx,
        "y": dy,
    }
    if variance_form == "two_pass":
        grads["xshift"] = dxshift(gx, m.rstd, dvar_, m.xshift, n)
        grads["mean"] = dmean(gx, m.rstd, axes)
    else:
        grads["xshift"] = gx * m.rstd
        grads["mean"] = dmean(gx, m.rstd, axes) - 2.0 * m.mean * dvar_
    shared = param_axes(x.ndim, param_axis)
    if gamma is not None:
        grads["gamma"] = dgamma(dy, m.xhat, shared)
    if beta is not None:
        grads["beta"] = dbeta(dy, shared)
    return grads


def rms_node_grads(
    x: np.ndarray,
    gamma: np.ndarray | None,
    beta: None,
    eps: float,
    dy: np.ndarray,
    axes: Axes = (-1,),
    param_axis: int = -1,
    variance_form: str = "two_pass",
) -> dict[str, np.ndarray]:
    """dL/d(node) for every named node of an RMSNorm graph, loss = sum(y * dy).

    Same signature as :func:`normalization_node_grads`; RMSNorm has no beta and no
    variance, so ``beta`` must be None and ``variance_form`` is ignored.
    """
    m = rms_moments(x, axes, eps)
    gx = dxhat(dy, param_view(gamma, x.ndim, param_axis))
    drrms = (gx * x).sum(axis=axes, keepdims=True)
    drms = -drrms / (m.rms * m.rms)
    grads = {
        "x": rms_dx(gx, m.xhat, m.rrms, axes),
        "ms": drms / (2.0 * m.rms),
        "rms": drms,
        "rrms": drrms,
        "xhat": gx,
        "y": dy,
    }
    if gamma is not None:
        grads["gamma"] = dgamma(dy, m.xhat, param_axes(x.ndim, param_axis))
    return grads


def rms_dx_paths(
    dxhat_: np.ndarray, x: np.ndarray, rms: np.ndarray, rrms: np.ndarray, axes: Axes
) -> tuple[np.ndarray, np.ndarray]:
    """The two paths from x_i to the loss in RMSNorm, separately: (direct, via the mean square).

    direct:                dxhat_i * dxhat_i/dx_i  = dxhat_i * rrms
    via the mean square:   dL/dms * dms/dx_i       = dL/dms * 2 x_i / n,
                           dL/dms = -(1/2) rms^-3 sum_j dxhat_j * x_j

    Their sum is :func:`rms_dx`. (LayerNorm has a third path, through the mean;
    RMSNorm subtracts no mean.)
    """
    n = group_size(dxhat_.shape, axes)
    direct = dxhat_ * rrms
    dms = -(dxhat_ * x).sum(axis=axes, keepdims=True) / (2.0 * rms * rms * rms)
    return direct, dms * (2.0 / n) * x
