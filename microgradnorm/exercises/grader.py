"""Grade a learner's exercise file: run it in a separate process, judge what came back.

Why a separate process: learner code may loop forever, eat all memory, call
``sys.exit``, crash, print anything, or change its inputs. None of that may
touch the grader. So :func:`grade`

1. draws two cases from a fresh seed (:mod:`.problems`): a random upstream
   gradient, gamma not 1, the second case of another shape (and eps = 0 for the
   normalizations);
2. writes their inputs to a temporary directory and starts
   ``python -c <boot> ...`` (:mod:`.runner`) there, with a wall-clock timeout
   (the whole process group is killed when it runs out, or when the check is
   interrupted) and an address-space limit (``resource.setrlimit``, where
   available); should the grader itself be killed outright, the child has a
   CPU-time limit and, on Linux, dies with it;
3. reads back the arrays the learner's functions returned (``outputs.npz``) and
   a description of them (``result.json``), and judges them here: types and
   shapes, dtype float64, finiteness, every output against the closed form on
   both cases, the same answer on a repeated call, inputs unchanged.

Only those arrays decide the grade; what the learner's code prints is shown,
dimmed, and never parsed. The outcome is a :class:`GradeResult` (data); the
renderers in :mod:`.render` draw it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from microgradnorm import tolerances as tol
from microgradnorm.exercises.catalog import Exercise
from microgradnorm.exercises.diagnose import (
    Finding,
    exception_findings,
    geometry_findings,
    match_mistake,
    scale_finding,
    shape_findings,
    worst_entry,
)
from microgradnorm.exercises.problems import Case, Problem, get_problem

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT", "CheckRow", "GradeResult", "Worst", "grade"]

DEFAULT_TIMEOUT = 10.0  # seconds of wall-clock time for all three calls together
DEFAULT_MEMORY_MB = 1024  # address space of the child process
PRINTED_LIMIT = 2000  # characters of the learner's own output shown back

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from microgradnorm.exercises.runner import main; sys.exit(main())"
)


@dataclass(frozen=True)
class CheckRow:
    """One line of the per-check table. ``ok`` is None when the check could not run."""

    label: str
    ok: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Worst:
    """The entry of a wrong output where the learner's answer is furthest from the right one."""

    output: str
    case: str
    index: tuple[int, ...]
    expected: float
    got: float


@dataclass
class GradeResult:
    """Everything a renderer needs to show the outcome of one check."""

    exercise: Exercise
    path: Path
    passed: bool
    status: str  # passed, failed, not_written, error, timeout, crashed
    summary: str
    seed: int
    rows: list[CheckRow] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    worst: Worst | None = None
    where: str | None = None  # "line 12: dx = ..." for errors
    printed: str = ""
    cases: list[str] = field(default_factory=list)


# ---- running the child process ---------------------------------------------------------


@dataclass
class _Run:
    result: dict[str, Any] | None
    arrays: dict[str, np.ndarray]
    returncode: int | None
    timed_out: bool
    printed: str


_WORKDIR_PREFIX = "microgradnorm-grade-"
STALE_AFTER = 2 * 3600.0  # seconds: twice the longest --timeout, so no running check's folder is this old


def _remove_stale_workdirs() -> None:
    """Delete this user's grading folders left behind by a grader killed outright (kill -9)."""
    now = time.time()
    for folder in Path(tempfile.gettempdir()).glob(f"{_WORKDIR_PREFIX}*"):
        try:
            info = folder.lstat()
            if folder.is_dir() and info.st_uid == os.getuid() and now - info.st_mtime > STALE_AFTER:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # gone already, or not ours to look at
            continue


