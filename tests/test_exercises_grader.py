"""The grader, against deliberately wrong solutions: every failure mode gets its clear message,
and every diagnosis names the mistake that was planted.

Each wrong solution is a reference solution with one line changed, so the test
states exactly which mistake the grader must find. The files are graded once,
several at a time (tests.grading), and each test asserts on its result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from microgradnorm import formulas
from microgradnorm.exercises import messages, process
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.exercises.diagnose import Count, Geometry, geometry_findings, scale_finding, shape_findings
from microgradnorm.exercises.grader import grade
from microgradnorm.exercises.problems import get_problem
from tests.grading import (
    Submission,
    failed_rows,
    finding,
    findings,
    grade_all,
    keys,
    live_child_processes,
    planted,
    still_running,
    titles,
)

LN_DX = "dx = rstd * (dxhat - mean_part - xhat * var_part)  # B,T,D"
BN_DX_STAGED = "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift / m  # M,D"
BN_DX = "dx = rstd * (dxhat - dxhat.mean(axis=0) - xhat * (dxhat * xhat).mean(axis=0))  # M,D"
LN_VAR = "var = (xshift * xshift).mean(axis=-1, keepdims=True)  # B,T,1"
LN_MEAN = "mean = x.mean(axis=-1, keepdims=True)  # B,T,1"
UNBIASED_VAR = "var = (xshift * xshift).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)"
LN_MEAN_PART = "mean_part = dxhat.mean(axis=-1, keepdims=True)  # B,T,1: the path through the mean"
RMS_DX = "dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # N,D"

# (exercise, line in the solution, planted mistake, the finding it must give: its message key, or (key, the facts
# the learner is told: the finding's parameters)); several changes are (line, mistake) pairs. Laid out by hand as a
# table (fmt: skip), one planted mistake an entry.
DIAGNOSES = [
    pytest.param(5, LN_DX, "dx = rstd * (dxhat - xhat * var_part)", "mean_path_missing", id="ln-no-mean-path"),
    pytest.param(5, LN_DX, "dx = rstd * (dxhat - mean_part)", "variance_path_missing", id="ln-no-var-path"),
    pytest.param(5, LN_DX, "dx = rstd * dxhat", "direct_path_only", id="ln-direct-only"),
    pytest.param(5, LN_VAR, UNBIASED_VAR, ("unbiased_variance", {"n": 5, "n_minus_1": 4}), id="ln-unbiased"),
    pytest.param(5, "return dx, dgamma, dbeta", "return dx, dbeta, dgamma",
                 ("swapped_outputs", {"first": "dgamma", "second": "dbeta"}), id="ln-swapped"),
    pytest.param(5, "rstd = 1.0 / np.sqrt(var + eps)  # B,T,1", "rstd = 1.0 / np.sqrt(var)", "eps_left_out",
                 id="ln-no-eps"),
    pytest.param(5, "dxhat = dy * gamma  # B,T,D", "dxhat = dy", "gamma_left_out_dx", id="ln-no-gamma"),
    pytest.param(6, BN_DX_STAGED, "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift * (m - 1) / m**2",
                 ("variance_path_slip", {"m": 6}), id="bn-m-minus-1-slip"),
    pytest.param(6, "dvar = -0.5 * std**-3 * (dxhat * xshift).sum(axis=0, keepdims=True)  # 1,D",
                 "dvar = -0.5 * rstd * (dxhat * xshift).sum(axis=0, keepdims=True)", "dvar_power", id="bn-dvar-power"),
    pytest.param(7, BN_DX, "dx = rstd * (dxhat - dxhat.mean(axis=1, keepdims=True) - xhat * "
                           "(dxhat * xhat).mean(axis=1, keepdims=True))",
                 ("wrong_axis_backward", {"wrong": "1", "right": "0"}), id="bn-wrong-axis"),
    pytest.param(8, RMS_DX, "dx = rrms * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * "
                            "(dxhat * xhat).mean(axis=-1, keepdims=True))",
                 "rms_layernorm_formula", id="rms-mean-term"),
    pytest.param(8, RMS_DX, "dx = rrms * dxhat", "rms_path_missing", id="rms-no-radial"),
    pytest.param(9, "return rstd * gamma[:, None] * (np.eye(d) - projection(xhat))",
                 "return rstd * (np.eye(d) - projection(xhat)) * gamma[None, :]", "j_transposed",
                 id="jacobian-transposed"),
    pytest.param(9, "return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d", "return np.outer(ones, ones) / d",
                 "p_no_radial", id="projection-no-radial"),
    pytest.param(10, "    delta = value - mean\n    mean += delta / count\n    m2 += delta * (value - mean)",
                 "    s = m2 + (count - 1) * mean * mean + value * value\n    mean += (value - mean) / count\n"
                 "    m2 = s - count * mean * mean",
                 "cancellation", id="welford-naive"),
    pytest.param(11, "return dy + dx_ln, dgamma, dbeta, dW", "return dx_ln, dgamma, dbeta, dW", "identity_path_missing",
                 id="preln-no-identity"),
    pytest.param(11, "dh = dy @ W.T  # N,D", "dh = dy @ W", "w_not_transposed", id="preln-w-not-transposed"),
    pytest.param(11, "dW = h.T @ dy  # D,D", "dW = dy.T @ h", "dw_transposed", id="preln-dw-transposed"),
    pytest.param(1, "return p * a ** (p - 1.0) * dout", "return p * a**p * dout", "pow_not_lowered", id="pow-power"),
    pytest.param(1, "return 0.5 / np.sqrt(a) * dout", "return 1 / np.sqrt(a) * dout", "sqrt_no_half", id="sqrt-half"),
    pytest.param(1, "return dout / b, -a / b**2 * dout", "return dout / b, -a / b * dout", "div_b_not_squared",
                 id="div"),
    pytest.param(2, "return 2.0 * xshift * dvar / d", "return 2.0 * xshift * dvar / (d - 1)",
                 ("scale_unbiased", {"n": 5}), id="variance-unbiased-ratio"),
    pytest.param(2, "return np.ones_like(x) * dmean / d", "return np.ones_like(x) * dmean",
                 ("scale_missing_1_over_n", {"n": 5}), id="mean-no-1/n"),
]  # fmt: skip


# the diagnoses issue 13 asked for, and the wording it asked to fix
DIAGNOSES += [
    pytest.param(5, (LN_MEAN, "mean = x.sum(axis=-1, keepdims=True) / x.shape[0]  # B,T,1"),
                 (LN_VAR, "var = (xshift * xshift).sum(axis=-1, keepdims=True) / x.shape[0]  # B,T,1"),
                 ("wrong_count", {"right": 5, "wrong": 2}), id="ln-rows-not-row-length"),
    pytest.param(2, ("return np.ones_like(x) * dmean / d", "return np.ones_like(x) * dmean / x.shape[0]"),
                 ("scale_count", {"right": 5, "wrong": 3}), id="mean-rows-not-row-length"),
    pytest.param(4, ("dgamma = (dy * xhat).sum(axis=lead)  # D", "dgamma = (dy * xhat).mean(axis=lead)"),
                 ("param_mean_not_sum", {"param": "gamma"}), id="affine-mean-not-sum"),
    pytest.param(9, ("rstd = 1.0 / np.sqrt((xshift * xshift).mean() + eps)",
                     "rstd = 1.0 / np.sqrt((xshift * xshift).mean())"), "j_eps_left_out", id="jacobian-without-eps"),
    pytest.param(10, ("m2 += delta * (value - mean)", "m2 += delta * delta"), "welford_delta_squared",
                 id="welford-delta-squared"),
    pytest.param(5, (LN_MEAN_PART, "mean_part = 0.5 * dxhat.mean(axis=-1, keepdims=True)"),
                 ("geometry_mean_scaled", {"yours": pytest.approx(0.5)}),  # measured against the right mean path
                 id="ln-half-mean-path"),
]  # fmt: skip


# found by the review: typical mistakes that had no name, or a misleading one
BN_DX_SUMS = "dx = rstd * (dxhat - dxhat.sum(axis=0) - xhat * (dxhat * xhat).sum(axis=0))"
DIAGNOSES += [
    pytest.param(2, ("xshift = x - x.mean(axis=1, keepdims=True)  # N,D", "xshift = x - x.mean(axis=0, keepdims=True)"),
                 "var_mean_wrong_axis", id="variance-mean-over-columns"),
    pytest.param(2, ("return 2.0 * xshift * dvar / d", "return 2.0 * xshift * dvar / d * (d - 1) / d"),
                 ("variance_path_slip", {"m": 5}), id="variance-slip"),  # the slip, not "unbiased variance"
    # D, which divides nothing here: not "a mean where a sum belongs"
    pytest.param(4, ("dbeta = dy.sum(axis=lead)  # D", "dbeta = dy.sum(axis=lead) / dy.shape[-1]"),
                 ("scale_extra_count", {"n": 5}), id="affine-divided-by-d"),
    pytest.param(5, (LN_MEAN_PART, "mean_part = dxhat.sum(axis=-1, keepdims=True) / (dxhat.shape[0] * dxhat.shape[1])"),
                 ("var_part = (dxhat * xhat).mean(axis=-1, keepdims=True)  # B,T,1: the path through the variance",
                  "var_part = (dxhat * xhat).sum(axis=-1, keepdims=True) / (dxhat.shape[0] * dxhat.shape[1])"),
                 ("geometry_count", {"n": 5, "k": 6}), id="ln-dx-divided-by-rows"),  # B*T rows, not the row length
    pytest.param(7, (BN_DX, BN_DX_SUMS), "geometry_count_sum", id="bn-dx-sums"),
    pytest.param(7, (BN_DX, BN_DX_SUMS.replace("sum(axis=0)", "sum(axis=0) / (len(dy) - 1)")),
                 ("geometry_count_unbiased", {"n": 6, "k": 5}), id="bn-dx-unbiased-count"),
    pytest.param(10, ("mean += delta / count", "mean += delta / max(count - 1, 1)"), "welford_old_count",
                 id="welford-late"),
    pytest.param(5, ("rstd = 1.0 / np.sqrt(var + eps)  # B,T,1", "rstd = 1.0 / np.sqrt(var + (eps or 1e-5))"),
                 "eps_zero_changed", id="ln-eps-zero-guarded"),
    pytest.param(5,
                 ("rstd = 1.0 / np.sqrt(var + eps)  # B,T,1", "rstd = 1.0 / np.sqrt((var + eps).astype(np.float32))"),
                 "estimate_value", id="ln-float32-forward"),  # a forward value is not a finite-difference estimate
]  # fmt: skip


def _diagnosis_submissions(folder: Path) -> list[Submission]:
    subs = []
    for p in DIAGNOSES:
        number, *rest, _ = p.values
        changes = [tuple(rest)] if all(isinstance(r, str) for r in rest) else rest  # one (old, new), or several
        subs.append(Submission(p.id, number, planted(folder, number, *changes)))
    return subs


MUL = "return b * dout, a * dout"
# (id, exercise, change, expected status, words in the summary)
FAILURES = [
    ("timeout", 1, (MUL, "while True:\n        pass"), "timeout", "did not finish within 2 s"),
    ("sys-exit", 1, (MUL, "import sys\n    sys.exit(3)"), "error", "sys.exit(3)"),
    ("os-exit", 1, (MUL, "import os\n    os._exit(0)"), "crashed", "before it returned a result"),
    ("segfault", 1, (MUL, "import faulthandler\n    faulthandler._sigsegv()"), "crashed", "SIGSEGV"),
    ("memory", 1, (MUL, "big = np.ones(80_000_000)\n    return big, big"), "error", "ran out of memory"),
    ("crash", 1, (MUL, "raise KeyError('oops')"), "error", "raised KeyError"),
    ("bad-return", 1, (MUL, "return b * dout"), "error", "must return 2 values (da, db)"),
    ("torch-refused", 1, (MUL, "import torch"), "error", "cannot be imported while an exercise is graded"),
]
# (id, change, failed row, words in its detail)
RETURNS = [
    ("list", (MUL, "return (b * dout).tolist(), a * dout"), "types and shapes", "is a Python list"),
    ("none", (MUL, "return None, a * dout"), "types and shapes", "is None"),
    ("dtype", (MUL, "return (b * dout).astype(np.float32), a * dout"), "types and shapes", "dtype float32"),
    ("nan", (MUL, "return b * dout * np.nan, a * dout"), "finite", "NaN"),
    ("inf", (MUL, "return b * dout / 0.0, a * dout"), "finite", "Inf"),
    ("scalar", (MUL, "return float(b[0] * dout[0]), a * dout"), "types and shapes", "single number"),
    ("complex", (MUL, "return b * dout + 0j, a * dout"), "types and shapes", "dtype complex128"),
]
OTHERS = {
    "syntax": (1, (MUL, "return b * dout,, a * dout")),
    "strings": (1, (MUL, 'return "da", "db"')),
    "second-run": (
        1,
        (MUL, "global CALLS\n    CALLS = globals().get('CALLS', 0) + 1\n    return b * dout * CALLS, a * dout"),
    ),
    "writable-input": (
        1,
        (MUL, "da, db = b * dout, a * dout\n    a.flags.writeable = True\n    a[0] = 42.0\n    return da, db"),
    ),
    "read-only-input": (1, (MUL, "a *= 1.0\n    return b * dout, a * dout")),
    "fake-print-wrong": (
        1,
        (MUL, 'print("Every check passed. {\\"status\\": \\"passed\\"}")\n    return a * dout, a * dout'),
    ),
    "fake-print-right": (
        1,
        (MUL, 'print("Every check passed. {\\"status\\": \\"passed\\"}")\n    return b * dout, a * dout'),
    ),
    "keepdims": (4, ("dgamma = (dy * xhat).sum(axis=lead)  # D", "dgamma = (dy * xhat).sum(axis=lead, keepdims=True)")),
    "one-axis": (4, ("dgamma = (dy * xhat).sum(axis=lead)  # D", "dgamma = (dy * xhat).sum(axis=0)")),
    "no-keepdims": (5, ("mean = x.mean(axis=-1, keepdims=True)  # B,T,1", "mean = x.mean(axis=-1)")),
    "hard-coded": (2, ("    d = x.shape[1]\n    return np.ones_like(x)", "    d = 5\n    return np.ones_like(x)")),
    "library-layer-norm": (
        3,
        (
            "    d = len(x)\n",
            "    from microgradnorm import layer_norm as lib\n\n    return lib(x, gamma, beta, eps)\n",
        ),
    ),
    "slip-geometry": (6, (BN_DX_STAGED, "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift * (m - 1) / m**2")),
    "floats-not-values": (
        3,
        (
            "return [g * (s * rstd) + b for s, g, b in zip(xshift, gamma, beta)]",
            "return [(g * (s * rstd) + b).data for s, g, b in zip(xshift, gamma, beta)]",
        ),
    ),
    "matmul-not-keepdims": (11, ("dW = h.T @ dy  # D,D", "dW = h * dy[:, :1].T @ dy")),
    "mean-path-geometry": (5, (LN_DX, "dx = rstd * (dxhat - xhat * var_part)")),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    subs = _diagnosis_submissions(folder)
    subs += [Submission(i, n, planted(folder, n, change), timeout=2.0, memory_mb=384) for i, n, change, *_ in FAILURES]
    subs += [Submission(i, 1, planted(folder, 1, change)) for i, change, *_ in RETURNS]
    subs += [Submission(i, n, planted(folder, n, change)) for i, (n, change) in OTHERS.items()]
    subs.append(Submission("unbiased-seed-3", 5, planted(folder, 5, (LN_VAR, UNBIASED_VAR)), seed=3))
    return grade_all(subs)


@pytest.mark.parametrize("sid, named", [(p.id, p.values[-1]) for p in DIAGNOSES], ids=[p.id for p in DIAGNOSES])
def test_planted_mistake_is_named(graded, sid, named):
    result = graded[sid]
    assert not result.passed
    key, facts = named if isinstance(named, tuple) else (named, {})
    found = [f for f in findings(result) if f.key == key]
    assert any(facts.items() <= f.params.items() for f in found), (key, facts, titles(result))
    # the worst entry is shown with expected and got, and they differ
    assert result.worst is not None
    assert result.worst.expected != result.worst.got
    assert "by not " not in titles(result)  # the wording issue 13 named: every finding reads as a sentence


def test_geometry_shows_the_sums_and_the_share_along_ones(graded):
    said = finding(graded["mean-path-geometry"], "geometry_mean_missing").params
    assert said["share"].fields["ones"] != "0%" and said["sum_got"] > 0.1  # the true dx sums to 0
    assert "along the ones vector" in titles(graded["mean-path-geometry"])


def test_unbiased_forward_names_the_factor_sqrt_n_over_n_minus_1(graded):
    result = graded["unbiased-seed-3"]
    assert result.worst.output == "y"
    assert f"{np.sqrt(5 / 4):.6g}" in titles(result)  # first input: D = 5


@pytest.mark.parametrize(
    "sid, row, key, words",
    [
        ("slip-geometry", None, None, ("off along xhat", "(m-1)/m")),  # the (m-1)/m slip, by geometry too
        ("keepdims", "types and shapes", "keepdims", ("only the shape is off",)),
        ("one-axis", None, "wrong_axis_shape", ("axis (0, 1)",)),  # a sum over one axis too few
        ("second-run", "same answer twice", "second_run_differs", ()),  # a different answer on a second run
        ("writable-input", "inputs untouched", "input_modified", ()),  # even when the array is made writable
        ("no-keepdims", None, None, ("keepdims",)),  # the crash of a statistic without keepdims, explained
    ],
)
def test_a_mistake_fails_its_row_and_is_named(graded, sid, row, key, words):
    """The row that fails (where one is named), the finding's key, and words its findings say."""
    result = graded[sid]
    assert row is None or row in failed_rows(result), failed_rows(result)
    assert key is None or key in keys(result), keys(result)
    for word in words:
        assert word in titles(result), titles(result)


