"""What a forward pass hands to its backward pass, and the checks on the arguments that fill it.

:func:`check_forward` turns a forward call's arguments into a :class:`ForwardArgs`
(or a one-line error naming the argument); every backend computes from it, and
:meth:`NormCache.from_forward` is the one place a cache is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from microgradnorm.inputs import check_eps, check_num_groups
from microgradnorm.registry import NormSpec
from microgradnorm.vectorized.backend import resolve_backend

# ---- input checks and dtypes ---------------------------------------------------------------

_LOW_PRECISION = ("bfloat16", "float8")


def compute_dtype(dtype: np.dtype, name: str) -> np.dtype:
    """float32/float64 stay; float16 and bfloat16-like compute in float32; the rest is a TypeError."""
    if dtype in (np.float32, np.float64):
        return np.dtype(dtype)
    if (dtype.kind == "f" and dtype.itemsize < 4) or dtype.name.startswith(_LOW_PRECISION):
        return np.dtype(np.float32)
    if dtype.kind == "f":  # long double: computed in float64
        return np.dtype(np.float64)
    raise TypeError(
        f"{name}: expected a floating-point array (float16, bfloat16, float32 or float64), got dtype {dtype}"
    )


def as_array(a: Any, name: str) -> np.ndarray:
    """``a`` as an array of a floating dtype, or a TypeError naming it."""
    arr = np.asarray(a)
    compute_dtype(arr.dtype, name)
    return arr


def _param(p: Any, name: str, size: int, what: str, x_shape: tuple[int, ...], cdt: np.dtype):
    """(the parameter in the compute dtype or None, its own dtype or None)."""
    if p is None:
        return None, None
    arr = as_array(p, name)
    if arr.shape != (size,):
        raise ValueError(
            f"{name}: expected shape {(size,)} (one per {what} of x with shape {x_shape}), got shape {arr.shape}"
        )
    return arr.astype(cdt, copy=False), arr.dtype


def _features(spec: NormSpec, x: np.ndarray) -> tuple[int, str]:
    """(how many values gamma and beta hold, what one of them scales), or an error for x's shape."""
    ranks = spec.array_ranks
    axis = spec.param_axis(x.shape) if x.ndim else 0
    if (ranks is not None and x.ndim not in ranks) or x.ndim < 1 or x.size == 0:
        raise ValueError(f"x: {spec.function} expects {spec.array_form}, got shape {x.shape}")
    if spec.grouped:
        check_num_groups(spec.num_groups, x.shape[1])
    if spec.axes(x.shape) == (x.ndim - 1,) and spec.view(x.shape) == x.shape:
        return x.shape[axis], "feature (last axis)"
    return x.shape[axis], "column (axis 1)" if x.ndim == 2 else "channel (axis 1)"


@dataclass
class ForwardArgs:
    """A forward call's arguments, checked: what every backend and the cache are built from.

    ``gamma`` and ``beta`` are in ``compute_dtype`` (None when not given);
    ``given`` holds the caller's own x, gamma and beta, so the cache can tell
    which arrays it shares with the caller.
    """

    spec: NormSpec
    x: np.ndarray
    gamma: np.ndarray | None
    beta: np.ndarray | None
    eps: float
    compute_dtype: np.dtype
    gamma_dtype: np.dtype | None
    beta_dtype: np.dtype | None
    backend: str
    keep_xhat: bool
    given: tuple[Any, ...]

    @property
    def norm(self) -> str:
        return self.spec.name


def check_forward(spec: NormSpec, x: Any, gamma: Any, beta: Any, eps: object, recompute, backend) -> ForwardArgs:
    """Check a forward call's arguments (in this order: x, eps, gamma, beta, backend) and resolve the backend."""
    x = as_array(x, "x")
    size, what = _features(spec, x)
    if beta is not None and not spec.has_beta:
        raise ValueError(f"beta: {spec.function} has no shift, so expected None, got {type(beta).__name__}")
    eps = check_eps(eps)
    cdt = compute_dtype(x.dtype, "x")
    gamma_c, gamma_dtype = _param(gamma, "gamma", size, what, x.shape, cdt)
    beta_c, beta_dtype = _param(beta, "beta", size, what, x.shape, cdt)
    name = resolve_backend(backend)
    # None: numpy keeps xhat; fused recomputes it, which costs a kernel that reads the row anyway nothing
    keep_xhat = not recompute if recompute is not None else name != "fused"
    return ForwardArgs(spec, x, gamma_c, beta_c, eps, cdt, gamma_dtype, beta_dtype, name, keep_xhat, (x, gamma, beta))


