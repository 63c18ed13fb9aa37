"""Lesson 12 (numerical traps): the eps option, the prediction, N against N − 1, and the checked claims.

Oracles: exact rational arithmetic for the variance of [4, 7, 13, 16]; PyTorch
autograd for eps outside the square root and PyTorch's BatchNorm1d for the
running variance (both skipped when PyTorch is absent); NumPy written out here.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.lessons import demos_traps as T
from microgradnorm.lessons.demo_tools import random_dy, random_vector
from microgradnorm.lessons.demos import LessonParams, run_demo
from microgradnorm.present import fmt
from tests.helpers import flat as render
from tests.helpers import numeric_grad, standardize


def test_the_true_variance_the_demo_checks_against_is_exact():
    xs = [Fraction(v) for v in T.CANCELLATION_X]
    mean = sum(xs) / len(xs)
    assert sum((v - mean) ** 2 for v in xs) / len(xs) == Fraction(T.TRUE_VARIANCE)
    text = render(run_demo("variance_cancellation", LessonParams()).renderable)
    assert text.count("✓") == 2 and "✗" not in text


@pytest.mark.parametrize("eps", [1e-5, 0.1, 1000.0])
def test_the_engine_refuses_the_cancelled_variance_unless_eps_hides_it(eps):
    """E[x²] − E[x]² of [4, 7, 13, 16] + 1e9 in float64 is −128 (one unit in the last place of 1e18)."""
    x = np.array(T.CANCELLATION_X) + 1e9
    naive = float(np.mean(x * x) - np.mean(x) ** 2)
    assert naive == -np.spacing(1e18) == -128.0
    text = render(run_demo("variance_cancellation", LessonParams(eps=eps)).renderable)
    if naive + eps < 0:
        assert "DomainError" in text and "no complaint" not in text
    else:  # the engine cannot tell: a positive variance, 150.5 too small
        assert "DomainError" not in text
        assert f"{naive + eps:g}" in text and f"{T.TRUE_VARIANCE + eps:g}" in text  # the naive and the true var + eps


@pytest.mark.parametrize("seed", [0, 1, 3])
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_eps_outside_gives_nan_as_torch_does_and_the_prediction_says_so(seed, eps):
    torch = pytest.importorskip("torch")
    d = 4
    x = torch.full((d,), 3.0, dtype=torch.float64, requires_grad=True)
    xs = x - x.mean()
    y = xs / (torch.sqrt((xs * xs).mean()) + eps)
    (y * torch.tensor(random_dy(seed, d))).sum().backward()
    expected = 1 if torch.isnan(x.grad).any() else 0
    assert torch.isnan(x.grad).all()  # 0/0 in every entry
    out = run_demo("eps_placement", LessonParams(dim=d, seed=seed, eps=eps))
    assert out.prediction.answer == expected == 1
    assert f"eps = {eps:g}" in render(out.renderable)


@pytest.mark.parametrize(("seed", "eps"), [(0, 1e-5), (2, 1e-2), (5, 0.1)])
def test_eps_inside_gives_a_constant_input_the_gradient_the_prose_states(seed, eps):
    """The lesson says: with xhat = 0 and gamma = 1, dx = (dy − mean(dy)) / sqrt(eps). PyTorch agrees."""
    torch = pytest.importorskip("torch")
    d = 4
    dy = random_dy(seed, d)
    x = torch.full((d,), 3.0, dtype=torch.float64, requires_grad=True)
    (torch.nn.functional.layer_norm(x, (d,), eps=eps) * torch.tensor(dy)).sum().backward()
    stated = (dy - dy.mean()) / np.sqrt(eps)
    assert np.allclose(x.grad.numpy(), stated, rtol=1e-9, atol=0.0)
    text = render(run_demo("eps_placement", LessonParams(dim=d, seed=seed, eps=eps)).renderable)
    assert f"constant inside 0 {np.max(np.abs(stated)):.4g}" in text


def test_at_eps_0_the_step_follows_the_option():
    with np.errstate(divide="ignore", invalid="ignore"):  # the oracle: 0 / 0 in plain NumPy
        xs = np.full(4, 3.0) - 3.0
        assert np.isnan(xs / np.sqrt(np.mean(xs * xs))).all()
    out = run_demo("eps_placement", LessonParams(eps=0.0))
    text = render(out.renderable)
    assert "eps = 0" in text and "eps = 1e-05" not in text
    assert text.count("forward divides by 0") == 2 and "the same formula" in text
    assert out.prediction.answer == 2 and out.graph is None


@pytest.mark.parametrize("p", [LessonParams(), LessonParams(dim=6, seed=2, eps=0.0), LessonParams(dim=3, seed=5)])
def test_every_claim_of_lesson_12_holds(p):
    for name in ("variance_cancellation", "float32_offset", "float_precision", "n_or_n_minus_1"):
        out = run_demo(name, p)
        text = render(out.renderable)
        assert "✓" in text and "✗" not in text, name


def test_batchnorm_running_variance_is_unbiased_like_torch():
    x, y, running = T.batchnorm_both_ways(3, 5, 4, 1e-5)
    assert np.allclose(running, x.var(axis=0, ddof=1), rtol=1e-12)
    assert np.allclose(y, (x - x.mean(axis=0)) / np.sqrt(x.var(axis=0) + 1e-5), rtol=1e-12, atol=1e-12)
    torch = pytest.importorskip("torch")
    bn = torch.nn.BatchNorm1d(5, eps=1e-5, momentum=1.0, dtype=torch.float64)
    y_t = bn(torch.from_numpy(x))
    assert np.allclose(bn.running_var.numpy(), running, rtol=1e-12)
    assert np.allclose(y_t.detach().numpy(), y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("p", [LessonParams(), LessonParams(dim=6, seed=2, eps=0.0), LessonParams(dim=3, seed=5)])
def test_sum_y_misses_the_missing_variance_path_and_catches_the_missing_mean_path(p):
    """Oracle: with gamma = 1 and dy = 1 the right dx is 0 (finite differences of a constant loss), the
    variance path's share is 0 (mean(xhat) = 0) and the mean path's is -rstd, so a backward without the
    mean path returns rstd in every entry."""
    x = random_vector(p.seed, p.dim)
    rstd = 1.0 / np.sqrt(np.var(x) + p.eps)
    out = run_demo("sum_loss_hides_bugs", p)
    q = out.prediction
    assert q.answer == 1  # only the one without the mean path
    row = render(out.renderable).split("sum(y) ")[1]  # the first row: gamma 1, sum(y)
    assert row.split()[1] == "missed" and row.split()[3] == "caught"
    shown_error = float(row.split()[4])  # the missing mean path's largest difference, one significant digit
    assert shown_error == pytest.approx(rstd, rel=0.5)


def _textbook_float32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A textbook LayerNorm of each row of the float32 ``x`` in float32 (mean, x - mean, centred variance), and
    the same rows standardized in float64: (float32 result, float64 result)."""
    x64 = x.astype(np.float64)
    y64 = standardize(x64, 1, 1e-5)
    xshift = x - x.mean(1, keepdims=True, dtype=np.float32)
    return xshift / np.sqrt((xshift * xshift).mean(1, keepdims=True, dtype=np.float32) + np.float32(1e-5)), y64


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_textbook_float32_layernorm_loses_the_mean_s_rounding_and_the_package_s_does_not(seed):
    """Oracle: a float32 LayerNorm written here (mean, x - mean, centred variance, all float32) against
    float64 on the same float32 input: at mean/spread 1e6 its error is of the order of the mean's rounding."""
    x = (np.random.default_rng(seed).normal(0.0, 1.0, size=(64, 8)) + 1e6).astype(np.float32)
    y32, y64 = _textbook_float32(x)
    unit = np.finfo(np.float32).eps / 2
    assert tol.normwise_error(y32, y64)[1] > 1e-3  # about 1e6 * unit = 0.06 of a spread
    ours = V.layer_norm_forward(x, None, None, 1e-5, backend="numpy")[0]
    assert tol.normwise_error(ours, y64)[1] <= 16 * unit
    out = run_demo("float32_offset", LessonParams(seed=seed))
    assert "✓" in render(out.renderable)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 64),
    offset=st.floats(1.0, 1e7),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_float32_mean_of_one_sign_is_within_the_stated_bound(n, offset, seed):
    """Oracle: the exact mean of the float32 values (Fraction arithmetic) against NumPy's float32 mean;
    the lesson's bound gamma_n must hold for any values of one sign, in any summation order."""
    x = (np.random.default_rng(seed).normal(0.0, 1.0, size=n) * offset / 10 + offset).astype(np.float32)
    x = np.abs(x)  # one sign: the bound is relative to the mean only then
    exact = sum(Fraction(float(v)) for v in x) / n
    got = Fraction(float(x.mean(dtype=np.float32)))
    if exact != 0:
        assert abs(got - exact) / exact <= T.mean_rounding_bound(n)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("d", [4, 7, 16])
