"""Closed-form forward and backward formulas of the normalization layers, in NumPy.

Each formula is written once, here, and everything else reuses it: the check
compares the scalar graph against these, the vectorized path calls them for its
reference implementation, and the lessons print their numbers.

The same functions serve LayerNorm, BatchNorm and GroupNorm: they differ only
in which axes are reduced. ``axes`` is a tuple of axes of ``x`` to reduce over
(LayerNorm: ``(-1,)``; BatchNorm [N, D]: ``(0,)``; BatchNorm [N, C, H, W]:
``(0, 2, 3)``; GroupNorm: ``(2,)`` of x seen as [N, G, C/G * H * W]), and
every per-group statistic keeps those axes with size 1 (``keepdims``) so it
broadcasts against ``x``. ``n`` is the number of values in one group. The shape
comments say ``x`` for an array shaped like x, ``stat`` for a per-group
statistic (x's shape with the reduced axes kept as 1), ``P`` for one entry per
feature or channel, ``D`` for the length of one vector.

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
    return x.mean(axis=axes, keepdims=True)  # stat: x's shape, axes kept as 1


def variance(xshift: np.ndarray, axes: Axes) -> np.ndarray:
    """sigma^2 = (1/n) sum_i (x_i - mu)^2: the two-pass form, accurate for any mean."""
    return (xshift * xshift).mean(axis=axes, keepdims=True)  # stat


def naive_variance(x: np.ndarray, axes: Axes) -> np.ndarray:
    """sigma^2 = E[x^2] - E[x]^2: one pass, but it cancels catastrophically when |mean| >> std."""
    m = x.mean(axis=axes, keepdims=True)  # stat
    return (x * x).mean(axis=axes, keepdims=True) - m * m  # stat


def moments(x: np.ndarray, axes: Axes, eps: float, variance_form: str = "two_pass") -> Moments:
    """mean, xshift, var, std = sqrt(var + eps), rstd = 1/std and xhat = xshift * rstd."""
    mu = mean(x, axes)  # stat
    xshift = x - mu  # x
    var = variance(xshift, axes) if variance_form == "two_pass" else naive_variance(x, axes)  # stat
    std = np.sqrt(var + eps)  # stat
    rstd = 1.0 / std  # stat
    return Moments(mu, xshift, var, std, rstd, xshift * rstd)  # xhat: x


def affine(xhat: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None) -> np.ndarray:
    """y = gamma * xhat + beta (gamma and beta already broadcastable; None means 1 and 0)."""
    y = xhat if gamma is None else gamma * xhat  # x
    return y if beta is None else y + beta  # x


# ---- backward: affine -----------------------------------------------------------


def dxhat(dy: np.ndarray, gamma: np.ndarray | None) -> np.ndarray:
    """dL/dxhat_i = gamma_i * dL/dy_i (each y_i depends on its own xhat_i only)."""
    return dy if gamma is None else dy * gamma  # x


def dgamma(dy: np.ndarray, xhat: np.ndarray, param_axes: Axes) -> np.ndarray:
    """dL/dgamma = sum over everything a gamma is shared by of dy * xhat."""
    return (dy * xhat).sum(axis=param_axes)  # P (one per feature or channel)


def dbeta(dy: np.ndarray, param_axes: Axes) -> np.ndarray:
    """dL/dbeta = sum of dy over everything a beta is shared by."""
    return dy.sum(axis=param_axes)  # P


# ---- backward: through the statistics (LayerNorm and BatchNorm) ------------------


def drstd(dxhat_: np.ndarray, xshift: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/drstd = sum_j dxhat_j * xshift_j (xhat_j = xshift_j * rstd)."""
    return (dxhat_ * xshift).sum(axis=axes, keepdims=True)  # stat


