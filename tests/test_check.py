"""The three-way check: it passes on correct code, and it fails when any one of the three is wrong."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microgradnorm import check, engine, formulas
from microgradnorm import tolerances as tol
from microgradnorm.check import check_norm, random_problem
from microgradnorm.present import check_table
from microgradnorm.registry import NORMS, NormSpec, get_norm
from tests.helpers import rendered, run_cli

CASES = [  # (norm, GroupNorm's num_groups, shape)
    ("layernorm", None, (5,)),
    ("layernorm", None, (3, 4)),
    ("batchnorm", None, (4, 3)),
    ("batchnorm", None, (2, 3, 2, 2)),
    ("rmsnorm", None, (3, 5)),
    ("groupnorm", 2, (2, 4)),  # GroupNorm: the shapes and groupings of tests/test_norms.py's TORCH_CASES
    ("groupnorm", 3, (2, 6, 3)),
    ("groupnorm", 2, (1, 4, 2, 2)),
    ("groupnorm", 1, (3, 4, 2)),
    ("groupnorm", 4, (2, 4, 3)),
]


@pytest.mark.parametrize(("norm", "groups", "shape"), CASES)
@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.5])
def test_every_node_agrees_three_ways(norm, groups, shape, eps):
    """At every entry: finite differences over all of them (fd_max_entries=None)."""
    spec = get_norm(norm, groups)
    x, gamma, beta, dy = random_problem(spec, shape, seed=3)
    report = check_norm(spec, x, gamma, beta, eps, dy, fd_max_entries=None)
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
    monkeypatch.setattr(engine.Sqrt, "derivatives", lambda self, out, a: (1.0 / out,))
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
    with pytest.raises(ValueError, match=", ".join(NORMS)):
        check_norm("instancenorm", [1.0, 2.0])


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


# ---- the library's defaults: tolerances that scale with the problem, a cap, a size limit ----------------


def test_a_thousand_entries_far_from_zero_pass_with_the_default_cap():
    # x = 0, 1, ..., 999: the loss's rounding (about 1e-16 of the centered terms) over a step of 1e-6
    # is far above a fixed 1e-8, although autograd and the closed form agree to 1e-16
    report = check_norm("layernorm", [float(i) for i in range(1000)], seed=0)
    assert report.passed, [(n.name, n.fd_abs, n.fd_atol) for n in report.failures]
    assert report.node("x").fd_count == tol.FD_MAX_ENTRIES == check.FD_MAX_ENTRIES


def test_the_scaled_tolerance_still_catches_a_wrong_derivative_on_a_thousand_entries(monkeypatch):
    monkeypatch.setattr(engine.Sqrt, "derivatives", lambda self, out, a: (1.0 / out,))  # drop the 0.5
    report = check_norm("layernorm", [float(i) for i in range(1000)], seed=0, fd_max_entries=4)
    assert not report.node("var").fd_ok and not report.node("x").fd_ok


@pytest.mark.parametrize(
    ("cap", "count"),
    [({}, tol.FD_MAX_ENTRIES), ({"fd_max_entries": 3}, 3), ({"fd_max_entries": None}, 40)],
    ids=["default", "set-3", "lifted"],
)
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_finite_differences_default_to_a_cap_that_can_be_set_or_lifted(norm, cap, count):
    """An entry the cap leaves out has no finite difference (NaN)."""
    x = np.linspace(-1.0, 2.0, 40) ** 2
    report = check_norm(norm, x, seed=1, **cap)
    assert report.passed and report.node("x").fd_count == count
    assert np.isnan(report.node("x").finite_diff).sum() == 40 - count


@pytest.mark.parametrize("bad", [0, -3, True])
def test_a_cap_below_one_is_refused(bad):
    with pytest.raises(ValueError, match=rf"fd_max_entries: expected a whole number >= 1 .*got {bad!r}"):
        check_norm("layernorm", [1.0, 2.0, 4.0], fd_max_entries=bad)


def test_an_input_too_large_to_check_is_refused_before_anything_is_built(monkeypatch):
    def no_building(*args, **kwargs):
        raise AssertionError("the graph was built")

    monkeypatch.setattr(NormSpec, "build_graph", no_building)
    rows = check.MAX_ENTRIES // 4 + 1
    with pytest.raises(
        ValueError, match=rf"x: .* at most {check.MAX_ENTRIES} entries, got {rows * 4} \(shape \[{rows}, 4\]"
    ):
        check_norm("layernorm", np.zeros((rows, 4)))


def test_checking_every_entry_warns_when_it_will_be_slow(monkeypatch):
    monkeypatch.setattr(check, "SLOW_FD_WORK", 100)
    x = np.arange(12.0)
    with pytest.warns(check.SlowCheckWarning, match="fd_max_entries=32"):
        check_norm("layernorm", x, seed=0, fd_max_entries=None)
    monkeypatch.setattr(check, "SLOW_FD_WORK", 10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_norm("layernorm", x, seed=0, fd_max_entries=None)


def test_a_spread_below_the_step_is_nudged_by_a_fraction_of_itself():
    # column 0 has a variance of 2.25e-8: a step of 1e-6 would push var + eps below zero; and with
    # a batch of two and eps = 0, xhat is +-1 whatever x is, so dL/dx is rounding left over from
    # terms of size |dxhat| * rstd (about 7e3), not 0 to 1e-12
    x = [[0.0, 1.0], [3e-4, -1.0]]
    report = check_norm("batchnorm", x, [1.5, -0.5], [0.1, 0.2], 0.0, [[0.3, -1.2], [0.7, 0.4]])
    assert report.passed, [(n.name, n.closed_form_abs, n.closed_form_atol, n.fd_abs) for n in report.failures]


def test_the_loss_rounding_estimate_adds_each_op_s_rounding_times_its_gradient():
    a, b = engine.Value(3.0), engine.Value(-1.0)
    loss = (a + b) * 4.0  # the sum rounds by at most eps * (3 + 1) and reaches the loss times 4
    loss.backward()
    assert check.loss_rounding(loss) == tol.EPS64 * (1.0 * 8.0 + 4.0 * (3.0 + 1.0))


def test_absolute_gradients_add_the_magnitudes_of_terms_that_cancel():
    a, b = engine.Value(2.0), engine.Value(3.0)
    loss = a * b - b * a  # dL/da = b - b = 0, made of two terms of size |b|
    loss.backward()
    size = check.absolute_gradients(loss)
    assert a.grad == 0.0 and size[a] == 6.0 and size[b] == 4.0


# ---- the report as a table ---------------------------------------------------------------------------


def _render(report, width: int, full: bool = False) -> str:
    return rendered(check_table(report, full=full), width)


def test_the_title_names_a_variance_only_for_a_norm_that_has_one():
    rms = check_norm("rmsnorm", [1.0, -2.0, 0.5, 3.0], seed=1)
    ln = check_norm("layernorm", [1.0, -2.0, 0.5, 3.0], seed=1)
    for width in (60, 120):
        assert "variance" not in _render(rms, width).splitlines()[0]
        assert "variance two-pass" in _render(ln, width).splitlines()[0]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_title_breaks_between_phrases_and_no_line_ends_in_spaces(width):
    report = check_norm("layernorm", [1.0, -2.0, 0.5, 3.0], seed=1)
    text = _render(report, width, full=True)
    assert f"loss = sum(y · dy) = {report.loss:.6g}" in text.splitlines()[0 if width == 120 else 1]
    assert [line for line in text.splitlines() if line != line.rstrip()] == []


@pytest.mark.parametrize("width", [80, 120])
def test_a_full_listing_marks_and_measures_every_entry(monkeypatch, width):
    real = formulas.dx_simplified
    monkeypatch.setattr(formulas, "dx_simplified", lambda *args: real(*args) + np.array([0.0, 0.5, 0.0]))
    report = check_norm("layernorm", [1.0, -2.0, 0.5], seed=2, fd_max_entries=2)
    rows = {line.split()[0]: line for line in _render(report, width, full=True).splitlines() if "[" in line}
    assert rows["x[1]"].endswith("✗") and rows["x[0]"].endswith("✓") and rows["x[2]"].endswith("✓")
    assert rows["xhat[1]"].endswith("✓")
    assert len(re.findall(r"\d\.\de[-+]\d\d", rows["x[2]"])) == 2  # both error columns, at every entry
    assert rows["xhat[1]"].count("—") == 2  # no finite difference there (the middle of three): fd and its error


# ---- a statistic over one value: refused by the command, not "checked" ---------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["layernorm", "--dim", "1"], "--dim"), (["batchnorm", "--batch", "1"], "--batch")],
)
def test_the_command_refuses_a_mean_over_a_single_value(capsys, argv, flag):
    code, out, err = run_cli(capsys, "check", *argv)
    assert code == 2 and "All agree" not in out
    assert f"argument {flag}:" in err and "single value" in err and len(err.strip().splitlines()) == 1


def test_the_report_says_how_many_values_each_mean_pools():
    # the library still checks the degenerate case; the report carries the fact the CLI refuses on
    report = check_norm("layernorm", [[1.0], [2.0]], seed=0)
    assert report.pooled == 1 and all(np.all(n.autograd == 0.0) for n in report.nodes if n.name == "x")
    assert check_norm("layernorm", [1.0, 2.0, 4.0], seed=0).pooled == 3
    assert check_norm("rmsnorm", [1.0, 2.0, 4.0], seed=0).pooled is None