def stat_shape(spec: NormSpec, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of a per-group statistic: the view's shape with the reduced axes as 1.

    It broadcasts against x ([..., 1] per row, [1, C(, 1, 1)] per channel) except
    for GroupNorm, whose [N, G, 1] broadcasts against its view [N, G, M].
    """
    axes = spec.axes(shape)
    return tuple(1 if a in axes else s for a, s in enumerate(spec.view(shape)))


# ---- the cache -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheBytes:
    """How much memory a cache holds.

    ``kept``: bytes of arrays the cache allocated and keeps alive (xhat, the
    statistics, converted copies of inputs). ``shared``: bytes of the caller's
    own arrays it refers to (x in recompute mode, gamma); they cost nothing
    extra while the caller keeps them anyway. ``saved``: bytes the recompute
    option saves compared with keeping xhat (0 when xhat is kept).
    """

    kept: int
    shared: int
    saved: int


@dataclass
class NormCache:
    """What a forward pass keeps for the backward pass (the names of llm.c's layernorm.py).

    Statistics keep the reduced axes with size 1, so they broadcast against x
    (LayerNorm on [B, T, C]: mean is [B, T, 1]; BatchNorm on [N, C, H, W]:
    [1, C, 1, 1]). Made by :meth:`from_forward`.

    Attributes:
        norm: the registry name of the norm ("layernorm", ...).
        num_groups: GroupNorm's number of groups (None for the other norms).
        backend: the backend that ran the forward pass (the backward pass uses it too).
        shape: the shape of x (and of y, dy and dx).
        dtype: x's dtype; y and dx are returned in it.
        compute_dtype: float32 or float64, the precision of the big arrays.
        eps: the epsilon added to the variance (RMSNorm: to the mean square).
        xhat: the normalized input ``(x - mean) * rstd`` (RMSNorm: ``x * rrms``),
            in compute_dtype, shaped like x; None in recompute mode.
        x: the input, shaped like x, kept only in recompute mode (a view of the
            caller's array when it was already in compute_dtype, and contiguous
            for the fused backend: do not change it before the backward pass).
        mean: per-group mean, float64 (None for RMSNorm). Recompute mode rebuilds
            xhat from it, so for float64 input far from zero that xhat is only as
            good as a float64 mean: off by about 1e-16 * |mean| / std (the kept
            xhat is centered on the mean to twice that precision).
        var: per-group biased variance (RMSNorm: the mean square ``ms``), float64;
            ``inf`` where it does not fit in float64.
        rstd: per-group ``1 / sqrt(var + eps)`` (RMSNorm: ``rrms``), float64.
        xshift: ``x - mean``; only the reference backend keeps it (the textbook
            cache does). The xhat form of the backward pass does not need it,
            so the other backends save that whole array.
        gamma: the scale in compute_dtype, or None.
        gamma_dtype, beta_dtype: the dtypes dgamma and dbeta are returned in
            (None when there is no gamma or beta).
    """

    norm: str
    backend: str
    shape: tuple[int, ...]
    dtype: np.dtype
    compute_dtype: np.dtype
    eps: float
    xhat: np.ndarray | None
    x: np.ndarray | None
    mean: np.ndarray | None
    var: np.ndarray
    rstd: np.ndarray
    gamma: np.ndarray | None
    gamma_dtype: np.dtype | None
    beta_dtype: np.dtype | None
    xshift: np.ndarray | None = None
    num_groups: int | None = None
    _caller_arrays: tuple[int, ...] = ()

    @classmethod
    def from_forward(cls, args: ForwardArgs, *, xhat, x, mean, var, rstd, xshift=None) -> NormCache:
        """The cache of the forward pass ``args`` ran: arrays reshaped like x, statistics in float64.

        ``x`` is what recompute mode keeps (None when xhat is kept). Notes which
        arrays are the caller's own, for :meth:`nbytes`.
        """
        shape = args.x.shape
        stat = stat_shape(args.spec, shape)
        cache = cls(
            norm=args.norm,
            backend=args.backend,
            shape=shape,
            dtype=args.x.dtype,
            compute_dtype=args.compute_dtype,
            eps=args.eps,
            xhat=None if xhat is None else xhat.reshape(shape),
            x=None if x is None else x.reshape(shape),
            mean=None if mean is None else _stat(mean, stat),
            var=_stat(var, stat),
            rstd=_stat(rstd, stat),
            gamma=args.gamma,
            gamma_dtype=args.gamma_dtype,
            beta_dtype=args.beta_dtype,
            xshift=xshift,
            num_groups=args.spec.num_groups,
        )
        cache._caller_arrays = tuple(id(a) for a in args.given if a is not None)
        if cache.x is not None and np.shares_memory(cache.x, args.x):
            cache._caller_arrays += (id(cache.x),)
        return cache

    @property
    def recompute(self) -> bool:
        """True when xhat is not kept and the backward pass recomputes it from (x, mean, rstd)."""
        return self.xhat is None

    @property
    def std(self) -> np.ndarray:
        """sqrt(var + eps), derived from rstd (not stored)."""
        return 1.0 / self.rstd

    def nbytes(self) -> CacheBytes:
        """Bytes kept and shared, and bytes saved by the recompute option."""
        kept = shared = 0
        for a in (self.xhat, self.x, self.mean, self.var, self.rstd, self.xshift, self.gamma):
            if a is None:
                continue
            if id(a) in self._caller_arrays:
                shared += a.nbytes
            else:
                kept += a.nbytes
        size = math.prod(self.shape)
        saved = size * self.compute_dtype.itemsize if self.xhat is None else 0
        return CacheBytes(kept, shared, saved)


def _stat(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A per-group float64 statistic, reshaped so that it broadcasts against x."""
    return np.asarray(values, dtype=np.float64).reshape(shape)


def check_dy(dy: Any, cache: NormCache, norm: str, function: str) -> np.ndarray:
    """dy in the cache's compute dtype, or an error for a wrong cache, dtype or shape."""
    if not isinstance(cache, NormCache):
        raise TypeError(f"cache: expected the NormCache a forward function returned, got {type(cache).__name__}")
    arr = as_array(dy, "dy")
    if arr.shape != cache.shape:
        raise ValueError(f"dy: expected shape {cache.shape} (the shape of x and y), got shape {arr.shape}")
    if cache.norm != norm:
        raise ValueError(f"cache: {function} expects the cache of a {norm} forward pass, got one from {cache.norm}")
    return arr.astype(cache.compute_dtype, copy=False)
