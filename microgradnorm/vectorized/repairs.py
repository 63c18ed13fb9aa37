"""The numerics repairs: what keeps the tuned paths right where the plain formulas go wrong.

The closed forms (:mod:`microgradnorm.formulas`) are exact in exact arithmetic.
In floating point three things can spoil them, and each has its repair here:

* the mean's rounding error: a float32 mean of many values far from zero
  misses by more than their spread, so ``x - mean`` is off-center and the
  variance is noise. The error is measured (the sum of ``x - mean``, zero in
  exact arithmetic) and folded back (:func:`_recenter`, :func:`_needs_correction`).
* squares that overflow or underflow: a group with ``|x|`` near 1e20 in float32
  (or a float64 spread under about 1e-135) is recomputed after scaling by a
  power of two, ``LN_eps(x) = LN_{eps/s^2}(x/s)`` (:func:`_repair_rows`,
  :func:`_repair_channels`).
* float32 groups near the ends of float32's range: the whole call is redone in
  float64 and rounded back (:func:`_tuned_forward`, :func:`_backward_dtype`).

Each check is one cheap pass over the per-group statistics; the repairs run
only for the groups (or calls) that need them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from microgradnorm import formulas as F

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


def _backward_dtype(rstd: np.ndarray, group: int, cdt: np.dtype) -> np.dtype:
    """The dtype a backward pass computes in: the forward's ``cdt``, or float64 where the forward needed it."""
    return np.dtype(np.float64) if _needs_float64(rstd, group, cdt) else cdt


# ---- the mean's rounding error ---------------------------------------------------------------


def _split_mean(mean: np.ndarray, cdt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """A float64 mean as hi + lo with hi in the compute dtype (so x - hi is exact for x near the mean)."""
    hi = mean.astype(cdt)
    return hi, (mean - hi).astype(cdt)


def _needs_correction(resid: np.ndarray, rstd: np.ndarray, cdt: np.dtype) -> bool:
    """Whether subtracting ``resid`` would change xhat by more than a quarter of its rounding unit."""
    with np.errstate(invalid="ignore", over="ignore"):
        shift = np.abs(resid.astype(np.float64)) * rstd
    return bool(np.any(shift > 0.25 * np.finfo(cdt).eps))


# How many times _recenter may fold the mean's rounding error back into the mean.
RECENTER_ROUNDS = 3


def _recenter(
    xshift: np.ndarray,
    mean: np.ndarray,
    resid: np.ndarray,
    sumsq: np.ndarray,
    count: int,
    *,
    expand: tuple,
    sums: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold the mean's rounding error into the mean while it is big enough to spoil the variance.

    ``var = sumsq / count - resid^2`` is exact in exact arithmetic, but when the
    error of the first mean (``resid``) is not small against the spread, the
    subtraction cancels: a float32 sum of 16,384 values near 1e6 misses the mean
    by more than the spread, and the variance comes out as noise. Then subtract
    ``resid`` from ``xshift`` (exact: both are close to the same error) and take
    the two sums again; each round shrinks the error by about count * eps, and
    the rounds run only for arrays where it is needed.

    ``expand`` indexes a per-group vector so that it broadcasts against
    ``xshift`` (``(slice(None), None)`` for rows of [R, D]); ``sums(xshift)``
    returns the per-group (sum, sum of squares) of ``xshift``.
    """
    for _ in range(RECENTER_ROUNDS):
        with np.errstate(over="ignore", invalid="ignore"):
            r2 = np.square(resid.astype(np.float64))
            spoiled = 16.0 * r2 > sumsq.astype(np.float64) / count  # the error is over a quarter of the spread
        if not spoiled.any():
            break
        xshift -= resid[expand]
        mean = mean + resid
        total, sumsq = sums(xshift)
        resid = total / count
    return mean, resid, sumsq


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