def test_the_textbook_float32_error_stays_under_the_bound_the_lesson_prints(seed, d):
    """Oracle: a float32 LayerNorm written here (NumPy float32 mean, x - mean, centred variance) on rows
    whose mean is 1e4 times their spread, against float64 on the same float32 input: its relative error
    is within y_error_bound, the bound step 4's answer prints."""
    x = (np.random.default_rng(seed).normal(0.0, 1.0, size=(64, d)) + 1e4).astype(np.float32)
    y32, y64 = _textbook_float32(x)
    _spreads, bound = T.y_error_bound(x)
    assert tol.normwise_error(y32, y64)[1] <= bound


# The question's bands: each edge at least this factor away from every error the lesson can show
BAND_MARGIN = 2.0


def test_the_float32_question_s_answer_does_not_sit_on_a_band_edge():
    """Every seed 0-5, every d the lesson allows (2 to 16) and eps at 0, its default and 100: the textbook
    error at mean/spread = 1e4 is more than BAND_MARGIN from the bands (1e-5, 1e-2), so the answer is the
    same at every option, and it is the middle band."""
    worst = []
    for eps in (0.0, 1e-5, 100.0):
        for d in range(2, 17):
            for seed in range(6):
                errors, _bounds = T.float32_offset_errors(seed, d, eps, (1e4,))
                worst.append(errors["textbook"][0])
    assert 1e-5 * BAND_MARGIN < min(worst) and max(worst) * BAND_MARGIN < 1e-2
    q = run_demo("float32_offset", LessonParams(seed=4, dim=9)).prediction
    assert q.choices[q.answer] == "between 1e-5 and 1e-2"


