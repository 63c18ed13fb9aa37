"""The vectorized path: LayerNorm, BatchNorm and RMSNorm on whole NumPy arrays.

The scalar graph (:mod:`microgradnorm.norms`) is for seeing every node; this
module is for speed. It follows llm.c's ``doc/layernorm/layernorm.py``: a forward
pass returns ``(y, cache)``, a backward pass takes ``(dy, cache)``, and the cache
holds what the backward pass needs::

    y, cache = layer_norm_forward(x, gamma, beta)        # x [B, T, C]
    dx, dgamma, dbeta = layer_norm_backward(dy, cache)   # dy = dL/dy, same shape as y

Three backends compute the same numbers (within float rounding):

``"numpy"``
    The tuned NumPy path: row sums and row dot products as one- and
    two-operand ``einsum`` (one pass each, no temporary array), every big
    temporary reused in place or through ``out=``. The backward pass uses the xhat form of the gradient,
    ``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`` with ``g = gamma * dy``.
``"fused"``
    The numba kernels of :mod:`microgradnorm.fused`: one pass over memory per
    row (or channel) forward and backward (``pip install microgradnorm[fast]``).
``"reference"``
    The readable baseline: the closed forms of :mod:`microgradnorm.formulas`
    called one after another, exactly as a textbook writes them. Slow, and
    kept that way on purpose: it is what the benchmark calls "NumPy naive".

``backend="auto"`` (the default) means fused when numba can be imported and
numpy otherwise. Choose for one call with ``backend=...``, for the whole
program with :func:`set_backend` (or :func:`use_backend` for a ``with`` block,
or the environment variable ``MICROGRADNORM_BACKEND``); :func:`backend_info`
says which one is in use and why.

Rules every backend follows:

* dtypes: float32 and float64 are computed in their own precision and
  returned as such; float16 and bfloat16-like inputs are computed in float32
  and returned in their own dtype; integer, bool and complex input is a
  TypeError. The per-group statistics (mean, var, rstd) are kept in float64.
* Inputs are never written to.
* Numerics: the variance is centered (two-pass), with the rounding error of
  the mean corrected (``var = mean(xshift^2) - mean(xshift)^2``, the second term
  is zero in exact arithmetic); a group whose squares overflow (``|x|`` near
  1e20 in float32) or underflow (a float64 spread under about 1e-135 with eps
  smaller still) is recomputed after scaling by a power of two ``s`` near its
  largest ``|x|``, using ``LN_eps(x) = LN_{eps/s^2}(x/s)``; a NaN or Inf stays in
  its own row (LayerNorm, RMSNorm) or channel (BatchNorm).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from microgradnorm import formulas as F

__all__ = [
    "BACKENDS",
    "BackendInfo",
    "BackendUnavailable",
    "BatchNorm",
    "CacheBytes",
    "NormCache",
    "backend_info",
    "batch_norm_backward",
    "batch_norm_forward",
    "get_backend",
    "layer_norm_backward",
    "layer_norm_forward",
    "resolve_backend",
    "rms_norm_backward",
    "rms_norm_forward",
    "set_backend",
    "use_backend",
]

BACKENDS = ("auto", "numpy", "fused", "reference")
ENV_VAR = "MICROGRADNORM_BACKEND"

# ---- choosing a backend ----------------------------------------------------------------


class BackendUnavailable(ValueError):
    """The fused backend was asked for, but numba cannot be imported."""


_setting: str | None = None  # None: not set by set_backend, read the environment variable


def _check_backend_name(name: object, what: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise ValueError(f"{what}: expected one of {', '.join(BACKENDS)}, got {name!r}")
    return name.strip().lower()


def set_backend(name: str | None) -> None:
    """Use ``name`` ("auto", "numpy", "fused" or "reference") for every later call without ``backend=``.

    ``None`` forgets the setting, so the environment variable (or "auto") applies again.
    """
    global _setting
    if name is None:
        _setting = None
        return
    name = _check_backend_name(name, "backend")
    if name == "fused":
        _require_fused()
    _setting = name


def get_backend() -> str:
    """The backend setting as chosen ("auto" unless set), before "auto" is resolved."""
    if _setting is not None:
        return _setting
    return _check_backend_name(os.environ.get(ENV_VAR, "auto"), f"environment variable {ENV_VAR}")


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """``with use_backend("numpy"): ...`` -- the setting inside the block, restored after it."""
    global _setting
    before = _setting
    set_backend(name)
    try:  # restore exactly what was there, including "not set"
        yield
    finally:
        _setting = before


def _fused_module():
    from microgradnorm import fused  # imports numba when it is installed (about half a second)

    return fused


def _require_fused():
    fused = _fused_module()
    if not fused.AVAILABLE:
        raise BackendUnavailable(f"backend: 'fused' needs numba, which is unavailable: {fused.UNAVAILABLE_REASON}")
    return fused


def resolve_backend(backend: str | None = None) -> str:
    """The backend a call with ``backend=`` (None: the global setting) actually runs."""
    name = get_backend() if backend is None else _check_backend_name(backend, "backend")
    if name == "auto":
        return "fused" if _fused_module().AVAILABLE else "numpy"
    if name == "fused":
        _require_fused()
    return name


@dataclass(frozen=True)
class BackendInfo:
    """Which backend runs, and why (for ``microgradnorm bench`` and for curious users)."""

    setting: str
    active: str
    numba_version: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.active} ({self.reason})"


def backend_info() -> BackendInfo:
    """The backend setting, the backend it resolves to and the reason."""
    setting = get_backend()
    fused = _fused_module()
    version = getattr(fused.numba, "__version__", None) if fused.AVAILABLE else None
    active = resolve_backend() if (setting != "fused" or fused.AVAILABLE) else "unavailable"
    if setting == "auto":
        reason = f"auto: numba {version} is installed" if fused.AVAILABLE else f"auto: {fused.UNAVAILABLE_REASON}"
    else:
        reason = f"set to {setting!r}"
    return BackendInfo(setting, active, version, reason)


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
    """What a forward pass keeps for the backward pass (the names of seed 002 and llm.c).

    Statistics keep the reduced axes with size 1, so they broadcast against x
    (LayerNorm on [B, T, C]: mean is [B, T, 1]; BatchNorm on [N, C, H, W]:
    [1, C, 1, 1]).

    Attributes:
        norm: "layernorm", "batchnorm" or "rmsnorm".
        backend: the backend that ran the forward pass (the backward pass uses it too).
        shape: the shape of x (and of y, dy and dx).
        dtype: x's dtype; y and dx are returned in it.
        compute_dtype: float32 or float64, the precision of the big arrays.
        eps: the epsilon added to the variance (RMSNorm: to the mean square).
        xhat: the normalized input ``(x - mean) * rstd`` (RMSNorm: ``x * rrms``),
            in compute_dtype; None in recompute mode.
        x: the input, kept only in recompute mode (a reference to the caller's
            array when it was already contiguous in compute_dtype: do not change
            it before the backward pass).
        mean: per-group mean, float64 (None for RMSNorm). Recompute mode rebuilds
            xhat from it, so for float64 input far from zero that xhat is only as
            good as a float64 mean: off by about 1e-16 * |mean| / std (the kept
            xhat is centered on the mean to twice that precision).
        var: per-group biased variance (RMSNorm: the mean square ``ms``), float64;
            ``inf`` where it does not fit in float64.
        rstd: per-group ``1 / sqrt(var + eps)`` (RMSNorm: ``rrms``), float64.
        xshift: ``x - mean``; only the reference backend keeps it (seed 002's
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
    _caller_arrays: tuple[int, ...] = ()

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


# ---- input checks and dtypes ---------------------------------------------------------------

_LOW_PRECISION = ("bfloat16", "float8")


def _compute_dtype(dtype: np.dtype, name: str) -> np.dtype:
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


def _as_array(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a)
    _compute_dtype(arr.dtype, name)
    return arr


def _check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)):
        raise TypeError(f"eps: expected a number >= 0, got {type(eps).__name__} ({eps!r})")
    value = float(eps)
    if not (value >= 0.0 and math.isfinite(value)):
        raise ValueError(f"eps: expected a finite number >= 0, got {value!r}")
    return value


