"""Lessons 1-9: every ✓ line, answer and title states what the run measured, under the options that used to
contradict it (issue 22, item 4). Each oracle is computed here in NumPy, independently of the demo."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import verdicts as V
from microgradnorm.lessons import demo_layernorm as ln
from microgradnorm.lessons import demos_backward as back
from microgradnorm.lessons import demos_batchnorm as bn
from microgradnorm.lessons import demos_rmsnorm as rms
from microgradnorm.lessons.demo_tools import random_dy, random_gamma, random_vector, rng_for
from microgradnorm.lessons.demos import LessonParams, run_demo
from microgradnorm.lessons.demos_jacobian import _problem
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from tests.helpers import asking_steps, flat, marked, rendered, standardize, torch_results


def _spread_claims(text: str) -> dict[str, tuple[float, float]]:
    """'each column: mean 0, spread 0.77 to 0.9' -> {'column': (0.77, 0.9)}, read off the ✓/✗ lines."""
    found = {}
    for which, low, high in re.findall(r"each (column|row): mean 0, spread ([0-9.]+)(?: to ([0-9.]+))?", text):
        found[which] = (float(low), float(high or low))
    return found


@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.1, 1.0])
@pytest.mark.parametrize(("seed", "dim", "batch"), [(0, 6, None), (4, 6, None), (1, 16, 16), (2, 2, 2)])
def test_lesson_2_states_the_spread_it_measured_at_every_eps(seed, dim, batch, eps):
    """At --eps 0.1 and 1 a column's spread is well below 1; the line says the measured numbers, not 'spread 1'.

    The batch is [--batch, --dim] (3 rows without --batch): the step follows the options it is run with.
    """
    p = LessonParams(dim=dim, seed=seed, eps=eps, batch=batch)
    text = rendered(run_demo("standardize_both_ways", p, {}).renderable, 200)
    x = np.round(rng_for(seed, 36).normal(5.0, 3.0, size=(batch or 3, dim)), 1)
    if np.ptp(x, axis=0).min() == 0 or np.ptp(x, axis=1).min() == 0:  # the demo's own fix for a constant line
        x += 0.1 * np.arange(x.size).reshape(x.shape) ** 2
    # a batch larger than the screen shows its corner and says what it leaves out
    assert (f"of {dim} columns shown" in " ".join(text.split())) == (dim > 6 or (batch or 3) > 6), text
    claims = _spread_claims(text)
    assert set(claims) == {"column", "row"}, text
    for which, axis in (("column", 0), ("row", 1)):
        var = np.var(x, axis=axis)
        spreads = np.sqrt(var / (var + eps))  # the oracle: the spread of (x − mean)/sqrt(var + eps)
        low, high = claims[which]
        assert low == pytest.approx(spreads.min(), rel=5e-3)
        assert high == pytest.approx(spreads.max(), rel=5e-3)
    assert "✗" not in text
    if eps >= 0.1:
        assert claims["column"][0] < 0.99  # the old line said "spread 1" here


@pytest.mark.parametrize("dim", [3, 6])
@pytest.mark.parametrize("seed", [0, 2])
def test_lesson_2_shows_layernorm_sends_many_rows_to_one_output(seed, dim):
    text = rendered(run_demo("identity_recovery", LessonParams(dim=dim, seed=seed), {}).renderable, 200)
    line = next(line for line in text.splitlines() if "3·(row 0) + 7" in line)
    assert line.startswith("✓")
    # the oracle: at eps = 0, LN(a·x + b) = LN(x) for a > 0
    x = rng_for(seed, 32).normal(3.0, 2.0, size=dim)
    moved = 3.0 * x + 7.0
    a, b = (x - x.mean()) / x.std(), (moved - moved.mean()) / moved.std()
    assert np.max(np.abs(a - b)) < 1e-12 * (1 + np.max(np.abs(moved)) / moved.std())


@pytest.mark.parametrize(("dim", "eps", "rank"), [(6, 0.0, 4), (6, 1e-5, 5), (6, 1.0, 5), (4, 0.0, 2), (2, 0.0, 0)])
def test_lesson_7_measures_the_rank_of_j_and_that_j_is_not_symmetric(dim, eps, rank):
    """Issue 22 item 7: J = (1/std) diag(gamma)(I − P) has rank d − 2 at eps = 0, d − 1 at eps > 0 (its xhat
    direction keeps a singular value of eps/(var + eps)), and is not symmetric when gamma varies. Oracle: torch."""
    torch = pytest.importorskip("torch")
    p = LessonParams(dim=dim, seed=0, eps=eps)
    x, gamma = _problem(p, "random")
    xt = torch.tensor(x, dtype=torch.float64)
    gt = torch.tensor(gamma, dtype=torch.float64)
    j = torch.autograd.functional.jacobian(lambda v: torch.nn.functional.layer_norm(v, (dim,), gt, None, eps), xt)
    s = torch.linalg.svdvals(j).numpy()
    assert int(np.sum(s > 1e-9 * max(s.max(), 1e-300))) == rank or dim == 2
    text = rendered(run_demo("jacobian_heatmap", p, {}).renderable, 200)
    assert f"rank of J: {rank} of {dim}" in text
    asym = float((j - j.T).abs().max())
    if dim > 2:
        assert asym > 1e-3 and "J ≠ Jᵀ" in text
    else:  # d = 2 at eps = 0: J is 0 up to rounding
        assert asym < 1e-12 and "J = Jᵀ here" in text
    assert "✗" not in text


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dim", [3, 6])
def test_lesson_4_the_sum_loss_hides_a_missing_variance_term_but_not_a_missing_mean_term(seed, dim):
    """Lesson 4 step 1: with gamma = 1 and L = Σ y (dy = 1), a backward without the variance term still gives the
    true dx = 0, and one without the mean term does not (issue 22: 'forgets a whole term' was too broad)."""
    x = rng_for(seed, 5).normal(0.5, 2.0, size=dim)
    rstd = 1.0 / np.sqrt(x.var() + 1e-5)
    xhat = (x - x.mean()) * rstd
    g = np.ones(dim)  # gamma · dy
    true = rstd * (g - g.mean() - xhat * np.mean(g * xhat))
    no_variance = rstd * (g - g.mean())
    no_mean = rstd * (g - xhat * np.mean(g * xhat))
    size = rstd * (1 + np.max(np.abs(xhat)))  # what cancels in each entry
    assert np.max(np.abs(true)) <= 16 * np.finfo(float).eps * size * dim
    assert np.max(np.abs(no_variance - true)) <= 16 * np.finfo(float).eps * size * dim
    assert np.max(np.abs(no_mean - true)) > 0.5 * rstd


@pytest.mark.parametrize("dim", [2, 4, 7])
@pytest.mark.parametrize("seed", [0, 5])
def test_lessons_4_and_5_ask_the_strong_questions_and_the_numbers_answer_them(seed, dim):
    """rstd collects one contribution per xhat_i; dL/dvar has the sign of −Σ dxhat·xshift; the variance adds
    nothing to dL/dmean. Oracles in NumPy from the lesson's own inputs."""
    p = LessonParams(dim=dim, seed=seed)
    x, gamma, _beta, dy = ln.ln_problem(p)
    count = run_demo("ln_backward_steps", p, {"stages": ("divide",), "ask": "rstd_count"}).prediction
    assert count.choices[count.answer].startswith(f"d = {dim}")
    xshift = x - x.mean()
    total = float(np.sum(gamma * dy * xshift))
    sign = run_demo("ln_backward_steps", p, {"stages": ("sqrt",), "ask": "dvar_sign"}).prediction
    assert sign.choices[sign.answer] == ("positive" if -total > 0 else "negative")
    mean = run_demo("ln_dvar_dmean", p, {}).prediction
    assert mean.choices[mean.answer] == "nothing: it is 0"
    with pytest.raises(ValueError, match="ask"):
        run_demo("ln_backward_steps", p, {"stages": ("sqrt",), "ask": "nonsense"})


