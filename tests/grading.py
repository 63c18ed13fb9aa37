"""Helpers for the exercise-grader tests: files to grade, grading many at once, processes left over.

Grading runs a child process per file (about half a second, mostly NumPy's
import), so the tests grade their files in a thread pool, once per module, and
assert on the results.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from microgradnorm.exercises import runner, supervisor
from microgradnorm.exercises.catalog import Exercise, get_exercise
from microgradnorm.exercises.diagnose import Finding
from microgradnorm.exercises.grader import GradeResult, grade

ANSWERS = Path(__file__).parent / "exercise_answers"
WORKERS = 4  # child processes at once: each is mostly waiting on its own import
# the command lines of this checkout's supervisors and children (another checkout's are not ours to judge)
CHILD_MARKERS = (str(Path(runner.__file__)).encode(), str(Path(supervisor.__file__)).encode())


@dataclass(frozen=True)
class Submission:
    """A file to grade, and how to grade it."""

    id: str
    number: int
    path: Path
    timeout: float = 10.0
    memory_mb: int = 1024
    seed: int | None = None

    @property
    def exercise(self) -> Exercise:
        return get_exercise(self.number)


def planted(folder: Path, number: int, *changes: tuple[str, str]) -> Path:
    """The reference solution of exercise ``number`` with each (old, new) change made (old appears once)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{get_exercise(number).name}-{abs(hash(changes)) % 10**8}.py"
    path.write_text(changed(number, *changes), encoding="utf-8")
    return path


def written(folder: Path, sources: dict[str, tuple[int, str]], **limits) -> list[Submission]:
    """Each id's (exercise number, source) written to ``folder`` as ``<id>.py``: the submissions to grade."""
    folder.mkdir(parents=True, exist_ok=True)
    for sid, (_, source) in sources.items():
        (folder / f"{sid}.py").write_text(source, encoding="utf-8")
    return [Submission(sid, number, folder / f"{sid}.py", **limits) for sid, (number, _) in sources.items()]


def grade_source(folder: Path, number: int, source: str, **limits) -> GradeResult:
    """``source`` written to ``folder`` and graded as exercise ``number``'s file."""
    return grade_all(written(folder, {"graded": (number, source)}, **limits))["graded"]


def grade_all(submissions: Iterable[Submission], seconds: dict[str, float] | None = None) -> dict[str, GradeResult]:
    """Grade every submission, several at once; results by id (and, into ``seconds``, how long each took)."""
    items = list(submissions)

    def one(s: Submission) -> GradeResult:
        started = time.monotonic()
        result = grade(s.exercise, s.path, seed=s.seed, timeout=s.timeout, memory_mb=s.memory_mb)
        if seconds is not None:
            seconds[s.id] = time.monotonic() - started
        return result

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip((s.id for s in items), pool.map(one, items)))


def titles(result: GradeResult) -> str:
    return " | ".join(f"{f.title}: {f.detail}" for f in result.findings)


def keys(result: GradeResult) -> set[str]:
    """The message keys of every finding (and of the findings that explain it): what was diagnosed, in no language."""
    return set().union(*(f.keys for f in result.findings))


def finding(result: GradeResult, key: str) -> Finding:
    """The one finding (or finding that explains another further) with message key ``key``: its ``params`` are
    the numbers and names the learner is told, in no language."""
    found = [f for f in findings(result) if f.key == key]
    assert len(found) == 1, f"{len(found)} findings {key!r} in {keys(result)}"
    return found[0]


def findings(result: GradeResult) -> list[Finding]:
    """Every finding, and every finding that explains one further."""
    return [f for top in result.findings for f in _with_also(top)]


def _with_also(f: Finding) -> list[Finding]:
    return [f, *(g for also in f.also for g in _with_also(also))]


def failed_rows(result: GradeResult) -> set[str]:
    return {row.label for row in result.rows if row.ok is False}


def live_child_processes(root: int | None = None) -> list[int]:
    """Processes of the grader's (supervisors and children) still running, from /proc; [] without /proc.

    With ``root``, only those descended from process ``root``. Without it, all of this checkout's; but on an
    xdist worker (the quick set runs on two) the other worker may be grading at that moment, so there this
    worker's own, and any that the test session no longer holds: a child whose supervisor died is adopted by
    process 1 or by a subreaper outside the session (``systemd --user`` on a desktop).
    """
    found, parent = _graders()
    if root is not None:
        return [pid for pid in found if _descends(pid, root, parent)]
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return found
    session = os.getppid()  # the xdist controller, parent of both workers
    return [pid for pid in found if _descends(pid, os.getpid(), parent) or not _descends(pid, session, parent)]


def _graders() -> tuple[list[int], dict[int, int]]:
    """This checkout's live grader processes, and every process's parent."""
    found, parent = [], {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state, ppid = f.read().rpartition(b")")[2].split()[:2]
        except (OSError, ValueError):
            continue
        parent[int(entry)] = int(ppid)
        if state != b"Z" and any(marker in cmdline for marker in CHILD_MARKERS):
            found.append(int(entry))
    return found, parent


def _descends(pid: int, root: int, parent: dict[int, int]) -> bool:
    while pid > 1 and pid != root:
        pid = parent.get(pid, 0)
    return pid == root


def still_running(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are still grader processes (alive, not zombies)."""
    return [pid for pid in _graders()[0] if pid in pids]


# ---- judging in this process (fast): for corpora of answers this test suite wrote itself ----------------


def judge_source(number: int, source: str, seed: int):
    """Run ``source`` (an exercise file this test suite wrote: trusted) here, through the exercise's driver on
    the grader's cases of ``seed``, and judge it as the grader does. Returns the :class:`Judgement`."""
    import sys
    import types

    import numpy as np

    from microgradnorm import engine
    from microgradnorm.exercises import drivers, runner, wire
    from microgradnorm.exercises.judge import CALLS, judge
    from microgradnorm.exercises.problems import get_problem

    ex = get_exercise(number)
    problem = get_problem(ex.name)
    rng = np.random.default_rng(seed)
    cases = [problem.make_case(rng, False), problem.make_case(rng, True)]
    module = types.ModuleType(f"corpus_{ex.name}")
    exec(compile(source, f"<{ex.name}>", "exec"), module.__dict__)
    calls, arrays = {}, {}
    for label in CALLS:
        case = cases[1] if label == "b" else cases[0]
        inputs = runner.read_only(case.inputs)
        outputs = drivers.DRIVERS[ex.name](module, inputs, engine if ex.uses == "engine" else None)
        described = {}
        for name, value in outputs.items():
            if name.startswith("_in_"):
                arrays[wire.key(label, "in", name[4:])] = np.asarray(value, dtype=np.float64)
                continue
            described[name], arr = runner._describe(value)
            if arr is not None:
                arrays[wire.key(label, "out", name)] = arr
        for name, value in inputs.items():
            k = wire.key(label, "in", name)
            if isinstance(value, np.ndarray) and k not in arrays:
                arrays[k] = np.array(value)
        calls[label] = described
    sys.modules.pop(module.__name__, None)
    return judge(problem, cases, calls, arrays)


def solution(number: int) -> str:
    """The text of exercise ``number``'s reference solution."""
    return get_exercise(number).solution.read_text(encoding="utf-8")


def changed(number: int, *changes: tuple[str, str]) -> str:
    """The reference solution of exercise ``number`` with each (old, new) change made (old appears once)."""
    source = solution(number)
    for old, new in changes:
        assert source.count(old) == 1, f"{old!r} is not in the solution of exercise {number} exactly once"
        source = source.replace(old, new)
    return source
