"""Tolerances only the tests compare with (the package's own are in :mod:`microgradnorm.tolerances`)."""

from __future__ import annotations

import math

import numpy as np

from microgradnorm import tolerances as tol

# float32 results against the float64 analytic result (the relative part is the package's FLOAT32_RTOL)
FLOAT32_ATOL = 1e-5

# a float32 parameter gradient summed over many rows (blocks of rows in float32, the blocks in
# float64) against float64: a few float32 rounding units, however many rows there are
FLOAT32_PARAM_SUM_RTOL = 1e-6

# y of float32 BatchNorm over many rows, whose statistics are summed in blocks of rows (NumPy) or
# in float64 (fused), against float64: a few float32 rounding units, not a drift with the row count
FLOAT32_BN_ROWS_RTOL = 1e-6

# float16 / bfloat16-like inputs (accumulated in float32) against float64
FLOAT16_RTOL = 2e-2
FLOAT16_ATOL = 2e-2

# PyTorch (float64) against this package (float64)
TORCH_F64_RTOL = 1e-10
TORCH_F64_ATOL = 1e-12

# a number as a diagram or a table prints it against the exact value (the relative part: DISPLAY_RTOL)
DISPLAY_ATOL = 1e-12


def norm_dgamma_atol(x, dy, rstd, params: int) -> float:
    """Absolute tolerance for a normalization layer's float64 dgamma, from the terms that cancel in it.

    dgamma sums dy * xhat over the x.size / params entries of each parameter, and is
    exactly zero for BatchNorm with a constant dy (xhat sums to zero over a channel).
    In a group of g values |xhat| <= sqrt(g) (its squares add up to at most g), and
    xhat's rounding is about EPS64 * a, a = max|x| * max(rstd), from centering, plus
    the mean's own rounding (a sum of g values: up to log2(g) rounding units, shared
    by the whole group, so it does not average out). A term's size is taken as
    |dy| * (sqrt(g) + a) * (1 + log2(g)).
    """
    x = np.asarray(x, dtype=np.float64)
    rstd = np.asarray(rstd, dtype=np.float64)
    if x.size == 0 or rstd.size == 0 or params < 1:
        return 0.0
    g = x.size // rstd.size
    a = float(np.max(np.abs(x))) * float(np.max(rstd))
    term = float(np.max(np.abs(dy))) * (math.sqrt(g) + a) * (1.0 + math.log2(g))
    return tol.cancellation_atol(term, x.size // params)


def rstd_of(x, eps: float, axis: int = -1) -> np.ndarray:
    """1 / sqrt(var + eps) of each group along ``axis``, in float64."""
    return 1.0 / np.sqrt(np.var(np.asarray(x, dtype=np.float64), axis=axis) + eps)


def xhat_atol(x, eps: float) -> float:
    """Two computations of one row's xhat differ by the rounding of its centering (|x| before the rstd) and of
    the mean's sum of d values: a few rounding units of (1 + |x| * rstd), d times."""
    x = np.asarray(x, dtype=np.float64)
    return tol.cancellation_atol(1.0 + np.abs(x).max() * rstd_of(x, eps).max(), x.size)


# (rtol, atol) pairs as the comparisons take them
TORCH_F64 = (TORCH_F64_RTOL, TORCH_F64_ATOL)
VECTORIZED_F64 = (tol.VECTORIZED_F64_RTOL, tol.VECTORIZED_F64_ATOL)
FLOAT32 = (tol.FLOAT32_RTOL, FLOAT32_ATOL)
FLOAT16 = (FLOAT16_RTOL, FLOAT16_ATOL)
