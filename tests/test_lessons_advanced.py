"""The claims of lessons 05-11, checked against oracles that do not share the demos' code.

Oracles: NumPy written out here (standardization, sums, linear algebra), central
finite differences, the engine where the demo uses a closed form (and the other
way round), and PyTorch where it is installed. Every demo is also run at
non-default parameters and rendered at 60 columns without colour.
"""

from __future__ import annotations

import math
from io import StringIO

import numpy as np
import pytest
from hypothesis import given
from rich.console import Console

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.engine import DomainError, Value
from microgradnorm.jacobian import autograd_jacobian
from microgradnorm.lessons import demos_batchnorm as bn_demos
from microgradnorm.lessons import demos_practice as practice
from microgradnorm.lessons import demos_residual as residual
from microgradnorm.lessons import demos_traps as traps
from microgradnorm.lessons import demos_why as why
from microgradnorm.lessons.demo_tools import autograd_dx, engine_forward
from microgradnorm.lessons.demos import DEMOS, DemoOutput, LessonParams, load_demos
from microgradnorm.registry import get_norm
from tests import tolerances as test_tol
from tests.helpers import assert_close, numeric_grad, standardize, torch_stack_grads
from tests.strategies import matrices, vectors

MY_MODULES = ("demos_jacobian", "demos_batchnorm", "demos_rmsnorm", "demos_practice", "demos_residual")
MY_MODULES += ("demos_why", "demos_traps")


# ---- oracles written out here -------------------------------------------------------


def central_diff(f, x: np.ndarray) -> np.ndarray:
    """Jacobian of f at x by central differences (rows: outputs, columns: inputs), one output at a time."""
    return np.stack([numeric_grad(lambda v, k=k: np.ravel(f(v))[k], x) for k in range(np.size(f(x)))])


# ---- lesson 07: the Jacobian as a projection -----------------------------------------