def test_at_two_features_the_float32_step_says_why_it_runs_at_three():
    """At d = 2 and eps = 0, dx is zero (finite differences of two numbers normalized to ±1 show it here),
    so the step measures at d = 3 and says so; with d >= 3 there is no note."""
    x = np.array([0.3, -1.7])
    h = 1e-6
    y = lambda v: (v - v.mean()) / v.std()  # noqa: E731
    step = np.array([h, 0.0])
    fd = (y(x + step) - y(x - step)) / (2 * h)
    assert np.max(np.abs(fd)) < 1e-8
    shown = render(run_demo("float_precision", LessonParams(dim=2, eps=0.0)).renderable)
    assert "this step uses d = 3" in shown and "x [64, 3]" in shown and "✗" not in shown
    assert "this step uses" not in render(run_demo("float_precision", LessonParams(dim=3)).renderable)


@pytest.mark.parametrize(
    "p",
    [
        LessonParams(),
        LessonParams(dim=2, seed=1, eps=0.0),
        LessonParams(dim=9, eps=1.0),
        LessonParams(dim=2, eps=100.0),
    ],
)
def test_the_mean_square_of_a_normalized_row_is_one_with_n_and_n_minus_1_over_n_without(p):
    """Lesson 12 step 6's prose claim, live: the demo's ✓ line shows the mean squares NumPy computes here."""
    x = random_vector(p.seed, p.dim)
    by_n = (x - x.mean()) / np.sqrt(x.var() + p.eps)
    by_n1 = (x - x.mean()) / np.sqrt(x.var(ddof=1) + p.eps)
    shown = render(run_demo("n_or_n_minus_1", p).renderable)
    if np.mean(by_n**2) >= 0.99:  # "1 up to eps" is said only when it is near 1
        line = f"✓ a row of d = {p.dim}: mean(xhat²) is {fmt(np.mean(by_n**2), 4)} with ÷n (up to eps)"
    else:
        line = f"(var + eps) is {fmt(np.mean(by_n**2), 4)} with ÷n"
        assert f"({fmt(x.var(), 3)})" in shown and "(up to eps)" not in shown  # eps set beside the row's variance
    assert line in shown and f"{fmt(np.mean(by_n1**2), 4)} with ÷(n−1)" in shown
    if p.eps == 0:
        assert np.mean(by_n**2) == pytest.approx(1, rel=1e-12)
        assert np.mean(by_n1**2) == pytest.approx((p.dim - 1) / p.dim, rel=1e-12)


def _unbiased_ln(v: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm with the variance divided by n - 1, in plain NumPy (the oracle's forward)."""
    return (v - v.mean()) / np.sqrt(v.var(ddof=1) + eps)


@pytest.mark.parametrize("p", [LessonParams(dim=2, seed=4, eps=0.0), LessonParams(dim=2), LessonParams(dim=5, seed=3)])
def test_the_mixed_n_dx_error_is_measured_where_the_true_dx_is_not_zero(p):
    """Lesson 12 step 6's last line: the ÷n formula's dx against the ÷(n−1) forward's true dx, by central
    finite differences here. At d = 2 that true dx is zero at eps = 0 (a relative error against it is
    inf), so the step measures a row of d = 3 and says so."""
    d = max(p.dim, 3)
    x, dy = random_vector(p.seed, d), random_dy(p.seed, d)
    true_dx = numeric_grad(lambda v: dy @ _unbiased_ln(v, p.eps), x)
    xhat = _unbiased_ln(x, p.eps)
    rstd = (x.var(ddof=1) + p.eps) ** -0.5
    by_n = rstd * (dy - dy.mean() - xhat * np.mean(dy * xhat))  # the ÷n closed form, gamma = 1
    err = np.max(np.abs(by_n - true_dx)) / np.max(np.abs(true_dx))  # normwise, in the max norm
    shown = render(run_demo("n_or_n_minus_1", p).renderable)
    assert f"dx off by {T.sci(err, 1)} (relative)" in shown and "inf" not in shown
    assert ("on a row of d = 3" in shown) == (p.dim == 2)
    if p.dim == 2 and p.eps == 0:  # why: the two-number ÷(n−1) LayerNorm is constant, its dx vanishes
        x2 = random_vector(p.seed, 2)
        e0 = np.array([tol.FD_STEP, 0.0])
        assert np.max(np.abs(_unbiased_ln(x2 + e0, 0.0) - _unbiased_ln(x2 - e0, 0.0))) < 1e-9
