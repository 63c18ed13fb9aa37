"""The three-way check: it passes on correct code, and it fails when any one of the three is wrong."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microgradnorm import engine, formulas
from microgradnorm.check import check_norm, random_problem
from microgradnorm.registry import NORMS, get_norm

CASES = [
    ("layernorm", (5,)),
    ("layernorm", (3, 4)),
    ("batchnorm", (4, 3)),
    ("batchnorm", (2, 3, 2, 2)),
    ("rmsnorm", (3, 5)),
]


@pytest.mark.parametrize(("norm", "shape"), CASES)
@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.5])
def test_every_node_agrees_three_ways(norm, shape, eps):
    spec = get_norm(norm)
    x, gamma, beta, dy = random_problem(spec, shape, seed=3)
    report = check_norm(spec, x, gamma, beta, eps, dy)
    assert [n.name for n in report.nodes] == list(spec.node_names)
    assert report.passed, [(n.name, n.closed_form_rel, n.fd_rel) for n in report.failures]
    assert all(n.fd_count == len(n.autograd) for n in report.nodes)


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm"])
def test_the_naive_variance_graph_checks_too(norm):
    spec = get_norm(norm)
    x, gamma, beta, dy = random_problem(spec, spec.default_shape(4, 3), seed=4)
    report = check_norm(spec, x, gamma, beta, 1e-3, dy, variance="naive")
    assert report.passed


@settings(max_examples=15)
@given(
    st.sampled_from(sorted(NORMS)),
    st.integers(2, 5),
    st.integers(1, 3),
    st.sampled_from([0.0, 1e-4]),
    st.integers(0, 999),
)
def test_random_problems_pass(norm, dim, batch, eps, seed):
    spec = get_norm(norm)
    shape = spec.default_shape(dim, batch if norm != "batchnorm" else batch + 1)
    x, gamma, beta, dy = random_problem(spec, shape, seed)
    assert check_norm(spec, x, gamma, beta, eps, dy).passed


def test_without_gamma_and_beta_the_output_node_is_xhat():
    report = check_norm("layernorm", [1.0, -2.0, 0.5, 3.0], eps=0.0, seed=1)
    assert report.passed
    assert "gamma" not in [n.name for n in report.nodes]
    assert np.array_equal(report.node("y").autograd, report.node("xhat").autograd)


def test_finite_differences_can_be_limited_per_node():
    spec = get_norm("layernorm")
    x, gamma, beta, dy = random_problem(spec, (12,), seed=5)
    report = check_norm(spec, x, gamma, beta, 1e-5, dy, fd_max_entries=3)
    assert report.passed
    assert report.node("x").fd_count == 3
    assert np.isnan(report.node("x").finite_diff).sum() == 9


def test_a_wrong_closed_form_is_caught(monkeypatch):
    # forget the path through the mean: dx no longer sums to zero
    def no_mean_path(dxhat, xhat, rstd, axes):
        return rstd * (dxhat - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True))

    monkeypatch.setattr(formulas, "dx_simplified", no_mean_path)
    spec = get_norm("layernorm")
    report = check_norm(spec, *random_problem(spec, (5,), seed=6)[:3], 1e-5, random_problem(spec, (5,), 6)[3])
    assert not report.passed
    assert [n.name for n in report.failures] == ["x"]
    assert report.node("x").fd_ok and not report.node("x").closed_form_ok


def test_a_wrong_local_derivative_in_the_engine_is_caught(monkeypatch):
    # d sqrt(v)/dv = 0.5 / sqrt(v); drop the 0.5
    monkeypatch.setitem(engine._LOCAL_GRADS, "sqrt", lambda out: (1.0 / out.data,))
    spec = get_norm("layernorm")
    x, gamma, beta, dy = random_problem(spec, (5,), seed=7)
    report = check_norm(spec, x, gamma, beta, 1e-5, dy)
    failed = {n.name for n in report.failures}
    assert "var" in failed and "x" in failed and "std" not in failed
    assert not report.node("var").fd_ok and not report.node("var").closed_form_ok


def test_dy_of_the_wrong_shape_is_rejected():
    with pytest.raises(ValueError, match=r"dy: expected shape \[3\]"):
        check_norm("layernorm", [1.0, 2.0, 3.0], dy=[1.0, 2.0])


def test_an_unknown_norm_lists_the_choices():
    with pytest.raises(ValueError, match="layernorm, batchnorm, rmsnorm"):
        check_norm("groupnorm", [1.0, 2.0])


def test_the_error_shown_is_relative_unless_the_reference_is_about_zero():
    from microgradnorm.present import shown_error

    # rtol * scale >= atol: the relative tolerance decides, the relative error is shown
    assert shown_error(1e-13, 1e-13, 1.0, 1e-10, 1e-12) == (1e-13, False)
    # a reference of 0 (or rounding away from it): the absolute tolerance decides, and a relative
    # error (1.0 or inf) would contradict a passing verdict, so the absolute error is shown
    assert shown_error(1e-16, 1.0, 1e-16, 1e-10, 1e-12) == (1e-16, True)
    assert shown_error(5e-17, float("inf"), 0.0, 1e-10, 1e-12) == (5e-17, True)


def test_a_zero_gradient_is_reported_by_its_absolute_error():
    # d = 2 with eps = 0: y does not depend on x, so dL/dx is 0 up to rounding
    spec = get_norm("layernorm")
    x, gamma, beta, dy = random_problem(spec, (2,), seed=0)
    report = check_norm(spec, x, gamma, beta, 0.0, dy)
    node = report.node("x")
    assert report.passed and node.closed_form_scale < 1e-12
    assert node.closed_form_scale == float(np.max(np.abs(node.closed_form)))
    assert node.fd_scale == float(np.max(np.abs(node.finite_diff)))
