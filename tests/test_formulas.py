"""Closed forms against finite differences of a plain NumPy forward, and the forms against each other.

These tests never use the scalar engine: the closed forms are checked on their
own, so that the three-way check compares three independent things.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import formulas as f
from microgradnorm import tolerances as tol
from microgradnorm.jacobian import autograd_jacobian, projection_report
from tests import tolerances as test_tol
from tests.helpers import numeric_grad
from tests.strategies import eps_values, matrices, upstream, vectors
from tests.tolerances import xhat_atol


def assert_fd(got, want):
    assert tol.close(got, want, tol.FD_RTOL, tol.FD_ATOL), np.max(np.abs(got - want))


def assert_centered_grads_match_fd(x, gamma, beta, eps, dy, axes, param_axis):
    """dx, dgamma and dbeta of a centered norm (LayerNorm, BatchNorm) against finite differences of a plain
    NumPy forward loss = sum(y * dy)."""

    def loss(x, gamma, beta):
        m = f.moments(x, axes, eps)
        y = f.affine(m.xhat, f.param_view(gamma, x.ndim, param_axis), f.param_view(beta, x.ndim, param_axis))
        return float(np.sum(y * dy))

    grads = f.normalization_node_grads(x, gamma, beta, eps, dy, axes, param_axis)
    assert_fd(grads["x"], numeric_grad(lambda v: loss(v, gamma, beta), x))
    assert_fd(grads["gamma"], numeric_grad(lambda g: loss(x, g, beta), gamma))
    assert_fd(grads["beta"], numeric_grad(lambda b: loss(x, gamma, b), beta))


@given(matrices(), eps_values, st.data())
def test_layer_norm_dx_dgamma_dbeta_match_finite_differences(x, eps, data):
    dy = data.draw(upstream(x.shape))
    d = x.shape[1]
    gamma = np.linspace(0.5, 1.5, d) * np.where(np.arange(d) % 2, -1, 1)
    assert_centered_grads_match_fd(x, gamma, np.linspace(-1, 1, d), eps, dy, (1,), 1)


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 2, 2)])
@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_batch_norm_dx_dgamma_dbeta_match_finite_differences(shape, eps):
    rng = np.random.default_rng(7)
    x = rng.normal(1.0, 2.0, size=shape)
    dy = rng.normal(size=shape)
    axes, param_axis = ((0,), 1) if len(shape) == 2 else ((0, 2, 3), 1)
    c = shape[param_axis]
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.normal(size=c)
    assert_centered_grads_match_fd(x, gamma, beta, eps, dy, axes, param_axis)


@given(matrices(), eps_values, st.data())
def test_rms_norm_dx_and_dgamma_match_finite_differences(x, eps, data):
    dy = data.draw(upstream(x.shape))
    gamma = np.linspace(0.5, 1.5, x.shape[1])

    def loss(x_, g=gamma):
        return float(np.sum(g * f.rms_moments(x_, (1,), eps).xhat * dy))

    grads = f.rms_node_grads(x, gamma, eps, dy, (1,), 1)
    assert_fd(grads["x"], numeric_grad(loss, x))
    assert_fd(grads["gamma"], numeric_grad(lambda g: loss(x, g), gamma))


@given(matrices(), eps_values, st.data())
def test_three_path_simplified_and_projection_forms_agree(x, eps, data):
    dy = data.draw(upstream(x.shape))
    gamma = np.linspace(-1.5, 1.5, x.shape[1]) + 0.1
    m = f.moments(x, (1,), eps)
    g = f.dxhat(dy, gamma)
    three = f.dx_three_path(g, m.xshift, m.std, m.rstd, (1,))
    simple = f.dx_simplified(g, m.xhat, m.rstd, (1,))
    projected = np.stack([f.dx_projection(dy[r], gamma, m.xhat[r], m.rstd[r, 0]) for r in range(x.shape[0])])
    assert tol.close(three, simple, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert tol.close(projected, simple, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_the_three_paths_are_each_what_the_chain_rule_says():
    rng = np.random.default_rng(8)
    x, g = rng.normal(size=6), rng.normal(size=6)
    m = f.moments(x, (0,), 1e-3)
    direct, via_mean, via_var = f.dx_paths(g, m.xshift, m.std, m.rstd, (0,))
    assert tol.close(direct, g * m.rstd, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert np.ptp(via_mean) == 0.0  # the mean path is the same for every x_i
    assert tol.close(via_mean.sum(), f.dmean(g, m.rstd, (0,))[0], tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert tol.close(via_var / m.xshift, np.full(6, via_var[0] / m.xshift[0]), tol.CLOSED_FORM_RTOL, 0)


# ---- properties of LayerNorm (its shift and scale invariance, dx's sum and its orthogonality to xhat: checked on
# the closed forms and the scalar graph alike in tests/test_norms.py) ------------------------------------------


@given(vectors())
def test_p_is_a_symmetric_idempotent_projection_of_rank_two_at_eps_zero(x):
    xhat = f.moments(x, (0,), 0.0).xhat
    p = f.projection(xhat)
    size = np.abs(p).max()  # p @ p sums d products of two entries; p's own entries round once or twice
    assert np.allclose(p, p.T, rtol=0.0, atol=tol.cancellation_atol(size))
    # P @ P - P also holds (1·xhat) 1 xhatᵀ / d² twice: 1·xhat is 0 only up to the centering's rounding, which
    # grows with |x| * rstd (xhat_atol per entry, d entries)
    centering = 2 * xhat_atol(x, 0.0) * np.abs(xhat).max() / len(x)
    assert np.allclose(p @ p, p, rtol=0.0, atol=tol.cancellation_atol(size * size, len(x)) + centering)
    assert np.linalg.matrix_rank(p) == 2
    assert np.isclose(np.trace(p), 2.0)


# ---- the Jacobian ---------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.5])
def test_autograd_jacobian_is_sigma_inverse_diag_gamma_times_i_minus_p(eps):
    rng = np.random.default_rng(9)
    x, gamma = rng.normal(size=5), rng.uniform(0.5, 2, size=5)
    m = f.moments(x, (0,), eps)
    want = f.layer_norm_jacobian(m.xhat, m.rstd[0], gamma)
    got = autograd_jacobian("layernorm", x.tolist(), gamma.tolist(), None, eps)
    assert tol.close(got, want, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_rms_jacobian_matches_finite_differences():
    rng = np.random.default_rng(10)
    x, gamma = rng.normal(size=4), rng.uniform(0.5, 2, size=4)
    m = f.rms_moments(x, (0,), 1e-3)
    want = f.rms_jacobian(m.xhat, m.rrms[0], gamma)
    got = np.stack([numeric_grad(lambda v, i=i: (gamma * f.rms_moments(v, (0,), 1e-3).xhat)[i], x) for i in range(4)])
    assert tol.close(got, want, tol.FD_RTOL, tol.FD_ATOL)


REPORT_X = [1.0, 2.0, 4.0, -3.0, 0.5]
REPORT_DY = [0.3, -1.2, 0.8, 2.0, -0.5]


def _zero_bounds(gamma, eps) -> dict[str, float]:
    """For each result of the report that should be zero, the rounding left by the terms that cancel in it."""
    d = len(REPORT_X)
    m = f.moments(np.asarray(REPORT_X), (0,), eps)
    g = np.ones(d) if gamma is None else np.abs(np.asarray(gamma))
    xhat = float(np.max(np.abs(m.xhat)))
    row = float(m.rstd[0]) * float(np.max(g)) * (1 + xhat * xhat)  # an entry of J, or of dx per unit dy
    dx_term = row * float(np.max(np.abs(REPORT_DY)))
    return {
        "jacobian": tol.cancellation_atol(row, d),  # autograd adds d contributions into each entry
        "projection": tol.cancellation_atol(max(1.0, xhat * xhat), d),  # P's entries, summed d at a time in P @ P
        "sum_dx": tol.cancellation_atol(dx_term, 3 * d),  # three terms in each of d entries
        "xhat_dot_dx": tol.cancellation_atol(xhat * dx_term, 3 * d),
        "scale": tol.cancellation_atol(float(np.max(g)) * xhat, d),  # y rounds differently for c x
    }


def test_projection_report_at_eps_zero_finds_an_exact_projection():
    gamma = [1.0, 2.0, 0.5, 1.0, -1.0]
    r = projection_report(REPORT_X, gamma=gamma, eps=0.0, dy=REPORT_DY)
    zero = _zero_bounds(gamma, 0.0)
    assert r.rank == 2 and r.idempotent_error <= zero["projection"] and r.jacobian_error <= zero["jacobian"]
    assert np.isclose(r.xhat_norm_sq, r.d, rtol=tol.CLOSED_FORM_RTOL, atol=0)
    assert abs(r.sum_dx) <= zero["sum_dx"] and abs(r.xhat_dot_dx) <= zero["xhat_dot_dx"]
    assert r.scale_error <= zero["scale"]


@pytest.mark.parametrize("eps", [1e-3, 0.1, 10.0])
def test_projection_report_with_eps_measures_each_broken_property_as_predicted(eps):
    r = projection_report(REPORT_X, eps=eps, dy=REPORT_DY)
    assert r.idempotent_error > 0 and np.isclose(r.idempotent_error, r.idempotent_predicted, rtol=1e-9)
    assert r.xhat_dot_dx != 0 and np.isclose(r.xhat_dot_dx, r.xhat_dot_dx_predicted, rtol=1e-9)
    assert abs(r.sum_dx) <= _zero_bounds(None, eps)["sum_dx"]  # still exact
    assert r.xhat_norm_sq < r.d
    assert r.scale_error > 0


def test_the_dx_tolerance_for_a_zero_result_covers_its_rounding_but_not_a_missing_term():
    # a constant gamma * dy: the true dx is 0, and what comes out is rounding from terms of size
    # |gamma * dy| * rstd (a fixed 1e-13 was below it for rows as narrow as these)
    x = np.linspace(2.0, 4.0, 12).reshape(2, 2, 3)
    gamma, dy = np.full(3, -2.0), np.full(x.shape, 2.0)
    m = f.moments(x, (-1,), 0.0)
    g = f.dxhat(dy, gamma)
    dx = f.dx_simplified(g, m.xhat, m.rstd, (-1,))
    atol = tol.norm_dx_atol(x, gamma, dy, m.rstd)
    assert np.abs(dx).max() <= atol
    forgot_the_mean = m.rstd * (g - m.xhat * (g * m.xhat).mean(axis=-1, keepdims=True))
    assert np.abs(forgot_the_mean).max() > 1e6 * atol


def test_the_dgamma_tolerance_for_a_zero_result_covers_its_rounding_but_not_a_wrong_formula():
    # BatchNorm with a constant dy: xhat sums to zero over each column, so dgamma is 0, and what comes
    # out for values near 9.56 with a spread of 0.002 is rounding about 1e-11, far above a fixed 1e-13
    x = 9.56 + 0.0018 * np.random.default_rng(0).normal(size=(36, 2))
    dy = np.full(x.shape, 2.0)
    m = f.moments(x, (0,), 1e-5)
    dgamma = (dy * m.xhat).sum(axis=0)
    atol = test_tol.norm_dgamma_atol(x, dy, m.rstd, 2)
    assert tol.VECTORIZED_F64_ATOL < np.abs(dgamma).max() <= atol
    without_centering = (dy * x * m.rstd).sum(axis=0)  # xhat taken as x * rstd
    assert np.abs(without_centering).max() > 1e6 * atol