def _param(p: Any, name: str, size: int, what: str, x_shape: tuple[int, ...], cdt: np.dtype):
    """(the parameter in the compute dtype or None, its own dtype or None)."""
    if p is None:
        return None, None
    arr = _as_array(p, name)
    if arr.shape != (size,):
        raise ValueError(
            f"{name}: expected shape {(size,)} (one per {what} of x with shape {x_shape}), got shape {arr.shape}"
        )
    return arr.astype(cdt, copy=False), arr.dtype


def _check_dy(dy: Any, cache: NormCache) -> np.ndarray:
    if not isinstance(cache, NormCache):
        raise TypeError(f"cache: expected the NormCache a forward function returned, got {type(cache).__name__}")
    arr = _as_array(dy, "dy")
    if arr.shape != cache.shape:
        raise ValueError(f"dy: expected shape {cache.shape} (the shape of x and y), got shape {arr.shape}")
    return arr.astype(cache.compute_dtype, copy=False)


def _contiguous(a: np.ndarray, cdt: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=cdt)


def _stat(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A per-group float64 statistic, reshaped so that it broadcasts against x."""
    return np.asarray(values, dtype=np.float64).reshape(shape)


def _ln_stat_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape[:-1], 1)


def _bn_stat_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1, shape[1]) if len(shape) == 2 else (1, shape[1], 1, 1)


# ---- float32 groups near the ends of float32's range -------------------------------------------

_F32_MAX = float(np.finfo(np.float32).max)
# a spread below this squares to numbers under float32's smallest normal one, which lose digits
_F32_SMALLEST_SPREAD = math.sqrt(float(np.finfo(np.float32).tiny) * 2.0**24)


def _needs_float64(rstd: np.ndarray, group: int, cdt: np.dtype) -> bool:
    """Whether a float32 pass must be redone in float64 because a group is near the ends of float32's range.

    Both tuned backends work in x's dtype. In float32 that goes wrong for a group
    of ``group`` values whose spread 1 / rstd is too large (|x - mean|, at most
    sqrt(group) / rstd, can overflow; a variance that overflowed gives rstd = 0)
    or too small (squares below float32's smallest normal number lose their
    digits). Such groups (spread above about 1e37, or below about 4e-16 with eps
    near 0) are rare, so the whole call is redone in float64 and rounded back.
    float64 itself is never promoted: its overflow is repaired by rescaling
    (``_repair_rows``). A NaN rstd does not count: the NaN stays in its group.
    """
    if cdt != np.float32:
        return False
    lowest = 4.0 * math.sqrt(group) / _F32_MAX
    return bool(np.any((rstd < lowest) | (rstd * _F32_SMALLEST_SPREAD > 1.0)))


def _tuned_forward(forward, xc: np.ndarray, params: tuple, eps: float, keep_xhat: bool, group: int) -> tuple:
    """``forward(xc, *params, eps, keep_xhat)`` -> (y, *stats, xhat), redone in float64 when needed.

    Every tuned forward returns its statistics with rstd (or rrms) last; when
    :func:`_needs_float64` says a group left float32's safe range, the call is
    repeated on float64 copies and y and xhat are rounded back to xc's dtype.
    """
    y, *stats, xhat = forward(xc, *params, eps, keep_xhat)
    if not _needs_float64(stats[-1], group, xc.dtype):
        return (y, *stats, xhat)
    y, *stats, xhat = forward(*(None if a is None else a.astype(np.float64) for a in (xc, *params)), eps, keep_xhat)
    return (y.astype(xc.dtype), *stats, None if xhat is None else xhat.astype(xc.dtype))


def _backward_dtype(rstd: np.ndarray, group: int, cache: NormCache) -> np.dtype:
    """The dtype a backward pass computes in: the cache's, or float64 where the forward needed it."""
    return np.dtype(np.float64) if _needs_float64(rstd, group, cache.compute_dtype) else cache.compute_dtype


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
    return _rows_forward("layernorm", x, gamma, beta, eps, recompute, backend)


def _rows_forward(norm: str, x: Any, gamma: Any, beta: Any, eps: float, recompute, backend) -> tuple:
    """The forward pass of a norm over the last axis, LayerNorm or RMSNorm (which has no beta and no mean).

    Every row is a group: the tuned backends see x as [R, D] and return the
    statistics per row, with RMSNorm's ``ms, rrms`` in the places of ``var, rstd``.
    """
    x = _as_array(x, "x")
    if x.ndim < 1 or x.shape[-1] < 1:
        function = {"layernorm": "layer_norm", "rmsnorm": "rms_norm"}[norm]
        raise ValueError(f"x: {function} expects an array [..., D] with D >= 1, got shape {x.shape}")
    eps = _check_eps(eps)
    cdt = _compute_dtype(x.dtype, "x")
    d = x.shape[-1]
    gamma_c, gamma_dtype = _param(gamma, "gamma", d, "feature (last axis)", x.shape, cdt)
    beta_c, beta_dtype = _param(beta, "beta", d, "feature (last axis)", x.shape, cdt)
    name = resolve_backend(backend)
    keep_xhat = not recompute if recompute is not None else name != "fused"
    if name == "reference":
        y, cache = _reference_forward(norm, x, gamma_c, beta_c, eps, cdt, keep_xhat, gamma_dtype, beta_dtype)
    else:
        x2 = x.reshape(-1, d)  # R,D  (R = all leading axes; a view when x is contiguous)
        xc = _contiguous(x2, cdt) if name == "fused" else x2.astype(cdt, copy=False)
        if norm == "rmsnorm":
            forward = _require_fused().rms_norm_forward if name == "fused" else _rms_forward_numpy
            params: tuple = (gamma_c,)
        else:
            forward = _require_fused().layer_norm_forward if name == "fused" else _ln_forward_numpy
            params = (gamma_c, beta_c)
        y2, *stats, xhat2 = _tuned_forward(forward, xc, params, eps, keep_xhat, d)
        mean = stats[0] if norm == "layernorm" else None
        var, rstd = stats[-2:]  # RMSNorm: ms, rrms
        _repair_rows(xc, y2, xhat2, mean, var, rstd, gamma_c, beta_c, eps)
        stat = _ln_stat_shape(x.shape)
        cache = NormCache(
            norm=norm,
            backend=name,
            shape=x.shape,
            dtype=x.dtype,
            compute_dtype=cdt,
            eps=eps,
            xhat=None if xhat2 is None else xhat2.reshape(x.shape),
            x=None if keep_xhat else xc,
            mean=None if mean is None else _stat(mean, stat),
            var=_stat(var, stat),
            rstd=_stat(rstd, stat),
            gamma=gamma_c,
            gamma_dtype=gamma_dtype,
            beta_dtype=beta_dtype,
        )
        y = y2.reshape(x.shape)
    return _finish_forward(y, cache, x, gamma, beta)


def layer_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dgamma, dbeta) for ``dy`` = dL/dy; dgamma/dbeta are None where gamma/beta were.

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gamma * dy (the
    xhat form of ``formulas.dx_simplified``), dgamma = sum over rows of dy * xhat,
    dbeta = sum over rows of dy.
    """
    dyc = _check_dy(dy, cache)
    _expect_norm(cache, "layernorm", "layer_norm_backward")
    if cache.backend == "reference":
        return _reference_backward(dyc, cache)
    d = cache.shape[-1]
    mean = cache.mean.reshape(-1)  # R
    rstd = cache.rstd.reshape(-1)  # R
    cdt = _backward_dtype(rstd, d, cache)
    dy2 = dyc.reshape(-1, d).astype(cdt, copy=False)  # R,D
    have_xhat = cache.xhat is not None
    src = (cache.xhat.reshape(-1, d) if have_xhat else cache.x).astype(cdt, copy=False)  # R,D  xhat or x
    if cache.backend == "fused":
        fused = _require_fused()
        dx2, dgamma, dbeta = fused.layer_norm_backward(_contiguous(dy2, cdt), src, mean, rstd, cache.gamma, have_xhat)
    else:
        xhat2 = src if have_xhat else _recompute_xhat(src, mean, rstd)
        dx2, dgamma, dbeta = _ln_backward_numpy(dy2, xhat2, rstd.astype(cdt), cache.gamma)
    return _finish_backward(dx2, dgamma, dbeta, cache)


# ---- RMSNorm ---------------------------------------------------------------------------------


def rms_norm_forward(
    x: Any,
    gamma: Any = None,
    eps: float = 1e-5,
    *,
    recompute: bool | None = None,
    backend: str | None = None,
) -> tuple[np.ndarray, NormCache]:
    """RMSNorm over the last axis: ``y = gamma * x * rrms``, ``rrms = 1 / sqrt(mean(x^2) + eps)``.

    No mean and no shift. In the cache, ``var`` holds the mean square ``ms`` and
    ``rstd`` holds ``rrms``; ``mean`` is None.
    """
    return _rows_forward("rmsnorm", x, gamma, None, eps, recompute, backend)


def rms_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None]:
    """(dx, dgamma): dx = rrms * (g - xhat * mean(g * xhat)), g = gamma * dy (``formulas.rms_dx``)."""
    dyc = _check_dy(dy, cache)
    _expect_norm(cache, "rmsnorm", "rms_norm_backward")
    if cache.backend == "reference":
        dx, dgamma, _ = _reference_backward(dyc, cache)
        return dx, dgamma
    d = cache.shape[-1]
    rrms = cache.rstd.reshape(-1)  # R
    cdt = _backward_dtype(rrms, d, cache)
    dy2 = dyc.reshape(-1, d).astype(cdt, copy=False)  # R,D
    have_xhat = cache.xhat is not None
    src = (cache.xhat.reshape(-1, d) if have_xhat else cache.x).astype(cdt, copy=False)  # R,D  xhat or x
    if cache.backend == "fused":
        fused = _require_fused()
        dx2, dgamma = fused.rms_norm_backward(_contiguous(dy2, cdt), src, rrms, cache.gamma, have_xhat)
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # as quiet as the forward pass (eps = 0: 0 * inf)
            xhat2 = src if have_xhat else np.multiply(src, rrms.astype(cdt)[:, None])  # R,D
        dx2, dgamma = _rms_backward_numpy(dy2, xhat2, rrms.astype(cdt), cache.gamma)
    dx, dgamma, _ = _finish_backward(dx2, dgamma, None, cache)
    return dx, dgamma


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
    x = _as_array(x, "x")
    if x.ndim not in (2, 4) or x.size == 0:
        raise ValueError(f"x: batch_norm expects a non-empty 2-D [N, D] or 4-D [N, C, H, W] array, got shape {x.shape}")
    eps = _check_eps(eps)
    cdt = _compute_dtype(x.dtype, "x")
    c = x.shape[1]
    what = "column (axis 1)" if x.ndim == 2 else "channel (axis 1)"
    gamma_c, gamma_dtype = _param(gamma, "gamma", c, what, x.shape, cdt)
    beta_c, beta_dtype = _param(beta, "beta", c, what, x.shape, cdt)
    name = resolve_backend(backend)
    keep_xhat = not recompute if recompute is not None else name != "fused"
    if name == "reference":
        y, cache = _reference_forward("batchnorm", x, gamma_c, beta_c, eps, cdt, keep_xhat, gamma_dtype, beta_dtype)
    else:
        n = x.shape[0]
        x3 = x.reshape(n, c, -1)  # N,C,Q  (Q = H*W, or 1 for [N, D])
        if name == "fused":
            xc = _contiguous(x3 if x.ndim == 4 else x, cdt)  # [N, D] keeps its own column-block kernel
            forward = _require_fused().batch_norm_forward
        else:
            xc = x3.astype(cdt, copy=False)
            forward = _bn_forward_numpy
        y3, mean, var, rstd, xhat3 = _tuned_forward(forward, xc, (gamma_c, beta_c), eps, keep_xhat, x.size // c)
        xc, y3 = xc.reshape(n, c, -1), y3.reshape(n, c, -1)
        xhat3 = None if xhat3 is None else xhat3.reshape(n, c, -1)
        _repair_channels(xc, y3, xhat3, mean, var, rstd, gamma_c, beta_c, eps)
        stat = _bn_stat_shape(x.shape)
        cache = NormCache(
            norm="batchnorm",
            backend=name,
            shape=x.shape,
            dtype=x.dtype,
            compute_dtype=cdt,
            eps=eps,
            xhat=None if xhat3 is None else xhat3.reshape(x.shape),
            x=None if keep_xhat else xc.reshape(x.shape),
            mean=_stat(mean, stat),
            var=_stat(var, stat),
            rstd=_stat(rstd, stat),
            gamma=gamma_c,
            gamma_dtype=gamma_dtype,
            beta_dtype=beta_dtype,
        )
        y = y3.reshape(x.shape)
    return _finish_forward(y, cache, x, gamma, beta)


def batch_norm_backward(dy: Any, cache: NormCache) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dgamma, dbeta): dx = rstd * gamma * (dy - dbeta / m - xhat * dgamma / m) per channel.

    With g = gamma * dy, ``formulas.dx_simplified`` needs mean(g) and
    mean(g * xhat) over each channel's m values; gamma is constant over the
    channel, so they are gamma * dbeta / m and gamma * dgamma / m.
    """
    dyc = _check_dy(dy, cache)
    _expect_norm(cache, "batchnorm", "batch_norm_backward")
    if cache.backend == "reference":
        return _reference_backward(dyc, cache)
    n, c = cache.shape[:2]
    mean = cache.mean.reshape(-1)  # C
    rstd = cache.rstd.reshape(-1)  # C
    cdt = _backward_dtype(rstd, math.prod(cache.shape) // c, cache)
    have_xhat = cache.xhat is not None
    src = (cache.xhat if have_xhat else cache.x).astype(cdt, copy=False)  # xhat or x, shaped like x
    if cache.backend == "fused":
        fused = _require_fused()
        kshape = cache.shape if len(cache.shape) == 2 else (n, c, -1)
        dyk = _contiguous(dyc.reshape(kshape), cdt)
        dx, dgamma, dbeta = fused.batch_norm_backward(dyk, src.reshape(kshape), mean, rstd, cache.gamma, have_xhat)
    else:
        dy3 = dyc.reshape(n, c, -1).astype(cdt, copy=False)  # N,C,Q
        src3 = src.reshape(n, c, -1)  # N,C,Q
        xhat3 = src3 if have_xhat else _recompute_xhat(src3, mean, rstd, channels=True)
        dx, dgamma, dbeta = _bn_backward_numpy(dy3, xhat3, rstd.astype(cdt), cache.gamma)
    return _finish_backward(dx, dgamma, dbeta, cache)


# ---- shared pieces of the forward and backward passes ----------------------------------------


def _finish_forward(y: np.ndarray, cache: NormCache, x: np.ndarray, *params: Any) -> tuple[np.ndarray, NormCache]:
    """Note which arrays the cache shares with the caller (for ``nbytes``); y in x's dtype."""
    cache._caller_arrays = tuple(id(a) for a in (x, *params) if a is not None)
    if cache.x is not None and np.shares_memory(cache.x, x):
        cache._caller_arrays += (id(cache.x),)
    return y.astype(x.dtype, copy=False), cache


def _expect_norm(cache: NormCache, norm: str, function: str) -> None:
    if cache.norm != norm:
        raise ValueError(f"cache: {function} expects the cache of a {norm} forward pass, got one from {cache.norm}")


def _finish_backward(dx, dgamma, dbeta, cache: NormCache):
    """dx in x's dtype and shape; dgamma and dbeta in their parameters' dtypes (None without them)."""
    dx = np.asarray(dx).reshape(cache.shape).astype(cache.dtype, copy=False)
    dgamma = None if cache.gamma_dtype is None else np.asarray(dgamma).astype(cache.gamma_dtype, copy=False)
    dbeta = None if cache.beta_dtype is None else np.asarray(dbeta).astype(cache.beta_dtype, copy=False)
    return dx, dgamma, dbeta


def _split_mean(mean: np.ndarray, cdt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """A float64 mean as hi + lo with hi in the compute dtype (so x - hi is exact for x near the mean)."""
    hi = mean.astype(cdt)
    return hi, (mean - hi).astype(cdt)


def _recompute_xhat(x: np.ndarray, mean: np.ndarray, rstd: np.ndarray, channels: bool = False) -> np.ndarray:
    """xhat = (x - mean) * rstd from the recompute cache, in x's dtype.

    The float64 mean is applied as hi + lo, so a float32 row with a large mean
    offset still centers exactly; the lo part is skipped when it is below the
    dtype's rounding of xhat.
    """
    cdt = x.dtype
    hi, lo = _split_mean(mean, cdt)
    r = rstd.astype(cdt)
    expand = (lambda v: v[None, :, None]) if channels else (lambda v: v[:, None])
    with np.errstate(over="ignore", invalid="ignore"):  # as quiet as the forward pass (eps = 0: 0 * inf)
        xhat = np.subtract(x, expand(hi))  # R,D
        if _needs_correction(lo, rstd, cdt):
            xhat -= expand(lo)  # R,D
        xhat *= expand(r)  # R,D
    return xhat


def _needs_correction(resid: np.ndarray, rstd: np.ndarray, cdt: np.dtype) -> bool:
    """Whether subtracting ``resid`` would change xhat by more than a quarter of its rounding unit."""
    with np.errstate(invalid="ignore", over="ignore"):
        shift = np.abs(resid.astype(np.float64)) * rstd
    return bool(np.any(shift > 0.25 * np.finfo(cdt).eps))


# ---- the tuned NumPy path ---------------------------------------------------------------------


# Row sums are einsum("ij->i"), not the matrix-vector product x @ ones: both are one
# pass, but BLAS splits a product over threads, and on a machine shared with other
# work a thread that waits for a busy core stalls the whole call for a scheduler
# tick (measured: 0.2 ms became 8 ms). einsum runs its SIMD loop in this thread.


def _ln_forward_numpy(x2: np.ndarray, gamma, beta, eps: float, keep_xhat: bool):
    """Row statistics with einsum reductions, the rest in place in one buffer."""
    d = x2.shape[1]
    cdt = x2.dtype
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mean0 = np.einsum("ij->i", x2)  # R     row sums
        mean0 /= d  # R
        xshift = np.subtract(x2, mean0[:, None])  # R,D   the one big temporary: xshift, then xhat
        resid = np.einsum("ij->i", xshift)  # R     0 in exact arithmetic: the rounding error of mean0, times d
        resid /= d  # R
        sumsq = np.einsum("ij,ij->i", xshift, xshift)  # R     row dot products
        mean = mean0.astype(np.float64)  # R
        mean, resid, sumsq = _recenter(xshift, mean, resid, sumsq, d, "ij->i")  # rarely more than a check
        mean += resid  # R     the corrected mean, float64
        var = sumsq.astype(np.float64) / d - np.square(resid.astype(np.float64))  # R
        var = np.maximum(var, 0.0)  # R
        rstd = 1.0 / np.sqrt(var + eps)  # R
        if _needs_correction(resid, rstd, cdt):
            xshift -= resid[:, None]  # R,D   only when the mean's rounding would show in xhat
        xhat = np.multiply(xshift, rstd.astype(cdt)[:, None], out=xshift)  # R,D
        y = _affine_rows(xhat, gamma, beta, in_place=not keep_xhat)  # R,D
    return y, mean, var, rstd, (xhat if keep_xhat else None)


# How many times _recenter may fold the mean's rounding error back into the mean.
RECENTER_ROUNDS = 3


def _recenter(xshift, mean, resid, sumsq, count: int, groups: str):
    """Fold the mean's rounding error into the mean while it is big enough to spoil the variance.

    ``var = sumsq / count - resid^2`` is exact in exact arithmetic, but when the
    error of the first mean (``resid``) is not small against the spread, the
    subtraction cancels: a float32 sum of 16,384 values near 1e6 misses the mean
    by more than the spread, and the variance comes out as noise. Then subtract
    ``resid`` from ``xshift`` (exact: both are close to the same error) and take
    the two sums again; each round shrinks the error by about count * eps, and
    the rounds run only for arrays where it is needed. ``groups`` is the
    einsum of a group sum: "ij->i" for rows, "ncq->c" for channels.
    """
    each, group = groups.split("->")
    expand = tuple(slice(None) if axis == group else None for axis in each)  # resid against xshift
    total = _sum_in_blocks if each[0] != group else np.einsum  # a sum over the first axis goes in blocks
    for _ in range(RECENTER_ROUNDS):
        with np.errstate(over="ignore", invalid="ignore"):
            r2 = np.square(resid.astype(np.float64))
            spoiled = 16.0 * r2 > sumsq.astype(np.float64) / count  # the error is over a quarter of the spread
        if not spoiled.any():
            break
        xshift -= resid[expand]
        mean = mean + resid
        resid = total(groups, xshift) / count
        sumsq = total(f"{each},{each}->{group}", xshift, xshift)
    return mean, resid, sumsq


def _affine_rows(xhat: np.ndarray, gamma, beta, in_place: bool) -> np.ndarray:
    """y = gamma * xhat + beta, written into xhat's buffer when xhat is not kept."""
    if gamma is None and beta is None:
        return xhat if in_place else xhat.copy()
    if gamma is not None:
        y = np.multiply(xhat, gamma, out=xhat if in_place else None)  # R,D
        if beta is not None:
            y += beta  # R,D
        return y
    return np.add(xhat, beta, out=xhat if in_place else None)  # R,D


# Rows summed in the compute dtype before the blocks are added up in float64 (see _sum_in_blocks).
SUM_BLOCK = 256


def _sum_in_blocks(subscripts: str, *operands: np.ndarray) -> np.ndarray:
    """``np.einsum(subscripts, *operands)`` summed over the first axis in blocks, in float64.

    For the parameter gradients, sums over every row: einsum adds the rows one
    after another into one float32 accumulator, whose rounding error grows with
    the number of rows (1e-5 relative at 262,144 rows). Here each block of
    SUM_BLOCK rows is summed in the compute dtype and the blocks in float64: the
    same single pass over memory, with the error of a 256-row sum. The first
    letter of each operand's subscripts is the axis summed this way.
    """
    inputs, output = subscripts.split("->")
    n = operands[0].shape[0]
    full = n - n % SUM_BLOCK if n > SUM_BLOCK else 0  # up to one block: a plain einsum is as exact
    total = np.einsum(subscripts, *(op[full:] for op in operands)).astype(np.float64)  # the last rows
    if full:
        blocked = ",".join("k" + term for term in inputs.split(","))  # k numbers the blocks
        heads = (op[:full].reshape(-1, SUM_BLOCK, *op.shape[1:]) for op in operands)  # views: one axis split
        total += np.einsum(f"{blocked}->k{output}", *heads).sum(axis=0, dtype=np.float64)
    return total


def _ln_backward_numpy(dy2: np.ndarray, xhat2: np.ndarray, rstd: np.ndarray, gamma):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gamma * dy, with two R,D buffers."""
    d = dy2.shape[1]
    dgamma = _sum_in_blocks("ij,ij->j", dy2, xhat2)  # D     column dot products: sum over rows of dy * xhat
    dbeta = _sum_in_blocks("ij->j", dy2)  # D     column sums
    dx = np.multiply(dy2, gamma) if gamma is not None else dy2.copy()  # R,D   g = dL/dxhat, then dx in place
    mean_g = np.einsum("ij->i", dx)  # R
    mean_g /= d  # R
    mean_gxhat = np.einsum("ij,ij->i", dx, xhat2)  # R
    mean_gxhat /= d  # R
    dx -= mean_g[:, None]  # R,D
    dx -= np.multiply(xhat2, mean_gxhat[:, None])  # R,D
    dx *= rstd[:, None]  # R,D
    return dx, dgamma, dbeta


def _rms_forward_numpy(x2: np.ndarray, gamma, eps: float, keep_xhat: bool):
    d = x2.shape[1]
    cdt = x2.dtype
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ms = np.einsum("ij,ij->i", x2, x2).astype(np.float64) / d  # R     mean of squares
        rrms = 1.0 / np.sqrt(ms + eps)  # R
        xhat = np.multiply(x2, rrms.astype(cdt)[:, None])  # R,D
        y = _affine_rows(xhat, gamma, None, in_place=not keep_xhat)  # R,D
    return y, ms, rrms, (xhat if keep_xhat else None)


def _rms_backward_numpy(dy2: np.ndarray, xhat2: np.ndarray, rrms: np.ndarray, gamma):
    """dx = rrms * (g - xhat * mean(g * xhat)), g = gamma * dy."""
    d = dy2.shape[1]
    dgamma = _sum_in_blocks("ij,ij->j", dy2, xhat2)  # D
    dx = np.multiply(dy2, gamma) if gamma is not None else dy2.copy()  # R,D   g
    mean_gxhat = np.einsum("ij,ij->i", dx, xhat2)  # R
    mean_gxhat /= d  # R
    dx -= np.multiply(xhat2, mean_gxhat[:, None])  # R,D
    dx *= rrms[:, None]  # R,D
    return dx, dgamma


def _bn_forward_numpy(x3: np.ndarray, gamma, beta, eps: float, keep_xhat: bool):
    n, c, q = x3.shape
    m = n * q
    cdt = x3.dtype
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # channel sums over N (in blocks of rows, see _sum_in_blocks) and Q, in float64
        mean0 = (_sum_in_blocks("ncq->c", x3) / m).astype(cdt)  # C     the center, in x's dtype
        xshift = np.subtract(x3, mean0[None, :, None])  # N,C,Q
        resid = _sum_in_blocks("ncq->c", xshift) / m  # C     what the center misses of the mean
        sumsq = _sum_in_blocks("ncq,ncq->c", xshift, xshift)  # C
        mean, resid, sumsq = _recenter(xshift, mean0.astype(np.float64), resid, sumsq, m, "ncq->c")
        mean += resid  # C
        var = np.maximum(sumsq.astype(np.float64) / m - np.square(resid.astype(np.float64)), 0.0)  # C
        rstd = 1.0 / np.sqrt(var + eps)  # C
        if _needs_correction(resid, rstd, cdt):
            xshift -= resid[None, :, None]  # N,C,Q
        xhat = np.multiply(xshift, rstd.astype(cdt)[None, :, None], out=xshift)  # N,C,Q
        if gamma is None and beta is None:
            y = xhat if not keep_xhat else xhat.copy()
        else:
            y = xhat if not keep_xhat else np.empty_like(xhat)
            np.multiply(xhat, (np.ones(c, cdt) if gamma is None else gamma)[None, :, None], out=y)  # N,C,Q
            if beta is not None:
                y += beta[None, :, None]  # N,C,Q
    return y, mean, var, rstd, (xhat if keep_xhat else None)


def _bn_backward_numpy(dy3: np.ndarray, xhat3: np.ndarray, rstd: np.ndarray, gamma):
    """dx = rstd * gamma * (dy - dbeta / m - xhat * dgamma / m), per channel."""
    n, _, q = dy3.shape
    m = n * q
    dbeta = _sum_in_blocks("ncq->c", dy3)  # C
    dgamma = _sum_in_blocks("ncq,ncq->c", dy3, xhat3)  # C
    cdt = dy3.dtype
    scale = rstd if gamma is None else rstd * gamma  # C
    dx = np.multiply(xhat3, (dgamma / m).astype(cdt)[None, :, None])  # N,C,Q   xhat * dgamma / m
    np.subtract(dy3, dx, out=dx)  # N,C,Q
    dx -= (dbeta / m).astype(cdt)[None, :, None]  # N,C,Q
    dx *= scale[None, :, None]  # N,C,Q
    return dx, dgamma, dbeta


# ---- groups whose squares overflow or underflow: rescale and recompute ---------------------------

# A group with var + eps below this has centered squares near the bottom of float64's range
# (a spread under about 1e-135, with eps smaller still): its variance loses digits, and at
# eps = 0 it can round to 0. Such a group is rescaled like one whose squares overflow.
TINY_VAR = 2.0**-900


def _rescaled_moments(group: np.ndarray, eps: float, rms: bool) -> tuple[float, float, float, np.ndarray]:
    """(mean, var, rstd, xhat) of one group whose squares overflow or underflow, in float64.

    Divide by s = 2^k >= max|x| (a power of two, so the division is exact),
    normalize with eps / s^2 and undo the scale on the statistics:
    LN_eps(x) = LN_{eps/s^2}(x / s), mean = s * mean', var = s^2 * var', rstd = rstd' / s.
    """
    g = group.astype(np.float64).ravel()
    k = math.frexp(float(np.max(np.abs(g))))[1]
    # s = 2^k as two factors: for |x| >= 2^1023, k = 1024 and 2^k itself is not a float64
    s1, s2 = math.ldexp(1.0, k // 2), math.ldexp(1.0, k - k // 2)
    eps_s = eps / s1 / s1 / s2 / s2
    scaled = g / s1 / s2
    if rms:
        r = F.rms_moments(scaled, (0,), eps_s)
        mean, var, rstd, xhat = 0.0, float(r.ms[0]), float(r.rrms[0]), r.xhat
    else:
        m = F.moments(scaled, (0,), eps_s)
        mean, var, rstd, xhat = float(m.mean[0]), float(m.var[0]), float(m.rstd[0]), m.xhat
    # Python floats: a product that overflows is inf, not an error
    return mean * s1 * s2, var * s1 * s1 * s2 * s2, rstd / s1 / s2, xhat


def _any_to_repair(var: np.ndarray, eps: float) -> bool:
    """Whether any group's variance (RMSNorm: mean square) overflowed or is below TINY_VAR."""
    with np.errstate(invalid="ignore", over="ignore"):  # compared in float64: in float32 TINY_VAR is 0
        return not (np.isfinite(var).all() and (var.astype(np.float64) + eps >= TINY_VAR).all())


def _to_repair(x_groups: np.ndarray, var: np.ndarray, eps: float, rms: bool) -> np.ndarray:
    """Indices of the groups to rescale: an overflowed or tiny variance, all values finite.

    A group with nothing to normalize stays as the formulas leave it (NaN at
    eps = 0, as in PyTorch): all values equal, or for RMSNorm all zero.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        suspects = np.flatnonzero(~np.isfinite(var) | (var.astype(np.float64) + eps < TINY_VAR))

    def something_to_normalize(g: np.ndarray) -> bool:
        return bool(np.any(g != 0.0)) if rms else bool(np.any(g != g.flat[0]))

    return np.array(
        [i for i in suspects if np.isfinite(x_groups[i]).all() and something_to_normalize(x_groups[i])],
        dtype=np.intp,
    )


def _repair_rows(x2, y2, xhat2, mean, var, rstd, gamma, beta, eps) -> None:
    """Recompute the rows of a [R, D] LayerNorm/RMSNorm whose squares over- or underflowed (in place)."""
    if not _any_to_repair(var, eps):
        return
    for i in _to_repair(x2, var, eps, rms=mean is None):
        mu, v, rs, xh = _rescaled_moments(x2[i], eps, rms=mean is None)
        if mean is not None:
            mean[i] = mu
        var[i], rstd[i] = v, rs
        if xhat2 is not None:
            xhat2[i] = xh
        y2[i] = F.affine(xh, gamma, beta)


def _repair_channels(x3, y3, xhat3, mean, var, rstd, gamma, beta, eps) -> None:
    """The same for the channels of a BatchNorm [N, C, Q]."""
    if not _any_to_repair(var, eps):
        return
    channels = np.moveaxis(x3, 1, 0)  # C,N,Q
    for ch in _to_repair(channels.reshape(channels.shape[0], -1), var, eps, rms=False):
        mu, v, rs, xh = _rescaled_moments(channels[ch], eps, rms=False)
        mean[ch], var[ch], rstd[ch] = mu, v, rs
        xh = xh.reshape(x3.shape[0], x3.shape[2])  # N,Q
        if xhat3 is not None:
            xhat3[:, ch, :] = xh
        g = None if gamma is None else gamma[ch]
        b = None if beta is None else beta[ch]
        y3[:, ch, :] = F.affine(xh, g, b)


# ---- the reference: the closed forms of formulas.py, one after another --------------------------


def _norm_axes(norm: str, ndim: int) -> tuple[tuple[int, ...], int]:
    """(the axes one statistic is taken over, the axis gamma and beta run along)."""
    if norm == "batchnorm":
        return ((0,), 1) if ndim == 2 else ((0, 2, 3), 1)
    return (ndim - 1,), ndim - 1


def _reference_forward(norm, x, gamma, beta, eps, cdt, keep_xhat, gamma_dtype, beta_dtype):
    """The textbook forward pass, straight from formulas.py (seed 002's five steps)."""
    xc = x.astype(cdt, copy=False)
    axes, param_axis = _norm_axes(norm, x.ndim)
    g = F.param_view(gamma, x.ndim, param_axis)  # 1,..,D  broadcastable
    b = F.param_view(beta, x.ndim, param_axis)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if norm == "rmsnorm":
            r = F.rms_moments(xc, axes, eps)  # ms, rms, rrms: [..., 1]; xhat: [..., D]
            mean, var, rstd, xhat, xshift = None, r.ms, r.rrms, r.xhat, None
        else:
            m = F.moments(xc, axes, eps)  # mean, var, std, rstd: [..., 1]; xshift, xhat: [..., D]
            mean, var, rstd, xhat, xshift = m.mean, m.var, m.rstd, m.xhat, m.xshift
        y = F.affine(xhat, g, b)  # [..., D]
    _repair_reference(norm, xc, y, xhat, mean, var, rstd, gamma, beta, eps)
    cache = NormCache(
        norm=norm,
        backend="reference",
        shape=x.shape,
        dtype=x.dtype,
        compute_dtype=cdt,
        eps=eps,
        xhat=xhat if keep_xhat else None,
        x=None if keep_xhat else xc,
        mean=None if mean is None else mean.astype(np.float64),
        var=var.astype(np.float64),
        rstd=rstd.astype(np.float64),
        gamma=gamma,
        gamma_dtype=gamma_dtype,
        beta_dtype=beta_dtype,
        xshift=xshift if keep_xhat else None,
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


def _reference_backward(dyc: np.ndarray, cache: NormCache):
    """The textbook backward pass: dxhat, then dx_simplified (or rms_dx), dgamma, dbeta."""
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
    dgamma = F.dgamma(dyc, xhat, shared)
    dbeta = F.dbeta(dyc, shared)
    return _finish_backward(dx, dgamma, dbeta, cache)


# ---- the BatchNorm layer ----------------------------------------------------------------------


class BatchNorm:
    """A BatchNorm layer with learnable gamma and beta, running statistics and an eval mode.

    In training mode (the default) each forward pass normalizes with the
    batch's own statistics and updates the running averages
    ``running = (1 - momentum) * running + momentum * batch`` (the running
    variance uses the unbiased batch variance, n / (n - 1) times the biased
    one, as PyTorch does). In eval mode (:meth:`eval`) it normalizes with the
    running averages, so one example gives the same output alone or in a batch.

    ``backward(dy)`` returns dx and stores ``dgamma`` and ``dbeta`` on the layer.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        *,
        affine: bool = True,
        dtype: Any = np.float32,
        backend: str | None = None,
    ) -> None:
        if isinstance(num_features, bool) or not isinstance(num_features, (int, np.integer)) or num_features < 1:
            raise ValueError(f"num_features: expected a positive integer, got {num_features!r}")
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum: expected a number in [0, 1], got {momentum!r}")
        self.num_features = int(num_features)
        self.eps = _check_eps(eps)
        self.momentum = float(momentum)
        self.dtype = np.dtype(dtype)
        _compute_dtype(self.dtype, "dtype")
        self.backend = backend
        self.gamma = np.ones(self.num_features, self.dtype) if affine else None
        self.beta = np.zeros(self.num_features, self.dtype) if affine else None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None
        self.running_mean = np.zeros(self.num_features)
        self.running_var = np.ones(self.num_features)
        self.num_batches_tracked = 0
        self.training = True
        self._cache: NormCache | None = None
        self._eval_xhat: np.ndarray | None = None

    def train(self, mode: bool = True) -> BatchNorm:
        self.training = bool(mode)
        return self

    def eval(self) -> BatchNorm:
        return self.train(False)

    def __call__(self, x: Any) -> np.ndarray:
        return self.forward(x)

    def forward(self, x: Any) -> np.ndarray:
        x = _as_array(x, "x")
        if x.ndim not in (2, 4) or x.shape[1] != self.num_features:
            raise ValueError(
                f"x: BatchNorm({self.num_features}) expects [N, {self.num_features}] or "
                f"[N, {self.num_features}, H, W], got shape {x.shape}"
            )
        if self.training:
            m = x.size // self.num_features
            if m < 2:  # no spread to measure, and the unbiased running variance would divide by 0
                raise ValueError(
                    f"x: BatchNorm in training mode needs more than one value per channel, got shape {x.shape} "
                    "(use a bigger batch, or eval() to normalize with the running statistics)"
                )
            y, cache = batch_norm_forward(x, self.gamma, self.beta, self.eps, backend=self.backend)
            batch_var = cache.var.reshape(-1) * (m / (m - 1))
            self.running_mean = (1.0 - self.momentum) * self.running_mean + self.momentum * cache.mean.reshape(-1)
            self.running_var = (1.0 - self.momentum) * self.running_var + self.momentum * batch_var
            self.num_batches_tracked += 1
            self._cache, self._eval_xhat = cache, None
            return y
        # eval: a fixed affine map per channel, xhat = (x - running_mean) / sqrt(running_var + eps)
        cdt = _compute_dtype(x.dtype, "x")
        _, param_axis = _norm_axes("batchnorm", x.ndim)
        mean = F.param_view(self.running_mean.astype(cdt), x.ndim, param_axis)  # 1,C(,1,1)
        rstd = F.param_view((1.0 / np.sqrt(self.running_var + self.eps)).astype(cdt), x.ndim, param_axis)
        xhat = (x.astype(cdt, copy=False) - mean) * rstd  # N,C(,H,W)
        gamma = None if self.gamma is None else F.param_view(self.gamma.astype(cdt), x.ndim, param_axis)
        beta = None if self.beta is None else F.param_view(self.beta.astype(cdt), x.ndim, param_axis)
        self._cache, self._eval_xhat = None, xhat
        self._eval_rstd, self._eval_dtype = rstd, x.dtype
        return F.affine(xhat, gamma, beta).astype(x.dtype, copy=False)

    def backward(self, dy: Any) -> np.ndarray:
        """dx for the last forward pass; sets ``self.dgamma`` and ``self.dbeta``."""
        if self._cache is not None:
            dx, self.dgamma, self.dbeta = batch_norm_backward(dy, self._cache)
            return dx
        if self._eval_xhat is None:
            raise RuntimeError("BatchNorm.backward: call forward first")
        xhat = self._eval_xhat
        dy = _as_array(dy, "dy")
        if dy.shape != xhat.shape:
            raise ValueError(f"dy: expected shape {xhat.shape} (the shape of x and y), got shape {dy.shape}")
        _, param_axis = _norm_axes("batchnorm", xhat.ndim)
        shared = F.param_axes(xhat.ndim, param_axis)
        dyc = dy.astype(xhat.dtype, copy=False)
        gamma = None if self.gamma is None else F.param_view(self.gamma.astype(xhat.dtype), xhat.ndim, param_axis)
        # in eval mode the statistics are constants: dx = gamma * rstd * dy, no paths through mean or var
        dx = F.dxhat(dyc, gamma) * self._eval_rstd
        if self.gamma is not None:
            self.dgamma = F.dgamma(dyc, xhat, shared).astype(self.gamma.dtype)
            self.dbeta = F.dbeta(dyc, shared).astype(self.beta.dtype)
        return dx.astype(self._eval_dtype, copy=False)  # in x's dtype, as in training mode

    def parameters(self) -> list[np.ndarray]:
        return [] if self.gamma is None else [self.gamma, self.beta]

    def __repr__(self) -> str:
        mode = "train" if self.training else "eval"
        return f"BatchNorm({self.num_features}, eps={self.eps:g}, momentum={self.momentum:g}, mode={mode})"
