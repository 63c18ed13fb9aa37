"""The supervisor: a small process between the grader and the learner's code.

The grader starts it as ``python -I -S supervisor.py CONFIG`` (standard library
only, loaded by its path). It

1. makes itself a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): any
   process started below it that loses its parent (a double fork, a daemon that
   called ``setsid``) is re-parented to it instead of to init, so it can always
   find them;
2. starts the child that runs the learner's code: between fork and exec it
   sets hard resource limits (address space, CPU time, file size 0, no core
   file, at most FILES_LIMIT open files: a pipe holds kernel memory the
   address-space limit does not count; no real-time priority, no nice below 0)
   and ``PR_SET_PDEATHSIG`` (the child dies if the supervisor does). Where
   bubblewrap works (``config["isolated"]``, :mod:`.bubblewrap`) it execs
   ``bwrap``, which starts the child in its namespaces and installs the syscall
   filter (:mod:`.seccomp`, handed over in a pipe) just before; elsewhere it
   installs the kernel's file filter (:mod:`.landlock`, where there is one) and
   the syscall filter itself, both kept across the exec. Then it tells the
   grader the child's pid (bwrap's, when it is used);
3. waits until the child exits, or the grader closes the control pipe (the
   supervisor's stdin: the check timed out, was interrupted, or the grader
   itself died), or its own backstop deadline passes;
4. kills every process below it, found through ``/proc``, again and again until
   none is left, reaps them all, reports the child's exit status, and exits.

The grader waits for it to exit, so when a check returns nothing it started is
left. Where there is no ``/proc`` (macOS), the child's process group is killed
instead.

Status lines on stdout, for the grader: ``started PID``, then ``exit CODE``
(negative: killed by that signal) or ``stopped`` (the supervisor ended it),
then ``clean N`` (how many processes it had to kill).
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["descendants", "kill_tree", "main"]

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
CLEANUP_LIMIT = 10.0  # seconds of killing and reaping before giving up on a process that will not die


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0


def _parent_of(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # gone meanwhile
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
    fields = stat.rpartition(b")")[2].split()
    return int(fields[1]) if len(fields) > 1 else None


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...), from ``/proc``; [] where there is none."""
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for entry in entries:
        parent = _parent_of(entry)
        if parent is not None:
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    """Collect every child of ours that has exited (adopted orphans included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(root: int, group: int | None = None) -> int:
    """SIGKILL every process below ``root`` until none is left; returns how many were found.

    ``group`` is a process group to kill as well (the fallback without ``/proc``).
    A process forked between a look and the kill is found by the next look:
    killed processes fork no more, so this ends.
    """
    seen: set[int] = set()
    end = time.monotonic() + CLEANUP_LIMIT
    while time.monotonic() < end:
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                group = None
        found = descendants(root)
        for pid in found:
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        if not found and group is None:
            return len(seen)
        time.sleep(0.002)
    return len(seen)


def _sibling(name: str) -> Any:
    """A sibling module (:mod:`.seccomp`, :mod:`.landlock`), loaded by its path (this process never imports
    the package)."""
    spec = importlib.util.spec_from_file_location(f"_microgradnorm_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # dataclasses look their module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


FILES_LIMIT = 64  # open files at once: Python and NumPy need a few; each one can hold kernel memory (a pipe)


def _before_exec(
    argv: list[str],
    memory: int,
    cpu: int,
    kernel_filter: bool,
    readable: dict[str, Any] | None = None,
    namespaced: bool = False,
) -> Callable[[], None]:
    """What the child does between fork and exec: hard limits, die with the supervisor, the filters, exec.

    ``kernel_filter`` False leaves the seccomp filter out (the tests of the cleanup below need processes to
    clean up); ``readable`` (an :class:`.landlock.Allowed`, as JSON) turns the file filter on.
    """
    seccomp = _sibling("seccomp")
    landlock = _sibling("landlock") if readable is not None else None
    allowed = landlock.Allowed.from_json(readable) if landlock is not None else None

    def apply() -> None:
        import resource

        limits = (("RLIMIT_AS", memory), ("RLIMIT_CPU", cpu), ("RLIMIT_FSIZE", 0), ("RLIMIT_CORE", 0))
        # no real-time priority, no nice below 0: a SCHED_FIFO hog would starve the machine's other processes
        more = (("RLIMIT_NOFILE", FILES_LIMIT), ("RLIMIT_RTPRIO", 0), ("RLIMIT_RTTIME", 0), ("RLIMIT_NICE", 0))
        for name, value in (*limits, *more):
            which = getattr(resource, name, None)
            if which is None:
                continue
            hard = value + 1 if name == "RLIMIT_CPU" else value  # SIGXCPU first, then SIGKILL a second later
            try:
                resource.setrlimit(which, (value, hard))
            except (ValueError, OSError):  # e.g. RLIMIT_AS on macOS
                pass
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if allowed is not None:
            landlock.restrict(allowed)  # False where the kernel has no Landlock: the audit hook then stands alone
        if kernel_filter and not namespaced:  # inside bubblewrap, bwrap installs it (--seccomp) before its exec
            seccomp.exec_filtered(argv, dict(os.environ))  # does not return

    return apply


def _wait(pid: int, control: int, deadline: float) -> int | None:
    """The child's exit code, or None when told to stop (control closed) or past ``deadline``."""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        ready, _, _ = select.select([control], [], [], 0.01)
        if ready:  # EOF or a byte: either way, stop (unless the child has just exited by itself)
            done, status = os.waitpid(pid, os.WNOHANG)
            return os.waitstatus_to_exitcode(status) if done else None
    return None


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _namespaced(config: dict[str, Any]) -> tuple[list[str], list[int]]:
    """(the command that starts the child inside bubblewrap, fds to pass on) from ``config["isolated"]``.

    The seccomp filter goes to bwrap through a pipe it reads before its exec of the child.
    """
    bubblewrap, seccomp = _sibling("bubblewrap"), _sibling("seccomp")
    spec, fds = config["isolated"], []
    program = seccomp.namespaced() if config.get("filter", True) else None
    if program is not None:
        read, write = os.pipe()  # a filter is a few kB: the pipe holds it all
        os.write(write, program)
        os.close(write)
        fds.append(read)
    argv = bubblewrap.command(
        spec["bwrap"],
        read_dirs=spec["read_dirs"],
        read_files=spec["read_files"],
        hide=spec["hide"],
        seccomp_fd=fds[0] if fds else None,
        argv=config["argv"],
    )
    return argv, fds


def main(argv: list[str] | None = None) -> int:
    config = json.loads((sys.argv if argv is None else argv)[1])
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    namespaced = config.get("isolated") is not None
    command, extra_fds = _namespaced(config) if namespaced else (config["argv"], [])
    child = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=config["log_fd"],
        stderr=config["log_fd"],
        pass_fds=(*config["pass_fds"], *extra_fds),
        start_new_session=True,
        preexec_fn=_before_exec(
            config["argv"],
            int(config["memory"]),
            int(config["cpu"]),
            config.get("filter", True),
            config.get("readable"),
            namespaced,
        ),
    )
    for fd in (*config["pass_fds"], config["log_fd"], *extra_fds):
        os.close(fd)
    _say(f"started {child.pid}")
    code = _wait(child.pid, 0, time.monotonic() + float(config["deadline"]))
    child.returncode = 0  # reaped by _wait or kill_tree below, not by Popen
    if namespaced and code is not None:
        code = _sibling("bubblewrap").exit_code(code)
    killed = kill_tree(os.getpid(), group=None if os.path.isdir("/proc") else child.pid)
    _say("stopped" if code is None else f"exit {code}")
    _say(f"clean {killed}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
