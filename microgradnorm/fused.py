"""Fused kernels for the vectorized path, compiled with numba (``pip install microgradnorm[fast]``).

Why a fused kernel at all? A normalization does almost no arithmetic per number:
a handful of adds and multiplies. Its cost is moving memory. The NumPy path
computes one whole-array expression at a time (``xshift = x - mean``, then
``xshift * rstd``, then ``* gamma``, ...), so every step reads and writes the
full array again. A fused kernel walks each row once: it loads the row into the
processor's cache, takes its statistics, and writes the output, so the big
array crosses the memory bus only twice (read x, write y).

These loops are written to be read. They are the loops a GPU kernel runs: on a
GPU one block of threads takes one row (``for i in prange(rows)`` below), the
threads of the block split the ``for j`` loop among themselves, and the row sums
become a reduction inside the block. Here a CPU worker takes a batch of rows and
runs the ``for j`` loop with SIMD instructions.

Conventions shared by every kernel:

* Two precisions, LayerNorm and RMSNorm. The first sum over each row (the
  mean; RMSNorm's mean square) is accumulated in float64, whatever the input
  dtype, so a float32 row with a mean offset of 1e7 still centers right. The
  rest runs in the input's dtype ``T``: centering, the centered squares, scale,
  shift, the backward pass's row sums and dx. In float32 one SIMD instruction
  then handles twice as many numbers; converting every element to float64 and
  back was what made the float32 backward pass slower than PyTorch's (which
  also sums float32 rows in float32). The float64 mean enters the float32
  arithmetic as ``mu_hi + mu_lo`` (see :func:`_center`), so centering is exact
  to float32 precision. dgamma and dbeta are summed in ``T`` over blocks of
  ROW_BLOCK rows, then added into float64, so their rounding error grows with
  ROW_BLOCK, not with the number of rows. Groups near the ends of float32's
  range (entries near 1e20 square to infinity) are redone in float64 by
  :mod:`microgradnorm.vectorized`.
* BatchNorm takes every sum in float64: the mean, the centered squares (the
  centered values themselves are float64 there, x minus a float64 mean), and
  the backward pass's sums of dy and dy * xhat. Its group is a whole channel or
  column, tens of thousands of values (25,088 per channel of [32, 64, 28, 28])
  rather than a row of hundreds, and a float32 sum's rounding error grows with
  the number of terms. Only the normalized values, y and dx run in ``T``.
* ``fastmath`` allows reordering sums (so the compiler may split a sum into
  SIMD lanes) and fusing multiply-adds; it does NOT assume away NaN or Inf,
  so a NaN in one row still shows up in that row.
* ``cache=True``: the compiled machine code is written next to this file (or to
  numba's cache directory) and later runs load it instead of compiling again.
* Kernels never allocate the big arrays: the caller passes ``y``, ``dx`` and the
  statistics arrays in, already shaped, and the kernel fills them.

The module imports without numba; then :data:`AVAILABLE` is False and
:data:`UNAVAILABLE_REASON` says why, and :mod:`microgradnorm.vectorized` uses the
NumPy path.
"""

from __future__ import annotations

import numpy as np

try:  # numba is an optional extra
    import numba
    from numba import njit, prange

    AVAILABLE = True
    UNAVAILABLE_REASON = ""
except ImportError as exc:  # pragma: no cover - exercised only without numba
    numba = None
    AVAILABLE = False
    from microgradnorm.i18n import N_, LazyText

    if isinstance(exc, ModuleNotFoundError) and exc.name == "numba":
        UNAVAILABLE_REASON = LazyText(N_("numba is not installed; `pip install 'microgradnorm[fast]'`"))
    else:  # installed but broken (an incompatible NumPy, say): the import's own words tell which
        UNAVAILABLE_REASON = LazyText(
            N_("numba did not import ({error}); `pip install 'microgradnorm[fast]'`"), error=str(exc)
        )

    def njit(*args, **kwargs):
        """Without numba the kernels stay plain (slow) Python functions."""
        if args and callable(args[0]):
            return args[0]
        return lambda fn: fn

    prange = range

__all__ = [
    "AVAILABLE",
    "UNAVAILABLE_REASON",
    "batch_norm_backward",
    "batch_norm_backward_channels",
    "batch_norm_backward_columns",
    "batch_norm_forward",
    "batch_norm_forward_channels",
    "batch_norm_forward_columns",
    "layer_norm_backward",
    "layer_norm_backward_rows",
    "layer_norm_forward",
    "layer_norm_forward_rows",
    "num_workers",
    "rms_norm_backward",
    "rms_norm_backward_rows",
    "rms_norm_forward",
    "rms_norm_forward_rows",
]