def dstd(dxhat_: np.ndarray, xshift: np.ndarray, std: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dstd = -(1/std^2) sum_j dxhat_j * xshift_j (rstd = std^-1)."""
    return -drstd(dxhat_, xshift, axes) / (std * std)  # stat


def dvar(dxhat_: np.ndarray, xshift: np.ndarray, std: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j * xshift_j (std = sqrt(var + eps))."""
    return dstd(dxhat_, xshift, std, axes) / (2.0 * std)  # stat


def dmean(dxhat_: np.ndarray, rstd: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dmean = -rstd * sum_j dxhat_j.

    The mean also reaches the loss through the variance, but that path
    contributes nothing: dvar/dmean = -(2/n) sum_j (x_j - mean) = 0.
    """
    return -rstd * dxhat_.sum(axis=axes, keepdims=True)  # stat


def dxshift(dxhat_: np.ndarray, rstd: np.ndarray, dvar_: np.ndarray, xshift: np.ndarray, n: int) -> np.ndarray:
    """dL/dxshift_i = dxhat_i * rstd + dL/dvar * 2 xshift_i / n (it feeds xhat_i and var)."""
    return dxhat_ * rstd + dvar_ * (2.0 / n) * xshift  # x


def dx_paths(
    dxhat_: np.ndarray,
    xshift: np.ndarray,
    std: np.ndarray,
    rstd: np.ndarray,
    axes: Axes,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three paths from x_i to the loss, separately: (direct, via the mean, via the variance).

    direct:            dxhat_i * dxhat_i/dx_i      = dxhat_i * rstd
    via the mean:      dL/dmean * dmean/dx_i       = dL/dmean / n
    via the variance:  dL/dvar * dvar/dx_i         = dL/dvar * 2 (x_i - mean) / n
    """
    n = group_size(dxhat_.shape, axes)
    direct = dxhat_ * rstd  # x
    via_mean = np.broadcast_to(  # x
        dmean(dxhat_, rstd, axes) / n, dxhat_.shape
    )
    via_var = (  # x
        dvar(dxhat_, xshift, std, axes) * (2.0 / n) * xshift
    )
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
    m1 = dxhat_.mean(axis=axes, keepdims=True)  # stat
    m2 = (dxhat_ * xhat).mean(axis=axes, keepdims=True)  # stat
    return rstd * (dxhat_ - m1 - xhat * m2)  # x


# ---- the projection form (one vector at a time) ----------------------------------


def projection(xhat: np.ndarray) -> np.ndarray:
    """P = (1/d) (1 1^T + xhat xhat^T), for one normalized vector xhat of length d.

    At eps = 0, 1^T xhat = 0 and |xhat|^2 = d, so P is the orthogonal projection
    onto the plane spanned by 1 and xhat: symmetric, P @ P = P, rank 2.
    """
    d = xhat.shape[-1]
    ones = np.ones(d)  # D
    return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d  # D,D


def dx_projection(dy: np.ndarray, gamma: np.ndarray | None, xhat: np.ndarray, rstd: float) -> np.ndarray:
    """dL/dx = (1/sigma) (I - P) (gamma * dy), for one vector."""
    g = dxhat(dy, gamma)  # D
    return rstd * (g - projection(xhat) @ g)  # D


def layer_norm_jacobian(xhat: np.ndarray, rstd: float, gamma: np.ndarray | None) -> np.ndarray:
    """dy/dx = (1/sigma) diag(gamma) (I - P), for one vector; exact for any eps."""
    d = xhat.shape[-1]
    j = rstd * (np.eye(d) - projection(xhat))  # D,D
    return j if gamma is None else gamma[:, None] * j  # D,D


# ---- RMSNorm ----------------------------------------------------------------------


class RMSMoments(NamedTuple):
    """The forward intermediates of RMSNorm."""

    ms: np.ndarray
    rms: np.ndarray
    rrms: np.ndarray
    xhat: np.ndarray


def rms_moments(x: np.ndarray, axes: Axes, eps: float) -> RMSMoments:
    """ms = mean(x^2), rms = sqrt(ms + eps), rrms = 1/rms, xhat = x * rrms."""
    ms = (x * x).mean(axis=axes, keepdims=True)  # stat
    rms = np.sqrt(ms + eps)  # stat
    rrms = 1.0 / rms  # stat
    return RMSMoments(ms, rms, rrms, x * rrms)  # xhat: x


def rms_dx(dxhat_: np.ndarray, xhat: np.ndarray, rrms: np.ndarray, axes: Axes) -> np.ndarray:
    """dL/dx_i = rrms * (dxhat_i - xhat_i * mean_j(dxhat_j * xhat_j)).

    The LayerNorm form without the mean term: RMSNorm removes only the radial
    component of the gradient.
    """
    m2 = (dxhat_ * xhat).mean(axis=axes, keepdims=True)  # stat
    return rrms * (dxhat_ - xhat * m2)  # x


def rms_jacobian(xhat: np.ndarray, rrms: float, gamma: np.ndarray | None) -> np.ndarray:
    """dy/dx = (1/rms) diag(gamma) (I - xhat xhat^T / d), for one vector."""
    d = xhat.shape[-1]
    j = rrms * (np.eye(d) - np.outer(xhat, xhat) / d)  # D,D
    return j if gamma is None else gamma[:, None] * j  # D,D


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
    return p.reshape(shape)  # 1,..,P,..,1


def normalization_node_grads(
    x: np.ndarray,
    gamma: np.ndarray | None,
    beta: np.ndarray | None,
    eps: float,
    dy: np.ndarray,
    axes: Axes,
    param_axis: int,
    variance_form: str = "two_pass",
    view: tuple[int, ...] | None = None,
) -> dict[str, np.ndarray]:
    """dL/d(node) for every named node of a LayerNorm, BatchNorm or GroupNorm graph, loss = sum(y * dy).

    Keys follow the scalar graph: x, mean, xshift, var, std, rstd, xhat, y, and
    gamma/beta when given. The statistics are taken over ``axes`` of ``view``, a
    C-order reshape of x (GroupNorm's [N, G, C/G * ...]; None: x itself), and
    per-group entries keep those axes with size 1; gamma and beta run along
    ``param_axis`` of x. In the naive-variance graph the mean feeds the variance
    directly (var = E[x^2] - mean^2), so dL/dmean and dL/dxshift differ from the
    two-pass graph; dL/dx does not.
    """
    view = x.shape if view is None else view
    m = moments(x.reshape(view), axes, eps, variance_form)  # stats: view, axes kept as 1
    n = group_size(view, axes)
    g = param_view(gamma, x.ndim, param_axis)  # 1,..,P,..,1
    gx = dxhat(dy, g).reshape(view)  # view
    dvar_ = dvar(gx, m.xshift, m.std, axes)  # stat
    grads = {
        "x": dx_simplified(gx, m.xhat, m.rstd, axes),  # view
        "var": dvar_,
        "std": dstd(gx, m.xshift, m.std, axes),  # stat
        "rstd": drstd(gx, m.xshift, axes),  # stat
        "xhat": gx,
        "y": dy,  # x
    }
    if variance_form == "two_pass":
        grads["xshift"] = dxshift(gx, m.rstd, dvar_, m.xshift, n)  # view
        grads["mean"] = dmean(gx, m.rstd, axes)  # stat
    else:
        grads["xshift"] = gx * m.rstd  # view
        grads["mean"] = dmean(gx, m.rstd, axes) - 2.0 * m.mean * dvar_  # stat
    for name in ("x", "xshift", "xhat"):
        grads[name] = grads[name].reshape(x.shape)  # x
    shared = param_axes(x.ndim, param_axis)
    xhat = m.xhat.reshape(x.shape)  # x
    if gamma is not None:
        grads["gamma"] = dgamma(dy, xhat, shared)  # P
    if beta is not None:
        grads["beta"] = dbeta(dy, shared)  # P
    return grads


def rms_node_grads(
    x: np.ndarray,
    gamma: np.ndarray | None,
    eps: float,
    dy: np.ndarray,
    axes: Axes = (-1,),
    param_axis: int = -1,
) -> dict[str, np.ndarray]:
    """dL/d(node) for every named node of an RMSNorm graph, loss = sum(y * dy)."""
    m = rms_moments(x, axes, eps)  # stats: axes kept as 1
    gx = dxhat(dy, param_view(gamma, x.ndim, param_axis))  # x
    drrms = (gx * x).sum(axis=axes, keepdims=True)  # stat
    drms = -drrms / (m.rms * m.rms)  # stat
    grads = {
        "x": rms_dx(gx, m.xhat, m.rrms, axes),  # x
        "ms": drms / (2.0 * m.rms),  # stat
        "rms": drms,
        "rrms": drrms,
        "xhat": gx,
        "y": dy,
    }
    if gamma is not None:
        grads["gamma"] = dgamma(dy, m.xhat, param_axes(x.ndim, param_axis))  # P
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
    direct = dxhat_ * rrms  # x
    dms = -(dxhat_ * x).sum(axis=axes, keepdims=True) / (2.0 * rms * rms * rms)  # stat
    return direct, dms * (2.0 / n) * x  # x, x
