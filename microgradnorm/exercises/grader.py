"""Grade a learner's exercise file: run it in a sandboxed process, judge what came back.

Why a separate process: learner code may loop forever, eat all memory, call
``sys.exit``, crash, print anything, change its inputs, or try to reach the
answer keys, start processes or forge its progress. None of that may touch the
grader or its verdict. So :func:`grade`

1. reads the learner's file (a regular file, at most 1 MiB, never a FIFO or a
   device, read without blocking);
2. draws two cases from a fresh seed (:mod:`.problems`): a random upstream
   gradient, gamma not 1, the second case of another shape (and eps = 0 for the
   normalizations), and computes their right answers and how close an answer
   must be, here, in the grading process;
3. sends the source and the inputs, never an answer, to a child process that
   runs the learner's code in the sandbox (:mod:`.process`, :mod:`.runner`,
   :mod:`.sandbox`) under a wall-clock deadline and hard limits, and collects
   what it sends back over a pipe this process owns (size-capped, no pickle);
4. judges it here (:mod:`.judge`), one check at a time.

Only the returned arrays decide the grade; what the learner's code prints is
shown, dimmed, and never parsed. The outcome is a :class:`GradeResult` (data);
the renderers in :mod:`.render` draw it. What the sandbox guarantees, and what
it does not, is in ``docs/grader.md``.
"""

from __future__ import annotations

import os
import secrets
import signal
import stat
import tokenize
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np

from microgradnorm.exercises import wire
from microgradnorm.exercises.catalog import Exercise
from microgradnorm.exercises.diagnose import Finding, exception_findings
from microgradnorm.exercises.judge import CALLS, CheckRow, Worst, judge
from microgradnorm.exercises.messages import child_message, listed, say
from microgradnorm.exercises.problems import Case, get_problem
from microgradnorm.exercises.process import RESULT_LIMIT, ChildRun, isolation, run_child
from microgradnorm.i18n import _

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT", "SOURCE_LIMIT", "CheckRow", "GradeResult", "Worst", "grade"]

DEFAULT_TIMEOUT = 10.0  # seconds of wall-clock time for all three calls together
DEFAULT_MEMORY_MB = 1024  # address space of the child process
PRINTED_LIMIT = 2000  # characters of the learner's own output shown back
SOURCE_LIMIT = 2**20  # bytes: an exercise file is a few KiB


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
    kernel_filter: bool = False  # the child ran under the seccomp filter
    file_filter: bool = False  # the child ran under the Landlock file filter
    isolated: bool = False  # the child ran inside bubblewrap's namespaces (the grader's own knowledge, not the child's)
    recorded: bool = True  # the verdict went into the learner's progress (not for chosen inputs: --seed)
    notes: list[str] = field(default_factory=list)  # said after the verdict


# ---- the learner's file ---------------------------------------------------------------------


class _SourceError(Exception):
    """The learner's file cannot be graded; the message says why and what to do."""


def _outside_its_folder(path: Path) -> str | None:
    """Where ``path`` really leads, if a symbolic link takes it out of the folder it is in; else None.

    The grading process may run as another user than the file's author (a teacher, root): a link to a
    file the author cannot read (``/etc/shadow``) would otherwise be read by the grader and shown back
    in a syntax error.
    """
    try:
        real, folder = os.path.realpath(path), os.path.realpath(path.parent)
    except (OSError, ValueError):
        return None
    return None if os.path.dirname(real) == folder or real.startswith(folder + os.sep) else real


