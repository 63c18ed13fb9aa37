"""Lesson 11 (pre-LN vs post-LN): the LayerNorm bound, the unrolled product and the predictions, against oracles.

Oracles: the engine's autograd Jacobian of LayerNorm (for the vectorized one the
demo builds); explicit per-token Jacobian matrices of each pre-LN block built
here by central differences, multiplied out as (I + A)ᵀ products, for the
expansion into first-order and cross terms; PyTorch autograd for the stack's
gradients behind the predictions (skipped when PyTorch is absent).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from microgradnorm import tolerances as tol
from microgradnorm.jacobian import autograd_jacobian
from microgradnorm.lessons import demos_residual as R
from microgradnorm.lessons.demos import LessonParams, run_demo
from microgradnorm.present import fmt
from tests.helpers import flat as render
from tests.helpers import marked, run_cli, standardize, torch_stack_grads

# ---- one LayerNorm ------------------------------------------------------------------------------


@given(st.integers(3, 9), st.integers(0, 2**16))
def test_the_vectorized_jacobian_is_the_engines_and_obeys_the_tight_bound(d, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, rng.uniform(0.5, 3.0), size=d)
    gamma = rng.uniform(-2.0, 2.0, size=d)
    j = R.ln_jacobian(x, gamma, 1e-5)
    assert tol.close(j, autograd_jacobian("layernorm", x.tolist(), gamma.tolist(), None, 1e-5), 1e-9, 1e-12)
    sigma = math.sqrt(x.var() + 1e-5)
    norm = np.linalg.norm(j, 2)
    assert norm <= np.max(np.abs(gamma)) / sigma * (1 + 1e-9)
    assert np.max(np.abs(gamma)) <= np.linalg.norm(gamma)  # the tight bound is never above the loose one


@pytest.mark.parametrize(("dim", "seed"), [(32, 0), (3, 1), (8, 5), (16, 9)])
def test_the_stretch_prediction_is_one_over_sigma(dim, seed):
    out = run_demo("ln_stretch", LessonParams(dim=dim, seed=seed))
    x = R.rng_for(seed, 21).normal(0.5, 2.0, size=dim)
    j = np.array(autograd_jacobian("layernorm", x.tolist(), None, None, 1e-5))
    assert np.linalg.norm(j, 2) * math.sqrt(x.var() + 1e-5) == pytest.approx(1.0, rel=1e-9)
    assert out.prediction.answer == 0
    text = render(out.renderable)
    assert text.count("✓") == 3 and "✗" not in text


# ---- the unrolled pre-LN product ------------------------------------------------------------------


def _block_jacobians(weights: R.StackWeights) -> list[np.ndarray]:
    """A_k per token, [T, D, D], by central differences of x -> f_k(LN(x)) along the forward pass."""
    h, out = weights.x.copy(), []

    def block(k, v):
        return np.tanh(standardize(v, -1, 1e-5) @ weights.w1[k] + weights.b1[k]) @ weights.w2[k]

    step = 1e-6
    for k in range(len(weights.w1)):
        t, d = h.shape
        jac = np.zeros((t, d, d))
        for i in range(d):
            e = np.zeros(d)
            e[i] = step
            jac[:, :, i] = (block(k, h + e) - block(k, h - e)) / (2 * step)  # column i: d f / d x_i
        out.append(jac)
        h = h + block(k, h)
    return out


def test_the_expansion_matches_explicit_products_of_jacobians():
    weights = R.stack_weights(3, 5, width=4, tokens=2, gain=3.0, bias=0.0)
    a = _block_jacobians(weights)
    _, g_top = R.stack_forward(weights, "pre")
    exp = R.pre_ln_expansion(weights)
    eye = np.eye(4)
    for layer in range(5):
        full, first = [], []
        for t in range(2):
            prod = eye
            for k in range(layer, 5):
                prod = (eye + a[k][t]) @ prod  # d x_top / d x_l = (I + A_top) ... (I + A_l): g_l = prodᵀ g_top
            full.append(prod.T @ g_top[t])
            first.append((eye + sum(a[k][t] for k in range(layer, 5))).T @ g_top[t])
        top = np.linalg.norm(g_top)
        full, first = np.array(full), np.array(first)
        assert exp.full[layer] == pytest.approx(np.linalg.norm(full) / top, rel=tol.FD_RTOL * 10)
        assert exp.first[layer] == pytest.approx(np.linalg.norm(first) / top, rel=tol.FD_RTOL * 10)
        assert exp.cross[layer] == pytest.approx(np.linalg.norm(full - first) / top, rel=1e-4, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_cross_terms_prediction_follows_the_expansion(seed):
    p = LessonParams(dim=32, seed=seed)
    out = run_demo("pre_ln_cross_terms", p)
    exp = R.pre_ln_expansion(R.stack_weights(seed, 24, width=32, gain=4.0, bias=0.0))
    assert out.prediction.answer == (1 if exp.cross[0] > exp.first[0] else 0) == 1
    assert exp.cross[-1] == 0.0 and exp.first[-1] == pytest.approx(exp.full[-1])
    text = render(out.renderable)
    assert text.count("✓") == 2 and "✗" not in text


# ---- the predictions and readings of the stack ------------------------------------------------------


def _torch_bottom_ratio(weights: R.StackWeights, arrangement: str) -> float:
    pytest.importorskip("torch")
    norms, top = torch_stack_grads(weights, arrangement)
    return norms[0] / top


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_closer_prediction_agrees_with_torch(seed):
    weights = R.stack_weights(seed, 24, width=32)
    pre, post = _torch_bottom_ratio(weights, "pre"), _torch_bottom_ratio(weights, "post")
    out = run_demo("residual_gradients", LessonParams(dim=32, seed=seed))
    expected = 0 if abs(math.log(pre)) < abs(math.log(post)) else 1
    assert out.prediction.answer == expected == 0
    text = render(out.renderable)
    assert f"pre-LN: layer 0 gets {pre:.3g} ×" in text
    assert f"a factor {post ** (1 / 24):.3g} per layer" in text


def test_the_depth_reading_compares_logarithms():
    p = LessonParams(dim=16, seed=2)
    text = render(run_demo("residual_gradients", p, {"layers": 12, "versus": 6}).renderable)
    r = {n: R.bottom_ratio(R.stack_gradients(R.stack_weights(2, n, width=16), "post")) for n in (6, 12)}
    assert f"6 → 12 layers: post-LN's log(ratio) × {math.log(r[12]) / math.log(r[6]):.3g}" in text


def test_the_depth_table_computes_its_log_column():
    out = run_demo("residual_depth", LessonParams(dim=8, seed=1), {"depths": (4, 8), "blocks": ((2.0, 0.0),)})
    text = render(out.renderable)
    r = {
        n: R.bottom_ratio(R.stack_gradients(R.stack_weights(1, n, width=8, gain=2.0, bias=0.0), "post")) for n in (4, 8)
    }
    assert f"{math.log(r[8]) / math.log(r[4]):.3g}" in text
    assert "log ×: log(post 8) ÷ log(post 4), 2 for a product" in text


def test_log_growth_refuses_a_ratio_of_one():
    assert math.isnan(R.log_growth(5.0, 1.0000001))


# ---- d = 2: a LayerNorm of two numbers ------------------------------------------------------------


def test_at_d_2_one_layernorm_passes_almost_nothing_and_the_why_says_so():
    """At d = 2, I − P = 0: PyTorch's Jacobian of LayerNorm is zero up to eps, so 'less than 1/std' is right."""
    torch = pytest.importorskip("torch")
    out = run_demo("ln_stretch", LessonParams(dim=2, seed=0))
    x = R.rng_for(0, 21).normal(0.5, 2.0, size=2)
    j = torch.autograd.functional.jacobian(
        lambda t: torch.nn.functional.layer_norm(t, (2,), eps=1e-5), torch.tensor(x)
    ).numpy()
    sigma = math.sqrt(x.var() + 1e-5)
    # d(±(a − b)/2 / sqrt(var + eps))/da = (eps / 2) (var + eps)^(-3/2): of order eps, not 1/std
    assert np.linalg.norm(j, 2) * sigma < 1e-3
    assert out.prediction.choices[out.prediction.answer] == "less than 1/std"
    assert "d = 2" in out.prediction.why
    assert "d − 2 of them" not in out.prediction.why


