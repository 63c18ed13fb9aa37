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

* Statistics (mean, rstd) and every sum are accumulated in float64, whatever
  the input dtype, so float32 rows with a mean offset of 1e7 or entries near
  1e20 (whose squares overflow float32) still come out right.
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
    UNAVAILABLE_REASON = f"numba is not installed ({exc}); pip install 'microgradnorm[fast]'"

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

# BatchNorm [N, D]: each worker owns a block of this many adjacent columns, so
# every row it reads is a contiguous run of memory.
COLUMN_BLOCK = 64


# Below this many numbers a kernel runs on one thread: starting the other threads
# costs more than the work (and on a busy machine a thread that waits for a core
# can stall the call for a whole scheduler tick).
SMALL = 1 << 16


def num_workers() -> int:
    """How many threads the parallel loops use (each gets its own partial sums)."""
    return int(numba.get_num_threads()) if AVAILABLE else 1


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


@njit(**_JIT)
def layer_norm_forward_rows(x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat):  # pragma: no cover - compiled
    """y[i] = gamma * (x[i] - mean[i]) * rstd[i] + beta for every row i of x [R, D].

    Reads each row from memory once; the second and third loops over the row
    find it in the L1 cache. Two passes (mean, then the centered variance) are
    as accurate as the textbook two-pass formula, and cost no extra memory
    traffic because the row is still cached.
    """
    rows, d = x.shape
    for i in prange(rows):  # rows are independent: on a GPU, one block per row
        # the mean of the row
        s = 0.0
        for j in range(d):
            s += x[i, j]
        mu = s / d
        # the variance, centered: sum of (x - mu)^2, never E[x^2] - E[x]^2
        ss = 0.0
        for j in range(d):
            xs = x[i, j] - mu
            ss += xs * xs
        v = ss / d
        rs = 1.0 / np.sqrt(v + eps)
        # normalize, scale, shift: the only write of the row
        for j in range(d):
            xh = (x[i, j] - mu) * rs
            y[i, j] = xh * gamma[j] + beta[j]
            if keep_xhat:
                xhat[i, j] = xh
        mean[i] = mu
        var[i] = v
        rstd[i] = rs


@njit(**_JIT)
def layer_norm_backward_rows(dy, src, mean, rstd, gamma, dx, dgamma_part, dbeta_part, have_xhat):  # pragma: no cover
    """dx[i] = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gamma * dy[i], for every row.

    ``src`` is xhat itself when ``have_xhat``, otherwise x (and xhat is
    recomputed from x, mean and rstd on the fly: the same bytes are read
    either way). dgamma and dbeta sum over all rows; to avoid two workers
    adding into the same entry, worker w adds into row w of ``dgamma_part`` and
    ``dbeta_part`` [workers, D], and the caller sums those few rows at the end
    (on a GPU: per-block partial sums, then a second small reduction).
    """
    rows, d = dy.shape
    workers = dgamma_part.shape[0]
    per_worker = (rows + workers - 1) // workers
    for w in prange(workers):
        dgamma_w = dgamma_part[w]
        dbeta_w = dbeta_part[w]
        for i in range(w * per_worker, min(rows, (w + 1) * per_worker)):
            mu = mean[i]
            rs = rstd[i]
            # first read of the row: the two means in the formula, and this worker's dgamma, dbeta
            s_g = 0.0
            s_gxhat = 0.0
            for j in range(d):
                xh = src[i, j] if have_xhat else (src[i, j] - mu) * rs
                g = dy[i, j] * gamma[j]
                s_g += g
                s_gxhat += g * xh
                dgamma_w[j] += dy[i, j] * xh
                dbeta_w[j] += dy[i, j]
            mean_g = s_g / d
            mean_gxhat = s_gxhat / d
            # second read (cached): dx
            for j in range(d):
                xh = src[i, j] if have_xhat else (src[i, j] - mu) * rs
                dx[i, j] = rs * (dy[i, j] * gamma[j] - mean_g - xh * mean_gxhat)


# ---- RMSNorm: LayerNorm without the mean -------------------------------------------------


@njit(**_JIT)
def rms_norm_forward_rows(x, gamma, eps, y, ms, rrms, xhat, keep_xhat):  # pragma: no cover - compiled
    """y[i] = gamma * x[i] * rrms[i], rrms = 1 / sqrt(mean(x[i]^2) + eps), for every row."""
    rows, d = x.shape
    for i in prange(rows):
        ss = 0.0
        for j in range(d):
            ss += x[i, j] * x[i, j]
        rs = 1.0 / np.sqrt(ss / d + eps)
        for j in range(d):
            xh = x[i, j] * rs
            y[i, j] = xh * gamma[j]
            if keep_xhat:
                xhat[i, j] = xh
        ms[i] = ss / d
        rrms[i] = rs