def _run_child(exercise: Exercise, path: Path, cases: list[Case], timeout: float, memory_mb: int) -> _Run:
    if os.name == "posix":
        _remove_stale_workdirs()
    with tempfile.TemporaryDirectory(prefix=_WORKDIR_PREFIX) as tmp:
        work = Path(tmp)
        arrays = {}
        for label, case in zip("ab", cases):
            for name, value in case.inputs.items():
                arrays[f"{label}:{name}"] = np.asarray(value, dtype=np.float64)
        np.savez(work / "inputs.npz", **arrays)
        env = dict(os.environ)
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONSTARTUP", None)
        cpu_seconds = math.ceil(timeout) + 5  # a backstop only: the wall-clock timeout below comes first
        cmd = [sys.executable, "-c", _BOOT, str(_PACKAGE_ROOT), exercise.name, str(path), str(work)]
        cmd += [str(memory_mb), str(os.getpid()), str(cpu_seconds)]
        log_path = work / "printed.txt"
        timed_out = False
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=(os.name == "posix"),
            )
            try:
                with _sigterm_as_exit():
                    proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(proc)
            except BaseException:  # Ctrl-C or a kill signal: the learner's code must not run on alone
                _kill(proc)
                raise
        printed = _tail(log_path)
        result = None
        outputs: dict[str, np.ndarray] = {}
        if not timed_out and (work / "result.json").exists():
            result = json.loads((work / "result.json").read_text(encoding="utf-8"))
            with np.load(work / "outputs.npz") as data:
                outputs = {k: data[k] for k in data.files}
        return _Run(result, outputs, proc.returncode, timed_out, printed)


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While waiting for the child, turn SIGTERM into SystemExit so that the child is killed too.

    Only in the main thread (Python runs signal handlers there; ``exercise
    watch`` in a test runs elsewhere); elsewhere this does nothing.
    """
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _kill(proc: subprocess.Popen) -> None:
    """Kill the child and anything it started (its whole session), then reap it."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def _tail(path: Path) -> str:
    data = path.read_bytes()
    text = data[-PRINTED_LIMIT:].decode("utf-8", errors="replace")
    if len(data) > PRINTED_LIMIT:
        text = "…" + text
    return text.rstrip()


# ---- judging -------------------------------------------------------------------------------


