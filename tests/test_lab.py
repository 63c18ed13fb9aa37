"""The training lab: its network against finite differences and PyTorch, its experiments' claims, its command.

The lessons (15 to 18) render the same cached runs; tests/test_lessons.py renders
them at two widths and with another seed, so the seeds checked here are the ones
the lessons show (0, and 3 for the changed-option render).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from microgradnorm import i18n
from microgradnorm import tolerances as tol
from microgradnorm.drawing.figure import Figure
from microgradnorm.exercises.catalog import derive_scaffold
from microgradnorm.i18n import _
from microgradnorm.lab import CATALOG, NEEDS_TORCH, pairs
from microgradnorm.lab import experiments as E
from microgradnorm.lab.experiments import INSTALL
from microgradnorm.lab.net import Net, NetSpec, cross_entropy
from microgradnorm.lab.task import CLASSES, FEATURES, teacher_task
from microgradnorm.lab.train import TrainConfig, batches, learning_rate, train
from microgradnorm.lessons.demos import DemoOutput, LessonParams, run_demo
from microgradnorm.lessons.demos_lab import _curve_prediction, _not_a_shift_prediction, _saved_for_backward
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from tests.helpers import numeric_grad, rendered, run_cli

EXERCISES = Path(__file__).parents[1] / "microgradnorm" / "exercises"
SOLUTION = EXERCISES / "solutions" / "05_layernorm_backward.py"
LESSON_SEEDS = (0, 3)  # the lessons' default seed and the one tests/test_lessons.py changes it to
# a central difference of the whole network's loss (float64, step FD_STEP): truncation and
# rounding are both near 1e-10 relative to gradients of order 1e-2 to 1; the check samples entries
NET_FD_RTOL = 1e-5
# ... and an absolute floor for gradients that are zero (a bias right before BatchNorm, whose mean
# BatchNorm removes): the difference quotient of a loss near 1 rounds to about 1e-16 / 1e-6
NET_FD_ATOL = 1e-9


# ---- the task and the training loop --------------------------------------------------------------------


def test_the_task_is_the_same_for_a_seed_and_every_class_is_common():
    a, b, c = teacher_task(0), teacher_task(0), teacher_task(1)
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.x_train, c.x_train)
    assert a.x_train.shape == (512, FEATURES) and set(a.y_train) == set(range(CLASSES))
    for task in (a, c):
        assert min(np.bincount(task.y_train, minlength=CLASSES)) > 0.15 * len(task.y_train)


def test_batches_cover_each_epoch_once_and_warmup_is_linear():
    cfg = TrainConfig(steps=32, batch=32, seed=5, warmup=4)
    seen = np.concatenate(list(batches(512, cfg)))
    assert sorted(seen[:512]) == list(range(512)) and sorted(seen[512:]) == list(range(512))
    assert [learning_rate(cfg, s) for s in range(6)] == pytest.approx([0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01])


SPECS = [NetSpec("mlp", 2, 6, norm) for norm in ("none", "batchnorm", "layernorm", "rmsnorm")] + [
    NetSpec("residual", 2, 6, "layernorm", placement) for placement in ("pre", "post")
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.norm}-{s.placement}")
def test_the_numpy_network_backward_matches_finite_differences(spec):
    """Every parameter's gradient; BatchNorm in training mode, where its statistics depend on the batch."""
    task = teacher_task(2)
    x, labels = task.x_train[:12], task.y_train[:12]
    net = Net(spec, 1)
    rng = np.random.default_rng(0)
    for p in net.parameters():  # norm parameters away from 1 and 0, which hide mistakes
        p += rng.normal(0.0, 0.3, p.shape)
    _, dlogits = cross_entropy(net.forward(x), labels)
    net.backward(dlogits)

    def loss_at(p: np.ndarray, value: np.ndarray) -> float:
        """The loss with the parameter p set to value (in training mode BatchNorm's running averages move, but its
        output does not use them)."""
        kept = p.copy()
        p[...] = value
        loss = cross_entropy(net.forward(x), labels)[0]
        p[...] = kept
        return loss

    for p, g in zip(net.parameters(), net.gradients()):
        numerical = numeric_grad(lambda value, p=p: loss_at(p, value), p.copy())
        assert tol.close(g, numerical, NET_FD_RTOL, NET_FD_ATOL)


