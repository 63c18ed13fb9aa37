"""The public forward and backward functions: check the arguments, run the backend, keep the cache.

Each forward function checks its arguments into a :class:`ForwardArgs` (with
the registry's entry for the norm) and calls one of ``_rows_forward`` (x as
[R, D]; GroupNorm's rows are its groups, [N * G, M], before its per-channel
affine) or ``_channels_forward`` ([N, C, Q]), which runs the backend through
``_tuned_forward`` (the float32 range check), repairs the groups that left
the safe range and makes the cache: the backend is three calls from the
public function. Each backward function checks dy against
the cache and reverses the same steps. The "reference" backend is
:mod:`microgradnorm.vectorized.reference`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from microgradnorm.registry import NormSpec, get_norm
from microgradnorm.vectorized import numpy_path as P
from microgradnorm.vectorized.backend import require_fused
from microgradnorm.vectorized.cache import ForwardArgs, NormCache, check_dy, check_forward
from microgradnorm.vectorized.reference import reference_backward, reference_forward
from microgradnorm.vectorized.repairs import _backward_dtype, _repair_channels, _repair_rows, _tuned_forward

# ---- LayerNorm -------------------------------------------------------------------------------


def layer_norm_forward(
    x: Any,
    gamma: Any = None,
    beta: Any = None,
    eps: float = 1e-5,
    *,
    recompute: bool | None = None,
    backend: str | None = None,
) -> tuple[np.ndarray, NormCache]:
    """LayerNorm over the last axis of ``x`` [..., D]: ``y = gamma * (x - mean) * rstd + beta``.

    ``gamma`` and ``beta`` have shape [D] or are None (scale 1, shift 0).
    ``recompute=True`` keeps only (x, mean, rstd) in the cache and recomputes
    xhat in the backward pass (less memory, a little more work); None lets the
    backend choose (numpy keeps xhat; fused recomputes, which costs it nothing
    because it reads a row either way, the same choice PyTorch makes).
    """
    return _rows_forward(check_forward(get_norm("layernorm"), x, gamma, beta, eps, recompute, backend))


def layer_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dgamma, dbeta) for ``dy`` = dL/dy; dgamma/dbeta are None where gamma/beta were.

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gamma * dy (the
    xhat form of ``formulas.dx_simplified``), dgamma = sum over rows of dy * xhat,
    dbeta = sum over rows of dy.
    """
    return _rows_backward(check_dy(dy, cache, "layernorm", "layer_norm_backward"), cache)


# ---- RMSNorm ---------------------------------------------------------------------------------


def rms_norm_forward(
    x: Any,
    gamma: Any = None,
    beta: None = None,
    eps: float = 1e-5,
    *,
    recompute: bool | None = None,
    backend: str | None = None,
) -> tuple[np.ndarray, NormCache]:
    """RMSNorm over the last axis: ``y = gamma * x * rrms``, ``rrms = 1 / sqrt(mean(x^2) + eps)``.

    No mean and no shift: ``beta`` is there so that every norm takes the same
    arguments, and must be None. In the cache, ``var`` holds the mean square
    ``ms`` and ``rstd`` holds ``rrms``; ``mean`` is None.
    """
    return _rows_forward(check_forward(get_norm("rmsnorm"), x, gamma, beta, eps, recompute, backend))


def rms_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None, None]:
    """(dx, dgamma, None): dx = rrms * (g - xhat * mean(g * xhat)), g = gamma * dy (``formulas.rms_dx``)."""
    return _rows_backward(check_dy(dy, cache, "rmsnorm", "rms_norm_backward"), cache)


# ---- BatchNorm -------------------------------------------------------------------------------


def batch_norm_forward(
    x: Any,
    gamma: Any = None,
    beta: Any = None,
    eps: float = 1e-5,
    *,
    recompute: bool | None = None,
    backend: str | None = None,
) -> tuple[np.ndarray, NormCache]:
    """BatchNorm with training-mode statistics: x [N, D] per column, or [N, C, H, W] per channel.

    ``gamma`` and ``beta`` have one value per column or channel. For running
    averages and an eval mode, use the :class:`BatchNorm` layer.
    """
    return _channels_forward(check_forward(get_norm("batchnorm"), x, gamma, beta, eps, recompute, backend))