def read_source(path: Path, number: int) -> str:
    """The text of the learner's file, read without blocking and without bound; _SourceError otherwise.

    A symbolic link is followed only while it stays in the file's own folder.
    """
    real = _outside_its_folder(path)
    if real is not None:
        raise _SourceError(
            _("{path} is a link to {real}, outside its folder: only a file in the folder is graded").format(
                path=one_line(str(path), 300), real=one_line(real, 300)
            )
        )
    try:
        # the real path, opened without following a link made since the look above (O_NOFOLLOW: ELOOP)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0)
        fd = os.open(os.path.realpath(path), flags)
    except FileNotFoundError:
        raise _SourceError(say("missing_file", path=path, number=number)) from None
    except IsADirectoryError:
        raise _SourceError(say("directory", path=path, number=number)) from None
    except OSError as exc:
        raise _SourceError(say("unreadable_file", path=path, why=exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _SourceError(say("directory", path=path, number=number))
        if not stat.S_ISREG(info.st_mode):
            kind = say("fifo" if stat.S_ISFIFO(info.st_mode) else "device")
            raise _SourceError(say("not_regular", path=path, kind=kind))
        data = os.read(fd, SOURCE_LIMIT + 1)
    finally:
        os.close(fd)
    if len(data) > SOURCE_LIMIT:
        raise _SourceError(say("file_too_large", path=path, limit=SOURCE_LIMIT // 1024))
    try:
        encoding, _lines = tokenize.detect_encoding(BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise _SourceError(say("not_text", path=path, why=str(exc).splitlines()[0])) from None


# ---- grading ---------------------------------------------------------------------------------


def _job(exercise: Exercise, path: Path, source: str, cases: list[Case]) -> bytes:
    arrays = {
        wire.key(label, "in", name): np.asarray(value, dtype=np.float64)
        for label, case in zip("ab", cases)
        for name, value in case.inputs.items()
    }
    message = {
        "exercise": exercise.name,
        "title": f"exercise {exercise.number}",
        "uses": exercise.uses_text,
        "engine": exercise.uses == "engine",
        "source": source,
        "filename": str(path),
    }
    return wire.encode(message, arrays)


_said_unisolated: list[bool] = []  # the note about a missing sandbox has been given in this process


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
    out = GradeResult(exercise, path, False, "error", "", seed)
    if os.name != "posix":  # pragma: no cover
        out.summary = say("posix_only")
        return out
    try:
        source = read_source(path, exercise.number)
    except _SourceError as exc:
        out.summary = str(exc)
        return out
    problem = get_problem(exercise.name)
    rng = np.random.default_rng(seed)
    cases = [problem.make_case(rng, False), problem.make_case(rng, True)]
    out.cases = [c.label for c in cases]
    run = run_child(
        _job(exercise, path, source, cases),
        timeout=timeout,
        memory_mb=memory_mb,
        cwd=path.resolve().parent,
        probe=_job(exercise, path, "", cases),  # no learner code: does a child start here at all?
        engine=exercise.uses == "engine",
    )
    out.printed = _printed(run)
    out.isolated = run.isolated
    if not run.isolated and not _said_unisolated:
        _said_unisolated.append(True)  # once per process: a class's gradebook need not repeat it 30 times
        out.notes.append(
            _(
                "This check ran without bubblewrap ({why}): only filters inside the process held the code, "
                "enough for your own code, not for someone else's (see docs/grader.md)."
            ).format(why=isolation())
        )
    _conclude(out, run, cases, timeout, memory_mb)
    return out


# control characters a terminal acts on (escape sequences move the cursor, erase lines, set colours, write
# the clipboard) and the ones that reorder text: shown as their escapes, never sent to the terminal as they are
_INERT = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (
        *range(0x00, 0x09),
        *range(0x0B, 0x20),
        *range(0x7F, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
}


def inert(text: str) -> str:
    """``text`` from the learner's process, safe to print: every control character but newline and tab escaped."""
    return text.translate(_INERT)


_LINE = {**_INERT, ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
STRING_LIMIT = 500  # characters of any one string from the child (an exception's message is cut there)
NODES_LIMIT = 10_000  # values in the child's message: the real one has a few dozen
LIST_LIMIT = 64  # items of any list in it


def one_line(text: str, limit: int = STRING_LIMIT) -> str:
    """A string from the child, safe to print inside a line: capped, control characters and newlines escaped.

    A newline in an exception's class name would otherwise start a line of its own inside the verdict
    ("Every check passed." under a failing check).
    """
    text = str(text)
    cut = len(text) > limit
    return text[:limit].translate(_LINE) + ("…" if cut else "")


def _inert_all(value: Any, budget: list[int] | None = None) -> Any:
    """Every string in a decoded JSON value (keys too) made :func:`one_line`; WireError past NODES_LIMIT values."""
    budget = [NODES_LIMIT] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        raise wire.WireError(f"the message holds more than {NODES_LIMIT} values")
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, list):  # a shape, the frames: never more than a few dozen in a real message
        return [_inert_all(v, budget) for v in value[:LIST_LIMIT]]
    if isinstance(value, dict):
        return {one_line(str(k), 100): _inert_all(v, budget) for k, v in value.items()}
    return value


def _printed(run: ChildRun) -> str:
    text = run.printed.decode("utf-8", errors="replace")[-PRINTED_LIMIT:]
    if run.printed_total > len(text.encode("utf-8")):
        text = "…" + text
    return inert(text.rstrip())


def _conclude(out: GradeResult, run: ChildRun, cases: list[Case], timeout: float, memory_mb: int) -> None:
    """Turn what came back into the verdict: a stop, a crash, an error, or the judged values."""
    out.status = "failed"
    if run.timed_out:
        out.status, out.summary = "timeout", say("timeout", timeout=timeout)
        out.rows = [CheckRow(say("check_ran"), False, say("row_stopped", timeout=timeout))]
        return
    crash = None  # why there is no result to judge
    if run.too_large:
        crash = say("too_large", limit=RESULT_LIMIT // 2**20)
    elif not run.result:
        crash = _no_result(run.returncode, memory_mb)
    else:
        try:
            message, arrays = wire.decode(bytes(run.result))
            calls, error = _checked(message)
        except wire.WireError as exc:
            crash = say("unreadable_result", why=str(exc))
    if crash is not None:
        out.status, out.summary = "crashed", crash
        out.rows = [CheckRow(say("check_ran"), False, say("row_no_result"))]
        return
    out.kernel_filter = message.get("kernel_filter") is True
    out.file_filter = message.get("file_filter") is True
    if error is not None:
        _explain_error(out, error, memory_mb)
        return
    verdict = judge(get_problem(out.exercise.name), cases, calls, arrays)
    out.rows, out.findings, out.worst, out.passed = verdict.rows, verdict.findings, verdict.worst, verdict.passed
    out.status = "passed" if out.passed else "failed"
    failed = [r.label for r in out.rows if r.ok is False]
    out.summary = say("passed") if out.passed else say("not_yet", failed=listed(failed))


def _checked(message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(calls, error) of the child's message, after checking their types and making its text inert (the
    child is not trusted: its strings may carry terminal escape sequences)."""
    try:
        calls, error = _inert_all(message.get("calls")), _inert_all(message.get("error"))
    except RecursionError:  # nested as deep as the JSON parser allows, deeper than is worth walking
        raise wire.WireError("the message is nested too deeply") from None
    if not isinstance(calls, dict) or not (error is None or isinstance(error, dict)):
        raise wire.WireError("the message has no calls, or an error that is not an object")
    if set(calls) - set(CALLS) or not all(isinstance(c, dict) for c in calls.values()):
        raise wire.WireError("the message has calls other than a, b and a2")
    if error is not None and not isinstance(error.get("kind"), str):
        raise wire.WireError("the error has no kind")
    if error is not None:  # numbers where numbers are due; any other value said as a short line
        for name in ("line", "code"):
            value = error.get(name)
            if not (value is None or type(value) is int or (name == "code" and isinstance(value, str))):
                error[name] = one_line(str(value)[:200], 200)
        frames = error.get("frames")
        error["frames"] = [f for f in frames[-5:] if isinstance(f, dict)] if isinstance(frames, list) else []
        for frame in error["frames"]:
            if type(frame.get("line")) is not int:
                frame["line"] = None
    return calls, error


def _no_result(code: int | None, memory_mb: int) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = say("signal_number", number=-code)
        extra = {"SIGKILL": say("killed_memory", memory_mb=memory_mb), "SIGXCPU": say("killed_cpu")}.get(name, "")
        return say("killed", signal=name, extra=extra)
    return say("ended", code=code)


def _where(error: dict[str, Any]) -> str | None:
    frames = error.get("frames")
    if isinstance(frames, list) and frames and isinstance(frames[-1], dict):
        f = frames[-1]
        function, code = str(f.get("function"))[:60], str(f.get("code"))[:200]
        return say("where_frame", line=f.get("line"), function=function, code=code)
    if error.get("line"):
        return say("where_line", line=error["line"], code=str(error.get("code", ""))[:200])
    return None


# what stopped the learner's code, as the child names it: the row "ran" says it in a word or two
_KINDS = (
    "not_written",
    "sys_exit",
    "syntax",
    "memory",
    "mutates_input",
    "forbidden",
    "bad_return",
    "kernel_refused",
    "import",
    "exception",
)


def _kind_word(kind: str) -> str:
    if kind in _KINDS:
        return say(f"kind_{kind}")
    return kind.replace("_", " ") if len(kind) < 20 else say("kind_error")


def _explain_error(out: GradeResult, error: dict[str, Any], memory_mb: int) -> None:
    kind, message, etype = error["kind"], str(error.get("message", ""))[:500], str(error.get("type", ""))[:60]
    out.status, out.where = "error", _where(error)
    frames = error.get("frames") if isinstance(error.get("frames"), list) else []
    func = frames[-1].get("function") if frames and isinstance(frames[-1], dict) else None
    call = error.get("call")
    on = say(f"on_{call}") if call in CALLS else ""
    if kind == "not_written":
        out.status = "not_written"
        out.summary = say("not_written", name=f"`{func}`" if func and func != "<module>" else say("your_file"))
    elif kind == "sys_exit":
        code = error.get("code")
        out.summary = say("exit_at_import" if error.get("stage") == "import" else "exit_in_call", code=code, on=on)
    elif kind in ("syntax", "memory", "mutates_input", "forbidden", "bad_return", "kernel_refused"):
        text = _said_by_child(message, out.exercise) if kind in ("forbidden", "bad_return") else message
        out.summary = say(kind, message=text, on=on, memory_mb=memory_mb)
    elif kind == "import":
        out.summary = say("import_failed", type=etype, message=message)
    else:
        out.summary = say("raised", type=etype, on=on, message=message)
        out.findings = exception_findings(etype, message)
    out.rows = [CheckRow(say("check_ran"), False, _kind_word(kind))]


def _said_by_child(message: str, exercise: Exercise) -> str:
    """A refusal or a driver's complaint, in the learner's language, starting as a sentence does."""
    text = child_message(message, exercise=say("exercise_number", number=exercise.number), uses=_(exercise.uses_text))
    return text[:1].upper() + text[1:]