# Reorder sums and fuse multiply-adds, but keep NaN and Inf meaningful.
_FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
_JIT = {"parallel": True, "cache": True, "fastmath": _FASTMATH, "nogil": True}

# LayerNorm/RMSNorm backward: each worker adds dgamma and dbeta over this many rows in the
# input's dtype (full SIMD width), then folds them into its float64 partial sums.
ROW_BLOCK = 32


# Below this many numbers a kernel runs on one thread: starting the other threads
# costs more than the work (and on a busy machine a thread that waits for a core
# can stall the call for a whole scheduler tick).
SMALL = 1 << 16


def num_workers() -> int:
    """How many threads the parallel loops use (each gets its own partial sums)."""
    return int(numba.get_num_threads()) if AVAILABLE else 1


def _workers(size: int) -> int:
    """How many threads a kernel over ``size`` numbers runs on (see :func:`_launch`)."""
    return num_workers() if size >= SMALL else 1


def _launch(kernel, size: int, *args) -> None:
    """Run ``kernel(*args)``, on one thread when the problem has fewer than SMALL numbers."""
    if size >= SMALL or not AVAILABLE:
        kernel(*args)
        return
    before = numba.get_num_threads()
    numba.set_num_threads(1)  # this thread's setting only; restored below
    try:
        kernel(*args)
    finally:
        numba.set_num_threads(before)


# ---- LayerNorm: one row at a time -------------------------------------------------------


@njit(cache=True, fastmath=False)
def _center(v, hi, lo):  # pragma: no cover - compiled
    """v - mean, with the float64 mean given as hi + lo in v's dtype (see the module docstring).

    Compiled without fastmath on purpose: with reassociation allowed, the compiler
    rewrites (v - hi) - lo as v - (hi + lo), and hi + lo rounds back to hi, so lo is
    lost (a float32 row with a mean offset of 1e7 comes out 10% wrong). The
    ``fastmath=False`` must be spelled out: left unset, a function called from a
    kernel inherits the kernel's fastmath. Fast-math flags belong to each
    instruction, so when this is inlined into a kernel the two subtractions stay
    in order while the kernel's sums are still split into SIMD lanes.
    """
    return (v - hi) - lo


# fmt: off
# The two LayerNorm kernels keep their code lines within 54 characters: lesson 14 shows them line by line,
# numbered, in a 60-column terminal (ruff format would join the lines again).
@njit(**_JIT)
def layer_norm_forward_rows(  # pragma: no cover
        x, gamma, beta, eps,
        y, mean, var, rstd, xhat, keep_xhat):
    """y[i] = gamma * (x[i] - mean[i]) * rstd[i] + beta for every row i of x [R, d].

    Reads each row from memory once: the later loops find it in the L1 cache, so the two passes (mean,
    then the centered variance, as accurate as the textbook's) cost no extra memory traffic.
    """
    rows, d = x.shape
    T = x.dtype.type  # x's dtype, float32 or float64
    # rows are independent (on a GPU: a block each)
    for i in prange(rows):
        # the mean of the row, summed in float64
        s = 0.0
        for j in range(d):
            s += x[i, j]
        mu = s / d
        mu_hi = T(mu)
        mu_lo = T(mu - mu_hi)
        # the variance, centered (never E[x^2] -
        # E[x]^2), in T: nothing cancels. r, the
        # centered sum, is 0 only in exact arithmetic:
        # r / d is mu's rounding error, folded back in
        ss = T(0.0)
        r = T(0.0)
        for j in range(d):
            xs = _center(x[i, j], mu_hi, mu_lo)
            r += xs
            ss += xs * xs
        corr = r / d
        v = ss / d - corr * corr
        if v < 0.0:  # rounding; a NaN stays NaN
            v = 0.0
        mu_lo = T(mu_lo + corr)
        rs = 1.0 / np.sqrt(v + eps)
        # normalize, scale, shift in T: the one loop
        # that writes
        rs_t = T(rs)
        for j in range(d):
            xh = _center(x[i, j], mu_hi, mu_lo) * rs_t
            y[i, j] = xh * gamma[j] + beta[j]
            if keep_xhat:
                xhat[i, j] = xh
        mean[i] = mu + corr
        var[i] = v
        rstd[i] = rs