@pytest.mark.parametrize(("dim", "eps"), [(4, 0.0), (4, 1e-5), (3, 1.0), (6, 1e-5)])
def test_lesson_3_asks_the_mean_square_of_xhat_and_what_x_minus_a_flat_mean_does(dim, eps):
    p = LessonParams(dim=dim, seed=0, eps=eps)
    x = ln.ln_problem(p)[0]
    ms = np.mean(((x - x.mean()) / np.sqrt(x.var() + eps)) ** 2)  # the oracle: var / (var + eps)
    q = run_demo("ln_forward_steps", p, {"stages": ("affine",), "ask": True}).prediction
    expected = "1, up to rounding" if eps == 0 else "below 1"
    assert q.choices[q.answer] == expected and (eps == 0) == (abs(ms - 1) < 1e-12)
    shapes = run_demo("ln_shapes", p, {}).prediction
    with pytest.raises(ValueError):  # the oracle: NumPy refuses [2, 3, d] − [2, 3] (3 against 2), whatever d is
        np.zeros((2, 3, dim)) - np.zeros((2, 3))
    assert shapes.choices[shapes.answer] == "NumPy raises an error"


@pytest.mark.parametrize(("dim", "eps"), [(4, 1e-5), (2, 0.0), (6, 1.0)])
def test_lessons_6_and_9_questions_are_answered_by_their_numbers(dim, eps):
    """Lesson 6: doubling dy doubles dx (the backward is linear in dy); lesson 9: a shift of every input moves
    RMSNorm's output (|J·1| > 0) though not LayerNorm's. Oracle: torch's autograd and Jacobians."""
    torch = pytest.importorskip("torch")
    p = LessonParams(dim=dim, seed=1, eps=eps)
    x, gamma, beta, dy = ln.ln_problem(p)
    dx, dx_doubled = (torch_results("layernorm", x, gamma, beta, upstream, eps)[1] for upstream in (dy, 2 * dy))
    assert np.allclose(dx_doubled, 2 * dx, rtol=1e-12, atol=0.0)
    forms = run_demo("forms_agree", p, {}).prediction
    assert forms.choices[forms.answer] == "every dx_i is multiplied by 2"
    x = torch.tensor(rms._vector(p), dtype=torch.float64)
    j_rms = torch.autograd.functional.jacobian(lambda v: v / torch.sqrt(torch.mean(v * v) + eps), x)
    moved = float(torch.linalg.norm(j_rms @ torch.ones(dim, dtype=torch.float64)))
    shift = run_demo("rms_jacobian_heatmap", p, {}).prediction
    assert moved > 1e-6
    assert shift.choices[shift.answer] == "yes, it moves"