def batch_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dgamma, dbeta): dx = rstd * gamma * (dy - dbeta / m - xhat * dgamma / m) per channel.

    With g = gamma * dy, ``formulas.dx_simplified`` needs mean(g) and
    mean(g * xhat) over each channel's m values; gamma is constant over the
    channel, so they are gamma * dbeta / m and gamma * dgamma / m.
    """
    dyc = check_dy(dy, cache, "batchnorm", "batch_norm_backward")
    if cache.backend == "reference":
        return _finish_backward(*reference_backward(dyc, cache), cache)
    n, c = cache.shape[:2]
    mean = cache.mean.reshape(-1)  # C
    rstd = cache.rstd.reshape(-1)  # C
    cdt = _backward_dtype(rstd, math.prod(cache.shape) // c, cache.compute_dtype)
    if cache.backend == "fused":
        fused = require_fused()
        kshape = cache.shape if len(cache.shape) == 2 else (n, c, -1)  # [N, D] has its own column kernel
        src, have_xhat = _backward_source(cache, kshape, cdt)
        dyk = _contiguous(dyc.reshape(kshape), cdt)
        dx, dgamma, dbeta = fused.batch_norm_backward(dyk, src, mean, rstd, cache.gamma, have_xhat)
    else:
        dy3 = dyc.reshape(n, c, -1).astype(cdt, copy=False)  # N,C,Q
        src3, have_xhat = _backward_source(cache, (n, c, -1), cdt)  # N,C,Q
        xhat3 = src3 if have_xhat else P._recompute_xhat(src3, mean, rstd, channels=True)
        dx, dgamma, dbeta = P._bn_backward_numpy(dy3, xhat3, rstd.astype(cdt), cache.gamma)
    return _finish_backward(dx, dgamma, dbeta, cache)


# ---- GroupNorm -------------------------------------------------------------------------------


def group_norm_forward(
    x: Any,
    num_groups: int,
    gamma: Any = None,
    beta: Any = None,
    eps: float = 1e-5,
    *,
    recompute: bool | None = None,
    backend: str | None = None,
) -> tuple[np.ndarray, NormCache]:
    """GroupNorm of x [N, C, *spatial]: each example's C channels in ``num_groups`` groups of C/G,
    each group normalized over its channels and positions; gamma and beta have one value per channel.

    The statistics are LayerNorm's of the rows of x seen as [N * G, C/G * H * W],
    so GroupNorm runs on the same tuned row kernels, then the per-channel affine.
    """
    args = check_forward(get_norm("groupnorm", num_groups), x, gamma, beta, eps, recompute, backend)
    if args.backend == "reference":
        return _finish_forward(*reference_forward(args), args)
    n = args.x.shape[0]
    rows = dataclasses.replace(
        args, spec=get_norm("layernorm"), x=args.x.reshape(n * num_groups, -1), gamma=None, beta=None, keep_xhat=True
    )
    _, row_cache = _rows_forward(rows)  # each group's statistics and xhat, no affine yet
    return _group_affine(args, row_cache)


def group_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dgamma, dbeta): LayerNorm's row backward on [N * G, M] of g = gamma * dy;
    dgamma and dbeta summed per channel."""
    dyc = check_dy(dy, cache, "groupnorm", "group_norm_backward")
    if cache.backend == "reference":
        return _finish_backward(*reference_backward(dyc, cache), cache)
    n, c = cache.shape[:2]
    rows = n * cache.num_groups
    mean, rstd = cache.mean.reshape(-1), cache.rstd.reshape(-1)  # N*G
    cdt = _backward_dtype(rstd, math.prod(cache.shape) // rows, cache.compute_dtype)
    src, have_xhat = _backward_source(cache, (rows, -1), cdt)  # N*G,M  xhat or x
    xhat2 = src if have_xhat else P._recompute_xhat(src, mean, rstd)  # N*G,M
    dy3 = dyc.reshape(n, c, -1).astype(cdt, copy=False)  # N,C,Q
    xhat3 = xhat2.reshape(n, c, -1)  # N,C,Q
    dgamma = P._sum_in_blocks("ncq,ncq->c", dy3, xhat3)  # C
    dbeta = P._sum_in_blocks("ncq->c", dy3)  # C
    g2 = (dy3 if cache.gamma is None else dy3 * cache.gamma[:, None]).reshape(rows, -1)  # N*G,M
    if cache.backend == "fused":
        dx2, _, _ = require_fused().layer_norm_backward(
            _contiguous(g2, cdt), _contiguous(xhat2, cdt), mean, rstd, None, True
        )
    else:
        dx2, _, _ = P._ln_backward_numpy(g2, xhat2, rstd.astype(cdt), None)
    return _finish_backward(dx2, dgamma, dbeta, cache)


def public_pass(spec: NormSpec) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The public (tuned) forward and backward of the registry's entry ``spec``, found by its public
    name (``spec.function``): ``(x, gamma, beta, eps, **options) -> (y, cache)`` and ``(dy, cache) ->
    (dx, dgamma, dbeta)``, GroupNorm's forward with the entry's num_groups filled in."""
    forward, backward = globals()[f"{spec.function}_forward"], globals()[f"{spec.function}_backward"]
    if not spec.grouped:
        return forward, backward
    groups = spec.num_groups or 1

    def grouped(x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5, **options: Any) -> Any:
        return forward(x, groups, gamma, beta, eps, **options)

    return grouped, backward


def _group_affine(args: ForwardArgs, rc: NormCache) -> tuple[np.ndarray, NormCache]:
    """GroupNorm's y = gamma * xhat + beta per channel, from the rows' xhat, and its own cache."""
    x = args.x
    n, c = x.shape[:2]
    xhat3 = rc.xhat.reshape(n, c, -1)  # N,C,Q
    y3 = xhat3 if args.gamma is None else xhat3 * args.gamma[:, None]  # N,C,Q
    y3 = y3 if args.beta is None else y3 + args.beta[:, None]  # N,C,Q
    kept_x = None if args.keep_xhat else x.astype(args.compute_dtype, copy=False)
    xhat = xhat3 if args.keep_xhat else None
    cache = NormCache.from_forward(args, xhat=xhat, x=kept_x, mean=rc.mean, var=rc.var, rstd=rc.rstd)
    return _finish_forward(y3, cache, args)


# ---- a cache rebuilt from saved arrays -----------------------------------------------------------


def saved_cache(
    norm: str,
    x: Any,
    gamma: Any,
    beta: Any,
    mean: Any,
    rstd: Any,
    eps: float = 1e-5,
    *,
    backend: str | None = None,
    num_groups: int = 1,
) -> NormCache:
    """The cache of a recompute-mode forward pass, rebuilt from x and the statistics it returned.

    For callers that can keep arrays between the two passes but not a Python
    object (PyTorch's custom ops in :mod:`microgradnorm.torch`): in recompute
    mode a cache holds x, gamma and the per-group mean and rstd (RMSNorm: rrms),
    nothing more. ``mean`` and ``rstd`` hold one float64 value per group in any
    shape of that size; RMSNorm ignores ``mean``; ``beta`` only tells the
    backward pass to return dbeta (in beta's dtype). ``var``, which no backward
    pass reads, is rebuilt as ``1 / rstd^2 - eps``. GroupNorm takes ``num_groups`` (default 1).
    """
    args = check_forward(get_norm(norm, num_groups), x, gamma, beta, eps, True, backend)
    cdt = args.compute_dtype
    kept = _contiguous(args.x, cdt) if args.backend == "fused" else args.x.astype(cdt, copy=False)
    rstd = np.asarray(rstd, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64) if args.spec.centered else None
    with np.errstate(divide="ignore"):
        var = 1.0 / np.square(rstd) - args.eps
    return NormCache.from_forward(args, xhat=None, x=kept, mean=mean, var=var, rstd=rstd)


# ---- the tuned forward passes: rows and channels -----------------------------------------------


def _finish_forward(y: np.ndarray, cache: NormCache, args: ForwardArgs) -> tuple[np.ndarray, NormCache]:
    """y in x's dtype and shape."""
    return y.reshape(args.x.shape).astype(args.x.dtype, copy=False), cache


def _rows_forward(args: ForwardArgs) -> tuple[np.ndarray, NormCache]:
    """LayerNorm or RMSNorm (no beta, no mean) on the tuned backends: every row of x as [R, D] is a group.

    The backends return the statistics per row, with RMSNorm's ``ms, rrms`` in
    the places of ``var, rstd``.
    """
    if args.backend == "reference":
        return _finish_forward(*reference_forward(args), args)
    d = args.x.shape[-1]
    x2 = args.x.reshape(-1, d)  # R,D  (R = all leading axes; a view when x is contiguous)
    cdt, fused, centered = args.compute_dtype, args.backend == "fused", args.spec.centered
    xc = _contiguous(x2, cdt) if fused else x2.astype(cdt, copy=False)  # R,D
    if centered:
        forward = require_fused().layer_norm_forward if fused else P._ln_forward_numpy
        params: tuple = (args.gamma, args.beta)
    else:
        forward = require_fused().rms_norm_forward if fused else P._rms_forward_numpy
        params = (args.gamma,)
    y2, *stats, xhat2 = _tuned_forward(forward, xc, params, args.eps, args.keep_xhat, d)
    mean = stats[0] if centered else None
    var, rstd = stats[-2:]  # RMSNorm: ms, rrms
    _repair_rows(xc, y2, xhat2, mean, var, rstd, args.gamma, args.beta, args.eps)
    kept_x = None if args.keep_xhat else xc
    return _finish_forward(y2, NormCache.from_forward(args, xhat=xhat2, x=kept_x, mean=mean, var=var, rstd=rstd), args)


def _channels_forward(args: ForwardArgs) -> tuple[np.ndarray, NormCache]:
    """BatchNorm on the tuned backends: every channel of x as [N, C, Q] (Q = H * W, or 1 for [N, D]) is a group."""
    if args.backend == "reference":
        return _finish_forward(*reference_forward(args), args)
    x = args.x
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, -1)  # N,C,Q
    if args.backend == "fused":
        xc = _contiguous(x3 if x.ndim == 4 else x, args.compute_dtype)  # [N, D] keeps its own column-block kernel
        forward = require_fused().batch_norm_forward
    else:
        xc = x3.astype(args.compute_dtype, copy=False)  # N,C,Q
        forward = P._bn_forward_numpy
    params = (args.gamma, args.beta)
    y3, mean, var, rstd, xhat3 = _tuned_forward(forward, xc, params, args.eps, args.keep_xhat, x.size // c)
    xc, y3 = xc.reshape(n, c, -1), y3.reshape(n, c, -1)  # N,C,Q views
    xhat3 = None if xhat3 is None else xhat3.reshape(n, c, -1)
    _repair_channels(xc, y3, xhat3, mean, var, rstd, args.gamma, args.beta, args.eps)
    kept_x = None if args.keep_xhat else xc
    return _finish_forward(y3, NormCache.from_forward(args, xhat=xhat3, x=kept_x, mean=mean, var=var, rstd=rstd), args)


# ---- shared pieces of the backward passes ----------------------------------------------------


def _rows_backward(dyc: np.ndarray, cache: NormCache) -> tuple[np.ndarray, Any, Any]:
    """LayerNorm's or RMSNorm's (no mean, no dbeta) backward on the tuned backends: every row of dy as [R, D]."""
    if cache.backend == "reference":
        return _finish_backward(*reference_backward(dyc, cache), cache)
    d = cache.shape[-1]
    centered = cache.mean is not None
    mean = cache.mean.reshape(-1) if centered else None  # R
    rstd = cache.rstd.reshape(-1)  # R  (RMSNorm: rrms)
    cdt = _backward_dtype(rstd, d, cache.compute_dtype)
    dy2 = dyc.reshape(-1, d).astype(cdt, copy=False)  # R,D
    src, have_xhat = _backward_source(cache, (-1, d), cdt)  # R,D  xhat or x
    dbeta = None
    if cache.backend == "fused":
        fused, dyk = require_fused(), _contiguous(dy2, cdt)
        if centered:
            dx2, dgamma, dbeta = fused.layer_norm_backward(dyk, src, mean, rstd, cache.gamma, have_xhat)
        else:
            dx2, dgamma = fused.rms_norm_backward(dyk, src, rstd, cache.gamma, have_xhat)
    elif centered:
        xhat2 = src if have_xhat else P._recompute_xhat(src, mean, rstd)  # R,D
        dx2, dgamma, dbeta = P._ln_backward_numpy(dy2, xhat2, rstd.astype(cdt), cache.gamma)
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # as quiet as the forward pass (eps = 0: 0 * inf)
            xhat2 = src if have_xhat else np.multiply(src, rstd.astype(cdt)[:, None])  # R,D
        dx2, dgamma = P._rms_backward_numpy(dy2, xhat2, rstd.astype(cdt), cache.gamma)
    return _finish_backward(dx2, dgamma, dbeta, cache)


def _contiguous(a: np.ndarray, cdt: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=cdt)


def _backward_source(cache: NormCache, shape: tuple[int, ...], cdt: np.dtype) -> tuple[np.ndarray, bool]:
    """(xhat if the cache kept it, else x) reshaped to ``shape`` in ``cdt``, and whether it is xhat."""
    have_xhat = cache.xhat is not None
    src = cache.xhat if have_xhat else cache.x
    return src.reshape(shape).astype(cdt, copy=False), have_xhat


def _finish_backward(dx, dgamma, dbeta, cache: NormCache):
    """dx in x's dtype and shape; dgamma and dbeta in their parameters' dtypes (None without them)."""
    dx = np.asarray(dx).reshape(cache.shape).astype(cache.dtype, copy=False)
    dgamma = None if cache.gamma_dtype is None else np.asarray(dgamma).astype(cache.gamma_dtype, copy=False)
    dbeta = None if cache.beta_dtype is None else np.asarray(dbeta).astype(cache.beta_dtype, copy=False)
    return dx, dgamma, dbeta