@njit(**_JIT)
def rms_norm_backward_rows(dy, src, rrms, gamma, dx, dgamma_part, have_xhat):  # pragma: no cover - compiled
    """dx[i] = rrms * (g - xhat * mean(g * xhat)), g = gamma * dy[i]; per-worker partial dgamma."""
    rows, d = dy.shape
    workers = dgamma_part.shape[0]
    per_worker = (rows + workers - 1) // workers
    for w in prange(workers):
        dgamma_w = dgamma_part[w]
        for i in range(w * per_worker, min(rows, (w + 1) * per_worker)):
            rs = rrms[i]
            s_gxhat = 0.0
            for j in range(d):
                xh = src[i, j] if have_xhat else src[i, j] * rs
                s_gxhat += dy[i, j] * gamma[j] * xh
                dgamma_w[j] += dy[i, j] * xh
            mean_gxhat = s_gxhat / d
            for j in range(d):
                xh = src[i, j] if have_xhat else src[i, j] * rs
                dx[i, j] = rs * (dy[i, j] * gamma[j] - xh * mean_gxhat)


# ---- BatchNorm [N, C, H, W]: one channel at a time -------------------------------------


@njit(**_JIT)
def batch_norm_forward_channels(x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat):  # pragma: no cover
    """x [N, C, Q] (Q = H * W): every channel c normalized over its N * Q values.

    One worker per channel (on a GPU, one block per channel). A channel of
    [32, 64, 28, 28] is 25,088 numbers, 100 KB in float32: it stays in the
    worker's L2 cache between the three loops.
    """
    n, c, q = x.shape
    m = n * q
    for ch in prange(c):
        s = 0.0
        for i in range(n):
            for k in range(q):
                s += x[i, ch, k]
        mu = s / m
        ss = 0.0
        for i in range(n):
            for k in range(q):
                xs = x[i, ch, k] - mu
                ss += xs * xs
        v = ss / m
        rs = 1.0 / np.sqrt(v + eps)
        for i in range(n):
            for k in range(q):
                xh = (x[i, ch, k] - mu) * rs
                y[i, ch, k] = xh * gamma[ch] + beta[ch]
                if keep_xhat:
                    xhat[i, ch, k] = xh
        mean[ch] = mu
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
    for ch in prange(c):
        mu = mean[ch]
        rs = rstd[ch]
        s_dy = 0.0
        s_dyxhat = 0.0
        for i in range(n):
            for k in range(q):
                xh = src[i, ch, k] if have_xhat else (src[i, ch, k] - mu) * rs
                s_dy += dy[i, ch, k]
                s_dyxhat += dy[i, ch, k] * xh
        dgamma[ch] = s_dyxhat
        dbeta[ch] = s_dy
        scale = rs * gamma[ch]
        mean_dy = s_dy / m
        mean_dyxhat = s_dyxhat / m
        for i in range(n):
            for k in range(q):
                xh = src[i, ch, k] if have_xhat else (src[i, ch, k] - mu) * rs
                dx[i, ch, k] = scale * (dy[i, ch, k] - mean_dy - xh * mean_dyxhat)


# ---- BatchNorm [N, D]: blocks of columns ---------------------------------------------------


@njit(**_JIT)
def batch_norm_forward_columns(x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat):  # pragma: no cover
    """x [N, D]: every column normalized over the N rows.

    A column is strided in memory, so a worker takes a block of COLUMN_BLOCK
    adjacent columns and walks down the rows, reading a contiguous run of each
    row and keeping one running sum per column of its block.
    """
    n, d = x.shape
    blocks = (d + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    for b in prange(blocks):
        j0 = b * COLUMN_BLOCK
        j1 = min(d, j0 + COLUMN_BLOCK)
        s = np.zeros(j1 - j0)
        for i in range(n):
            for j in range(j0, j1):
                s[j - j0] += x[i, j]
        mu = s / n
        ss = np.zeros(j1 - j0)
        for i in range(n):
            for j in range(j0, j1):
                xs = x[i, j] - mu[j - j0]
                ss[j - j0] += xs * xs
        v = ss / n
        rs = 1.0 / np.sqrt(v + eps)
        for i in range(n):
            for j in range(j0, j1):
                xh = (x[i, j] - mu[j - j0]) * rs[j - j0]
                y[i, j] = xh * gamma[j] + beta[j]
                if keep_xhat:
                    xhat[i, j] = xh
        for j in range(j0, j1):
            mean[j] = mu[j - j0]
            var[j] = v[j - j0]
            rstd[j] = rs[j - j0]


@njit(**_JIT)
def batch_norm_backward_columns(dy, src, mean, rstd, gamma, dx, dgamma, dbeta, have_xhat):  # pragma: no cover
    """The column-block version of :func:`batch_norm_backward_channels` for x [N, D]."""
    n, d = dy.shape
    blocks = (d + COLUMN_BLOCK - 1) // COLUMN_BLOCK
    for b in prange(blocks):
        j0 = b * COLUMN_BLOCK
        j1 = min(d, j0 + COLUMN_BLOCK)
        s_dy = np.zeros(j1 - j0)
        s_dyxhat = np.zeros(j1 - j0)
        for i in range(n):
            for j in range(j0, j1):
                xh = src[i, j] if have_xhat else (src[i, j] - mean[j]) * rstd[j]
                s_dy[j - j0] += dy[i, j]
                s_dyxhat[j - j0] += dy[i, j] * xh
        for j in range(j0, j1):
            dgamma[j] = s_dyxhat[j - j0]
            dbeta[j] = s_dy[j - j0]
        for i in range(n):
            for j in range(j0, j1):
                xh = src[i, j] if have_xhat else (src[i, j] - mean[j]) * rstd[j]
                k = j - j0
                dx[i, j] = rstd[j] * gamma[j] * (dy[i, j] - s_dy[k] / n - xh * s_dyxhat[k] / n)


# ---- launchers: allocate the outputs, call a kernel ---------------------------------------
#
# The arrays handed in are C-contiguous, in float32 or float64 (the compute dtype);
# gamma and beta are float64 vectors (ones and zeros when the caller has none).
# Statistics come back in float64, one per group.

_EMPTY = {np.dtype(np.float32): np.empty((1, 1), np.float32), np.dtype(np.float64): np.empty((1, 1), np.float64)}


def _xhat_buffer(x: np.ndarray, keep_xhat: bool, ndim: int) -> np.ndarray:
    if keep_xhat:
        return np.empty_like(x)
    return _EMPTY[x.dtype].reshape((1,) * ndim)


def layer_norm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, keep_xhat: bool):
    """x [R, D] -> (y, mean, var, rstd, xhat or None)."""
    rows = x.shape[0]
    y = np.empty_like(x)
    mean, var, rstd = np.empty(rows), np.empty(rows), np.empty(rows)
    xhat = _xhat_buffer(x, keep_xhat, 2)
    _launch(layer_norm_forward_rows, x.size, x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat)
    return y, mean, var, rstd, (xhat if keep_xhat else None)