@pytest.mark.parametrize("seed", [0, 5])
def test_at_d_2_the_expansion_makes_no_claim_it_cannot_keep(seed):
    """Seed 5 at d = 2: two nearly equal numbers make A_k large and the first-order part wins (287 to 1.8)."""
    out = run_demo("pre_ln_cross_terms", LessonParams(dim=2, seed=seed))
    exp = R.pre_ln_expansion(R.stack_weights(seed, 24, width=2, gain=4.0, bias=0.0))
    text = render(out.renderable)
    assert "✗" not in text and "Not checked at d = 2" in text and "not additive" not in text
    assert out.prediction.answer == (1 if exp.cross[0] > exp.first[0] else 0)


@pytest.mark.parametrize("dim", [3, 4, 8, 16])
def test_from_d_3_up_the_cross_terms_win_and_are_checked(dim):
    out = run_demo("pre_ln_cross_terms", LessonParams(dim=dim, seed=1))
    exp = R.pre_ln_expansion(R.stack_weights(1, 24, width=dim, gain=4.0, bias=0.0))
    assert marked(out, "layer 0: cross terms vs first-order part") and "✗" not in render(out.renderable)
    assert out.prediction.answer == 1  # the cross terms
    assert fmt(exp.first[0], 3) in out.prediction.why and fmt(exp.cross[0], 3) in out.prediction.why


# ---- the widths lesson 11 takes --------------------------------------------------------------------


@pytest.mark.parametrize("dim", [16, 32, 64])
def test_lesson_11_takes_the_widths_its_header_invites(capsys, dim):
    code, out, err = run_cli(capsys, "lesson", "11", "--auto", "--dim", str(dim))
    assert code == 0, err
    assert f"dim {dim}, seed 0" in out


@pytest.mark.parametrize(("lesson", "dim", "low", "high"), [("11", 8, 16, 64), ("11", 65, 16, 64), ("3", 32, 2, 16)])
def test_a_width_outside_the_lessons_range_is_one_line_naming_it(capsys, lesson, dim, low, high):
    code, out, err = run_cli(capsys, "lesson", lesson, "--auto", "--dim", str(dim))
    assert code == 2 and not out
    line = err.strip().splitlines()[-1]
    assert "--dim" in line and f"{low} to {high}" in line and str(dim) in line and "Traceback" not in err
