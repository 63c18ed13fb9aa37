"""Every tolerance the package compares numbers with, named once (those only the tests use: tests/tolerances.py).

Two kinds of comparison, and why their tolerances differ:

* Two exact computations of the same float64 quantity (autograd against a
  closed form, the vectorized path against the scalar graph) differ only by
  rounding, so they must agree to about 1e-12 relative.
* A central finite difference (f(v + h) - f(v - h)) / 2h has a truncation error
  of order h^2 and a rounding error of order 1e-16 / h; with h = 1e-6 both are
  around 1e-10 to 1e-9, so it is trusted to about 1e-6 relative.

Relative errors are normwise: max|a - b| / max|b| over a whole node or array,
which stays meaningful when single entries are near zero. A comparison passes
when max|a - b| <= atol + rtol * max|b|.

A fixed atol is a coin toss where the true result is zero (dx of LayerNorm for a
constant dy, dx when y cannot depend on x): both sides are then rounding left
over from terms that cancelled, and that rounding grows with the terms' size.
Such comparisons take their atol from :func:`cancellation_atol` (or
:func:`norm_dx_atol`), and the finite difference adds the loss's own rounding
over the step (FD_ROUNDING_FACTOR; see :mod:`microgradnorm.check`).
"""

# autograd vs closed form, both float64
CLOSED_FORM_RTOL = 1e-10
CLOSED_FORM_ATOL = 1e-12

# central finite differences in float64: step h = FD_STEP * max(1, |value|) (for a spread such as
# var or rstd, FD_STEP * max(|value|, eps): a fraction of itself)
FD_STEP = 1e-6
FD_RTOL = 1e-6
FD_ATOL = 1e-8
# ... plus the rounding error dL of each loss evaluation over the step: the Richardson
# combination (4 (L(h/2) - L(-h/2)) / h - (L(h) - L(-h)) / 2h) / 3 turns four losses each off
# by up to dL into an error of at most (8 + 1) / 3 = 3 times dL / h
FD_ROUNDING_FACTOR = 3.0
# finite differences per node that microgradnorm.check takes by default (evenly spread entries):
# each one rebuilds the whole scalar graph four times
FD_MAX_ENTRIES = 32

# the vectorized NumPy path against the scalar graph, float64
VECTORIZED_F64_RTOL = 1e-12
VECTORIZED_F64_ATOL = 1e-13

# float32 results against the float64 analytic result
FLOAT32_RTOL = 1e-4

# a wrong answer "is" a known mistake (unbiased variance, a missing path, ...) when
# it matches that mistake's own closed form this closely
EXERCISE_MISTAKE_RTOL = 1e-6
EXERCISE_MISTAKE_ATOL = 1e-9

# float64's rounding unit (the gap between 1 and the next float64)
EPS64 = 2.220446049250313e-16

# A result that should be zero (dx of LayerNorm for a constant dy, sum(dx), x . dx at eps = 0) is
# what is left of terms that cancelled: rounding noise of a few rounding units of their size for
# each term summed, whatever fixed number one picks. Its tolerance is this many rounding units.
CANCELLATION_ULPS = 4.0

# a number as a diagram or a table prints it (4 significant digits) against the exact value
DISPLAY_RTOL = 5e-4


def normwise_error(a, b) -> tuple[float, float]:
    """(max|a - b|, max|a - b| / max|b|) for two arrays or sequences of numbers."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0, 0.0
    abs_err = float(np.max(np.abs(a - b)))
    scale = float(np.max(np.abs(b)))
    return abs_err, (abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else float("inf")))


def close(a, b, rtol: float, atol: float) -> bool:
    """Normwise closeness: max|a - b| <= atol + rtol * max|b| (NaN never passes)."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    diff = np.abs(a - b)
    if np.isnan(diff).any():
        return False
    return bool(diff.max() <= atol + rtol * np.abs(b).max())


def cancellation_atol(term_size: float, count: int = 1, units: float = CANCELLATION_ULPS) -> float:
    """The package's one rounding bound: ``units`` rounding units of ``term_size``, ``count`` times.

    ``count`` terms of size ``term_size`` summed to (nearly) zero leave at most a few rounding units of
    ``term_size`` each: ``units * EPS64 * term_size * count``, elementwise for an array. The check's
    running bound on the loss (one unit per op), the exercises' componentwise bound and the lessons'
    claims that a sum vanishes are this bound with their own sizes.
    """
    return units * EPS64 * term_size * count


def norm_dx_atol(x, gamma, dy, rstd) -> float:
    """Absolute tolerance for a normalization layer's float64 dx, from the terms that cancel in it.

    dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)) adds D terms (D = the group size)
    of size |g*dy| * rstd, and is exactly zero for a constant g*dy. Each term carries the
    rounding of xhat, whose centering x - mean loses about EPS64 * |x| before it is multiplied
    by rstd, so a term's size is |g*dy| * rstd * (1 + |x| * rstd). ``rstd`` is per group
    (a cache's rstd, or 1 / rms for RMSNorm); ``gamma`` may be None (a scale of one).
    """
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    rstd = np.asarray(rstd, dtype=np.float64)
    if x.size == 0 or rstd.size == 0:
        return 0.0
    g = 1.0 if gamma is None else float(np.max(np.abs(gamma)))
    r = float(np.max(rstd))
    term = g * float(np.max(np.abs(dy))) * r * (1.0 + float(np.max(np.abs(x))) * r)
    return cancellation_atol(term, x.size // rstd.size)