def layer_norm_backward(dy: np.ndarray, src: np.ndarray, mean: np.ndarray, rstd: np.ndarray, gamma, have_xhat: bool):
    """dy [R, D], src = xhat or x -> (dx, dgamma, dbeta), the last two in float64."""
    d = dy.shape[1]
    workers = num_workers() if dy.size >= SMALL else 1
    dx = np.empty_like(dy)
    dgamma_part = np.zeros((workers, d))  # worker w adds into row w only
    dbeta_part = np.zeros((workers, d))
    _launch(layer_norm_backward_rows, dy.size, dy, src, mean, rstd, gamma, dx, dgamma_part, dbeta_part, have_xhat)
    return dx, dgamma_part.sum(axis=0), dbeta_part.sum(axis=0)


def rms_norm_forward(x: np.ndarray, gamma: np.ndarray, eps: float, keep_xhat: bool):
    """x [R, D] -> (y, ms, rrms, xhat or None)."""
    rows = x.shape[0]
    y = np.empty_like(x)
    ms, rrms = np.empty(rows), np.empty(rows)
    xhat = _xhat_buffer(x, keep_xhat, 2)
    _launch(rms_norm_forward_rows, x.size, x, gamma, eps, y, ms, rrms, xhat, keep_xhat)
    return y, ms, rrms, (xhat if keep_xhat else None)


def rms_norm_backward(dy: np.ndarray, src: np.ndarray, rrms: np.ndarray, gamma: np.ndarray, have_xhat: bool):
    """dy [R, D], src = xhat or x -> (dx, dgamma in float64)."""
    d = dy.shape[1]
    dx = np.empty_like(dy)
    dgamma_part = np.zeros((num_workers() if dy.size >= SMALL else 1, d))
    _launch(rms_norm_backward_rows, dy.size, dy, src, rrms, gamma, dx, dgamma_part, have_xhat)
    return dx, dgamma_part.sum(axis=0)


def batch_norm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, keep_xhat: bool):
    """x [N, D] or [N, C, Q] -> (y, mean, var, rstd, xhat or None), one statistic per column or channel."""
    c = x.shape[1]
    y = np.empty_like(x)
    mean, var, rstd = np.empty(c), np.empty(c), np.empty(c)
    xhat = _xhat_buffer(x, keep_xhat, x.ndim)
    kernel = batch_norm_forward_columns if x.ndim == 2 else batch_norm_forward_channels
    _launch(kernel, x.size, x, gamma, beta, eps, y, mean, var, rstd, xhat, keep_xhat)
    return y, mean, var, rstd, (xhat if keep_xhat else None)


def batch_norm_backward(dy: np.ndarray, src: np.ndarray, mean: np.ndarray, rstd: np.ndarray, gamma, have_xhat: bool):
    """dy [N, D] or [N, C, Q], src = xhat or x -> (dx, dgamma, dbeta), the last two in float64."""
    c = dy.shape[1]
    dx = np.empty_like(dy)
    dgamma, dbeta = np.empty(c), np.empty(c)
    kernel = batch_norm_backward_columns if dy.ndim == 2 else batch_norm_backward_channels
    _launch(kernel, dy.size, dy, src, mean, rstd, gamma, dx, dgamma, dbeta, have_xhat)
    return dx, dgamma, dbeta
