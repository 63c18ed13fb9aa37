"""Bubblewrap: the sandbox tool that holds the learner's (or a student's) code on Linux.

Why a tool and not only filters of our own: code that runs in the grader's
memory space can rewrite anything of the grader's that lives there (NumPy makes
an array of any address), and a filter written here covers only what its author
thought of. Namespaces change what the process *is* instead of what it may call:
``bwrap`` (https://github.com/containers/bubblewrap, Debian package
``bubblewrap``) starts it

* in new user, PID, network, IPC, UTS and mount namespaces: it sees no other
  process (its ``/proc`` is its own), reaches no network and no socket of
  another process (a tmux server's, an X server's), no shared memory, and
  a file tree made of read-only binds of exactly what it needs: the
  interpreter and its libraries, the standard library (its ``site-packages``
  hidden), NumPy, and the few harness files of this package; an empty
  ``/tmp``; nothing else of the disk (no solution, no closed form, no progress
  file, no home folder);
* with every capability dropped, as an unprivileged uid (65534) inside, so that
  setting the clock, renicing or pinning anyone, raising its own limits or
  changing a file's mode fails in the kernel, whatever the code does to its own
  memory;
* killed when its parent (the supervisor) dies.

The supervisor (:mod:`.supervisor`) still sets the resource limits and the
seccomp filter (:mod:`.seccomp`, passed to ``bwrap --seccomp``: no new
process, no file opened for writing, no socket), and still kills every process
below it at the end; the audit hook of :mod:`.sandbox` still explains refusals.

Where ``bwrap`` is missing or cannot make namespaces (macOS; a container that
forbids user namespaces), :func:`available` says why, once, and the grader falls
back to the Landlock and seccomp filters (``docs/grader.md`` says what then holds).
``MICROGRADNORM_BWRAP`` names the program to use (``off`` turns it off, for the
tests of that fallback).

Standard library only: the supervisor loads this module by its path.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["ENV", "UID", "Found", "available", "command", "exit_code"]

ENV = "MICROGRADNORM_BWRAP"  # path of bwrap, or "off"
UID = 65534  # the uid and gid inside the sandbox: "nobody"
_PACKAGES = ("site-packages", "dist-packages")
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # merged-/usr systems make these symlinks
PROBE_TIMEOUT = 30.0  # seconds for the one probe that checks bwrap can make namespaces here


@dataclass(frozen=True)
class Found:
    """Whether the sandbox tool can be used here; ``why`` says, in a sentence, why not."""

    program: str | None
    why: str = ""

    def __bool__(self) -> bool:
        return self.program is not None


def _namespaces() -> list[str]:
    return [
        "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--uid", str(UID), "--gid", str(UID), "--cap-drop", "ALL", "--die-with-parent", "--new-session",
        "--hostname", "sandbox",
    ]  # fmt: skip


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def command(
    bwrap: str,
    *,
    read_dirs: Iterable[str],
    read_files: Iterable[str],
    hide: Iterable[str] = (),
    seccomp_fd: int | None = None,
    argv: Sequence[str],
) -> list[str]:
    """The full command line: ``bwrap`` with the namespaces, the read-only binds, then ``argv``.

    ``read_dirs`` and ``read_files`` are bound read-only at their own paths (a
    path inside an earlier bound directory is skipped); each of ``hide`` (a
    folder inside one of them, such as the standard library's site-packages)
    is covered with an empty read-only folder. ``seccomp_fd``: a pipe holding a
    BPF program that bwrap installs just before it execs ``argv``.
    """
    cmd = [bwrap, *_namespaces()]
    for name in _ROOT_LINKS:  # /lib64 -> usr/lib64: the dynamic loader's path goes through it
        path = "/" + name
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
    # first the empty /tmp, /proc and /dev: a file bound later (the package may live under /tmp) stays visible
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "0555", "--tmpfs", "/tmp", "--chdir", "/tmp"]
    hidden = [h for h in hide if os.path.isdir(h)]
    paths = [p for p in dict.fromkeys([*read_dirs, *read_files]) if os.path.exists(p)]
    outside = [p for p in paths if not any(_inside(p, h) for h in hidden)]

    def bind(group: list[str], bound: list[str]) -> None:
        for path in group:
            if not any(_inside(path, b) for b in bound):
                cmd.extend(["--ro-bind", path, path])
                if os.path.isdir(path):
                    bound.append(path)

    bound: list[str] = []
    bind(outside, bound)
    covered = [h for h in hidden if any(_inside(h, b) for b in bound)]
    for path in covered:
        cmd.extend(["--tmpfs", path])
    bind([p for p in paths if p not in outside], [])  # NumPy in a hidden site-packages: bound into the empty folder
    for path in covered:
        cmd.extend(["--remount-ro", path])
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return [*cmd, "--", *argv]


def loaders() -> list[str]:
    """The dynamic loader at the path programs name it (``/lib64/ld-linux-x86-64.so.2``), through the links."""
    found = glob.glob("/lib*/ld-linux*.so*") + glob.glob("/lib*/ld-musl*.so*")
    return sorted({os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p)) for p in found})


def exit_code(code: int) -> int:
    """The child's exit as ``waitstatus_to_exitcode`` gives it: bwrap reports a death by signal N as 128 + N."""
    return -(code - 128) if 128 < code < 128 + 65 else code


@functools.lru_cache(maxsize=1)
def available() -> Found:
    """bwrap, if it is there and can make the namespaces here (probed once, with no learner code)."""
    choice = os.environ.get(ENV, "")
    if choice == "off":
        return Found(None, f"{ENV}=off")
    if not sys.platform.startswith("linux"):
        return Found(None, f"bubblewrap is Linux-only; this system is {sys.platform}")
    program = shutil.which(choice or "bwrap")
    if program is None:
        return Found(None, f"{choice or 'bwrap'} is not installed (Debian, Ubuntu: apt install bubblewrap)")
    python = os.path.realpath(sys.executable)
    probe = command(program, read_dirs=[], read_files=[python], argv=[python, "-I", "-S", "-c", "pass"])
    # the probe needs the interpreter's libraries: bind the system's library folders whole for it
    probe[probe.index("--") : probe.index("--")] = _library_binds()
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Found(None, f"{program} could not be run: {exc}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return Found(None, f"{program} cannot make namespaces here: {said[-1] if said else done.returncode}")
    return Found(program)


def _library_binds() -> list[str]:
    binds = []
    for path in ("/usr", "/etc/ld.so.cache", os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))):
        if os.path.exists(path):
            binds += ["--ro-bind", path, path]
    return binds
