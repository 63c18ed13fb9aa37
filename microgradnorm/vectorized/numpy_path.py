"""The tuned NumPy path: each norm's forward and backward pass in a few whole-array lines.

These are the closed forms of :mod:`microgradnorm.formulas` rearranged for
memory traffic: row sums and row dot products as one- and two-operand
``einsum`` (one pass each, no temporary array), every big temporary reused in
place or through ``out=``, and the backward pass in the xhat form
``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`` with ``g = gamma * dy``,
so the cache needs no ``xshift``. Each line that touches a whole array carries
its shape (``# R,D``: R rows of D features; ``# N,C,Q``: N examples, C channels,
Q = H * W positions).

The forward functions take x already shaped as [R, D] (LayerNorm, RMSNorm) or
[N, C, Q] (BatchNorm) in its compute dtype and return ``(y, *statistics, xhat)``
with the statistics in float64 and xhat None when it is not kept; the checks,
the shapes and the cache are :mod:`microgradnorm.vectorized.api`'s job.
"""

from __future__ import annotations

import numpy as np

from microgradnorm.vectorized.repairs import _needs_correction, _recenter, _split_mean

# ---- groups: rows of [R, D], channels of [N, C, Q] ------------------------------------------------

# Per-group vectors broadcast against [R, D] with _ROW and against [N, C, Q] with _CHANNEL.
_ROW = (slice(None), None)
_CHANNEL = (None, slice(None), None)


def _row_sums(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum, sum of squares) of each row of a [R, D] array, in its dtype."""
    return np.einsum("ij->i", a), np.einsum("ij,ij->i", a, a)  # R, R


def _channel_sums(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum, sum of squares) of each channel of a [N, C, Q] array, in float64 (see _sum_in_blocks)."""
    return _sum_in_blocks("ncq->c", a), _sum_in_blocks("ncq,ncq->c", a, a)  # C, C


# ---- LayerNorm and RMSNorm ------------------------------------------------------------------


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
        mean, resid, sumsq = _recenter(xshift, mean, resid, sumsq, d, expand=_ROW, sums=_row_sums)  # rarely run
        mean += resid  # R     the corrected mean, float64
        var = sumsq.astype(np.float64) / d - np.square(resid.astype(np.float64))  # R
        var = np.maximum(var, 0.0)  # R
        rstd = 1.0 / np.sqrt(var + eps)  # R
        if _needs_correction(resid, rstd, cdt):
            xshift -= resid[:, None]  # R,D   only when the mean's rounding would show in xhat
        xhat = np.multiply(xshift, rstd.astype(cdt)[:, None], out=xshift)  # R,D
        y = _affine_rows(xhat, gamma, beta, in_place=not keep_xhat)  # R,D
    return y, mean, var, rstd, (xhat if keep_xhat else None)


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


# ---- BatchNorm --------------------------------------------------------------------------------


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
        mean, resid, sumsq = _recenter(
            xshift, mean0.astype(np.float64), resid, sumsq, m, expand=_CHANNEL, sums=_channel_sums
        )
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


# ---- recompute mode --------------------------------------------------------------------------


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