def test_a_run_that_diverges_stops_at_the_first_non_finite_loss():
    run = train(Net(NetSpec("mlp", 3, 16, "none"), 0), teacher_task(0), TrainConfig(steps=40, lr=1e6, optimizer="sgd"))
    assert not np.isfinite(run.losses[-1]) and len(run.losses) < 40


# ---- the LayerNorm pairs -------------------------------------------------------------------------------


def test_gradient_check_passes_the_right_pairs_and_measures_the_slips_exactly():
    assert pairs.gradient_check(pairs.package_pair()).passed
    assert pairs.gradient_check(pairs.reference_pair()).passed
    slip = pairs.gradient_check(pairs.mistake_pair("no-1/d"))
    d = 6  # the check's rows have six features: dx is six times the right one, 500% off
    assert slip.dx == pytest.approx(d - 1, rel=1e-6) and not slip.passed
    assert slip.dgamma < tol.FD_RTOL and slip.dbeta < tol.FD_RTOL
    assert pairs.gradient_check(pairs.mistake_pair("no-mean-path")).dx > 1e-2
    with pytest.raises(ValueError, match="mistake: expected one of"):
        pairs.mistake_pair("typo")


def _copy(tmp_path, text: str | None = None) -> Path:
    """A learner's file of exercise 5 in ``tmp_path``: ``text``, or the reference solution."""
    target = tmp_path / "05_layernorm_backward.py"
    target.write_text(SOLUTION.read_text(encoding="utf-8") if text is None else text, encoding="utf-8")
    return target


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "is not written yet (NotImplementedError); solve exercise 5 first"),
        ("def layernorm_forward(x, gamma, beta, eps):\n    return x, None\n", "defines no function layernorm_backward"),
        ("def layernorm_forward(x, gamma, beta, eps)\n", "could not be run: SyntaxError"),
        (
            "def layernorm_forward(x, g, b, eps):\n    return x, None\n"
            "def layernorm_backward(dy, cache):\n    return dy[..., :2], 0, 0\n",
            "fails on a small input: ValueError",
        ),
    ],
    ids=["scaffold", "missing", "syntax", "shapes"],
)
def test_a_learner_file_that_cannot_be_used_is_one_line(tmp_path, content, words):
    scaffold = derive_scaffold(SOLUTION.read_text(encoding="utf-8"))  # what init gives the learner
    path = _copy(tmp_path, scaffold if content is None else content)
    with pytest.raises(ValueError) as info:
        pairs.learner_pair(path)
    assert words in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="which is not a file"):
        pairs.learner_pair(tmp_path / "nothing.py")


# ---- the experiments' claims ----------------------------------------------------------------------------


# the seeds the lessons show; the cheapest experiment also over the seeds a learner is likely to try
CLAIMED = [
    *((name, seed) for name in ("depth", "norms", "batch") for seed in LESSON_SEEDS),
    *(("wrong", s) for s in range(10)),
]


@pytest.mark.parametrize(("name", "seed"), CLAIMED)
def test_every_claim_holds_on_the_runs_the_lessons_show(name, seed):
    result = E.EXPERIMENTS[name](seed)
    assert result.claims and all(c.ok for c in result.claims), [c.text for c in result.claims if not c.ok]


@pytest.mark.parametrize("seed", LESSON_SEEDS)
def test_yours_claims_hold_with_the_engine_installed_here(seed):
    result = E.yours(seed)
    assert all(c.ok for c in result.claims), [c.text for c in result.claims if not c.ok]
    assert len(result.curves) == (3 if E.have_torch() else 2)


def test_yours_numpy_engine_matches_the_package_to_rounding():
    result = E.yours(0, use_torch=False)
    assert all(c.ok for c in result.claims)
    assert set(result.curves) == {"microgradnorm (NumPy)", E.YOURS_REFERENCE}