@given(vectors(min_dim=3, max_dim=8))
def test_projection_is_idempotent_symmetric_rank_2_at_eps_0(x):
    xhat = standardize(x, 0, 0.0)
    p = formulas.projection(xhat)
    assert_close(p @ p, p, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert_close(p, p.T, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert np.linalg.matrix_rank(p) == 2
    eig = np.sort(np.linalg.eigvalsh(p))
    assert_close(eig, np.r_[np.zeros(len(x) - 2), 1.0, 1.0], tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


@given(vectors(min_dim=2, max_dim=6))
def test_autograd_jacobian_matches_finite_differences(x):
    gamma = np.linspace(0.5, 1.5, len(x))
    j = autograd_jacobian("layernorm", x.tolist(), gamma.tolist(), None, 1e-5)
    fd = central_diff(lambda v: gamma * standardize(v, 0, 1e-5), x)
    assert_close(j, fd, tol.FD_RTOL, tol.FD_ATOL)


@given(vectors(min_dim=3, max_dim=8))
def test_layernorm_gradient_has_no_mean_or_radial_part_at_eps_0(x):
    dy = np.cos(np.arange(len(x)) + 1.0)  # an upstream gradient that is not all ones
    grads, _ = autograd_dx("layernorm", x, np.linspace(0.5, 2.0, len(x)), None, 0.0, dy)
    dx, xhat = grads["x"], standardize(x, 0, 0.0)
    scale = np.linalg.norm(dx) + np.linalg.norm(dy)
    assert abs(dx.sum()) <= tol.CLOSED_FORM_ATOL + tol.CLOSED_FORM_RTOL * scale
    assert abs(xhat @ dx) <= tol.CLOSED_FORM_ATOL + tol.CLOSED_FORM_RTOL * scale * np.linalg.norm(xhat)


def test_radial_component_at_eps_matches_its_prediction():
    x = np.array([0.02, -0.01, 0.05, 0.0, 0.03])  # small spread, so that eps = 1e-3 matters
    dy = np.array([0.3, -1.0, 0.7, 0.2, -0.4])
    eps = 1e-3
    grads, _ = autograd_dx("layernorm", x, None, None, eps, dy)
    var = x.var()
    rstd = 1.0 / math.sqrt(var + eps)
    xhat = (x - x.mean()) * rstd
    predicted = rstd * eps / (var + eps) * (xhat @ dy)
    assert abs(predicted) > 1e-2  # not a trivially small effect
    assert xhat @ grads["x"] == pytest.approx(predicted, rel=tol.CLOSED_FORM_RTOL * 1e3)


def test_layernorm_is_scale_invariant_and_its_gradient_scales_like_1_over_c():
    x = np.array([1.0, -2.0, 0.5, 3.0, -0.25])
    dy = np.array([0.3, -1.0, 0.7, 0.2, -0.4])
    y = engine_forward("layernorm", x, None, None, 0.0)
    dx = autograd_dx("layernorm", x, None, None, 0.0, dy)[0]["x"]
    for c in (0.01, 3.0, 1000.0):
        assert_close(engine_forward("layernorm", c * x, None, None, 0.0), y, tol.CLOSED_FORM_RTOL, 1e-12)
        dxc = autograd_dx("layernorm", c * x, None, None, 0.0, dy)[0]["x"]
        assert_close(c * dxc, dx, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert_close(engine_forward("layernorm", -x, None, None, 0.0), -y, tol.CLOSED_FORM_RTOL, 1e-12)


# ---- lesson 08: BatchNorm ------------------------------------------------------------------


@given(matrices(min_rows=2, max_rows=5, min_dim=2, max_dim=4, axis=0))
def test_batchnorm_is_layernorm_of_the_transpose(x):
    bn = engine_forward("batchnorm", x, None, None, 1e-5)
    ln_t = engine_forward("layernorm", x.T, None, None, 1e-5).T
    assert_close(bn, ln_t, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert_close(bn, standardize(x, 0, 1e-5), tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_batchnorm_channel_statistics_pool_n_h_w():
    x = np.random.default_rng(3).normal(1.0, 2.0, size=(2, 3, 2, 2))
    y = engine_forward("batchnorm", x, None, None, 1e-5)
    per_channel = x.transpose(1, 0, 2, 3).reshape(3, -1)  # C, N*H*W
    expected = standardize(per_channel, 1, 1e-5).reshape(3, 2, 2, 2).transpose(1, 0, 2, 3)
    assert_close(y, expected, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_batchnorm_parameter_gradients_are_sums_over_the_batch():
    rng = np.random.default_rng(4)
    x, dy = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    gamma, beta = np.array([0.5, 1.5, -1.0]), np.array([0.1, 0.0, -0.2])
    grads, _ = autograd_dx("batchnorm", x, gamma, beta, 1e-5, dy)
    assert_close(grads["beta"], dy.sum(axis=0), tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)
    assert_close(grads["gamma"], (dy * standardize(x, 0, 1e-5)).sum(axis=0), tol.CLOSED_FORM_RTOL, 1e-12)


@pytest.mark.parametrize("m", [2, 3, 4, 8])
def test_the_slipped_variance_path_is_off_by_m_minus_1_over_m(m):
    rng = np.random.default_rng(m)
    x, dy = rng.normal(0.5, 2.0, size=(m, 3)), rng.normal(size=(m, 3))
    eps = 1e-5
    dx_fd = numeric_grad(lambda v: np.sum(standardize(v, 0, eps) * dy), x)
    slipped = bn_demos.dx_with_mean_slip(dy, x, eps)
    # the correct variance path, written out: dL/dvar * 2 (x - mean) / m
    xs = x - x.mean(axis=0)
    var = (xs**2).mean(axis=0)
    dvar = -0.5 * (var + eps) ** -1.5 * (dy * xs).sum(axis=0)
    via_var = dvar * 2.0 * xs / m
    assert_close(dx_fd, slipped + via_var / m, tol.FD_RTOL, tol.FD_ATOL)  # the slip kept (m-1)/m of it
    assert not tol.close(slipped, dx_fd, tol.FD_RTOL, tol.FD_ATOL)


def test_engine_says_the_variance_does_not_depend_on_the_mean():
    x = np.random.default_rng(5).normal(size=(4, 2))
    graph = get_norm("batchnorm").build_graph(x.tolist(), None, None, 1e-5)
    graph["var"][1].backward()
    xs = x[:, 1] - x[:, 1].mean()
    # dvar/dmean = -2 mean(x - mean): what is left of 4 terms of size 2 |x - mean| / 4 that cancel
    assert abs(graph["mean"][1].grad) <= tol.cancellation_atol(2 * np.abs(xs).max() / 4, 4)


# ---- lesson 09: RMSNorm ----------------------------------------------------------------------


@given(vectors(min_dim=2, max_dim=8))
def test_rmsnorm_of_a_centered_vector_is_layernorm(x):
    rms = engine_forward("rmsnorm", x - x.mean(), None, None, 1e-5)
    assert_close(rms, standardize(x, 0, 1e-5), tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_rmsnorm_gradient_removes_only_the_radial_part():
    x = np.array([2.0, -1.0, 0.5, 3.0, 1.5])
    dy = np.array([0.3, -1.0, 0.7, 0.2, -0.4])
    dx = autograd_dx("rmsnorm", x, None, None, 0.0, dy)[0]["x"]
    xhat = x / np.sqrt(np.mean(x * x))
    fd = numeric_grad(lambda v: np.sum(v / np.sqrt(np.mean(v * v)) * dy), x)
    assert_close(dx, fd, tol.FD_RTOL, tol.FD_ATOL)
    # xhat . dx = 0: five products of size |xhat| |dx|, and dx's own two terms of size rrms |dy| |xhat|^2
    rrms = 1.0 / np.sqrt(np.mean(x * x))
    terms = np.abs(xhat).max() * rrms * np.abs(dy).max() * (1 + np.abs(xhat).max() ** 2)
    assert abs(xhat @ dx) <= tol.cancellation_atol(terms, 2 * len(x))
    assert abs(dx.sum()) > 1e-3  # the mean direction is kept


def test_rmsnorm_jacobian_matches_finite_differences():
    x = np.array([2.0, -1.0, 0.5, 3.0])
    j = autograd_jacobian("rmsnorm", x.tolist(), None, None, 1e-5)
    fd = central_diff(lambda v: v / np.sqrt(np.mean(v * v) + 1e-5), x)
    assert_close(j, fd, tol.FD_RTOL, tol.FD_ATOL)
    removed = np.eye(4) - j * np.sqrt(np.mean(x * x) + 1e-5)
    assert np.linalg.matrix_rank(removed, tol=1e-6) == 1


# ---- lesson 10: LN vs BN in practice ------------------------------------------------------


def test_padding_changes_batchnorm_statistics_but_not_layernorm():
    x, mask = practice.padded_batch(0, 4, (5, 2, 3))
    assert (x[~mask] == 0).all() and mask.sum() == 10
    flat, real = x.reshape(-1, 4), x[mask]
    assert np.max(np.abs(flat.mean(axis=0) - real.mean(axis=0))) > 0.1
    bn_flat = engine_forward("batchnorm", flat, None, None, 1e-5)[mask.ravel()]
    bn_real = engine_forward("batchnorm", real, None, None, 1e-5)
    assert np.max(np.abs(bn_flat - bn_real)) > 0.1
    ln_flat = engine_forward("layernorm", flat, None, None, 1e-5)[mask.ravel()]
    assert_close(ln_flat, standardize(real, 1, 1e-5), tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_batchnorm_output_depends_on_the_batch_and_layernorm_does_not():
    stats = practice.batch_spread(0, 4, (1, 2, 16), trials=10, eps=1e-5)
    by_size = {s["size"]: s for s in stats}
    assert all(s["ln_spread"] == 0.0 for s in stats)
    assert by_size[1]["bn_max_abs"] == 0.0  # a batch of one normalizes to zero
    assert by_size[2]["bn_spread"] > 0.5 and by_size[16]["bn_spread"] > 0.01


def test_logistic_gradient_used_in_training_matches_finite_differences():
    rng = np.random.default_rng(6)
    x, t, w = rng.normal(size=(8, 3)), (rng.random(8) > 0.5).astype(float), rng.normal(size=3)
    analytic = x.T @ (practice._sigmoid(x @ w) - t) / len(t)
    fd = numeric_grad(lambda v: practice._logistic_loss(x @ v, t), w)
    assert_close(analytic, fd, tol.FD_RTOL, tol.FD_ATOL)


def test_normalizing_the_wrong_axis_stalls_training():
    for seed in (0, 1):
        curves = practice.train_wrong_axis(seed, steps=150)
        ln, bn = np.mean(curves["layernorm"][-15:]), np.mean(curves["batchnorm"][-15:])
        assert ln < 0.5 * math.log(2) < bn


# ---- lesson 11: pre-LN vs post-LN -----------------------------------------------------------


def test_stack_gradients_match_torch():
    pytest.importorskip("torch")
    weights = residual.stack_weights(1, 6, width=8, tokens=4, gain=1.0, bias=1.0)
    for arrangement in residual.ARRANGEMENTS:
        ours = residual.stack_gradients(weights, arrangement)
        norms, top = torch_stack_grads(weights, arrangement)
        assert_close(ours.norms, norms, test_tol.TORCH_F64_RTOL * 100, test_tol.TORCH_F64_ATOL)
        assert ours.top == pytest.approx(top, rel=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_pre_ln_stays_near_the_top_gradient_and_post_ln_compounds(seed):
    ratios = {}
    for depth in (24, 48):
        weights = residual.stack_weights(seed, depth, gain=0.5, bias=2.0)
        for a in residual.ARRANGEMENTS:
            r = residual.stack_gradients(weights, a)
            ratios[a, depth] = r.norms / r.top
    for depth in (24, 48):
        assert 0.5 < ratios["pre", depth].min() and ratios["pre", depth].max() < 2.0
    post24, post48 = ratios["post", 24][0], ratios["post", 48][0]
    assert post24 < 0.05
    # a product of per-layer factors: twice the layers, about twice the logarithm
    assert 1.5 < math.log(post48) / math.log(post24) < 2.5


def test_post_ln_can_explode_too_and_pre_ln_grows_far_less():
    ratios = {}
    for depth in (24, 48):
        weights = residual.stack_weights(0, depth, gain=4.0, bias=0.0)
        for a in residual.ARRANGEMENTS:
            r = residual.stack_gradients(weights, a)
            ratios[a, depth] = r.norms[0] / r.top
    assert ratios["post", 48] > 100 * ratios["pre", 48]
    assert math.log(ratios["post", 48]) / math.log(ratios["post", 24]) > 1.5


def test_identity_path_is_exact_in_pre_ln_and_bounded_by_1_over_sigma_in_post_ln():
    weights = residual.stack_weights(0, 24, gain=0.5, bias=2.0)
    pre = residual.stack_gradients(weights, "pre", identity_only=True)
    assert_close(pre.norms, np.full(24, pre.top), tol.CLOSED_FORM_RTOL, 0.0)
    post = residual.stack_gradients(weights, "post", identity_only=True)
    # each (1/sigma)(I - P) shrinks a token's gradient by at least 1/sigma: bound per token
    bound = np.sqrt(np.sum(np.prod(1.0 / post.sigma, axis=0) ** 2 * np.sum(weights.g**2, axis=1)))
    assert post.norms[0] <= bound * (1 + 1e-12)
    assert np.all(np.diff(post.norms) > 0)  # shrinking layer after layer towards the input


# ---- lesson 02: why normalize ----------------------------------------------------------------


def test_weight_gradients_scale_with_their_inputs():
    w1, w2 = Value(0.3), Value(-0.2)
    loss = 0.5 * (w1 * why.X1 + w2 * why.X2 - 1.0) ** 2
    loss.backward()
    assert w1.grad / w2.grad == pytest.approx(why.X1 / why.X2, rel=1e-12)


def test_normalized_problem_converges_and_raw_does_not():
    prob = why.linear_problem(0)
    raw = why.descend(prob.raw, prob.targets, 300)
    norm = why.descend(prob.normalized, prob.targets, 300)
    # condition numbers from numpy's own routine: cond(X)^2 = cond(X^T X)
    assert raw["condition"] == pytest.approx(np.linalg.cond(prob.raw) ** 2, rel=1e-3)
    assert norm["condition"] == pytest.approx(np.linalg.cond(prob.normalized) ** 2, rel=1e-6)
    assert raw["condition"] > 1e8 and norm["condition"] < 10
    assert norm["converged"] is not None and norm["converged"] < 50
    assert raw["converged"] is None and raw["gaps"][-1] > 1e-3


def test_sigmoid_derivative_from_engine_and_saturation():
    for z in (-10.0, -3.0, 0.0, 3.0, 10.0):
        v = Value(z)
        v.sigmoid().backward()
        s = 1.0 / (1.0 + math.exp(-z))
        assert v.grad == pytest.approx(s * (1 - s), rel=1e-12)
    big = Value(40.0)
    big.sigmoid().backward()
    assert big.grad < 1e-15


def test_gamma_sigma_beta_mu_give_back_the_batch():
    x = np.random.default_rng(7).normal(3.0, 2.0, size=(5, 3))
    eps = 1e-5
    gamma, beta = np.sqrt(x.var(axis=0) + eps), x.mean(axis=0)
    y = engine_forward("batchnorm", x, gamma.tolist(), beta.tolist(), eps)
    assert_close(y, x, tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


# ---- lesson 12: numerical traps --------------------------------------------------------------


def test_naive_variance_cancels_and_two_pass_does_not():
    x = np.array([4.0, 7.0, 13.0, 16.0]) + 1e9
    naive = float(np.mean(x * x) - np.mean(x) ** 2)
    assert abs(naive - 22.5) > 100  # in float64 it even comes out negative
    assert float(formulas.naive_variance(x, (0,))[0]) == naive
    assert float(formulas.variance(x - formulas.mean(x, (0,)), (0,))[0]) == 22.5
    with pytest.raises(DomainError, match="cancellation"):
        engine_forward("layernorm", x, None, None, 1e-5, variance="naive")


def test_eps_outside_the_sqrt_gives_nan_for_a_constant_input():
    x, dy = np.full(4, 3.0), np.array([0.3, -1.0, 0.7, 0.2])
    _, dx_out = traps.eps_outside_grad(x, dy, 1e-5)
    assert np.isnan(dx_out).all()
    grads, _ = autograd_dx("layernorm", x, None, None, 1e-5, dy)
    assert np.isfinite(grads["x"]).all()
    # eps inside: xhat = 0 and dx = rstd * (dy - mean(dy)), finite (closed form written out)
    assert_close(grads["x"], (dy - dy.mean()) / math.sqrt(1e-5), tol.CLOSED_FORM_RTOL, tol.CLOSED_FORM_ATOL)


def test_sum_loss_gives_zero_input_gradient_with_gamma_1():
    x = np.array([1.0, -2.0, 0.5, 3.0, -0.25])
    grads, _ = autograd_dx("layernorm", x, None, np.array([0.1, 0.2, 0.3, 0.4, 0.5]), 1e-5, np.ones(5))
    m = formulas.moments(x, (0,), 1e-5)
    terms = float(m.rstd[0]) * (1 + np.abs(m.xhat).max() ** 2)  # dx's three terms per entry, dy = 1
    assert np.max(np.abs(grads["x"])) <= tol.cancellation_atol(terms, 3 * len(x))
    grads, _ = autograd_dx("layernorm", x, None, None, 1e-5, np.array([0.3, -1.0, 0.7, 0.2, -0.4]))
    assert np.max(np.abs(grads["x"])) > 0.1


def test_float32_finite_differences_are_far_worse_than_float64():
    steps = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6)
    errors = traps.fd_errors(0, 4, 1e-5, steps)
    assert errors["float64"][steps.index(1e-6)] < tol.FD_RTOL
    assert min(errors["float32"]) > 100 * min(errors["float64"])


def test_unbiased_forward_with_biased_backward_formula_disagrees():
    x = np.array([1.0, -2.0, 0.5, 3.0])
    dy = np.array([0.3, -1.0, 0.7, 0.2])
    xs = [Value(float(v)) for v in x]
    ys = traps.layer_norm_unbiased(xs, 1e-5)
    Value.sum([y * float(g) for y, g in zip(ys, dy)]).backward()
    auto = np.array([v.grad for v in xs])
    fd = numeric_grad(lambda v: np.sum((v - v.mean()) / np.sqrt(v.var(ddof=1) + 1e-5) * dy), x)
    assert_close(auto, fd, tol.FD_RTOL, tol.FD_ATOL)  # the engine is right
    xhat = np.array([y.data for y in ys])
    wrong = formulas.dx_simplified(dy, xhat, (x.var(ddof=1) + 1e-5) ** -0.5, (0,))
    assert tol.normwise_error(wrong, auto)[1] > 1e-3


# ---- every demo runs and fits, at other parameters too --------------------------------------


def _my_demos() -> list[str]:
    return sorted(name for name, spec in load_demos().items() if spec.module.rsplit(".", 1)[-1] in MY_MODULES)


def test_all_my_demo_modules_are_registered():
    assert set(MY_MODULES) <= {spec.module.rsplit(".", 1)[-1] for spec in load_demos().values()}


@pytest.mark.parametrize(
    "params",
    [
        LessonParams(dim=3, seed=1, eps=0.0),
        LessonParams(dim=8, seed=2, eps=1e-3, batch=5),
        LessonParams(dim=2, seed=3, eps=0.0, batch=2),  # d = 2: LayerNorm's Jacobian is 0 at eps = 0
    ],
    ids=["dim3-eps0", "dim8-batch5", "dim2-eps0"],
)
def test_every_demo_renders_at_60_columns_without_colour(params, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    for name in _my_demos():
        with np.errstate(divide="raise", invalid="raise"):  # a 0/0 inside a demo is a bug, not a warning
            if name == "rms_speed":
                out = DEMOS[name].function(params, rows=16, features=64, repeats=3)
            else:
                out = DEMOS[name].function(params)
        renderable = out.renderable if isinstance(out, DemoOutput) else out
        console = Console(file=StringIO(), width=60)
        console.print(renderable)
        text = console.file.getvalue()
        assert "\x1b[" not in text, name
        widest = max(len(line) for line in text.splitlines())
        assert widest <= 60, f"{name}: {widest} columns"