@njit(**_JIT)
def layer_norm_backward_rows(  # pragma: no cover
        dy, src, mean, rstd, gamma,
        dx, dgamma_part, dbeta_part, have_xhat):
    """dx[i] = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gamma * dy[i], for every row; ``src`` is xhat
    (``have_xhat``) or x, xhat then recomputed on the fly. Worker w adds into row w of ``dgamma_part`` and
    ``dbeta_part`` [workers, d], the caller sums those rows (on a GPU: per-block partial sums, reduced)."""
    rows, d = dy.shape
    T = dy.dtype.type
    workers = dgamma_part.shape[0]
    per_worker = (rows + workers - 1) // workers
    for w in prange(workers):
        first = w * per_worker
        last = min(rows, first + per_worker)
        # the block's dgamma and dbeta, in dy's dtype
        dgamma_block = np.zeros(d, dy.dtype)
        dbeta_block = np.zeros(d, dy.dtype)
        for block in range(first, last, ROW_BLOCK):
            stop = min(last, block + ROW_BLOCK)
            for i in range(block, stop):
                mu_hi = T(mean[i])
                mu_lo = T(mean[i] - mu_hi)
                rs = T(rstd[i])
                # first read: two means, dgamma, dbeta
                s_g = s_gxhat = T(0.0)
                for j in range(d):
                    xh = (src[i, j] if have_xhat else
                          _center(src[i, j], mu_hi,
                                  mu_lo) * rs)
                    g = dy[i, j] * gamma[j]
                    s_g += g
                    s_gxhat += g * xh
                    dgamma_block[j] += dy[i, j] * xh
                    dbeta_block[j] += dy[i, j]
                mean_g = T(s_g / d)
                mean_gxhat = T(s_gxhat / d)
                # second read (cached): dx
                for j in range(d):
                    xh = (src[i, j] if have_xhat else
                          _center(src[i, j], mu_hi,
                                  mu_lo) * rs)
                    dx[i, j] = rs * (
                        dy[i, j] * gamma[j]
                        - mean_g - xh * mean_gxhat)
            # into the worker's float64 sums; reset
            for j in range(d):
                dgamma_part[w, j] += dgamma_block[j]
                dbeta_part[w, j] += dbeta_block[j]
                dgamma_block[j] = 0.0
                dbeta_block[j] = 0.0
# fmt: on


# ---- RMSNorm: LayerNorm without the mean -------------------------------------------------


@njit(**_JIT)
def rms_norm_forward_rows(x, gamma, eps, y, ms, rrms, xhat, keep_xhat):  # pragma: no cover - compiled
    """y[i] = gamma * x[i] * rrms[i], rrms = 1 / sqrt(mean(x[i]^2) + eps), for every row."""
    rows, d = x.shape
    T = x.dtype.type
    for i in prange(rows):
        ss = 0.0
        for j in range(d):
            xj = np.float64(x[i, j])
            ss += xj * xj
        rs = 1.0 / np.sqrt(ss / d + eps)
        rs_t = T(rs)
        for j in range(d):
            xh = x[i, j] * rs_t
            y[i, j] = xh * gamma[j]
            if keep_xhat:
                xhat[i, j] = xh
        ms[i] = ss / d
        rrms[i] = rs


@njit(**_JIT)
def rms_norm_backward_rows(dy, src, rrms, gamma, dx, dgamma_part, have_xhat):  # pragma: no cover - compiled
    """dx[i] = rrms * (g - xhat * mean(g * xhat)), g = gamma * dy[i]; per-worker partial dgamma."""
    rows, d = dy.shape
    T = dy.dtype.type
    workers = dgamma_part.shape[0]
    per_worker = (rows + workers - 1) // workers
    for w in prange(workers):
        first = w * per_worker
        last = min(rows, first + per_worker)
        dgamma_block = np.zeros(d, dy.dtype)
        for block in range(first, last, ROW_BLOCK):
            for i in range(block, min(last, block + ROW_BLOCK)):
                rs = T(rrms[i])
                s_gxhat = T(0.0)
                for j in range(d):
                    xh = src[i, j] if have_xhat else src[i, j] * rs
                    s_gxhat += dy[i, j] * gamma[j] * xh
                    dgamma_block[j] += dy[i, j] * xh
                mean_gxhat = T(s_gxhat / d)
                for j in range(d):
                    xh = src[i, j] if have_xhat else src[i, j] * rs
                    dx[i, j] = rs * (dy[i, j] * gamma[j] - xh * mean_gxhat)
            for j in range(d):
                dgamma_part[w, j] += dgamma_block[j]
                dgamma_block[j] = 0.0


