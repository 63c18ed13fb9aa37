"""Lesson 09 (RMSNorm): the prediction, the checked claims and the timing step, against oracles.

Oracles: RMSNorm and LayerNorm written out in NumPy here and differentiated by
central differences; for the timing step, synthetic medians whose reading is
known, and the timed calls' own outputs compared with the package's forward
pass (so the step times the norms it names). Wall-clock time is never asserted.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from microgradnorm import fused, i18n
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.i18n import _
from microgradnorm.lessons import demos_rmsnorm as R
from microgradnorm.lessons.demo_tools import random_dy, random_gamma, random_vector
from microgradnorm.lessons.demos import LessonParams, run_demo
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.translation import localized
from tests import tolerances as test_tol
from tests.helpers import flat as render
from tests.helpers import numeric_grad, run_cli
from tests.test_lessons import MAX_STEP_LINES, WIDTHS, _code_lines, _rendered


def rms_loss_grad(x, gamma, dy, eps):
    """d/dx of sum(gamma * x / sqrt(mean(x^2) + eps) * dy), by central differences."""
    return numeric_grad(lambda v: np.sum(gamma * v / np.sqrt(np.mean(v * v) + eps) * dy), x)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7])
def test_the_sum_prediction_matches_finite_differences(seed):
    p = LessonParams(dim=6, seed=seed)
    x = random_vector(seed, 6, loc=1.5)
    dx = rms_loss_grad(x, random_gamma(seed, 6), random_dy(seed, 6), p.eps)
    out = run_demo("rms_gradient", p)
    expected = 0 if abs(dx.sum()) <= tol.FD_RTOL * np.abs(dx).sum() else 1
    assert out.prediction.answer == expected == 1
    assert f"{dx.sum():.2e}" in out.prediction.why  # the why quotes the live sum


@pytest.mark.parametrize(
    "p", [LessonParams(dim=6), LessonParams(dim=3, seed=4, eps=0.0), LessonParams(dim=9, seed=2, eps=0.05)]
)
def test_every_claim_of_lesson_9_holds(p):
    for name in ("rms_vs_ln_forward", "rms_gradient", "rms_jacobian_heatmap"):
        out = run_demo(name, p)
        text = render(out.renderable)
        assert text.count("✓") >= 2 and "✗" not in text, name


def test_the_stretch_leaves_exactly_what_eps_predicts():
    # J x by central differences of RMSNorm itself, against |x| eps / (ms + eps)^(3/2)
    x, eps, h = np.array([2.0, -1.0, 0.5, 3.0]), 0.3, 1e-6

    def rms(v):
        return v / np.sqrt(np.mean(v * v) + eps)

    jx = (rms(x + h * x) - rms(x - h * x)) / (2 * h)
    ms = np.mean(x * x)
    assert np.linalg.norm(jx) == pytest.approx(np.linalg.norm(x) * eps / (ms + eps) ** 1.5, rel=tol.FD_RTOL)


# ---- the timing step -----------------------------------------------------------------------


def _medians(ratios: dict[str, float]) -> dict[str, dict[str, float]]:
    """Medians whose RMS/LN ratio (forward + backward) is given; forward the same ratio."""
    return {k: {"ln_f": 1.0, "rms_f": r, "ln_b": 2.0, "rms_b": 2.0 * r} for k, r in ratios.items()}


def read(line: str) -> tuple[str, list[str], list[str]]:
    """The facts of one implementation's reading: its name, the percentages in order, the verdicts in order."""
    verdicts = sorted(
        (line.index(R.said(k)), k) for k in ("faster", "slower", "about the same", "unclear") if R.said(k) in line
    )
    return line.split(":")[0], re.findall(r"\d+%", line), [k for _at, k in verdicts]


def test_the_reading_follows_the_numbers():
    lines = R.speed_reading(_medians({"numpy": 0.6, "fused": 0.99, "torch": 2.0}))
    assert read(lines[0]) == ("NumPy", ["60%", "60%"], ["faster"])
    assert read(lines[1]) == (R.path_name("fused"), ["99%", "99%"], ["about the same"])
    assert read(lines[2]) == ("PyTorch", ["200%", "200%"], ["slower"])
    named = "; ".join(
        f"{R.said(k)} on {R.path_name(p)}"
        for k, p in (("about the same", "fused"), ("faster", "numpy"), ("slower", "torch"))
    )
    assert lines[3] == _("Same formulas, different verdicts ({named}): the implementation decides.").format(named=named)
    same = R.speed_reading(_medians({"numpy": 0.5, "torch": 0.8}))
    agreed = _("Every implementation timed here agrees: RMSNorm is {verdict} (forward + backward).")
    assert same[-1] == agreed.format(verdict=R.said("faster"))
    assert R.speed_reading({}) == []
    assert R.speed_reading(_medians({"numpy": 0.5}))[-1] == only_one_timed()


def only_one_timed() -> str:  # looked up when a test runs, in its language (not at import, in the machine's)
    return _("Only one implementation was timed here: no comparison between implementations.")