@pytest.mark.parametrize(
    "sid, words, where",
    [
        ("no-keepdims", "ValueError", "xshift = x - mean"),  # a statistic without keepdims crashes
        ("syntax", "cannot read your file", "line"),  # a syntax error, with its line
        ("library-layer-norm", "cannot be used while an exercise is graded: only Value can", None),
    ],
)
def test_an_error_says_what_happened_and_where(graded, sid, words, where):
    result = graded[sid]
    assert result.status == "error"
    assert words in result.summary, result.summary
    assert where is None or (result.where and where in result.where), result.where


def test_values_turned_into_floats_are_named_as_such(graded):
    summary = graded["floats-not-values"].summary
    assert messages.recognise(summary.removesuffix(".")) == ("values_strays", {"d": "5", "k": "5", "stray": "float"})


def test_a_broadcast_error_that_lost_no_axis_is_not_called_keepdims(graded):
    result = graded["matmul-not-keepdims"]
    assert "could not be broadcast" in result.summary
    assert "keepdims" not in titles(result)


def test_hard_coded_size_passes_the_first_input_and_fails_the_second(graded):
    result = graded["hard-coded"]
    assert failed_rows(result) == {"second input"}
    assert "right_first_wrong_second" in keys(result)


def test_the_affine_case_names_its_whole_shape():
    """Exercise 04's inputs were once described as "dy and xhat [3;": cut at the shape's first comma."""
    case = get_problem("04_affine_backward").make_case(np.random.default_rng(0), True)
    assert case.label == "second input: dy and xhat [3, 4, 6]"


