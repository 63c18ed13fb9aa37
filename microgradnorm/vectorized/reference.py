"""The "reference" backend: the closed forms of :mod:`microgradnorm.formulas`, one after another.

Slow, and kept that way on purpose: it is the textbook written as code, what
the benchmark calls "NumPy naive", and the baseline the tuned backends are
measured against. Its cache keeps ``xshift`` as the textbook's does. It works
for every norm from the registry's facts: the statistics are taken over
``spec.axes`` of ``spec.view`` (x itself, or GroupNorm's [N, G, M]).
"""

from __future__ import annotations

import numpy as np

from microgradnorm import formulas as F
from microgradnorm.registry import get_norm
from microgradnorm.vectorized.cache import ForwardArgs, NormCache
from microgradnorm.vectorized.repairs import _any_to_repair, _repair_channels, _repair_rows


def reference_forward(args: ForwardArgs) -> tuple[np.ndarray, NormCache]:
    """The textbook forward pass: moments (mean, xshift, var, rstd, xhat), then the affine map."""
    spec, eps = args.spec, args.eps
    xc = args.x.astype(args.compute_dtype, copy=False)
    view, axes, pa = spec.view(xc.shape), spec.axes(xc.shape), spec.param_axis(xc.shape)
    xv = xc.reshape(view)  # the view the statistics are taken on
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if spec.centered:
            m = F.moments(xv, axes, eps)  # mean, var, std, rstd: stat; xshift, xhat: view
            mean, var, rstd, xhat, xshift = m.mean, m.var, m.rstd, m.xhat, m.xshift.reshape(xc.shape)
        else:
            r = F.rms_moments(xv, axes, eps)  # ms, rms, rrms: stat; xhat: view
            mean, var, rstd, xhat, xshift = None, r.ms, r.rrms, r.xhat, None
        _repair(xv, xhat, mean, var, rstd, axes, eps)
        xhat = xhat.reshape(xc.shape)  # x
        y = F.affine(xhat, F.param_view(args.gamma, xc.ndim, pa), F.param_view(args.beta, xc.ndim, pa))  # x
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


def _repair(xv, xhat, mean, var, rstd, axes, eps) -> None:
    """The same repair as the tuned paths, on xhat and the statistics, for groups out of range."""
    if not _any_to_repair(var, eps):
        return
    with np.errstate(over="ignore", under="ignore"):  # a float32 var of such a group stays inf, as it should
        flat_mean = None if mean is None else mean.reshape(-1)
        stats = (flat_mean, var.reshape(-1), rstd.reshape(-1), None, None, eps)
        if axes == (xv.ndim - 1,):  # rows of the view
            d = xv.shape[-1]
            _repair_rows(xv.reshape(-1, d), xhat.reshape(-1, d), xhat.reshape(-1, d), *stats)
        else:  # channels [N, C, ...] reduced over every axis but 1
            n, c = xv.shape[:2]
            _repair_channels(xv.reshape(n, c, -1), xhat.reshape(n, c, -1), xhat.reshape(n, c, -1), *stats)


def reference_backward(dyc: np.ndarray, cache: NormCache):
    """The textbook backward pass: dxhat, then dx_simplified (or rms_dx), dgamma, dbeta (not yet in output dtypes)."""
    spec = get_norm(cache.norm, cache.num_groups)
    shape = cache.shape
    view, axes, pa = spec.view(shape), spec.axes(shape), spec.param_axis(shape)
    cdt = cache.compute_dtype
    rstd = cache.rstd.astype(cdt)  # stat
    with np.errstate(over="ignore", invalid="ignore"):  # as quiet as the forward pass (eps = 0: 0 * inf)
        if cache.xhat is not None:
            xhat = cache.xhat.reshape(view)
        elif spec.centered:
            xhat = (cache.x.reshape(view) - cache.mean.astype(cdt)) * rstd  # view
        else:
            xhat = cache.x.reshape(view) * rstd  # view
    g = F.dxhat(dyc, F.param_view(cache.gamma, len(shape), pa)).reshape(view)  # dL/dxhat = gamma * dy
    dx = F.dx_simplified(g, xhat, rstd, axes) if spec.centered else F.rms_dx(g, xhat, rstd, axes)  # view
    shared = F.param_axes(len(shape), pa)
    xhat = xhat.reshape(shape)
    return dx, F.dgamma(dyc, xhat, shared), F.dbeta(dyc, shared)