def test_the_reading_names_both_directions_when_forward_and_backward_disagree():
    med = {"torch": {"ln_f": 2.0, "rms_f": 1.0, "ln_b": 3.0, "rms_b": 6.0}}
    assert read(R.speed_reading(med)[0]) == ("PyTorch", ["50%", "200%"], ["faster", "slower"])


def test_the_reading_says_when_the_medians_cannot_be_right():
    """Forward + backward includes the forward pass: a median below forward alone is noise, and said to be."""
    ok = _medians({"numpy": 0.6})  # forward 1.0, forward + backward 2.0: consistent
    assert R.speed_reading(ok)[-1] == only_one_timed()  # no noise line
    med = {"numpy": {"ln_f": 0.56, "rms_f": 0.14, "ln_b": 0.47, "rms_b": 0.30}}  # LN f+b below LN f
    noise = _(
        "{paths}: forward + backward took less time than forward alone, which only noise can do: "
        "the machine was busy, so read these medians loosely and run the step again."
    )
    assert R.speed_reading(med)[-1] == noise.format(paths="NumPy")


def test_the_timed_calls_compute_the_norms_they_are_named_after():
    prob = R.speed_problem(3, 8, 16, 1e-5)
    y_ln, _ = V.layer_norm_forward(prob.x, prob.gamma, prob.beta, prob.eps, backend="numpy")
    y_rms, _ = V.rms_norm_forward(prob.x, prob.gamma, eps=prob.eps, backend="numpy")
    calls = R.speed_calls(prob, ("numpy", "torch"))
    assert np.array_equal(calls["numpy"]["ln_f"]()[0], y_ln)
    if isinstance(calls["torch"], str):
        pytest.skip(f"PyTorch: {calls['torch']}")
    for name, want in (("ln_f", y_ln), ("rms_f", y_rms)):
        got = calls["torch"][name]().numpy()
        assert tol.close(got, want, tol.FLOAT32_RTOL, test_tol.FLOAT32_ATOL), name


def test_the_speed_step_renders_reads_its_numbers_and_names_what_it_skips(monkeypatch):
    monkeypatch.setattr(fused, "AVAILABLE", False)
    monkeypatch.setattr(R, "torch_installed", lambda: False)
    timed = R.time_samples

    def steady(calls, repeats):  # the calls run; their times are fixed, so the verdict does not hang on load
        return {
            path: {k: [t] * repeats for k, t in zip(R.CALLS, (1e-3, 8e-4, 3e-3, 2e-3))}
            for path in timed(calls, repeats)
        }

    monkeypatch.setattr(R, "time_samples", steady)
    text = render(R.rms_speed(LessonParams(), rows=4, features=8, repeats=2))
    header = _("median of {repeats} interleaved runs, one thread each, x [{rows}, {features}] float32")
    assert header.format(repeats=2, rows=4, features=8) in text
    for path, why in (("fused", R._fused_compiled()), ("torch", _("PyTorch is not installed"))):
        assert _("{path}: not timed, {why}").format(path=R.path_name(path), why=why) in text
    medians = {"numpy": {"ln_f": 1e-3, "rms_f": 8e-4, "ln_b": 3e-3, "rms_b": 2e-3}}
    reading = R.speed_reading(medians, {"numpy": {"f": [0.8, 0.8], "b": [2 / 3, 2 / 3]}})
    assert read(reading[0]) == ("NumPy", ["80%", "67%"], ["faster"]) and reading[-1] == only_one_timed()
    assert all(line in text for line in reading)


def test_the_speed_step_refuses_bad_arguments():
    with pytest.raises(ValueError, match="paths: expected some of numpy, fused, torch, got 'jax'"):
        R.rms_speed(LessonParams(), rows=4, features=8, repeats=1, paths=("jax",))
    with pytest.raises(ValueError, match="rows: expected an integer >= 2, got 1"):
        R.rms_speed(LessonParams(), rows=1)
    with pytest.raises(ValueError, match="repeats: expected a positive integer, got 0"):
        R.rms_speed(LessonParams(), rows=4, features=8, repeats=0, paths=("numpy",))


def test_lesson_9_takes_no_batch(capsys):
    code, _out, err = run_cli(capsys, "lesson", "9", "--auto", "--batch", "3")
    assert code == 2 and err.count("\n") == 1  # a usage error: one line, exit 2
    assert "does not use it" in err and "BatchNorm" not in err


