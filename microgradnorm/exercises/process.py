"""The grader's side of the child process: start it, feed it, collect it, and leave nothing behind.

:func:`run_child` starts the supervisor (:mod:`.supervisor`), which starts the
child (:mod:`.runner`) under hard limits, and talks to them over five pipes
that this process creates and owns:

=========  ==========================  =========================================
pipe       written by                  read by
=========  ==========================  =========================================
job        the grader                  the child: the exercise, source, inputs
result     the child                   the grader, at most RESULT_LIMIT bytes
printed    the child (stdout, stderr)  the grader, keeping the last part only
control    the grader                  the supervisor: closed means "stop now"
status     the supervisor              the grader: the child's pid, exit, clean
=========  ==========================  =========================================

Every read and write goes through one ``select`` loop with one deadline: the
check's time limit, counted from the moment the child says it is about to run
the learner's code (the byte :data:`.runner.READY` on the result pipe), so that
starting Python and NumPy on a loaded machine (longer inside bubblewrap) costs no
learner their time; before that, a start-up limit of its own, non-blocking, size-capped: whatever the child does, this
process neither hangs nor reads without bound. Nothing is written to disk, so
no temporary folder can be left behind. Whatever the outcome, the control pipe
is closed and the supervisor waited for: it kills and reaps every process the
child started before it exits.

The child's environment is built from nothing: no variable of the grader's
(``MICROGRADNORM_HOME`` included) is passed on. Where bubblewrap works
(:mod:`.bubblewrap`) the child runs in its namespaces, seeing read-only binds of
only what the kernel file filter would allow (:func:`_isolated`); elsewhere
under that file filter (:func:`_readable`, Landlock).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import select
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from microgradnorm.exercises.runner import BOOT, READY

__all__ = ["RESULT_LIMIT", "ChildRun", "child_environment", "run_child"]

HERE = Path(__file__).resolve().parent
RESULT_LIMIT = 32 * 2**20  # bytes: every answer of every exercise fits in well under 1 MiB
PRINTED_KEEP = 8000  # bytes of the child's own output kept (the last ones)
SUPERVISOR_GRACE = 15.0  # seconds the supervisor gets to clean up after being told to stop
STARTUP_LIMIT = 60.0  # seconds Python and NumPy may take to start (no learner code runs before READY)


@dataclass
class ChildRun:
    """What came back from one run of the child."""

    result: bytearray = field(default_factory=bytearray)
    printed: bytes = b""
    printed_total: int = 0
    returncode: int | None = None  # None: stopped before it exited
    timed_out: bool = False
    too_large: bool = False  # the result went over RESULT_LIMIT
    pid: int | None = None  # the child's
    cleaned: int = 0  # processes the supervisor had to kill
    status: list[str] = field(default_factory=list)
    isolated: bool = False  # the child ran inside bubblewrap's namespaces


def child_environment() -> dict[str, str]:
    """The whole environment of the supervisor and the child: nothing of the grader's."""
    return {
        "PATH": os.defpath,
        "LC_ALL": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
    }


def _numpy_parent() -> str:
    import numpy

    return str(Path(numpy.__file__).resolve().parent.parent)


HARNESS = ("runner.py", "wire.py", "drivers.py", "sandbox.py")  # the files of this package the child loads


@functools.lru_cache(maxsize=2)
def _readable(engine: bool = False) -> dict[str, Any]:
    """What the kernel file filter (:mod:`.landlock`) lets the child read, as the supervisor's arguments.

    ``engine``: the exercise is about the ``Value`` engine, whose file the child then loads too.
    """
    from microgradnorm.exercises import landlock

    package = HERE.parent
    harness = [str(HERE / name) for name in HARNESS] + ([str(package / "engine.py")] if engine else [])
    allowed = landlock.allowed_paths(
        numpy_dir=str(Path(_numpy_parent()) / "numpy"),
        stdlib=sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}),
        harness=harness,
        keep_out=str(package),
        mapped=landlock.mapped_directories(),
    )
    return dataclasses.asdict(allowed)


@functools.lru_cache(maxsize=2)
def _isolated(engine: bool = False) -> dict[str, Any] | None:
    """What bubblewrap (:mod:`.bubblewrap`) shows the child, as the supervisor's arguments; None without it.

    The same list the kernel file filter allows (one list of what the child needs), as read-only binds;
    the standard library's site-packages hidden under an empty folder.
    """
    from microgradnorm.exercises import bubblewrap

    found = bubblewrap.available()
    if not found:
        return None
    spec = _readable(engine)
    stdlib = sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
    stdlib = sorted({*stdlib, *map(os.path.realpath, stdlib)})
    hide = [os.path.join(d, p) for d in stdlib for p in ("site-packages", "dist-packages")]
    # whole folders where the file filter lists their files one by one: a bind mount each costs startup time
    inside = [
        d
        for d in spec["directories"]
        if any(d.startswith(h + "/") for h in hide) or not any(d.startswith(s + "/") for s in stdlib)
    ]
    files = (*spec["files"], *spec["programs"], *bubblewrap.loaders())
    return {
        "bwrap": found.program,
        "read_dirs": [*stdlib, *inside, *spec["library_dirs"]],
        "read_files": files_to_bind(files, stdlib, hide),
        "hide": hide,
    }