@pytest.mark.parametrize(("dim", "eps"), [(4, 1e-5), (6, 0.0), (3, 1.0)])
def test_lessons_5_and_7_count_x0s_contributions_and_sum_js_rows(dim, eps):
    """x_0 gets 2 contributions (from xshift_0 and from the mean's sum) though 3 paths reach it; every row of
    LayerNorm's J sums to 0 (a shift of all inputs changes nothing). Oracle for J: torch."""
    torch = pytest.importorskip("torch")
    p = LessonParams(dim=dim, seed=2, eps=eps)
    count = run_demo("ln_backward_steps", p, {"stages": ("center", "mean"), "ask": "x_count"}).prediction
    assert count.choices[count.answer] == "2"
    x, gamma = _problem(p, "random")
    gt = torch.tensor(gamma, dtype=torch.float64)
    j = torch.autograd.functional.jacobian(
        lambda v: torch.nn.functional.layer_norm(v, (dim,), gt, None, eps), torch.tensor(x, dtype=torch.float64)
    )
    assert float(j.sum(dim=1).abs().max()) < 1e-12 * float(j.abs().sum())
    rows = run_demo("jacobian_rows", p, {}).prediction
    assert rows.choices[rows.answer] == "0"


@pytest.mark.parametrize(("batch", "eps"), [(4, 1e-5), (6, 1e-12), (3, 1.0)])
def test_lesson_8_asks_what_a_column_of_dx_adds_up_to(batch, eps):
    """BatchNorm's dX column sums are 0 (the column mean is removed). Oracle: torch's batch_norm backward
    (which refuses eps = 0 in training, hence 1e-12)."""
    torch = pytest.importorskip("torch")
    p = LessonParams(dim=3, seed=1, eps=eps, batch=batch)
    x, gamma, beta, dy = bn._batch(p)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.batch_norm(xt, None, None, torch.tensor(gamma), torch.tensor(beta), training=True, eps=eps)
    (y * torch.tensor(dy)).sum().backward()
    assert float(xt.grad.sum(dim=0).abs().max()) < 1e-10 * float(xt.grad.abs().sum())
    q = run_demo("bn_simplified", p, {}).prediction
    assert q.choices[q.answer] == "0"