def grade(
    exercise: Exercise,
    path: Path,
    *,
    seed: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> GradeResult:
    """Grade the learner's file ``path`` for ``exercise``. ``seed`` None draws a fresh one."""
    path = Path(path)
    seed = secrets.randbits(31) if seed is None else int(seed)
    if not path.is_file():
        return GradeResult(
            exercise,
            path,
            False,
            "error",
            (f"{path} is a directory, not your exercise file" if path.is_dir() else f"{path} does not exist")
            + f": `microgradnorm exercise reset {exercise.number}` brings the scaffold back.",
            seed,
        )
    problem = get_problem(exercise.name)
    rng = np.random.default_rng(seed)
    cases = [problem.make_case(rng, False), problem.make_case(rng, True)]
    run = _run_child(exercise, path, cases, timeout, memory_mb)
    out = GradeResult(exercise, path, False, "failed", "", seed, printed=run.printed, cases=[c.label for c in cases])
    if run.timed_out:
        out.status = "timeout"
        out.summary = f"Your code did not finish within {timeout:g} s (wall clock) and was stopped: an endless loop?"
        out.rows = [CheckRow("ran", False, f"stopped after {timeout:g} s")]
        return out
    if run.result is None:
        out.status = "crashed"
        out.summary = _no_result(run.returncode, memory_mb)
        out.rows = [CheckRow("ran", False, "no result came back")]
        return out
    if run.result.get("error"):
        _explain_error(out, run.result["error"], memory_mb, exercise)
        return out
    _judge(out, problem, cases, run)
    return out


def _no_result(code: int | None, memory_mb: int) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = (
            f" (the memory limit of {memory_mb} MiB, or the system running out of memory)" if name == "SIGKILL" else ""
        )
        return f"The process running your code was killed by {name}{extra} before it returned a result."
    return (
        f"The process running your code ended (exit code {code}) before it returned a result: "
        "os._exit(), or a crash inside a compiled library?"
    )


def _where(error: dict[str, Any]) -> str | None:
    frames = error.get("frames") or []
    if frames:
        f = frames[-1]
        return f"line {f['line']} in {f['function']}: {f['code']}"
    if error.get("line"):
        return f"line {error['line']}: {error.get('code', '')}"
    return None


_CALL_NAMES = {"a": "the first input", "b": "the second input", "a2": "the first input, called again"}


def _explain_error(out: GradeResult, error: dict[str, Any], memory_mb: int, exercise: Exercise) -> None:
    kind, message, etype = error["kind"], error.get("message", ""), error.get("type", "")
    out.where = _where(error)
    frames = error.get("frames") or []
    func = frames[-1]["function"] if frames else None
    on = f" on {_CALL_NAMES[error['call']]}" if error.get("call") else ""
    out.status = "error"
    if kind == "not_written":
        out.status = "not_written"
        name = f"`{func}`" if func and func != "<module>" else "your file"
        out.summary = f"Not written yet: {name} still raises NotImplementedError. Replace that line with your code."
    elif kind == "syntax":
        out.summary = f"Python cannot read your file: {message}."
    elif kind == "import":
        out.summary = f"Importing your file failed: {etype}: {message}"
    elif kind == "sys_exit":
        out.summary = (
            f"Your code called sys.exit({error.get('code')!r}){on}: a graded function must return its result, "
            "not end the program."
        )
    elif kind == "memory":
        out.summary = f"Your code ran out of memory{on} (the limit is {memory_mb} MiB): {message}"
    elif kind == "mutates_input":
        out.summary = (
            f"Your code tried to change one of its inputs in place{on}. Inputs are read-only while grading: "
            "compute new arrays (x - mean), do not overwrite them (x -= mean)."
        )
    elif kind in ("bad_return", "forbidden"):
        out.summary = message[0].upper() + message[1:] + "."
    else:
        out.summary = f"Your code raised {etype}{on}: {message}"
        out.findings = exception_findings(etype, message)
    out.rows = [CheckRow("ran", False, kind.replace("_", " "))]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def _type_problem(name: str, desc: dict[str, Any], expected: np.ndarray) -> str | None:
    kind = desc["kind"]
    want = f"a float64 array of shape {tuple(expected.shape)}"
    if kind == "none":
        return f"`{name}` is None: a `return` is missing? Expected {want}."
    if kind == "list":
        return (
            f"`{name}` is a Python {desc['type']}, not an array: build it with NumPy operations, "
            f"or wrap it in np.asarray(...). Expected {want}."
        )
    if kind == "scalar":
        return f"`{name}` is a single number ({desc['type']}), expected {want}."
    if kind == "other":
        return f"`{name}` is a {desc['type']}, expected {want}."
    if tuple(desc["shape"]) != tuple(expected.shape):
        return f"`{name}` has shape {tuple(desc['shape'])}, expected {tuple(expected.shape)}."
    if desc["dtype"] != "float64":
        return (
            f"`{name}` has dtype {desc['dtype']}, expected float64 (the inputs are float64; "
            "a float32 or int conversion somewhere loses precision)."
        )
    return None


def _judge(out: GradeResult, problem: Problem, cases: list[Case], run: _Run) -> None:
    calls, arrays = run.result["calls"], run.arrays
    rows: list[CheckRow] = [CheckRow("ran", True, "no errors, three calls")]
    findings: list[Finding] = []

    def got(call: str, name: str) -> np.ndarray | None:
        return arrays.get(f"{call}:out:{name}")

    # types and shapes, on all three calls
    type_errors: list[tuple[str, str, str]] = []  # (call, name, message)
    for call, case in (("a", cases[0]), ("b", cases[1]), ("a2", cases[0])):
        for o in problem.outputs:
            msg = _type_problem(o.name, calls[call][o.name], case.expected[o.name])
            if msg:
                type_errors.append((call, o.name, msg))
    bad_type = {(c, n) for c, n, _ in type_errors}
    if type_errors:
        call, name, msg = type_errors[0]
        rows.append(CheckRow("types and shapes", False, msg))
        case = cases[0] if call != "b" else cases[1]
        desc = calls[call][name]
        if "shape" in desc and tuple(desc["shape"]) != tuple(case.expected[name].shape):
            g = got(call, name)
            squeezed = (
                g is not None
                and g.size == case.expected[name].size
                and tol.close(g.reshape(case.expected[name].shape), case.expected[name], 1e-8, 1e-10)
            )
            findings += shape_findings(
                f"`{name}`",
                tuple(desc["shape"]),
                tuple(case.expected[name].shape),
                problem.x_shape(case, name),
                squeezed,
            )
    else:
        rows.append(CheckRow("types and shapes", True, "float64 arrays of the right shapes"))

    # finite
    nonfinite = []
    checked = skipped = 0
    for call in ("a", "b"):
        for o in problem.outputs:
            g = got(call, o.name)
            if (call, o.name) in bad_type or g is None:
                skipped += 1
                continue
            checked += 1
            if not np.all(np.isfinite(g)):
                nonfinite.append((call, o.name, int(np.isnan(g).sum()), int(np.isinf(g).sum())))
    if not checked:
        rows.append(CheckRow("finite", None, "nothing to check: no output came back as numbers"))
    elif nonfinite:
        call, name, nan, inf = nonfinite[0]
        detail = f"`{name}` has {nan} NaN and {inf} Inf entries on {_CALL_NAMES[call]}"
        rows.append(CheckRow("finite", False, detail))
        if not findings:
            eps0 = " (eps = 0 there: a division by a std of zero, or by zero itself?)" if call == "b" else ""
            findings.append(Finding("not finite", detail + eps0 + "."))
    else:
        among = f" among the {checked} outputs that came back as numbers" if skipped else ""
        rows.append(CheckRow("finite", True, f"no NaN or Inf{among}"))

    # values against the closed form
    failing: list[tuple[int, str]] = []
    for o in problem.outputs:
        g = got("a", o.name)
        if ("a", o.name) in bad_type or g is None:
            rows.append(CheckRow(o.label, None, "not compared (wrong type or shape)"))
            continue
        exp = cases[0].expected[o.name]
        ok = tol.close(g, exp, o.rtol, o.atol)
        _, rel = tol.normwise_error(g, exp)
        rows.append(CheckRow(o.label, ok, f"relative error {rel:.1e}" if np.isfinite(rel) else "not finite"))
        if not ok:
            failing.append((0, o.name))
    second_bad = []
    for o in problem.outputs:
        g = got("b", o.name)
        if ("b", o.name) in bad_type or g is None:
            continue
        if not tol.close(g, cases[1].expected[o.name], o.rtol, o.atol):
            second_bad.append(o.name)
    if all(("b", o.name) in bad_type for o in problem.outputs):
        rows.append(CheckRow("second input", None, "not compared"))
    else:
        rows.append(
            CheckRow(
                "second input",
                not second_bad,
                f"{cases[1].label.split(': ', 1)[1]}" + (f"; wrong: {', '.join(second_bad)}" if second_bad else ""),
            )
        )
        if not failing:
            failing += [(1, n) for n in second_bad]

    # the same answer twice
    differs = [
        o.name
        for o in problem.outputs
        if ("a", o.name) not in bad_type
        and ("a2", o.name) not in bad_type
        and got("a", o.name) is not None
        and got("a2", o.name) is not None
        and not _same(got("a", o.name), got("a2", o.name))
    ]
    rows.append(
        CheckRow(
            "same answer twice",
            not differs,
            f"{', '.join(differs)} changed between two calls on the same input" if differs else "deterministic",
        )
    )

    # inputs untouched
    changed = []
    for call, case in (("a", cases[0]), ("b", cases[1]), ("a2", cases[0])):
        for name, value in case.inputs.items():
            after = arrays.get(f"{call}:in:{name}")
            if after is not None and not _same(after, np.asarray(value, dtype=np.float64)):
                changed.append((call, name, after, np.asarray(value, dtype=np.float64)))
    rows.append(
        CheckRow(
            "inputs untouched",
            not changed,
            f"`{changed[0][1]}` was modified" if changed else "every input as it was given",
        )
    )
    out.rows = rows

    # diagnosis of the first thing that went wrong
    if not findings and differs:
        a, a2 = got("a", differs[0]), got("a2", differs[0])
        idx, first, second = worst_entry(a2, a)
        findings.append(
            Finding(
                "a different answer on a second run",
                f"Called twice on the same input, {differs[0]}{_fmt_index(idx)} was {first:.6g} the first time "
                f"and {second:.6g} the second. Does your code use randomness, or keep state between calls "
                "(a global list or counter)?",
            )
        )
    if not findings and changed:
        call, name, after, before = changed[0]
        idx, was, now = worst_entry(after, before)
        findings.append(
            Finding(
                "an input was modified",
                f"After your code ran, input {name}{_fmt_index(idx)} was {now:.6g} instead of {was:.6g}. "
                "Work on new arrays (x = x - mean), never on the ones you are given: anything computed from "
                "the changed input afterwards is off too.",
            )
        )
    if not findings and failing:
        which, name = failing[0]
        findings += _diagnose_values(out, problem, cases, which, name, got("ab"[which], name), first_ok=which == 1)
    out.findings = findings
    out.passed = all(r.ok for r in rows)
    out.status = "passed" if out.passed else "failed"
    failed = [r.label for r in rows if r.ok is False]
    out.summary = "Every check passed." if out.passed else f"Not yet: {', '.join(failed)}."


def _fmt_index(idx: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, idx)) + "]" if idx else ""


