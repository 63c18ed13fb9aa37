"""The finite differences everything measures with: exact on polynomials they should be exact on,
and of the order of accuracy their docstrings claim."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm.finite_diff import central_difference, numerical_gradient, richardson_difference, step_for

# The rounding of one difference quotient: a few float64 units of the values subtracted, over 2h.
ROUNDING_UNITS = 8


def _rounding(size: float, h: float) -> float:
    return ROUNDING_UNITS * np.finfo(np.float64).eps * size / (2.0 * h)


@given(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3))
def test_a_central_difference_is_exact_on_a_quadratic_up_to_rounding(a, b, v):
    f = lambda t: a * t * t + b * t  # noqa: E731
    h = step_for(v)
    got = central_difference(lambda delta: f(v + delta), h)
    size = abs(a) * (abs(v) + h) ** 2 + abs(b) * (abs(v) + h)
    assert abs(got - (2 * a * v + b)) <= _rounding(size, h) + 1e-300


def test_richardson_cancels_the_h_squared_error():
    # f = exp at 0: the central difference errs by h^2/6; the combined one by about h^4/120
    h = 1e-2
    plain = central_difference(math.exp, h) - 1.0
    combined = richardson_difference(math.exp, h) - 1.0
    assert plain == pytest.approx(h**2 / 6, rel=1e-3)
    assert abs(combined) < h**4 / 10


def test_numerical_gradient_matches_the_gradient_of_a_known_function_and_leaves_x_alone():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3))
    w = rng.normal(size=(2, 3))
    before = x.copy()
    grad = numerical_gradient(lambda v: float(np.sum(w * v**2)), x)
    np.testing.assert_allclose(grad, 2 * w * x, rtol=1e-7, atol=1e-8)
    assert np.array_equal(x, before)