# ---- failure modes of the process and of the returned values ---------------------------


@pytest.mark.parametrize("sid, number, change, status, words", FAILURES, ids=[f[0] for f in FAILURES])
def test_process_failures_have_clear_messages(graded, sid, number, change, status, words):
    result = graded[sid]
    assert not result.passed
    assert result.status == status, result.summary
    assert words in result.summary, result.summary


@pytest.mark.parametrize("sid, change, row, words", RETURNS, ids=[r[0] for r in RETURNS])
def test_returned_value_problems(graded, sid, change, row, words):
    result = graded[sid]
    assert row in failed_rows(result)
    detail = " ".join(r.detail for r in result.rows if r.label == row)
    assert words in detail


def test_finiteness_is_claimed_only_for_outputs_that_are_numbers(graded):
    result = graded["strings"]
    (finite,) = [r for r in result.rows if r.label == "finite"]
    assert "types and shapes" in failed_rows(result)
    assert finite.ok is True and "among the" in finite.detail  # the strings were not looked at for NaN


def test_writing_into_a_read_only_input_is_explained(graded):
    result = graded["read-only-input"]
    assert result.status == "error"
    assert messages.recognise(result.summary, {"mutates_input": messages.SAYINGS["mutates_input"]})


def test_printing_does_not_change_the_grade(graded):
    wrong, right = graded["fake-print-wrong"], graded["fake-print-right"]
    assert not wrong.passed and "Every check passed" in wrong.printed  # shown back, dimmed, but not believed
    assert right.passed and "Every check passed" in right.printed


