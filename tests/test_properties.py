"""The invariants of LayerNorm, checked on the scalar graph itself (Hypothesis, float64)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import batch_norm, layer_norm, rms_norm
from tests.strategies import eps_values, matrices, positive_scales, shifts, upstream, vectors


def forward(y) -> np.ndarray:
    return np.array([v.data for v in y.graph["y"]])


def input_grad(y, dy) -> np.ndarray:
    y.graph.loss(dy.tolist()).backward()
    return np.array([v.grad for v in y.graph["x"]])


@given(vectors(), shifts, eps_values)
def test_layer_norm_ignores_a_constant_shift(x, c, eps):
    assert np.allclose(
        forward(layer_norm(x.tolist(), eps=eps)), forward(layer_norm((x + c).tolist(), eps=eps)), atol=1e-9
    )


@pytest.mark.parametrize("norm", [layer_norm, rms_norm], ids=["layer_norm", "rms_norm"])
@given(vectors(), positive_scales)
def test_a_norm_ignores_a_positive_scale_at_eps_zero(norm, x, c):
    assert np.allclose(forward(norm(x.tolist(), eps=0.0)), forward(norm((c * x).tolist(), eps=0.0)), atol=1e-9)


@given(vectors(), eps_values, st.data())
def test_the_input_gradient_sums_to_zero(x, eps, data):
    dy = data.draw(upstream(x.shape))
    gamma = np.linspace(0.5, 1.5, x.shape[0])
    dx = input_grad(layer_norm(x.tolist(), gamma.tolist(), eps=eps), dy)
    assert abs(dx.sum()) <= 1e-9 * (1 + np.abs(dx).sum())


@given(vectors(), st.data())
def test_the_input_gradient_is_orthogonal_to_xhat_at_eps_zero(x, data):
    dy = data.draw(upstream(x.shape))
    y = layer_norm(x.tolist(), eps=0.0)
    xhat = np.array([v.data for v in y.graph["xhat"]])
    dx = input_grad(y, dy)
    assert abs(dx @ xhat) <= 1e-9 * (1 + np.linalg.norm(dx) * np.linalg.norm(xhat))


@given(vectors())
def test_loss_sum_y_gives_a_zero_input_gradient_when_gamma_is_one(x):
    y = layer_norm(x.tolist(), eps=1e-5)
    dx = input_grad(y, np.ones(x.shape))
    assert np.allclose(dx, 0.0, atol=1e-9)


@given(matrices(min_rows=2, axis=0), st.data())
def test_batch_norm_of_x_is_layer_norm_of_x_transposed(x, data):
    dy = data.draw(upstream(x.shape))
    bn = batch_norm(x.tolist(), eps=1e-4)
    ln = layer_norm(x.T.tolist(), eps=1e-4)
    assert np.allclose(forward(bn).reshape(x.shape), forward(ln).reshape(x.T.shape).T, atol=1e-12)
    assert np.allclose(input_grad(bn, dy).reshape(x.shape), input_grad(ln, dy.T).reshape(x.T.shape).T, atol=1e-10)