# ---- BatchNorm [N, C, H, W]: one channel at a time -------------------------------------


@njit(**_JIT)
def batch_norm_forward_channels(x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat):  # pragma: no cover
    """x [N, C, Q] (Q = H * W): every channel c normalized over its N * Q values.

    One worker per channel (on a GPU, one block per channel). A channel of
    [32, 64, 28, 28] is 25,088 numbers, 100 KB in float32: it stays in the
    worker's L2 cache between the three loops. Every sum is float64 (see the
    module docstring); y is computed in x's dtype.
    """
    n, c, q = x.shape
    m = n * q
    T = x.dtype.type
    for ch in prange(c):
        s = 0.0
        for i in range(n):
            for k in range(q):
                s += x[i, ch, k]
        mu = s / m
        ss = 0.0
        r = 0.0  # the mean's rounding error, times m (see layer_norm_forward_rows)
        for i in range(n):
            for k in range(q):
                xs = x[i, ch, k] - mu
                r += xs
                ss += xs * xs
        corr = r / m
        v = ss / m - corr * corr
        if v < 0.0:  # rounding; a NaN stays NaN
            v = 0.0
        rs = 1.0 / np.sqrt(v + eps)
        mu_hi = T(mu)
        mu_lo = T((mu - mu_hi) + corr)
        rs_t = T(rs)
        for i in range(n):
            for k in range(q):
                xh = _center(x[i, ch, k], mu_hi, mu_lo) * rs_t
                y[i, ch, k] = xh * gamma[ch] + beta[ch]
                if keep_xhat:
                    xhat[i, ch, k] = xh
        mean[ch] = mu + corr
        var[ch] = v
        rstd[ch] = rs


@njit(**_JIT)
def batch_norm_backward_channels(dy, src, mean, rstd, gamma, dx, dgamma, dbeta, have_xhat):  # pragma: no cover
    """dx = rstd * gamma * (dy - dbeta / m - xhat * dgamma / m) per channel.

    In BatchNorm gamma and beta belong to the channel, so the two sums the
    formula needs (mean of g and mean of g * xhat, with g = gamma * dy) are
    gamma * dbeta / m and gamma * dgamma / m: one reading of the channel
    gives dgamma, dbeta and everything dx needs. Each worker owns its
    channels, so no partial sums are needed.
    """
    n, c, q = dy.shape
    m = n * q
    T = dy.dtype.type
    for ch in prange(c):
        mu_hi = T(mean[ch])
        mu_lo = T(mean[ch] - mu_hi)
        rs = T(rstd[ch])
        s_dy = 0.0
        s_dyxhat = 0.0
        for i in range(n):
            for k in range(q):
                xh = src[i, ch, k] if have_xhat else _center(src[i, ch, k], mu_hi, mu_lo) * rs
                s_dy += dy[i, ch, k]
                s_dyxhat += dy[i, ch, k] * xh
        dgamma[ch] = s_dyxhat
        dbeta[ch] = s_dy
        scale = T(rstd[ch] * gamma[ch])
        mean_dy = T(s_dy / m)
        mean_dyxhat = T(s_dyxhat / m)
        for i in range(n):
            for k in range(q):
                xh = src[i, ch, k] if have_xhat else _center(src[i, ch, k], mu_hi, mu_lo) * rs
                dx[i, ch, k] = scale * (dy[i, ch, k] - mean_dy - xh * mean_dyxhat)


# ---- BatchNorm [N, D]: the workers split the rows ---------------------------------------