@pytest.mark.parametrize("seed", [0, 3, 9])
def test_lesson_2_asks_whether_standardizing_columns_centers_the_rows(seed):
    p = LessonParams(dim=6, seed=seed)
    x = np.round(rng_for(seed, 36).normal(5.0, 3.0, size=(3, 4)), 1)
    cols = (x - x.mean(axis=0)) / np.sqrt(x.var(axis=0) + p.eps)  # the oracle
    q = run_demo("standardize_both_ways", p, {}).prediction
    expected = "yes, every row too" if np.abs(cols.mean(axis=1)).max() < 1e-12 else "no, not in general"
    assert q.choices[q.answer] == expected


@pytest.mark.parametrize("eps", [0.0, 1e-5])
@pytest.mark.parametrize("seed", [0, 7, 8])
def test_lesson_2_answers_the_general_question_even_when_two_rows_happen_to_be_centred(seed, eps):
    """With 2 rows each standardized column is ±1 (up to eps), so the rows can be centred by chance (review-a 2)."""
    p = LessonParams(dim=2, seed=seed, eps=eps, batch=2)
    x = np.round(rng_for(seed, 36).normal(5.0, 3.0, size=(3, 2)), 1)
    two, three = standardize(x[:2], 0, eps), standardize(x, 0, eps)  # the oracle
    assert np.abs(two.mean(axis=1)).max() < 1e-3  # these seeds are the chance case: rows look centred
    assert np.abs(three.mean(axis=1)).max() > 1e-2  # and a third row breaks it
    q = run_demo("standardize_both_ways", p, {}).prediction
    assert q.choices[q.answer] == "no, not in general"
    assert ("happens to be 0" if eps == 0 else "is tiny") in q.why


@pytest.mark.parametrize(("dim", "eps", "zero"), [(2, 0.0, True), (2, 1e-5, False), (4, 0.0, False)])
def test_lesson_6_says_when_doubling_dy_doubles_a_dx_that_is_0(dim, eps, zero):
    """At d = 2, eps = 0 the output is ±1 whatever x, so dx = (1/std)(I − P)g = 0: I − P has rank d − 2 = 0."""
    p = LessonParams(dim=dim, seed=1, eps=eps)
    q = run_demo("forms_agree", p, {}).prediction
    assert ("Here dx is 0 (d = 2, eps = 0" in q.why) == zero
    assert ("rerun with --dim 3" in q.why) == zero


@pytest.mark.parametrize(("dim", "eps", "seed"), [(2, 0.0, 5), (4, 1e-5, 0), (16, 100.0, 2)])
def test_lesson_5_calls_the_variance_share_of_dmean_exactly_0_only_when_it_is(dim, eps, seed):
    """dvar/dmean = −(2/n) Σ xshift is 0 in exact arithmetic; the engine's share is 0.0 or rounding (review-a 22)."""
    q = run_demo("ln_dvar_dmean", LessonParams(dim=dim, seed=seed, eps=eps), {}).prediction
    assert q.choices[q.answer] == "nothing: it is 0"
    share = float(re.search(r"via the variance is (\S+?)[,( ]", q.why).group(1)) if "exactly" not in q.why else 0.0
    assert ("exactly 0" in q.why) == (share == 0.0)
    assert ("rounding error" in q.why) == (share != 0.0)