def files_to_bind(files: Iterable[str], stdlib: Sequence[str], hide: Sequence[str]) -> list[str]:
    """The files bubblewrap binds one by one: all but /dev's and those a bound stdlib folder already shows.

    A file in a hidden site-packages is bound although it lies inside the stdlib: a venv's platstdlib holds
    its site-packages, and so an installed microgradnorm's harness (runner.py and its modules).
    """
    in_stdlib, hidden = tuple(s + "/" for s in stdlib), tuple(h + "/" for h in hide)
    return [p for p in files if not p.startswith("/dev/") and (not p.startswith(in_stdlib) or p.startswith(hidden))]


def isolation() -> str:
    """How the child is held here, in a word for messages: "bubblewrap", or why not (said once by the grader)."""
    from microgradnorm.exercises import bubblewrap

    found = bubblewrap.available()
    return "bubblewrap" if found else found.why


PROBE_TIMEOUT = 60.0  # seconds a probe may take to start Python and NumPy on a slow machine
# None: not yet known; True: a child under the file filter has answered; False: under it, no child starts here
_file_filter_works: dict[str, bool | None] = {"state": None}


class _Pipes:
    """The five pipes, as (read end, write end); the grader's ends are non-blocking."""

    def __init__(self) -> None:
        self.job, self.result, self.printed, self.control, self.status = (os.pipe() for _ in range(5))
        for fd in (self.job[1], self.result[0], self.printed[0], self.status[0]):
            os.set_blocking(fd, False)

    def child_ends(self) -> tuple[int, ...]:
        return self.job[0], self.result[1], self.printed[1], self.control[0], self.status[1]

    def close(self, fds: tuple[int, ...]) -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _start(
    pipes: _Pipes, timeout: float, memory_mb: int, cwd: Path, readable: dict | None, isolated: dict | None
) -> subprocess.Popen:
    python = os.path.realpath(sys.executable) if isolated else sys.executable  # a venv's link is not inside
    child = [python, "-I", "-S", "-B", "-X", "utf8", "-c", BOOT, str(HERE / "runner.py")]
    child += [str(pipes.job[0]), str(pipes.result[1]), _numpy_parent()]
    config = {
        "argv": child,
        "pass_fds": [pipes.job[0], pipes.result[1]],
        "log_fd": pipes.printed[1],
        "memory": memory_mb * 2**20,
        "cpu": math.ceil(timeout) + 1,  # a backstop: the wall-clock deadline comes first
        "deadline": STARTUP_LIMIT + timeout + 5.0,  # the supervisor's own backstop, should the grader vanish
        "readable": None if isolated else readable,  # no Landlock under bwrap: it would forbid its mounts
        "isolated": isolated,
    }
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", str(HERE / "supervisor.py"), json.dumps(config)],
        stdin=pipes.control[0],
        stdout=pipes.status[1],
        stderr=pipes.printed[1],
        pass_fds=(pipes.job[0], pipes.result[1], pipes.printed[1]),
        cwd=cwd,
        env=child_environment(),
        start_new_session=True,
    )