def _diagnose_values(
    out: GradeResult,
    problem: Problem,
    cases: list[Case],
    which: int,
    name: str,
    g: np.ndarray,
    first_ok: bool,
) -> list[Finding]:
    case = cases[which]
    expected = case.expected[name]
    found: list[Finding] = []
    named = _swapped(problem, case, name, g) or _named_mistakes(problem, case, name, g)
    if first_ok:
        guess = "" if named else " A size written into the code, or a formula that breaks at eps = 0?"
        found.append(
            Finding(
                "right on the first input, wrong on the second",
                f"The second input is {case.label.split(': ', 1)[1]}.{guess}",
            )
        )
    found += named or [
        Finding(
            f"{name} is wrong",
            "No common mistake matches this one. Compare the worst entry below with a finite difference: "
            "run your file on its own (python FILE) to see one.",
        )
    ]
    idx, e, v = worst_entry(g, expected)
    out.worst = Worst(name, case.label, idx, e, v)
    return found


def _swapped(problem: Problem, case: Case, name: str, g: np.ndarray) -> list[Finding]:
    """A finding when ``name`` holds the right value of the output it is paired with."""
    for pair in problem.swaps:
        if name not in pair:
            continue
        other = pair[1] if pair[0] == name else pair[0]
        want = case.expected[other]
        if g.shape == want.shape and tol.close(g, want, tol.EXERCISE_MISTAKE_RTOL, tol.EXERCISE_MISTAKE_ATOL):
            return [
                Finding(
                    f"{pair[0]} and {pair[1]} swapped",
                    f"Your `{name}` is the right `{other}`. Return them in the order of the docstring "
                    f"({pair[0]} is the sum of dy * xhat, {pair[1]} the sum of dy).",
                )
            ]
    return []


def _named_mistakes(problem: Problem, case: Case, name: str, g: np.ndarray) -> list[Finding]:
    """A known mistake the answer matches, the geometry of its error, a constant factor, extras."""
    expected = case.expected[name]
    found: list[Finding] = []
    m = match_mistake(g, problem.mistakes(case, name))
    if m is not None:
        found.append(Finding(m.title, m.detail))
    geom = problem.geometry(case, name)
    if geom is not None:
        for finding in geometry_findings(g, expected, geom, explain_outside=m is None):
            if m is not None and finding.title == m.title:  # the same mistake, seen twice: one bullet
                found[0] = Finding(m.title, f"{m.detail} {finding.detail}")
            else:
                found.append(finding)
    if m is None:
        s = scale_finding(g, expected, case.info.get("n"))
        if s is not None:
            found.append(s)
    found += problem.findings(case, name, g)
    return found
