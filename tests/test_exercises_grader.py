"""The grader, against deliberately wrong solutions: every failure mode gets its clear message,
and every diagnosis names the mistake that was planted.

Each wrong solution is a reference solution with one line changed, so the test
states exactly which mistake the grader must find.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from microgradnorm import formulas
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.exercises.diagnose import Geometry, geometry_findings, scale_finding, shape_findings
from microgradnorm.exercises.grader import grade


@pytest.fixture(autouse=True)
def _private_state(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))


def planted(tmp_path: Path, number: int, old: str, new: str) -> tuple[object, Path]:
    """The reference solution of exercise ``number`` with ``old`` replaced by ``new``."""
    ex = get_exercise(number)
    source = ex.solution.read_text(encoding="utf-8")
    assert source.count(old) == 1, f"{old!r} is not in the solution of {ex.name} exactly once"
    path = tmp_path / ex.filename
    path.write_text(source.replace(old, new), encoding="utf-8")
    return ex, path


def titles(result) -> str:
    return " | ".join(f"{f.title}: {f.detail}" for f in result.findings)


def failed_rows(result) -> set[str]:
    return {row.label for row in result.rows if row.ok is False}


LN_DX = "dx = rstd * (dxhat - mean_part - xhat * var_part)  # B,T,D"
BN_DX_STAGED = "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift / m  # M,D"
BN_DX = "dx = rstd * (dxhat - dxhat.mean(axis=0) - xhat * (dxhat * xhat).mean(axis=0))  # M,D"
LN_VAR = "var = (xshift * xshift).mean(axis=-1, keepdims=True)  # B,T,1"

# (exercise, line in the solution, planted mistake, words the diagnosis must contain)
DIAGNOSES = [
    pytest.param(
        5, LN_DX, "dx = rstd * (dxhat - xhat * var_part)", "the path through the mean is missing", id="ln-no-mean-path"
    ),
    pytest.param(
        5, LN_DX, "dx = rstd * (dxhat - mean_part)", "the path through the variance is missing", id="ln-no-var-path"
    ),
    pytest.param(5, LN_DX, "dx = rstd * dxhat", "only the direct path", id="ln-direct-only"),
    pytest.param(
        5,
        LN_VAR,
        "var = (xshift * xshift).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)",
        "unbiased variance",
        id="ln-unbiased",
    ),
    pytest.param(
        5, "return dx, dgamma, dbeta", "return dx, dbeta, dgamma", "dgamma and dbeta swapped", id="ln-swapped"
    ),
    pytest.param(
        5, "rstd = 1.0 / np.sqrt(var + eps)  # B,T,1", "rstd = 1.0 / np.sqrt(var)", "eps left out", id="ln-no-eps"
    ),
    pytest.param(5, "dxhat = dy * gamma  # B,T,D", "dxhat = dy", "gamma left out of dx", id="ln-no-gamma"),
    pytest.param(
        6,
        BN_DX_STAGED,
        "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift * (m - 1) / m**2",
        "seed 003's (m-1)/m slip",
        id="bn-seed-003",
    ),
    pytest.param(
        6,
        "dvar = -0.5 * std**-3 * (dxhat * xshift).sum(axis=0, keepdims=True)  # 1,D",
        "dvar = -0.5 * rstd * (dxhat * xshift).sum(axis=0, keepdims=True)",
        "the power -1/2 instead of -3/2",
        id="bn-dvar-power",
    ),
    pytest.param(
        7,
        BN_DX,
        "dx = rstd * (dxhat - dxhat.mean(axis=1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))",
        "wrong axis",
        id="bn-wrong-axis",
    ),
    pytest.param(
        8,
        "dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # N,D",
        "dx = rrms * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))",
        "the LayerNorm formula",
        id="rms-mean-term",
    ),
    pytest.param(
        8,
        "dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # N,D",
        "dx = rrms * dxhat",
        "the path through the rms is missing",
        id="rms-no-radial",
    ),
    pytest.param(
        9,
        "return rstd * gamma[:, None] * (np.eye(d) - projection(xhat))",
        "return rstd * (np.eye(d) - projection(xhat)) * gamma[None, :]",
        "transposed",
        id="jacobian-transposed",
    ),
    pytest.param(
        9,
        "return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d",
        "return np.outer(ones, ones) / d",
        "the xhat xhat^T term is missing",
        id="projection-no-radial",
    ),
    pytest.param(
        10,
        "    delta = value - mean\n    mean += delta / count\n    m2 += delta * (value - mean)",
        "    s = m2 + (count - 1) * mean * mean + value * value\n    mean += (value - mean) / count\n"
        "    m2 = s - count * mean * mean",
        "cancellation",
        id="welford-naive",
    ),
    pytest.param(
        11,
        "return dout + dx_ln, dgamma, dbeta, dW",
        "return dx_ln, dgamma, dbeta, dW",
        "identity path is missing",
        id="preln-no-identity",
    ),
    pytest.param(11, "dh = dout @ W.T  # N,D", "dh = dout @ W", "W instead of W.T", id="preln-w-not-transposed"),
    pytest.param(11, "dW = h.T @ dout  # D,D", "dW = dout.T @ h", "transposed", id="preln-dw-transposed"),
    pytest.param(
        1, "return p * a ** (p - 1.0) * dout", "return p * a**p * dout", "the exponent was not lowered", id="pow-power"
    ),
    pytest.param(1, "return 0.5 / np.sqrt(a) * dout", "return 1 / np.sqrt(a) * dout", "the factor 1/2", id="sqrt-half"),
    pytest.param(
        1, "return dout / b, -a / b**2 * dout", "return dout / b, -a / b * dout", "b is not squared", id="div"
    ),
    pytest.param(
        2,
        "return 2.0 * xshift * dvar / d",
        "return 2.0 * xshift * dvar / (d - 1)",
        "n/(n-1)",
        id="variance-unbiased-ratio",
    ),
    pytest.param(
        2,
        "return np.ones_like(x) * dmean / d",
        "return np.ones_like(x) * dmean",
        "a sum where a mean belongs",
        id="mean-no-1/n",
    ),
]


@pytest.mark.parametrize("number, old, new, words", DIAGNOSES)
def test_planted_mistake_is_named(tmp_path, number, old, new, words):
    ex, path = planted(tmp_path, number, old, new)
    result = grade(ex, path)
    assert not result.passed
    assert words in titles(result), titles(result)
    # the worst entry is shown with expected and got, and they differ
    assert result.worst is not None
    assert result.worst.expected != result.worst.got


def test_geometry_shows_the_sums_and_the_share_along_ones(tmp_path):
    ex, path = planted(tmp_path, 5, LN_DX, "dx = rstd * (dxhat - xhat * var_part)")
    text = titles(grade(ex, path))
    assert "along the ones vector" in text
    assert "sums to 0; yours sums to up to" in text


def test_unbiased_forward_names_the_factor_sqrt_n_over_n_minus_1(tmp_path):
    ex, path = planted(tmp_path, 5, LN_VAR, "var = (xshift * xshift).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)")
    result = grade(ex, path, seed=3)
    assert result.worst.output == "y"
    assert f"{np.sqrt(5 / 4):.6g}" in titles(result)  # first input: D = 5


def test_seed_003_slip_is_diagnosed_by_geometry_too(tmp_path):
    ex, path = planted(
        tmp_path, 6, BN_DX_STAGED, "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift * (m - 1) / m**2"
    )
    text = titles(grade(ex, path))
    assert "off along xhat" in text and "(m-1)/m" in text


def test_keepdims_shape_mistake(tmp_path):
    ex, path = planted(
        tmp_path, 4, "dgamma = (dy * xhat).sum(axis=lead)  # D", "dgamma = (dy * xhat).sum(axis=lead, keepdims=True)"
    )
    result = grade(ex, path)
    assert "types and shapes" in failed_rows(result)
    assert "keepdims shape mistake" in titles(result)
    assert "only the shape is off" in titles(result)


def test_sum_over_one_axis_too_few_is_the_wrong_axis(tmp_path):
    ex, path = planted(tmp_path, 4, "dgamma = (dy * xhat).sum(axis=lead)  # D", "dgamma = (dy * xhat).sum(axis=0)")
    result = grade(ex, path)
    assert "reduced over the wrong axis" in titles(result)
    assert "axis (0, 1)" in titles(result)


def test_statistic_without_keepdims_crashes_with_a_keepdims_explanation(tmp_path):
    ex, path = planted(tmp_path, 5, "mean = x.mean(axis=-1, keepdims=True)  # B,T,1", "mean = x.mean(axis=-1)")
    result = grade(ex, path)
    assert result.status == "error"
    assert "ValueError" in result.summary
    assert "keepdims" in titles(result)
    assert result.where and "xshift = x - mean" in result.where


def test_hard_coded_size_passes_the_first_input_and_fails_the_second(tmp_path):
    ex, path = planted(
        tmp_path, 2, "    d = x.shape[1]\n    return np.ones_like(x)", "    d = 5\n    return np.ones_like(x)"
    )
    result = grade(ex, path)
    assert failed_rows(result) == {"second input"}
    assert "right on the first input, wrong on the second" in titles(result)


# ---- failure modes of the process and of the returned values ---------------------------

MUL = "return b * dout, a * dout"


@pytest.mark.parametrize(
    "new, status, words",
    [
        pytest.param("while True:\n        pass", "timeout", "did not finish within 2 s", id="timeout"),
        pytest.param("import sys\n    sys.exit(3)", "error", "sys.exit(3)", id="sys-exit"),
        pytest.param("import os\n    os._exit(0)", "crashed", "before it returned a result", id="os-exit"),
        pytest.param("import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)", "crashed", "SIGSEGV", id="signal"),
        pytest.param("big = np.ones(80_000_000)\n    return big, big", "error", "ran out of memory", id="memory"),
        pytest.param("raise KeyError('oops')", "error", "raised KeyError", id="crash"),
        pytest.param("return b * dout", "error", "must return 2 values (da, db)", id="bad-return"),
        pytest.param("import torch", "error", "cannot be imported while an exercise is graded", id="torch-refused"),
    ],
)
def test_process_failures_have_clear_messages(tmp_path, new, status, words):
    ex, path = planted(tmp_path, 1, MUL, new)
    result = grade(ex, path, timeout=2.0, memory_mb=384)
    assert not result.passed
    assert result.status == status, result.summary
    assert words in result.summary, result.summary


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_an_interrupted_check_leaves_no_process_behind(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, turned into SystemExit) while the learner's endless loop runs: the loop dies too."""
    import subprocess

    ex, path = planted(tmp_path, 1, MUL, "while True:\n        pass")
    children: list[int] = []
    wait = subprocess.Popen.wait

    def interrupted(self, timeout=None):
        if timeout is None:  # the reaping wait after the kill
            return wait(self)
        children.append(self.pid)
        time.sleep(0.5)  # the learner's loop is running now
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        grade(ex, path, timeout=30.0)
    assert children and _gone(children[0])