class _Collector:
    """The select loop: write the job, read result, printed output and status, until all end or time is up."""

    def __init__(self, pipes: _Pipes, job: bytes, run: ChildRun) -> None:
        self.run = run
        self.pending = memoryview(job)
        self.writer: int | None = pipes.job[1]
        self.readers = {pipes.result[0]: "result", pipes.printed[0]: "printed", pipes.status[0]: "status"}
        self.status = b""
        self.ready: float | None = None  # when the child said it starts the learner's code

    def collect(self, timeout: float) -> None:
        """Until every pipe ends, the result is too large, or ``timeout`` has passed since READY (or the
        start-up limit since now, before it)."""
        startup = time.monotonic() + STARTUP_LIMIT
        while self.readers and not self.run.too_large:
            deadline = self.ready + timeout if self.ready is not None else startup
            left = deadline - time.monotonic()
            if left <= 0:
                self.run.timed_out = True
                return
            writers = [self.writer] if self.writer is not None else []
            readable, writable, _ = select.select(list(self.readers), writers, [], left)
            for fd in readable:
                self._read(fd)
            if writable:
                self._write()

    def _write(self) -> None:
        assert self.writer is not None
        try:
            self.pending = self.pending[os.write(self.writer, self.pending[: 1 << 16]) :]
        except BlockingIOError:
            return
        except BrokenPipeError:  # the child is gone before reading its job: its exit says why
            self.pending = self.pending[:0]
        if not self.pending:
            os.close(self.writer)
            self.writer = None

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        which = self.readers[fd]
        if not data:
            del self.readers[fd]
            return
        if which == "result":
            if self.ready is None:  # the first byte is READY (sent before any learner code ran): not the result's
                self.ready = time.monotonic()
                data = data[len(READY) :] if data.startswith(READY) else data
            self.run.result.extend(data)
            self.run.too_large = len(self.run.result) > RESULT_LIMIT
        elif which == "printed":
            self.run.printed = (self.run.printed + data)[-PRINTED_KEEP:]
            self.run.printed_total += len(data)
        else:
            self.status += data[:4096]

    def close_writer(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(OSError):
                os.close(self.writer)
            self.writer = None


def _read_status(run: ChildRun, text: str) -> None:
    for line in text.splitlines():
        word, _, value = line.partition(" ")
        run.status.append(line)
        if word == "started" and value.isdecimal():
            run.pid = int(value)
        elif word == "exit":
            with contextlib.suppress(ValueError):
                run.returncode = int(value)
        elif word == "clean" and value.isdecimal():
            run.cleaned = int(value)


def _finish(proc: subprocess.Popen, collector: _Collector) -> None:
    """After the control pipe is closed: the supervisor cleans up and exits; read its last words."""
    try:
        proc.wait(timeout=SUPERVISOR_GRACE)
    except subprocess.TimeoutExpired:  # pragma: no cover - a supervisor that does not exit
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    status_fd = next((fd for fd, which in collector.readers.items() if which == "status"), None)
    while status_fd is not None:
        try:
            data = os.read(status_fd, 4096)
        except BlockingIOError:
            break
        if not data:
            break
        collector.status += data[:4096]


def run_child(
    job: bytes, *, timeout: float, memory_mb: int, cwd: Path, probe: bytes = b"", engine: bool = False
) -> ChildRun:
    """Run the child on ``job`` for at most ``timeout`` seconds; every process is gone when this returns.

    Under the kernel file filter where the kernel has one (``engine``: the child
    may read the ``Value`` engine's file too). Should a child under it send
    nothing back before any has answered, ``probe`` (a job with no learner code
    in it) tells why: if the probe answers, the learner's code ended its child;
    if not, the filter keeps Python or NumPy from starting on this machine, and
    from then on children run without it (the audit hook still stands). The
    learner's code cannot steer that choice: it is not in the probe.
    """
    limits = {"timeout": timeout, "memory_mb": memory_mb, "cwd": cwd}
    isolated = _isolated(engine)
    if isolated is not None:  # the namespaces hold; bwrap's own probe showed that a Python starts in them
        return _run(job, readable=None, isolated=isolated, **limits)
    state, spec = _file_filter_works, _readable(engine)
    run = _run(job, readable=spec if state["state"] is not False else None, **limits)
    if run.result and state["state"] is None:
        state["state"] = True
    elif not run.result and not run.timed_out and state["state"] is None and probe:
        # limits of its own, not the check's: a tight --timeout or --memory must not pass for a broken filter
        sure = _run(probe, readable=spec, timeout=max(timeout, PROBE_TIMEOUT), memory_mb=max(memory_mb, 1024), cwd=cwd)
        if sure.result or not sure.timed_out:  # a probe that ran out of time says nothing: the filter stays
            state["state"] = bool(sure.result)
        if state["state"] is False:
            run = _run(job, readable=None, **limits)
    return run


def _run(
    job: bytes, *, timeout: float, memory_mb: int, cwd: Path, readable: dict | None, isolated: dict | None = None
) -> ChildRun:
    run = ChildRun(isolated=isolated is not None)
    pipes = _Pipes()
    ours = (pipes.job[1], pipes.result[0], pipes.printed[0], pipes.control[1], pipes.status[0])
    proc = None
    collector = _Collector(pipes, job, run)
    try:
        proc = _start(pipes, timeout, memory_mb, cwd, readable, isolated)
        pipes.close(pipes.child_ends())
        with _sigterm_as_exit():
            collector.collect(timeout)
    finally:
        collector.close_writer()
        pipes.close((pipes.control[1],))  # "stop now": the supervisor kills whatever is left
        if proc is not None:
            _finish(proc, collector)
        else:
            pipes.close(pipes.child_ends())
        pipes.close(tuple(fd for fd in ours if fd not in (pipes.job[1], pipes.control[1])))
    _read_status(run, collector.status.decode("ascii", errors="replace"))
    return run


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While the child runs, turn SIGTERM into SystemExit, so that the cleanup above still runs.

    Only in the main thread (Python runs signal handlers there; ``exercise
    watch`` in a test runs elsewhere); elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