@pytest.mark.parametrize("dim", [3, 6])
def test_lesson_7_asks_what_shrinking_x_does_to_shrink(dim):
    """shrink = eps/(var + eps) at eps = 1e-3 grows when x shrinks a hundredfold (var falls 1e4 times)."""
    p = LessonParams(dim=dim, seed=0)
    x, _gamma = _problem(p, "ones")
    var = float(np.var(x))
    before, after = 1e-3 / (var + 1e-3), 1e-3 / (var * 1e-4 + 1e-3)
    assert after > before
    q = run_demo("eps_effect", p, {"scale": 0.01, "caption": False, "ask": True}).prediction
    assert q.choices[q.answer] == "it grows"
    assert run_demo("eps_effect", p, {}).prediction is None


@pytest.mark.parametrize(("dim", "seed"), [(4, 0), (6, 7), (2, 3)])
def test_lesson_3_asks_what_xshift_adds_up_to(dim, seed):
    p = LessonParams(dim=dim, seed=seed)
    x = ln.ln_problem(p)[0]
    assert abs(np.sum(x - x.mean())) <= 8 * np.finfo(float).eps * np.sum(np.abs(x)) * dim  # the oracle
    q = run_demo("ln_stage_summary", p, {}).prediction
    assert q.choices[q.answer] == "0, up to rounding"


@pytest.mark.parametrize(("dim", "eps"), [(4, 1e-5), (6, 0.0), (2, 100.0)])
def test_lesson_5_asks_what_the_variance_path_sums_to(dim, eps):
    """dL/dvar · 2·xshift_i / n summed over i is 0 (the centered values sum to 0); the oracle computes the
    path from the inputs in NumPy, with the rounding bound of its terms."""
    p = LessonParams(dim=dim, seed=0, eps=eps)
    x, gamma, _beta, dy = ln.ln_problem(p)
    xshift = x - x.mean()
    dvar = -0.5 * (x.var() + eps) ** -1.5 * np.sum(gamma * dy * xshift)
    via_var = dvar * 2 * xshift / dim
    assert abs(np.sum(via_var)) <= 16 * dim * np.finfo(float).eps * np.sum(np.abs(via_var))
    out = run_demo("ln_paths_code", p, {})
    assert out.prediction.choices[out.prediction.answer] == "0, up to rounding"


def test_lesson_2_asks_how_steep_the_sigmoid_is_at_10():
    """sigmoid'(10) / sigmoid'(0) = 4·e^−10/(1 + e^−10)² ≈ 1.8e-4: less than a thousandth (closed form)."""
    ratio = 4 * math.exp(-10) / (1 + math.exp(-10)) ** 2
    assert 1e-4 < ratio < 1e-3
    q = run_demo("sigmoid_saturation", LessonParams(), {}).prediction
    assert q.answer == 2  # less than a thousandth as steep
    assert run_demo("sigmoid_saturation", LessonParams(), {"zs": (1.0, 2.0)}).prediction is None


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("number", range(1, 10))
def test_lessons_1_to_9_ask_at_least_one_prediction_per_three_steps(number):
    """Issue 22 item 3: every core lesson asks before it tells, at least once per three steps."""
    path = next(lessons_dir().glob(f"{number:02d}-*.md"))
    lesson = parse_lesson(path)
    asking = asking_steps(lesson)
    assert len(asking) >= math.ceil(len(lesson.steps) / 3), f"{path.name}: asks in steps {asking}"
    # and no three steps in a row go without a question
    silent = [b - a - 1 for a, b in zip([-1, *asking], [*asking, len(lesson.steps)])]
    assert max(silent) < 3, f"{path.name}: asks in steps {[i + 1 for i in asking]} of {len(lesson.steps)}"