@njit(**_JIT)
def batch_norm_forward_columns(x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat, part):  # pragma: no cover
    """x [N, D]: every column normalized over the N rows.

    A column is strided in memory, so one worker per column would read one
    number out of every row. Instead the workers split the rows, as in
    LayerNorm's dgamma: worker w adds its rows, contiguous runs that fill the
    SIMD lanes, into its own row of two float64 scratch arrays [workers, D]
    (the two slots of ``part``), and the few partial rows are added up at the
    end. Three sweeps: the column sums, the centered squares (a two-pass
    variance) with the sum of the centered values, then the normalization.
    """
    n, d = x.shape
    workers = part.shape[1]
    per_worker = (n + workers - 1) // workers
    # the slots of part: sweep 1 sums x into the first; sweep 2 sums (x - mean)^2 into the first
    # and x - mean into the second (0 in exact arithmetic: n times the mean's rounding error)
    x_sum, squares_sum, shifts_sum = part[0], part[0], part[1]
    part[:] = 0.0
    for w in prange(workers):
        for i in range(w * per_worker, min(n, (w + 1) * per_worker)):
            for j in range(d):
                x_sum[w, j] += x[i, j]
    mean[:] = x_sum.sum(axis=0) / n
    part[:] = 0.0
    for w in prange(workers):
        for i in range(w * per_worker, min(n, (w + 1) * per_worker)):
            for j in range(d):
                xs = x[i, j] - mean[j]
                squares_sum[w, j] += xs * xs
                shifts_sum[w, j] += xs  # see layer_norm_forward_rows
    corr = shifts_sum.sum(axis=0) / n
    var[:] = np.maximum(squares_sum.sum(axis=0) / n - corr * corr, 0.0)
    rstd[:] = 1.0 / np.sqrt(var + eps)
    mu_hi = mean.astype(x.dtype)
    mu_lo = ((mean - mu_hi) + corr).astype(x.dtype)
    mean += corr
    rs = rstd.astype(x.dtype)
    for i in prange(n):
        for j in range(d):
            xh = _center(x[i, j], mu_hi[j], mu_lo[j]) * rs[j]
            y[i, j] = xh * gamma[j] + beta[j]
            if keep_xhat:
                xhat[i, j] = xh


@njit(**_JIT)
def batch_norm_backward_columns(dy, src, mean, rstd, gamma, dx, dgamma, dbeta, have_xhat, part):  # pragma: no cover
    """The [N, D] version of :func:`batch_norm_backward_channels`, rows split as in the forward pass.

    The two float64 slots of ``part`` [2, workers, D] hold each worker's partial
    sums of dy (for dbeta) and of dy * xhat (for dgamma).
    """
    n, d = dy.shape
    workers = part.shape[1]
    per_worker = (n + workers - 1) // workers
    dy_sum, dyxhat_sum = part[0], part[1]
    mu_hi = mean.astype(dy.dtype)
    mu_lo = (mean - mu_hi).astype(dy.dtype)
    rs = rstd.astype(dy.dtype)
    part[:] = 0.0
    for w in prange(workers):
        for i in range(w * per_worker, min(n, (w + 1) * per_worker)):
            for j in range(d):
                xh = src[i, j] if have_xhat else _center(src[i, j], mu_hi[j], mu_lo[j]) * rs[j]
                dy_sum[w, j] += dy[i, j]
                dyxhat_sum[w, j] += dy[i, j] * xh
    dbeta[:] = dy_sum.sum(axis=0)
    dgamma[:] = dyxhat_sum.sum(axis=0)
    scale = (rstd * gamma).astype(dy.dtype)
    mean_dy = (dbeta / n).astype(dy.dtype)
    mean_dyxhat = (dgamma / n).astype(dy.dtype)
    for i in prange(n):
        for j in range(d):
            xh = src[i, j] if have_xhat else _center(src[i, j], mu_hi[j], mu_lo[j]) * rs[j]
            dx[i, j] = scale[j] * (dy[i, j] - mean_dy[j] - xh * mean_dyxhat[j])


# ---- launchers: allocate the outputs, call a kernel ---------------------------------------
#
# The arrays handed in are C-contiguous, in float32 or float64 (the compute dtype);
# gamma and beta are vectors in that dtype, or None (scale 1, shift 0).
# Statistics come back in float64, one per group.

_EMPTY = {np.dtype(np.float32): np.empty((1, 1), np.float32), np.dtype(np.float64): np.empty((1, 1), np.float64)}


def _xhat_buffer(x: np.ndarray, keep_xhat: bool, ndim: int) -> np.ndarray:
    if keep_xhat:
        return np.empty_like(x)
    return _EMPTY[x.dtype].reshape((1,) * ndim)


def _vector(p: np.ndarray | None, size: int, fill: float, dtype: np.dtype) -> np.ndarray:
    """gamma or beta in the kernel's dtype; ``fill`` (1 or 0) everywhere when it is None."""
    return np.full(size, fill, dtype) if p is None else np.asarray(p, dtype=dtype)