def test_a_wrong_learner_file_gives_a_failing_claim_not_a_passing_one(tmp_path):
    text = SOLUTION.read_text(encoding="utf-8").replace(
        "dx = rstd * (dxhat - mean_part - xhat * var_part)", "dx = rstd * (dxhat - xhat * var_part)"
    )
    assert "xhat * var_part)" in text
    result = E.yours(0, _copy(tmp_path, text), use_torch=False)
    failed = [c.text for c in result.claims if not c.ok]
    assert any("gradient check" in t for t in failed) and any("loss curve" in t for t in failed)
    # the "learns" claim is the baseline's run, and says so: its end is not the learner's
    (learns,) = (str(c.text) for c in result.claims if c.key == "learns")
    baseline = result.runs["microgradnorm (NumPy)"]
    said = _("with {baseline}, the network learns: loss {start:.2f} at the start, {end:.2f} at the end")
    assert learns == said.format(baseline="microgradnorm (NumPy)", start=baseline.losses[0], end=E.final_loss(baseline))


# ---- what lesson 16 says about the two slips, checked on the network itself ------------------------------

# A shift of a LayerNorm's input (the same number added to every feature of a row) changes its output only
# through rounding: the shifted row is recomputed at about 1e-16 of its size, so relative to logits of order 1
SHIFT_RTOL = 1e-12
# LayerNorm's eps (1e-5) breaks its scale invariance slightly: with row variances of order 0.1 to 1, scaling
# the input by c changes rstd's relative size by about eps / var, well under 1e-3
SCALE_RTOL = 1e-3


