"""How close a right answer must be: the rounding of float64, not a fixed tolerance.

A correct closed form computed in float64, in any sound order of operations
(two-pass, staged, simplified, Welford, the Value engine), differs from the
exact answer only by rounding. Each rounding changes a number by at most one
unit roundoff u = 2**-53 of its size, and what those changes do to an output
entry is bounded by how strongly that entry depends on each input: a result
computed by a backward-stable method is the exact result for inputs perturbed
by a few u each, so its error is at most about

    L * u * (sum_j |d out / d in_j| * |in_j|  +  |out|)

where L counts the roundings that pile up along the longest sum. The sum over
j is the componentwise condition number: it is large exactly where terms cancel
(a dx_i near 0 made of terms of size 1 gets a tolerance of the terms' size,
not of its own), and it scales with every magnitude in the problem.

:func:`tolerance` measures those derivatives on the closed form itself, by
forward differences (an estimate of the bound needs one correct digit, not
fifteen), and returns, for every entry of every output, how far an answer may be
from the closed form. A finite-difference estimate of a gradient is off by
about 1e-10 to 1e-6 of the gradient's size, far outside this bound; an exact
formula lands well inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from microgradnorm.tolerances import EPS64, cancellation_atol, normwise_error

__all__ = ["ESTIMATE_RTOL", "UNIT_ROUNDOFF", "relative_error", "tolerance", "within"]

UNIT_ROUNDOFF = EPS64 / 2  # float64: the largest relative change one rounding makes
STEP = 2.0**-20  # relative step of the differences that estimate the sensitivities
# an answer this close (normwise, relative) to the right one, but outside the rounding bound, is an
# estimate (finite differences: 1e-10 to 1e-5) or a step in float32 (about 1e-7), not a wrong formula;
# a wrong formula on these inputs is off by far more (eps = 1e-3 misplaced: about 1e-4)
ESTIMATE_RTOL = 1e-5

Solve = Callable[[dict[str, Any]], dict[str, np.ndarray]]


def tolerance(
    solve: Solve, inputs: dict[str, Any], exact: Iterable[str] = (), terms: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """For each output of ``solve``, the largest error a correct float64 computation may have, per entry.

    ``exact`` names inputs that are not rounded (counts): they are not nudged.
    ``terms``: per output, the size of terms that cancel inside its formula but
    that no input scales (the constant 1 and 1/D of LayerNorm's Jacobian beside
    xhat_i xhat_j / D, where xhat cannot grow any more): rounding them costs
    about u times their size, which the sensitivities to the inputs miss.
    """
    base = solve(inputs)
    sensitivity = {k: np.abs(np.asarray(v, dtype=np.float64)) for k, v in base.items()}
    for k, size in (terms or {}).items():
        sensitivity[k] = sensitivity[k] + np.abs(size)
    length = max(int(np.size(v)) for v in inputs.values())
    for name, value in inputs.items():
        if name in exact:
            continue
        arr = np.asarray(value, dtype=np.float64)
        for index in np.ndindex(arr.shape):
            h = STEP * abs(float(arr[index]))
            if h == 0.0:  # a zero input is stored exactly
                continue
            nudged = arr.copy()  # entry ``index`` of ``name`` moved by h
            nudged[index] += h
            moved = solve({**inputs, name: nudged})
            for k in sensitivity:
                sensitivity[k] += np.abs(moved[k] - base[k]) / STEP  # |d out/d in| * |in|, to a digit or so
    # L = the longest sum; the package's rounding bound gives each of its roundings 4 EPS64 = 8 u (different
    # sound orders of operations round differently: room for that)
    return {k: cancellation_atol(s, length) for k, s in sensitivity.items()}


def within(got: np.ndarray, expected: np.ndarray, allowed: np.ndarray) -> bool:
    """Every entry of ``got`` within ``allowed`` of ``expected`` (same shape; NaN never is)."""
    if got.shape != expected.shape:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(got - expected) <= allowed))


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """max|got - expected| / max|expected| (:func:`.tolerances.normwise_error`; inf when expected is all zero
    and got is not, or when got has a NaN)."""
    rel = normwise_error(got, expected)[1]
    return float("inf") if np.isnan(rel) else rel


def allowed_relative(expected: np.ndarray, allowed: np.ndarray) -> float:
    """The bound as one relative number, for the table: max allowed / max|expected|."""
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    return float(np.max(allowed)) / scale if scale > 0 and allowed.size else 0.0