def test_missing_file_says_how_to_get_it_back(tmp_path):
    result = grade(get_exercise(1), tmp_path / "nope.py")
    assert not result.passed
    assert "exercise reset 1" in result.summary


def test_fresh_seed_each_check_and_a_given_seed_repeats(tmp_path):
    ex = get_exercise(5)
    path = planted(tmp_path, 5, (LN_DX, "dx = rstd * (dxhat - mean_part)"))
    results = grade_all([Submission(str(i), 5, path, seed=11 if i < 2 else None) for i in range(4)])
    assert results["0"].worst == results["1"].worst
    assert len({results[k].seed for k in ("1", "2", "3")}) == 3
    assert ex.name == results["0"].exercise.name


def test_an_interrupted_check_leaves_no_process_behind(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, turned into SystemExit) while the learner's endless loop runs: the loop dies too."""
    path = planted(tmp_path, 1, (MUL, "while True:\n        pass"))
    real_select = process.select.select
    started = time.monotonic()
    ours: list[int] = []  # this test's supervisor and child (the other worker may be grading too)

    def interrupted(*args):
        if time.monotonic() - started > 1.0:  # the learner's loop is running by now
            ours.extend(live_child_processes(root=os.getpid()))
            raise KeyboardInterrupt
        return real_select(*args[:3], min(args[3], 0.1))

    monkeypatch.setattr(process.select, "select", interrupted)
    with pytest.raises(KeyboardInterrupt):
        grade(get_exercise(1), path, timeout=30.0)
    monkeypatch.undo()
    assert len(ours) >= 2, "the supervisor and the learner's loop were not running"
    assert still_running(ours) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and the control pipe's EOF are what is tested")
