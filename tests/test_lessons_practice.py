"""Lesson 10 (LayerNorm vs BatchNorm in practice): predictions, checked claims and BatchNorm's eval mode.

Oracles: standardization written out in NumPy here, applied to the very batches
the demos drew; running statistics written out here (PyTorch's definition: the
unbiased batch variance) and PyTorch's own ``BatchNorm1d`` where it is
installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from microgradnorm import tolerances as tol
from microgradnorm.lessons import demos_practice as P
from microgradnorm.lessons.demos import DemoOutput, LessonParams, run_demo
from microgradnorm.numfmt import fmt
from tests import tolerances as test_tol
from tests.helpers import flat as render
from tests.helpers import marked, said_in, standardize

SEEDS = (0, 1, 4, 9)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_batch_of_two_gives_plus_or_minus_one_up_to_eps(seed, eps):
    stats = P.batch_spread(seed, 4, (1, 2, 4, 16, 64), trials=20, eps=eps)  # the demo's defaults
    two = next(s for s in stats if s["size"] == 2)
    y = standardize(two["batches"], 1, eps)[:, 0]  # the fixed example's outputs, from NumPy here
    a, b = two["batches"][:, 0], two["batches"][:, 1]
    assert np.allclose(np.abs(y), np.abs(a - b) / np.sqrt((a - b) ** 2 + 4 * eps), rtol=1e-12)
    assert np.allclose(two["outputs"], y, rtol=tol.CLOSED_FORM_RTOL, atol=tol.CLOSED_FORM_ATOL)
    out = run_demo("batch_size_dependence", LessonParams(dim=4, seed=seed, eps=eps))
    assert out.prediction.answer == 1  # +1 or −1, up to eps
    gap = float(np.max(np.abs(np.abs(y) - 1)))
    assert f"{gap:.2e}" in out.prediction.why


@pytest.mark.parametrize("seed", SEEDS)
def test_when_eps_dominates_a_pairs_variance_a_batch_of_two_is_not_plus_or_minus_one(seed):
    """At eps = 100, far above the variance of most pairs, the outputs are far inside ±1 and depend on |a − b|."""
    eps = 100.0
    stats = P.batch_spread(seed, 4, (1, 2, 4, 16, 64), trials=20, eps=eps)
    two = next(s for s in stats if s["size"] == 2)
    y = standardize(two["batches"], 1, eps)[:, 0]
    assert np.median(np.abs(y)) < 0.5  # an independent look: most outputs are nearer 0 than ±1
    out = run_demo("batch_size_dependence", LessonParams(dim=4, seed=seed, eps=eps))
    assert out.prediction.answer == 0  # ±c, with c below 1 set by how far apart the two are
    assert f"{np.median(np.abs(1 - np.abs(y))):.2e}" in out.prediction.why  # how far eps pulls a typical output in


@pytest.mark.parametrize("seed", SEEDS)
def test_the_distance_from_the_population_value_and_its_check(seed):
    stats = P.batch_spread(seed, 4, (1, 2, 4, 16, 64), trials=20, eps=1e-5)
    x0 = stats[0]["batches"][0, 0]
    z = (x0 - P.POP_MEAN) / np.sqrt(P.POP_STD**2 + 1e-5)  # the population's value at the batches' eps
    distances = []
    for s in stats:
        y = standardize(s["batches"], 1, 1e-5)[:, 0]
        distances.append(float(np.sqrt(np.mean((y - z) ** 2))))
        assert s["bn_from_pop"] == pytest.approx(distances[-1], rel=1e-9)
    # the claim compares only the ends, batch 64 against batch 2 (the sizes' first entry is batch 1)
    closer = distances[-1] < distances[1]
    out = run_demo("batch_size_dependence", LessonParams(dim=4, seed=seed))
    assert marked(out, "batch 64 vs batch 2: distance from the population value") == closer
    assert marked(out, "batch 1: largest |y|")


# seeds and dims where LayerNorm's row 0 differs between batch shapes by a rounding error (found by a sweep)
ROUNDING_PARAMS = [LessonParams(dim=4, seed=4), LessonParams(dim=4, seed=7), LessonParams(dim=6), LessonParams(dim=7)]


@pytest.mark.parametrize("p", [*ROUNDING_PARAMS, LessonParams(dim=4), LessonParams(dim=2, seed=1, eps=0.1)])
def test_every_batch_size_claim_holds_including_layernorms_to_rounding(p):
    """LayerNorm's output for the example is the example standardized alone; BatchNorm's reach is √(B − 1)."""
    sizes = (1, 2, 4, 16, 64)
    stats = P.batch_spread(p.seed, p.dim, sizes, trials=20, eps=p.eps)
    alone = standardize(stats[0]["batches"][0, :1], 1, p.eps)[0]  # the fixed example, by itself
    for s in stats:
        rows = s["batches"][:, 0]  # trials, D: the fixed example in every batch
        assert np.allclose(rows, stats[0]["batches"][0, 0], rtol=0, atol=0)
        y_bn = standardize(s["batches"], 1, p.eps)[:, 0]  # BatchNorm: down the batch axis
        # Samuelson's inequality: |x - mean| <= sqrt(B - 1) * std, the std dividing by B
        assert np.all(np.abs(y_bn) <= math.sqrt(s["size"] - 1) * (1 + 1e-12))
        assert s["ln_spread"] <= tol.CLOSED_FORM_RTOL
    batches = [s["batches"][k] for s in stats for k in range(3)]  # the first three batches of each size
    ln_rows = np.array([P.V.layer_norm_forward(b, None, None, p.eps, backend="numpy")[0][0] for b in batches])
    assert np.allclose(ln_rows, alone, rtol=tol.CLOSED_FORM_RTOL, atol=tol.CLOSED_FORM_ATOL)
    out = run_demo("batch_size_dependence", p)
    assert all(v.ok for v in out.verdicts) and "✗" not in render(out.renderable)
    assert marked(out, *(f"batch {n}: largest |y|" for n in sizes))  # Samuelson's reach, every size
    assert marked(out, "LayerNorm: largest spread over the batches")


def test_batch_sizes_must_include_two():
    with pytest.raises(ValueError, match=r"sizes: expected positive batch sizes including 2, got \(4, 8\)"):
        run_demo("batch_size_dependence", LessonParams(), {"sizes": (4, 8)})


# ---- eval mode ----------------------------------------------------------------------------------


def _ema(batches, momentum):
    mean, var = np.zeros(batches[0].shape[1]), np.ones(batches[0].shape[1])
    for x in batches:
        n = x.shape[0]
        mean = (1 - momentum) * mean + momentum * np.sum(x, axis=0) / n
        var = (1 - momentum) * var + momentum * np.sum((x - x.mean(axis=0)) ** 2, axis=0) / (n - 1)
    return mean, var


@pytest.mark.parametrize("seed", SEEDS)
def test_running_statistics_are_the_unbiased_running_averages(seed):
    run = P.run_eval_mode(seed, 3, 1e-5, steps=30, batch=8, small=4)
    mean, var = _ema(run.batches, 0.1)
    assert np.allclose(run.layer.running_mean, mean, rtol=1e-12, atol=1e-12)
    assert np.allclose(run.layer.running_var, var, rtol=1e-12)
    # eval mode is the fixed map (x - running_mean) / sqrt(running_var + eps), gamma = 1, beta = 0
    assert np.allclose(run.y_eval, (run.small - mean) / np.sqrt(var + 1e-5), rtol=1e-12, atol=1e-12)
    assert np.allclose(run.y_train, standardize(run.small, 0, 1e-5), rtol=1e-12, atol=1e-12)


def test_eval_mode_matches_pytorch():
    torch = pytest.importorskip("torch")
    run = P.run_eval_mode(2, 3, 1e-5, steps=25, batch=8, small=4)
    bn = torch.nn.BatchNorm1d(3, eps=1e-5, momentum=0.1, dtype=torch.float64)
    for x in run.batches:
        bn(torch.from_numpy(x))
    assert np.allclose(bn.running_mean.numpy(), run.layer.running_mean, rtol=test_tol.TORCH_F64_RTOL)
    assert np.allclose(bn.running_var.numpy(), run.layer.running_var, rtol=test_tol.TORCH_F64_RTOL)
    bn.eval()
    with torch.no_grad():
        y = bn(torch.from_numpy(run.small)).numpy()
    assert np.allclose(y, run.y_eval, rtol=test_tol.TORCH_F64_RTOL, atol=test_tol.TORCH_F64_ATOL)


@pytest.mark.parametrize("p", [LessonParams(dim=4), LessonParams(dim=2, seed=3, eps=0.0), LessonParams(dim=6, seed=5)])
def test_the_eval_demo_checks_pass(p):
    text = render(run_demo("bn_eval_mode", p).renderable)
    assert text.count("✓") == 4 and "✗" not in text
    assert "÷(N − 1)" in text


# ---- padding and the wrong axis ---------------------------------------------------------------------


@pytest.mark.parametrize("pad_to", [5, 12, 30])
def test_padded_mean_is_the_real_mean_times_the_real_share(pad_to):
    x, mask = P.padded_batch(1, 4, (5, 2, 3), pad_to)
    flat = x.reshape(-1, 4)
    assert np.allclose(flat.mean(axis=0), x[mask].mean(axis=0) * mask.sum() / mask.size, rtol=1e-12)


@pytest.mark.parametrize("p", [LessonParams(dim=4), LessonParams(dim=3, seed=2, eps=0.0)])
def test_padding_demos_show_only_passing_checks(p):
    for name in ("padding_pollution", "padding_growth"):
        text = render(run_demo(name, p).renderable)
        assert text.count("✓") == 2 and "✗" not in text, name


@pytest.mark.parametrize("seed", [0, 1])
def test_the_wrong_axis_prediction_follows_the_curves(seed):
    curves = P.train_wrong_axis(seed, steps=200)
    tail = {k: float(np.mean(v[-20:])) for k, v in curves.items()}
    ln_ok, bn_ok = tail["layernorm"] < 0.5 * math.log(2), tail["batchnorm"] < 0.5 * math.log(2)
    out = run_demo("wrong_axis_loss", LessonParams(seed=seed))
    assert isinstance(out, DemoOutput)
    expected = {(True, False): 0, (False, True): 1, (True, True): 2, (False, False): 3}[(ln_ok, bn_ok)]
    assert out.prediction.answer == expected == 0
    assert f"{tail['layernorm']:.3g}" in out.prediction.why


def test_when_eps_flattens_the_quiet_tokens_the_answer_says_so():
    """At eps = 100 most tokens' own variance is below eps (counted here from the tokens), LayerNorm no longer
    learns, and the answer names the share; at the default eps no token is that quiet and nothing is added."""
    curves = P.train_wrong_axis(0, steps=200, eps=100.0)
    assert float(np.mean(curves["layernorm"][-20:])) >= 0.5 * math.log(2)
    share = P.quiet_share(0, 8, 100.0)
    assert share >= 0.1
    why = run_demo("wrong_axis_loss", LessonParams(seed=0, eps=100.0)).prediction.why
    assert f"{share:.0%}" in why and "eps = 100" in why
    assert "variance below eps" not in run_demo("wrong_axis_loss", LessonParams(seed=0)).prediction.why


@pytest.mark.parametrize("p", [LessonParams(dim=4), LessonParams(dim=2, seed=3, eps=1.0)])
def test_layernorms_output_alone_is_its_output_in_the_batch_as_the_eval_step_says(p):
    """Lesson 10 step 5's 'LayerNorm has no such gap', measured: a row standardized alone (NumPy here) is the
    row the demo's LayerNorm gives in its batch, and the demo prints that line with ✓."""
    run = P.run_eval_mode(p.seed, p.dim, p.eps if p.eps > 0 else 1e-5)
    alone = standardize(run.small[:1], 1, run.layer.eps)[0]
    assert np.allclose(P._normalize("layernorm", run.small, run.layer.eps)[0], alone, rtol=1e-12, atol=1e-12)
    assert marked(run_demo("bn_eval_mode", p), "LayerNorm: alone vs in its batch (difference ÷ tolerance)")


@pytest.mark.parametrize("p", [LessonParams(dim=6), LessonParams(dim=12, seed=3, eps=0.0)])
def test_step_5_shows_every_feature_of_example_0_whole_in_60_columns(p):
    """One row per feature (train mode, eval mode): the table no longer grows sideways with d."""
    out = run_demo("bn_eval_mode", p)
    shown = render(out.renderable if isinstance(out, DemoOutput) else out, 60)
    assert "…" not in shown and "eps = 0 would divide" not in shown
    run = P.run_eval_mode(p.seed, p.dim, p.eps, 200, 32, 4)
    for j in range(p.dim):
        assert f"{j} {fmt(run.y_train[0, j], 3)} {fmt(run.y_eval[0, j], 3)}" in shown


@pytest.mark.parametrize("seed", [0, 3])
def test_step_3_shows_the_padded_statistics_whole_in_60_columns(seed):
    out = run_demo("padding_growth", LessonParams(seed=seed, eps=0.0))
    shown = render(out.renderable if isinstance(out, DemoOutput) else out, 60)
    note = "eps = 0 would divide by zero on a constant group (a padding row, a batch of one); using eps = {eps} here"
    assert "…" not in shown and said_in(note, shown) is not None  # the note whole (render() folds line breaks)