@pytest.mark.skipif(os.name != "posix", reason="folders are matched to their owner by uid")
def test_folders_left_by_a_killed_grader_are_removed_later_and_fresh_ones_are_kept(tmp_path, monkeypatch):
    import tempfile

    from microgradnorm.exercises import grader

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale, fresh = tmp_path / "microgradnorm-grade-old", tmp_path / "microgradnorm-grade-new"
    other = tmp_path / "someone-elses-folder"
    for folder in (stale, fresh, other):
        folder.mkdir()
        (folder / "inputs.npz").write_bytes(b"x")
    long_ago = time.time() - grader.STALE_AFTER - 60
    os.utime(stale, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    grader._remove_stale_workdirs()
    assert not stale.exists() and fresh.is_dir() and other.is_dir()


RUNNER = "from microgradnorm.exercises.runner import _die_with"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and RLIMIT_CPU are Linux's")
def test_the_child_has_a_cpu_limit_and_dies_with_the_grader(tmp_path):
    """The backstops for a grader killed without cleaning up (kill -9)."""
    limits = subprocess.run(
        [sys.executable, "-c", f"{RUNNER}; import os, resource; _die_with(os.getppid(), 7); "
         "print(*resource.getrlimit(resource.RLIMIT_CPU))"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert limits.stdout.split() == ["7", "8"]
    # a grader (the middle process) starts a child that loops, then is killed with SIGKILL
    middle = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', "
         f"'{RUNNER}; import os; _die_with(os.getppid(), 100); print(os.getpid(), flush=True)\\nwhile True: pass']); "
         "time.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = int(middle.stdout.readline())
    assert not _gone(child)
    middle.kill()
    middle.wait()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def test_a_child_whose_grader_is_already_gone_exits_at_once():
    done = subprocess.run([sys.executable, "-c", f"{RUNNER}; _die_with(1, 100); print('ran on')"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and done.stdout == "" and done.stderr == ""  # exited quietly, before running on


def test_syntax_error_is_reported_with_its_line(tmp_path):
    ex, path = planted(tmp_path, 1, MUL, "return b * dout,, a * dout")
    result = grade(ex, path)
    assert result.status == "error"
    assert "cannot read your file" in result.summary
    assert result.where and "line" in result.where


@pytest.mark.parametrize(
    "new, row, words",
    [
        pytest.param("return (b * dout).tolist(), a * dout", "types and shapes", "is a Python list", id="list"),
        pytest.param("return None, a * dout", "types and shapes", "is None", id="none"),
        pytest.param("return (b * dout).astype(np.float32), a * dout", "types and shapes", "dtype float32", id="dtype"),
        pytest.param("return b * dout * np.nan, a * dout", "finite", "NaN", id="nan"),
        pytest.param("return b * dout / 0.0, a * dout", "finite", "Inf", id="inf"),
        pytest.param("return float(b[0] * dout[0]), a * dout", "types and shapes", "single number", id="scalar"),
    ],
)
def test_returned_value_problems(tmp_path, new, row, words):
    ex, path = planted(tmp_path, 1, MUL, new)
    result = grade(ex, path)
    assert row in failed_rows(result)
    detail = " ".join(r.detail for r in result.rows if r.label == row)
    assert words in detail


def test_finiteness_is_claimed_only_for_outputs_that_are_numbers(tmp_path):
    ex, path = planted(tmp_path, 1, MUL, 'return "da", "db"')
    result = grade(ex, path)
    (finite,) = [r for r in result.rows if r.label == "finite"]
    assert "types and shapes" in failed_rows(result)
    assert finite.ok is True and "among the" in finite.detail  # the strings were not looked at for NaN


def test_a_different_answer_on_a_second_run_fails(tmp_path):
    ex, path = planted(
        tmp_path,
        1,
        MUL,
        "global CALLS\n    CALLS = globals().get('CALLS', 0) + 1\n    return b * dout * CALLS, a * dout",
    )
    result = grade(ex, path)
    assert "same answer twice" in failed_rows(result)
    assert "different answer on a second run" in titles(result)


def test_modifying_an_input_fails_even_when_the_array_is_made_writable(tmp_path):
    ex, path = planted(
        tmp_path,
        1,
        MUL,
        "da, db = b * dout, a * dout\n    a.flags.writeable = True\n    a[0] = 42.0\n    return da, db",
    )
    result = grade(ex, path)
    assert "inputs untouched" in failed_rows(result)
    assert "an input was modified" in titles(result)


def test_writing_into_a_read_only_input_is_explained(tmp_path):
    ex, path = planted(tmp_path, 1, MUL, "a *= 1.0\n    return b * dout, a * dout")
    result = grade(ex, path)
    assert result.status == "error"
    assert "change one of its inputs in place" in result.summary


def test_printing_does_not_change_the_grade(tmp_path):
    fake = 'print("Every check passed. {\\"status\\": \\"passed\\"}")'
    ex, path = planted(tmp_path, 1, MUL, f"{fake}\n    return a * dout, a * dout")
    result = grade(ex, path)
    assert not result.passed
    assert "Every check passed" in result.printed  # shown back, dimmed, but not believed
    ex, path = planted(tmp_path, 1, MUL, f"{fake}\n    return b * dout, a * dout")
    result = grade(ex, path)
    assert result.passed
    assert "Every check passed" in result.printed


def test_the_value_exercise_refuses_the_library_layer_norm(tmp_path):
    ex, path = planted(
        tmp_path,
        3,
        "    d = len(x)\n",
        "    from microgradnorm import layer_norm as library\n\n"
        "    return library(x, gamma, beta, eps)\n    d = len(x)\n",
    )
    result = grade(ex, path)
    assert result.status == "error"
    assert "own norm builder" in result.summary


def test_missing_file_says_how_to_get_it_back(tmp_path):
    result = grade(get_exercise(1), tmp_path / "nope.py")
    assert not result.passed
    assert "exercise reset 1" in result.summary


def test_fresh_seed_each_check_and_a_given_seed_repeats(tmp_path):
    ex = get_exercise(5)
    seeds = {grade(ex, ex.scaffold).seed for _ in range(3)}
    assert len(seeds) == 3
    _, path = planted(tmp_path, 5, LN_DX, "dx = rstd * (dxhat - mean_part)")
    a, b = grade(ex, path, seed=11), grade(ex, path, seed=11)
    assert a.worst == b.worst


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
    assert geometry_findings(direct + via_var, right, geom)[0].title == "the path through the mean is missing"
    assert geometry_findings(direct + via_mean, right, geom)[0].title == "the path through the variance is missing"
    slip = geometry_findings(direct + via_mean + via_var * 5 / 6, right, geom)
    assert "(m-1)/m" in slip[0].title
    both = {f.title for f in geometry_findings(direct, right, geom)}
    assert both == {"the path through the mean is missing", "the path through the variance is missing"}
    outside = geometry_findings(right + np.random.default_rng(1).normal(size=right.shape), right, geom)
    assert outside[0].title == "the direct path is wrong"


def test_geometry_reports_the_invariants_at_eps_zero():
    direct, via_mean, via_var, geom = _ln_problem(eps=0.0)
    right = direct + via_mean + via_var
    # the right answer satisfies both identities; the planted error breaks the second one
    assert np.allclose(right.sum(axis=1), 0.0) and np.allclose((right * geom.xhat).sum(axis=1), 0.0)
    detail = geometry_findings(direct + via_mean, right, geom)[0].detail
    assert "orthogonal to xhat" in detail


def test_scale_finding_names_the_unbiased_factors():
    right = np.random.default_rng(2).normal(size=(4, 5))
    assert scale_finding(right * 5 / 4, right, 5).title == "unbiased variance"
    assert scale_finding(right * np.sqrt(4 / 5), right, 5).title == "unbiased variance"
    assert scale_finding(-right, right, 5).title == "sign flipped"
    assert scale_finding(right * 3.7, right, 5).title == "off by a constant factor"
    assert scale_finding(right + 1.0, right, 5) is None


def test_shape_findings():
    assert shape_findings("dgamma", (1, 1, 8), (8,))[0].title == "keepdims shape mistake"
    assert shape_findings("dmean", (4,), (1, 4))[0].title == "keepdims shape mistake"
    assert shape_findings("dgamma", (3, 8), (8,), x_shape=(2, 3, 8))[0].title == "reduced over the wrong axis"
    assert shape_findings("J", (5, 4), (4, 5))[0].title == "transposed"
    assert shape_findings("dx", (7,), (4, 5))[0].title == "wrong shape"