@pytest.mark.parametrize("eps", [0.0, 1e-5, 1.0])
def test_lesson_4_a_drift_in_the_mean_below_leaves_dx_unchanged(eps):
    """Item 10: the stability argument, live. Oracle: torch's layer_norm gradient at x and at x + DRIFT."""
    pytest.importorskip("torch")
    p = LessonParams(eps=eps)
    _x, gamma, beta, dy = ln.ln_problem(p)
    w, u = back.previous_layer(p)
    grads = [torch_results("layernorm", w @ u + shift, gamma, beta, dy, eps)[1] for shift in (0.0, back.DRIFT)]
    assert np.max(np.abs(grads[1] - grads[0])) < 1e-12 * (1 + np.max(np.abs(grads[0])))
    assert marked(run_demo("ln_param_vs_input", p, {}), "max |dx after the drift − dx|")


@pytest.mark.parametrize("seed", [0, 4])
def test_lesson_2_measures_how_close_a_standardized_sigmoid_is_to_its_line(seed):
    """Item 10: standardized pre-activations sit where σ is nearly its tangent 1/2 + z/4; raw ones do not."""
    p = LessonParams(dim=6, seed=seed)
    z = rng_for(seed, 31).normal(12.0, 4.0, size=6)
    zn = (z - z.mean()) / np.sqrt(z.var() + p.eps)

    def gap(v):
        return np.max(np.abs(1 / (1 + np.exp(-v)) - (0.5 + v / 4)))

    assert gap(zn) < 0.25 < gap(z)
    text = flat(run_demo("saturation_before_after", p, {}).renderable, 200)
    assert f"1/2 + z/4: {float(gap(zn)):.2g} standardized" in text and "✗" not in text


@pytest.mark.parametrize(("dim", "eps", "seed"), [(2, 100.0, 1), (4, 1.0, 0), (6, 0.0, 0), (2, 0.0, 3)])
def test_lesson_6_calls_dx_zero_only_where_it_is(dim, eps, seed):
    """At d = 2, eps = 100 dx is about 7e-3: small, not 0 up to rounding (a reader found it called 0)."""
    p = LessonParams(dim=dim, eps=eps, seed=seed)
    x, gamma, _beta, dy = ln.ln_problem(p)
    xhat = (x - x.mean()) / np.sqrt(x.var() + eps)
    g = gamma * dy
    dx = (g - g.mean() - xhat * np.mean(g * xhat)) / np.sqrt(x.var() + eps)  # the oracle, in NumPy
    text = flat(run_demo("forms_agree", p).renderable, 200)
    assert ("is 0 up to rounding" in text) == (np.max(np.abs(dx)) <= 1e-12), text


@pytest.mark.parametrize(("eps", "seed"), [(100.0, 1), (1e-5, 0), (0.0, 2)])
def test_lesson_2_depth_answer_and_why_follow_the_measured_size(eps, seed):
    """|h| through 32 standardized layers of gain 2: kept near gain·√64 at a small eps, shrinking at eps = 100."""
    rng = rng_for(seed, 34)
    h = x = rng.normal(size=64)
    mats = [rng.normal(size=(64, 64)) / 8.0 for _k in range(32)]
    for w in mats:  # the oracle: standardize, then 2·W, in NumPy
        h = 2.0 * (w @ ((h - h.mean()) / np.sqrt(h.var() + eps)))
    factor = np.linalg.norm(h) / np.linalg.norm(x)
    q = run_demo("depth_norms", LessonParams(dim=6, eps=eps, seed=seed)).prediction
    expected = 0 if factor > 10 else (2 if factor < 0.1 else 1)
    assert q.answer == expected
    assert ("only the last gain shows" in q.why) == (expected == 1), q.why