def _block1_gradient(net: Net, x: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    logits = net.forward(x)
    net.backward(cross_entropy(logits, labels)[1])
    return logits, net.blocks[0][0].grads[0].copy()


def test_a_change_of_the_same_size_in_every_row_of_w_before_a_layernorm_changes_nothing_after_it():
    """The 'shift' that lesson 16 separates from the no-mean-path error: a weight change 1 v^T on the
    Linear before a LayerNorm moves each example's outputs by one number, which LayerNorm removes."""
    task, rng = teacher_task(4), np.random.default_rng(7)
    x = task.x_train[:16]
    for k in range(E.MLP.depth):
        net = Net(E.MLP, 4)
        before = net.forward(x)
        w, b = net.blocks[k][0].params
        shift = np.ones((w.shape[0], 1)) * rng.normal(size=(1, w.shape[1]))  # out,in: every row the same
        w += shift
        b += rng.normal()
        assert np.max(np.abs(net.forward(x) - before)) <= SHIFT_RTOL * np.max(np.abs(before))
        w += rng.normal(size=w.shape) - shift  # a change that is not a shift does show
        assert np.max(np.abs(net.forward(x) - before)) > 1e-3 * np.max(np.abs(before))
    other = rng.normal(size=(8, 5))  # the experiment's "not a shift" part is orthogonal to every shift
    centered_sums = (other - other.mean(axis=0)).sum(axis=0)  # 8 terms of about |other| each, summing to 0
    assert np.allclose(centered_sums, 0.0, rtol=0.0, atol=tol.cancellation_atol(np.abs(other).max(), len(other)))


def test_weights_c_times_larger_before_a_layernorm_get_a_gradient_c_times_smaller():
    task, c = teacher_task(5), 10.0
    x, labels = task.x_train[:32], task.y_train[:32]
    net = Net(E.MLP, 5)
    logits, grad = _block1_gradient(net, x, labels)
    for p in net.blocks[0][0].params:
        p *= c
    logits_c, grad_c = _block1_gradient(net, x, labels)
    assert np.max(np.abs(logits_c - logits)) <= SCALE_RTOL * np.max(np.abs(logits))
    assert np.linalg.norm(grad_c * c - grad) <= SCALE_RTOL * np.linalg.norm(grad)


def test_adam_takes_the_same_first_step_for_a_gradient_scaled_by_a_constant_and_sgd_does_not():
    net, rng, c = Net(E.MLP, 0), np.random.default_rng(3), 1000.0
    grads = [rng.uniform(0.5, 1.5, p.shape) * rng.choice([-1.0, 1.0], p.shape) for p in net.parameters()]
    scaled = [c * g for g in grads]
    # Adam's step is m / (sqrt(v) + 1e-8): with |g| >= 0.5 the constant moves it by at most 2e-8, relatively
    assert E._first_step_difference(net, grads, scaled, "adam") <= 1e-7
    assert E._first_step_difference(net, grads, scaled, "sgd") == pytest.approx(c - 1.0, rel=1e-12)
    tiny = [g * 1e-8 for g in grads]  # gradients as small as the constant: there it does matter
    assert E._first_step_difference(net, tiny, [c * g for g in tiny], "adam") > 0.1


def test_the_curve_prediction_explains_only_the_gap_it_found():
    for gap, answer in ((3e-14, 0), (1e-4, 1), (0.3, 2)):
        outcome = E.Outcome("t", numbers={"your backward vs torch.nn.LayerNorm": gap})
        prediction = _curve_prediction(outcome)
        assert prediction.answer == answer
        assert ("only rounding" in prediction.why) == (answer == 0)


def test_claims_are_picked_by_key_and_a_missing_key_is_an_error():
    outcome = E.Outcome("t")
    outcome.claim("a", "first", True)
    outcome.claim("b", "second", False)
    assert [c.text for c in outcome.picked("b", "a")] == ["second", "first"]
    with pytest.raises(KeyError):
        outcome.picked("c")


def test_the_numpy_engine_chosen_with_torch_installed_does_not_say_torch_is_missing():
    pytest.importorskip("torch")
    assert not any("not installed" in note for note in E.yours(0, use_torch=False).notes)


def test_the_command_catalogue_names_the_experiments():
    assert set(CATALOG) == set(E.EXPERIMENTS) and set(NEEDS_TORCH) <= set(CATALOG)


# ---- the command -----------------------------------------------------------------------------------------


def test_lab_wrong_prints_its_claims_and_writes_an_svg(tmp_path, capsys):
    svg = tmp_path / "wrong.svg"
    code, out, _ = run_cli(capsys, "lab", "wrong", "--svg", str(svg))
    assert code == 0 and out.count("✓") == len(E.wrong(0).claims) and "✗" not in out
    text = svg.read_text(encoding="utf-8")
    assert text.startswith("<svg") and "no-mean-path (Adam)" in text


@pytest.mark.parametrize("where", ["missing/curves.svg", "."], ids=["no folder", "a folder"])
def test_an_svg_path_that_cannot_be_written_is_one_line_before_any_training(tmp_path, capsys, monkeypatch, where):
    monkeypatch.setattr(E, "EXPERIMENTS", {})  # nothing may train: the check comes first
    code, _, err = run_cli(capsys, "lab", "norms", "--svg", str(tmp_path / where))
    assert code == 2 and "\n" not in err.strip()
    assert err.strip().startswith("microgradnorm lab: error: argument --svg: expected a file")


def test_lab_yours_with_a_learner_file_and_its_errors(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "lab", "yours", "--file", str(_copy(tmp_path)), "--engine", "numpy")
    assert code == 0 and "your backward" in out
    code, _, err = run_cli(capsys, "lab", "yours", "--file", str(tmp_path / "missing.py"))
    assert code == 2 and err.strip().startswith("microgradnorm lab: error: --file:") and "\n" not in err.strip()
    code, _, err = run_cli(capsys, "lab")
    assert code == 2 and "required: EXPERIMENT" in err


def test_lab_help_says_which_experiments_need_torch(capsys):
    out = " ".join(run_cli(capsys, "lab", "--help")[1].split())
    assert "yours" in out and "need [torch]" in out and out.count("(NumPy only)") == len(CATALOG) - len(NEEDS_TORCH)


# ---- without PyTorch --------------------------------------------------------------------------------------

WITHOUT_TORCH = """
import io, sys
sys.modules["torch"] = None  # import torch now raises ImportError
from rich.console import Console
from microgradnorm import cli, i18n
from microgradnorm.lab import experiments as E
from microgradnorm.lessons import render
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.translation import localize
assert not E.have_torch()
print("exit", cli.main(["lab", "yours"]))
print("engine", cli.main(["lab", "yours", "--engine", "torch"]))
for path in sorted(lessons_dir().glob("1[5-8]-*.md")):
    lesson, notes = localize(parse_lesson(path), i18n.current_language())
    assert not notes, notes
    for i in range(len(lesson.steps)):
        outs = step_outputs(lesson, i, lesson.params())
        assert all(not isinstance(o, render.DemoFailure) for o in outs), (path.name, i, outs)
        console = Console(file=io.StringIO(), width=60, no_color=True, record=True)
        console.print(render.render_step(lesson, i, outs, lesson.params()))
        print(console.export_text())
"""


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_without_torch_the_lab_and_its_lessons_run_in_numpy_and_say_how_to_install_it(tmp_path, language):
    env = {"MICROGRADNORM_HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "80", "MICROGRADNORM_LANG": language}
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH], capture_output=True, text=True, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stderr
    text, err = ("".join(t.split()) for t in (out.stdout, out.stderr))  # Chinese wraps between any two characters
    with i18n.use_language(language):

        def said(message: str, **fields: str) -> str:
            return "".join(_(message).format(**fields).replace("`", "").split())  # `code` is shown without them

        assert "exit0" in text and "engine2" in text
        assert said("argument --engine: torch needs PyTorch, which is not installed: {install}", install=INSTALL) in err
        assert said("PyTorch is not installed: its curves need {install}", install=INSTALL) in text  # the command
        # lesson 15 step 3's table
        assert "PyTorch" + said("not installed") in text
        # lesson 15 step 2 says what replaces the three runs in its question (one colon: no "here: ")
        asked = said(
            "PyTorch is not installed here, so instead of the three runs described above there are two NumPy "
            "runs, the package's LayerNorm and exercise 5's answer (`{install}` adds PyTorch's). After {steps} "
            "steps, how far apart are their loss curves?",
            install=INSTALL,
            steps=str(E.ADAM.steps),
        )
        assert said("Predict: {question}", question=asked) in text
        # every claim line is a check mark (the ✗ in tables are data)
        assert said("✗ not shown by this run: {claim}", claim="").rstrip(":：") not in text
    if language != "en":  # the install hints are translated, not shown in English
        assert "PyTorchisnotinstalled" not in text and "notshownbythisrun" not in text


# ---- the lessons' demos -----------------------------------------------------------------------------------


def test_each_lab_lesson_asks_a_prediction_and_its_charts_are_also_svg_figures():
    for path in sorted(lessons_dir().glob("1[5-8]-*.md")):
        lesson = parse_lesson(path)
        outputs = [o for i in range(len(lesson.steps)) for o in step_outputs(lesson, i, lesson.params())]
        assert all(isinstance(o, DemoOutput) for o in outputs), path.name
        assert any(o.prediction is not None for o in outputs), f"{path.name} asks nothing before telling"
        figures = [o.graph for o in outputs if o.graph is not None]
        assert figures and all(isinstance(f, Figure) and f.svg().startswith("<svg") for f in figures), path.name


@pytest.mark.slow
def test_lesson_17_prints_the_same_numbers_when_run_twice_at_one_seed(tmp_path):
    """Two fresh processes (their own state folders, different string-hash seeds, the runs started in the
    background as the lesson starts them) print lesson 17 identically: nothing in it depends on the run.
    Both share one numba cache folder that starts empty, so the first compiles any kernel afresh and the
    second loads it from the cache (fastmath kernels may round differently in the two cases)."""
    outputs = []
    numba_cache = tmp_path / "numba-cache"  # empty: the first run compiles, the second loads
    for run, hash_seed in enumerate(("1", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "MICROGRADNORM_HOME": str(tmp_path / str(run)),
               "NUMBA_CACHE_DIR": str(numba_cache),
               "COLUMNS": "100", "PYTHONPATH": str(Path(__file__).parents[1])}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "microgradnorm", "lesson", "17", "--auto", "--lang", "en"],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert "✓" in outputs[0] and outputs[0] == outputs[1]


# ---- the questions of lessons 15 and 16 (demos_lab): answers against what the theory fixes ------------------


def _lab_question(name: str, seed: int = 0, **args):
    return run_demo(name, LessonParams(seed=seed), args)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_referee_question_answers_finite_differences_own_error(seed):
    """A central difference with h = 1e-6 in float64 is off by far more than rounding (h² and 1e-16 / h are both
    above 1e-12) and, for the right backward, far less than the pass mark: the middle choice, every seed."""
    q = _lab_question("lab_gradient_check", seed, ask=True).prediction
    worst = pairs.gradient_check(pairs.reference_pair(), seed).worst
    assert q.answer == 1 and 1e-12 <= worst <= tol.FD_RTOL
    assert f"{worst:.1e}" in q.why
    assert _lab_question("lab_gradient_check", seed).prediction is None


def test_the_slips_check_names_its_input_and_explains_the_no_1_over_d_error_as_d_minus_1():
    """The check's x is [2, 5, 6] (pairs.gradient_check: 2 batches of 5 rows of d = 6); the no-1/d dx is
    d times the right one, so its relative error is d − 1 = 5, the number the caption gives."""
    out = _lab_question("lab_gradient_check", which=("right", "no-1/d"))
    text = " ".join(rendered(out.renderable, 200).split())
    assert "on x [2, 5, 6]" in text and "(no-1/d: d − 1 = 5)" in text
    assert f"{pairs.gradient_check(pairs.mistake_pair('no-1/d')).dx:.1e}" == "5.0e+00"
    right_only = " ".join(rendered(_lab_question("lab_gradient_check").renderable, 200).split())
    assert "d − 1" not in right_only


def test_the_not_a_shift_column_is_in_percent_like_its_neighbour_and_the_question_names_all_blocks_but_the_last():
    """The last block's Linear feeds a LayerNorm directly, so the missing mean path changes its gradient by a
    shift only; the earlier blocks get the error through later weights, where it is no shift."""
    out = _lab_question("lab_wrong_why", part="mean")
    text = rendered(out.renderable, 200)
    assert "error without its shift" in text
    cells = [line.split()[-1] for line in text.splitlines() if line[:1].isdigit()]
    assert len(cells) == 4 and all(cell.endswith("%") for cell in cells), cells
    assert out.prediction.why.startswith("Shift taken out: block 1: ")
    assert out.prediction.answer == 2  # in every block but the last


@pytest.mark.parametrize(
    ("kept", "answer"),
    [((0.0, 0.0, 0.0), 0), ((0.0, 0.0, 0.3), 1), ((0.2, 0.3, 0.0), 2), ((0.2, 0.3, 0.4), 3), ((0.0, 0.3, 0.0), 4)],
)
def test_the_not_a_shift_question_has_one_true_choice_per_pattern(kept, answer):
    q = _not_a_shift_prediction(SimpleNamespace(extra={"mean_path_blocks": [(1.0, k) for k in kept]}))
    assert q.answer == answer
    assert [bool(e) for e in q.evidence] == [k == answer for k in range(len(q.choices))]


def test_the_mean_path_slip_trains_under_the_sgd_that_stalls_the_factor_slip():
    result = E.wrong(0)
    q = _lab_question("lab_wrong_why", part="blind").prediction
    end = E.final_loss(result.extra["sgd"]["no-mean-path"])
    assert q.answer == (0 if end < E.GUESSING / 2 else 1)
    assert f"{end:.2f}" in q.why
    # step 5's chart still draws the right backward and the factor slip only
    shown = rendered(_lab_question("lab_wrong_why", part="sgd").renderable, 100)
    assert "no-1/d (SGD)" in shown and "no-mean-path" not in shown


@pytest.mark.skipif(not E.have_torch(), reason="needs PyTorch")
def test_the_kept_question_reads_what_autograd_saved():
    """PyTorch's native layer_norm saves input, weight, bias, mean and rstd; this package's op saves no xhat."""
    out = _lab_question("lab_torch_status", ask=True)
    q = out.prediction
    assert q.answer == 1  # no: it keeps x and rebuilds xhat
    import torch

    x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    names = sorted(n for n, _s in _saved_for_backward(torch.nn.LayerNorm(5, dtype=torch.float64), x))
    assert names == ["beta", "gamma", "mean", "rstd", "x"]
    assert _lab_question("lab_torch_status").prediction is None
