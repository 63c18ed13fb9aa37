"""The "reference" backend: the closed forms of :mod:`microgradnorm.formulas`, one after another.

Slow, and kept that way on purpose: it is the textbook written as code, what
the benchmark calls "NumPy naive", and the baseline the tuned backends are
measured against. Its cache keeps ``xshift`` as the textbook's does.
"""

from __future__ import annotations

import numpy as np

from microgradnorm import formulas as F
from microgradnorm.vectorized.cache import ForwardArgs, NormCache
from microgradnorm.vectorized.repairs import _any_to_repair, _repair_channels, _repair_rows


def _norm_axes(norm: str, ndim: int) -> tuple[tuple[int, ...], int]:
    """(the axes one statistic is taken over, the axis gamma and beta run along)."""
    if norm == "batchnorm":
        return ((0,), 1) if ndim == 2 else ((0, 2, 3), 1)
    return (ndim - 1,), ndim - 1


def reference_forward(args: ForwardArgs) -> tuple[np.ndarray, NormCache]:
    """The textbook forward pass: moments (mean, xshift, var, rstd, xhat), then the affine map."""
    norm, eps = args.norm, args.eps
    xc = args.x.astype(args.compute_dtype, copy=False)
    axes, param_axis = _norm_axes(norm, xc.ndim)
    g = F.param_view(args.gamma, xc.ndim, param_axis)  # 1,..,D  broadcastable
    b = F.param_view(args.beta, xc.ndim, param_axis)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if norm == "rmsnorm":
            r = F.rms_moments(xc, axes, eps)  # ms, rms, rrms: [..., 1]; xhat: [..., D]
            mean, var, rstd, xhat, xshift = None, r.ms, r.rrms, r.xhat, None
        else:
            m = F.moments(xc, axes, eps)  # mean, var, std, rstd: [..., 1]; xshift, xhat: [..., D]
            mean, var, rstd, xhat, xshift = m.mean, m.var, m.rstd, m.xhat, m.xshift
        y = F.affine(xhat, g, b)  # [..., D]
    _repair_reference(norm, xc, y, xhat, mean, var, rstd, args.gamma, args.beta, eps)
    keep = args.keep_xhat
    cache = NormCache.from_forward(
        args,
        xhat=xhat if keep else None,
        x=None if keep else xc,
        mean=mean,
        var=var,
        rstd=rstd,
        xshift=xshift if keep else None,
    )
    return y, cache


def _repair_reference(norm, xc, y, xhat, mean, var, rstd, gamma, beta, eps) -> None:
    """The textbook formulas, then the same repair as the tuned paths for groups out of range."""
    if not _any_to_repair(var, eps):
        return
    with np.errstate(over="ignore", under="ignore"):  # a float32 var of such a group stays inf, as it should
        if norm == "batchnorm":
            n, c = xc.shape[:2]
            views = [a.reshape(n, c, -1) for a in (xc, y, xhat)]  # N,C,Q views of the arrays themselves
            _repair_channels(*views, mean.reshape(-1), var.reshape(-1), rstd.reshape(-1), gamma, beta, eps)
        else:
            d = xc.shape[-1]
            views = [a.reshape(-1, d) for a in (xc, y, xhat)]  # R,D
            flat_mean = None if mean is None else mean.reshape(-1)
            _repair_rows(*views, flat_mean, var.reshape(-1), rstd.reshape(-1), gamma, beta, eps)


def reference_backward(dyc: np.ndarray, cache: NormCache):
    """The textbook backward pass: dxhat, then dx_simplified (or rms_dx), dgamma, dbeta (not yet in output dtypes)."""
    ndim = len(cache.shape)
    axes, param_axis = _norm_axes(cache.norm, ndim)
    shared = F.param_axes(ndim, param_axis)
    cdt = cache.compute_dtype
    rstd = cache.rstd.astype(cdt)
    with np.errstate(over="ignore", invalid="ignore"):  # as quiet as the forward pass (eps = 0: 0 * inf)
        if cache.xhat is not None:
            xhat = cache.xhat
        elif cache.norm == "rmsnorm":
            xhat = cache.x * rstd
        else:
            xhat = (cache.x - cache.mean.astype(cdt)) * rstd
    g = F.dxhat(dyc, F.param_view(cache.gamma, ndim, param_axis))  # dL/dxhat = gamma * dy
    if cache.norm == "rmsnorm":
        dx = F.rms_dx(g, xhat, rstd, axes)
    else:
        dx = F.dx_simplified(g, xhat, rstd, axes)
    return dx, F.dgamma(dyc, xhat, shared), F.dbeta(dyc, shared)