@pytest.mark.parametrize(("dim", "eps", "seed"), [(6, 1e-5, 0), (2, 100.0, 1), (16, 0.0, 7)])
def test_lesson_7_shows_what_the_projection_costs_the_learning_signal(dim, eps, seed):
    """The size of γ·dy and of the part P removes from it, against NumPy: |P g| of |g| (issue 22 item 10)."""
    x, gamma, dy = random_vector(seed, dim), random_gamma(seed, dim), random_dy(seed, dim)
    xhat = (x - x.mean()) / np.sqrt(x.var() + eps)
    g = gamma * dy
    removed = (np.sum(g) + xhat * (xhat @ g)) / dim  # P g = (1/d)(1 1ᵀ + xhat xhatᵀ) g, without forming P
    text = rendered(run_demo("gradient_orthogonal", LessonParams(dim=dim, eps=eps, seed=seed)).renderable, 200)
    shown = {
        key: [float(v) for v in re.search(rf"{re.escape(label)}\s+(\S+)", text).group(1).split()]
        for key, label in (("signal", "|γ·dy|, the whole signal"), ("removed", "|P (γ·dy)|, the part removed"))
    }
    assert shown["signal"][0] == pytest.approx(np.linalg.norm(g), rel=1e-2)
    assert shown["removed"][0] == pytest.approx(np.linalg.norm(removed), rel=1e-2)


# ---- the verdict helpers the answers are read off ------------------------------------------------------------

_finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(_finite, st.lists(_finite, min_size=2, max_size=5))
def test_closest_holds_for_exactly_one_target_the_nearest(measured, targets):
    evidence = V.closest(measured, tuple(targets), "x")
    holding = [i for i, e in enumerate(evidence) if e]
    distances = [abs(measured - t) for t in targets]
    assert holding == [distances.index(min(distances))]  # the nearest, the first of equals
    assert V.first_holding(evidence) == holding[0]


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=2, max_size=5))
def test_largest_holds_for_exactly_one_entry_the_largest(sizes):
    evidence = V.largest(tuple(sizes), tuple(str(i) for i in range(len(sizes))), "size")
    assert [i for i, e in enumerate(evidence) if e] == [sizes.index(max(sizes))]


@given(_finite, _finite, st.sampled_from(["<", "<=", ">", ">="]))
def test_a_negated_check_holds_exactly_when_the_check_does_not(measured, bound, relation):
    check = V.Check("x", measured, relation, bound)
    assert bool(~check) is not bool(check)
    assert (~check).measured == measured and (~check).bound == bound


@given(st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), min_size=1, max_size=20))
def test_cancels_passes_a_sum_that_cancels_to_rounding_and_fails_one_that_does_not(values):
    terms = np.abs(values).sum()
    centered = np.array(values) - np.mean(values)
    assert V.cancels(centered.sum(), np.abs(centered).sum() + terms, "centered sum", count=len(values))
    if terms > 1e-290:  # above the floor of the smallest normal float, which always passes
        assert not V.cancels(terms, terms, "a sum of magnitudes", count=len(values))


def test_a_mark_is_recorded_with_the_check_it_was_decided_by():
    with V.recording() as marks:
        line = V.claim(V.at_most(2.0, 1.0, "two vs one"), "two is at most one")
    assert "✗" in line.plain and len(marks) == 1 and marks[0].ok is False and marks[0].check.measured == 2.0


@pytest.mark.parametrize(
    ("demo", "args"),
    [("standardize_both_ways", {}), ("bn_axes", {}), ("bn_param_grads", {}), ("projection_form", {"part": 1})],
)
@pytest.mark.parametrize(("dim", "batch"), [(16, 16), (2, 2), (3, 4)])
def test_batch_tables_fit_60_columns_at_every_size_the_lessons_take(demo, args, dim, batch):
    """At --dim 16 --batch 16 these tables had every cell cut to an ellipsis; they show a corner and say so."""
    text = rendered(run_demo(demo, LessonParams(dim=dim, batch=batch, seed=7), args).renderable, 60)
    assert "…" not in text, text
    corner = "columns shown" in " ".join(text.split())
    # the batch tables print at most 6 rows and 4 to 6 columns: only the 16 x 16 batch is cut (P is a heat map)
    assert corner == (demo != "projection_form" and (dim, batch) == (16, 16)), text