def test_a_grader_killed_outright_takes_its_child_along(tmp_path):
    """kill -9 on the grader: the supervisor reads EOF on the control pipe and kills the learner's loop."""
    path = planted(tmp_path, 1, (MUL, "while True:\n        pass"))
    env = {**os.environ, "MICROGRADNORM_HOME": str(tmp_path / "state")}
    script = (
        "import sys; from microgradnorm.exercises.catalog import get_exercise; "
        "from microgradnorm.exercises.grader import grade; grade(get_exercise(1), sys.argv[1], timeout=120)"
    )
    middle = subprocess.Popen([sys.executable, "-c", script, str(path)], env=env)
    try:
        deadline = time.monotonic() + 60
        while len(live_child_processes(root=middle.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the learner's loop is running
        ours = live_child_processes(root=middle.pid)  # its supervisor and child (not the other worker's)
        assert len(ours) >= 2, "the child never started"
    finally:
        middle.send_signal(signal.SIGKILL)
        middle.wait()
    deadline = time.monotonic() + 15
    while still_running(ours) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert still_running(ours) == []


# ---- the diagnosis tools on their own, against the closed forms ---------------------------


def _ln_problem(seed: int = 0, eps: float = 0.0):
    rng = np.random.default_rng(seed)
    x, gamma, dy = rng.normal(0.5, 2.0, (3, 6)), rng.uniform(0.5, 1.5, 6), rng.normal(size=(3, 6))
    m = formulas.moments(x, (1,), eps)
    gx = formulas.dxhat(dy, gamma)
    direct, via_mean, via_var = formulas.dx_paths(gx, m.xshift, m.std, m.rstd, (1,))
    dvar = formulas.dvar(gx, m.xshift, m.std, (1,))
    geom = Geometry((1,), m.xhat, formulas.dmean(gx, m.rstd, (1,)) / 6, dvar * 2.0 * m.std / 6, eps)
    return direct, via_mean, via_var, geom


def test_geometry_names_each_missing_path():
    direct, via_mean, via_var, geom = _ln_problem()
    right = direct + via_mean + via_var
    assert [f.key for f in geometry_findings(direct + via_var, right, geom)] == ["geometry_mean_missing"]
    assert [f.key for f in geometry_findings(direct + via_mean, right, geom)] == ["geometry_radial_missing"]
    (slip,) = geometry_findings(direct + via_mean + via_var * 5 / 6, right, geom)
    assert (slip.key, slip.params["m"]) == ("geometry_radial_slip", 6) and "(m-1)/m" in slip.title
    both = {f.key for f in geometry_findings(direct, right, geom)}
    assert both == {"geometry_mean_missing", "geometry_radial_missing"}
    # an error outside the plane of 1 and xhat blames no term (issue 28: the direct path was blamed for
    # mistakes elsewhere); it says only that no single path explains it
    outside = geometry_findings(right + np.random.default_rng(1).normal(size=right.shape), right, geom)
    assert [f.key for f in outside] == ["not_paths_alone"]


def test_geometry_reports_the_invariants_at_eps_zero():
    direct, via_mean, via_var, geom = _ln_problem(eps=0.0)
    right = direct + via_mean + via_var
    # the right answer satisfies both identities; the planted error breaks the second one
    assert np.allclose(right.sum(axis=1), 0.0) and np.allclose((right * geom.xhat).sum(axis=1), 0.0)
    detail = geometry_findings(direct + via_mean, right, geom)[0].detail
    assert "orthogonal to xhat" in detail


def test_scale_finding_names_a_division_by_the_wrong_count():
    right = np.random.default_rng(2).normal(size=(4, 5))
    counts = (Count(5, "the row length"), Count(4, "the number of rows"))
    found = scale_finding(right * 5 / 4, right, None, counts)
    assert (found.key, found.params["wrong"], found.params["right"]) == ("scale_count", 4, 5)
    assert (found.params["wrong_what"], found.params["right_what"]) == ("the number of rows", "the row length")
    assert "5/4" in found.detail


def test_scale_finding_names_the_unbiased_factors():
    right = np.random.default_rng(2).normal(size=(4, 5))
    found = [scale_finding(right * k, right, 5).key for k in (5 / 4, np.sqrt(4 / 5), -1, 3.7)]
    assert found == ["scale_unbiased", "scale_unbiased_std", "sign_flipped", "scale_other"]
    assert scale_finding(right + 1.0, right, 5) is None


def test_shape_findings():
    assert (
        shape_findings("dgamma", (1, 1, 8), (8,))[0].key == shape_findings("dmean", (4,), (1, 4))[0].key == "keepdims"
    )
    assert shape_findings("dgamma", (3, 8), (8,), x_shape=(2, 3, 8))[0].key == "wrong_axis_shape"
    assert shape_findings("J", (5, 4), (4, 5))[0].key == "transposed_shape"
    assert shape_findings("dx", (7,), (4, 5))[0].key == "wrong_shape"


def test_the_grading_process_itself_runs_with_warnings_as_errors_and_numpy_raising(tmp_path):
    """As under ``python -X dev -W error``: a NaN, an Inf, a wrong scale or path is judged, never a crash."""
    import warnings

    wrong = [
        (1, (MUL, "return b * dout / 0.0, a * dout * np.nan")),
        (5, (LN_DX, "dx = rstd * (dxhat - 2.0 * mean_part - xhat * var_part * 0.0)")),
        (8, (RMS_DX, "dx = rrms * 0.0")),
    ]
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        for number, change in wrong:
            result = grade(get_exercise(number), planted(tmp_path, number, change))
            assert not result.passed and result.findings, result.summary