def layer_norm_forward(x: np.ndarray, gamma, beta, eps: float, keep_xhat: bool):
    """x [R, D] -> (y, mean, var, rstd, xhat or None)."""
    rows, d = x.shape
    y = np.empty_like(x)
    mean, var, rstd = np.empty(rows), np.empty(rows), np.empty(rows)
    xhat = _xhat_buffer(x, keep_xhat, 2)
    g, b = _vector(gamma, d, 1.0, x.dtype), _vector(beta, d, 0.0, x.dtype)
    _launch(layer_norm_forward_rows, x.size, x, g, b, eps, y, mean, var, rstd, xhat, keep_xhat)
    return y, mean, var, rstd, (xhat if keep_xhat else None)


def layer_norm_backward(dy: np.ndarray, src: np.ndarray, mean: np.ndarray, rstd: np.ndarray, gamma, have_xhat: bool):
    """dy [R, D], src = xhat or x -> (dx, dgamma, dbeta), the last two in float64."""
    d = dy.shape[1]
    workers = _workers(dy.size)
    dx = np.empty_like(dy)
    dgamma_part = np.zeros((workers, d))  # worker w adds into row w only
    dbeta_part = np.zeros((workers, d))
    g = _vector(gamma, d, 1.0, dy.dtype)
    _launch(layer_norm_backward_rows, dy.size, dy, src, mean, rstd, g, dx, dgamma_part, dbeta_part, have_xhat)
    return dx, dgamma_part.sum(axis=0), dbeta_part.sum(axis=0)


def rms_norm_forward(x: np.ndarray, gamma, eps: float, keep_xhat: bool):
    """x [R, D] -> (y, ms, rrms, xhat or None)."""
    rows, d = x.shape
    y = np.empty_like(x)
    ms, rrms = np.empty(rows), np.empty(rows)
    xhat = _xhat_buffer(x, keep_xhat, 2)
    _launch(rms_norm_forward_rows, x.size, x, _vector(gamma, d, 1.0, x.dtype), eps, y, ms, rrms, xhat, keep_xhat)
    return y, ms, rrms, (xhat if keep_xhat else None)


def rms_norm_backward(dy: np.ndarray, src: np.ndarray, rrms: np.ndarray, gamma, have_xhat: bool):
    """dy [R, D], src = xhat or x -> (dx, dgamma in float64)."""
    d = dy.shape[1]
    dx = np.empty_like(dy)
    dgamma_part = np.zeros((_workers(dy.size), d))
    g = _vector(gamma, d, 1.0, dy.dtype)
    _launch(rms_norm_backward_rows, dy.size, dy, src, rrms, g, dx, dgamma_part, have_xhat)
    return dx, dgamma_part.sum(axis=0)


def batch_norm_forward(x: np.ndarray, gamma, beta, eps: float, keep_xhat: bool):
    """x [N, D] or [N, C, Q] -> (y, mean, var, rstd, xhat or None), one statistic per column or channel."""
    c = x.shape[1]
    y = np.empty_like(x)
    mean, var, rstd = np.empty(c), np.empty(c), np.empty(c)
    xhat = _xhat_buffer(x, keep_xhat, x.ndim)
    g, b = _vector(gamma, c, 1.0, x.dtype), _vector(beta, c, 0.0, x.dtype)
    if x.ndim == 2:
        part = np.empty((2, _workers(x.size), c))  # two slots of per-worker column sums (see the kernel)
        _launch(batch_norm_forward_columns, x.size, x, g, b, eps, y, mean, var, rstd, xhat, keep_xhat, part)
    else:
        _launch(batch_norm_forward_channels, x.size, x, g, b, eps, y, mean, var, rstd, xhat, keep_xhat)
    return y, mean, var, rstd, (xhat if keep_xhat else None)


def batch_norm_backward(dy: np.ndarray, src: np.ndarray, mean: np.ndarray, rstd: np.ndarray, gamma, have_xhat: bool):
    """dy [N, D] or [N, C, Q], src = xhat or x -> (dx, dgamma, dbeta), the last two in float64."""
    c = dy.shape[1]
    dx = np.empty_like(dy)
    dgamma, dbeta = np.empty(c), np.empty(c)
    g = _vector(gamma, c, 1.0, dy.dtype)
    if dy.ndim == 2:
        part = np.empty((2, _workers(dy.size), c))  # per-worker sums of dy and of dy * xhat
        _launch(batch_norm_backward_columns, dy.size, dy, src, mean, rstd, g, dx, dgamma, dbeta, have_xhat, part)
    else:
        _launch(batch_norm_backward_channels, dy.size, dy, src, mean, rstd, g, dx, dgamma, dbeta, have_xhat)
    return dx, dgamma, dbeta