def test_no_verdict_is_stronger_than_the_noise_of_its_repeats():
    """Issue 22: the speed verdict flipped between runs. With the ratio of each interleaved repeat, a direction
    is named only when every repeat says it; repeats on both sides of 1 give no verdict and no comparison."""
    med = _medians({"numpy": 0.6, "torch": 0.7})
    split = {"numpy": {"f": [0.5, 0.6, 1.3], "b": [0.5, 0.6, 1.3]}, "torch": {"f": [0.6, 0.7, 0.8], "b": [0.6, 0.7]}}
    lines = R.speed_reading(med, split)
    assert read(lines[0]) == ("NumPy", ["60%", "60%"], ["unclear"])
    assert read(lines[1]) == ("PyTorch", ["70%", "70%"], ["faster"])
    assert lines[2] == _(
        "Only one implementation gave a forward + backward verdict this run: no comparison between implementations."
    )
    steady = {"numpy": {"f": [0.5, 0.6, 0.7], "b": [0.5, 0.6, 0.7]}, "torch": {"f": [0.6, 0.7], "b": [0.6, 0.7]}}
    agreed = _("Every implementation timed here agrees: RMSNorm is {verdict} (forward + backward).")
    assert R.speed_reading(med, steady)[-1] == agreed.format(verdict=R.said("faster"))
    assert len(R.speed_reading(med, steady)) == 3
    assert R.verdict(0.6, [0.97, 1.02]) == "about the same" and R.verdict(0.6, [0.9, 1.02]) == "unclear"


def test_the_paired_ratios_pair_each_repeat_with_itself():
    samples = {"numpy": {"ln_f": [1.0, 2.0], "rms_f": [0.5, 3.0], "ln_b": [4.0, 4.0], "rms_b": [2.0, 8.0]}}
    assert R.paired_ratios(samples) == {"numpy": {"f": [0.5, 1.5], "b": [0.5, 2.0]}}


def test_the_timing_runs_torch_on_one_thread_and_discards_each_blocks_first_call():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    seen, log = [], []

    def call(name):
        def run():
            seen.append(torch.get_num_threads())
            log.append(name)

        return run

    calls = {path: {k: call(f"{path}.{k}") for k in ("ln_f", "rms_f")} for path in ("numpy", "torch")}
    samples = R.time_samples(calls, repeats=2)
    assert torch.get_num_threads() == before  # restored afterwards
    # warm-up (4 calls) aside, every call ran on one thread
    assert set(seen[4:]) == {1}
    # each path's block in each repeat starts with one extra, untimed call of its first function
    block = ["numpy.ln_f", "numpy.ln_f", "numpy.rms_f", "torch.ln_f", "torch.ln_f", "torch.rms_f"]
    assert log[4:] == block * 2
    assert all(len(v) == 2 for ks in samples.values() for v in ks.values())


# The speed step's length depends on the run: whether the fused kernels were compiled before (in this process, by
# another test or lesson, or in numba's on-disk cache) adds their row and reading, and the timings decide how long
# each reading is and whether the noise line shows. These timings make it as long as found: forward verdicts the
# repeats contradict, backward verdicts apart, and forward + backward below forward alone on every path.
LONGEST_TIMINGS = (
    # (forward ratios, forward + backward ratios) per path, one per repeat, cycled
    (((0.5,), (0.5, 1.5)), ((0.5, 1.5), (0.5,)), ((1.5,), (1.0,))),
    (((1.5,), (1.0,)),) * 3,
)


@pytest.mark.parametrize("timings", LONGEST_TIMINGS)
@pytest.mark.parametrize("compiled", [True, False], ids=["fused-compiled", "fused-not-compiled"])
@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_speed_step_fits_one_screen_however_the_run_falls(monkeypatch, timings, compiled, language):
    def samples(calls, repeats):
        out = {}
        for (forward, both), path in zip(timings, calls):
            # ln_b = 0.5 < ln_f = 1: forward + backward faster than forward alone, which only noise can do
            out[path] = {
                "ln_f": [1.0] * repeats,
                "rms_f": [forward[r % len(forward)] for r in range(repeats)],
                "ln_b": [0.5] * repeats,
                "rms_b": [0.5 * both[r % len(both)] for r in range(repeats)],
            }
        return out

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr(R, "time_samples", samples)
    monkeypatch.setattr(R, "_fused_compiled", lambda: "" if compiled else "not compiled yet, run bench --quick")
    english = parse_lesson(next(lessons_dir().glob("09-*.md")))
    lesson = english if language == i18n.ENGLISH else localized(english, language).lesson
    step = next(i for i, s in enumerate(english.steps) if any(d.name == "rms_speed" for d in s.demos))
    with i18n.use_language(language):
        outputs = step_outputs(lesson, step, lesson.params())
        heights = {
            w: len(_rendered(lesson, step, outputs, lesson.params(), w).splitlines()) - _code_lines(outputs, w)
            for w in WIDTHS
        }
    assert max(heights.values()) <= MAX_STEP_LINES, f"step {step + 1} of lesson 9: {heights} lines by width"


@pytest.mark.parametrize("eps", [0.0, 1e-5, 1.0])
def test_the_stretch_line_names_rounding_at_eps_0_and_eps_otherwise(eps):
    """At eps = 0, J·x is rounding, not something eps leaves (review-a 9); the closed form is 0 there."""
    text = render(run_demo("rms_jacobian_heatmap", LessonParams(dim=5, seed=4, eps=eps), {}).renderable, 300)
    assert ("rounding (eps = 0)" in text) == (eps == 0)
    assert ("what eps leaves" in text) == (eps != 0)
