"""A kernel file filter (Landlock) on the process that runs the learner's code.

The audit hook of :mod:`.sandbox` keeps the package's files (its closed forms,
its reference solutions) out of reach of code that plays by Python's rules. It
is not enough on its own: NumPy can make an array of any address
(``__array_interface__``), and code that writes memory through such an array
can rewrite the hook's own data. Landlock (Linux 5.13 and later) moves the
line into the kernel: between fork and exec the supervisor (:func:`restrict`)
allows the child to read exactly what it needs, and nothing it does afterwards
(Python, NumPy, memory writes, a C extension) can widen that:

* the Python interpreter and the shared libraries it and NumPy load;
* the standard library, without its ``site-packages``;
* NumPy (and ``numpy.libs``, where wheels keep their own libraries);
* the few files of this package the child loads by path (the runner, the wire
  format, the drivers, the audit hook, and the ``Value`` engine): no closed
  form, no solution, no other file of the package;
* ``/dev/null``, ``/dev/urandom``, ``/dev/zero``.

Everything else, the package's other files and the rest of the disk, ``/proc``
(another process's memory) and any write, is refused with EACCES; TCP and, from
Landlock ABI 6, signals to other processes and abstract sockets as well.

Where bubblewrap works (:mod:`.bubblewrap`) this filter is not used: the
child's mount namespace holds nothing but these files already, and a Landlock
domain would forbid bwrap's mounts; its list of what the child needs
(:func:`allowed_paths`) is what bubblewrap binds. Where Landlock is missing
(older kernels, other systems) :func:`restrict`
returns False and the audit hook is the only line for reading files (the
seccomp filter still refuses writes, processes and signals). Standard library
only (ctypes included: the supervisor may use it, the child never loads it):
the supervisor loads this module by its path.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Allowed", "abi_version", "allowed_paths", "mapped_directories", "restrict"]

# syscall numbers: the generic table, the same on x86-64 and aarch64
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, READ_FILE, READ_DIR = 1 << 0, 1 << 2, 1 << 3
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}  # every right it knows
_FILE_RIGHTS = EXECUTE | 1 << 1 | READ_FILE | 1 << 14 | 1 << 15  # the rights that apply to a file itself
_NET_ALL = (1 << 0) | (1 << 1)  # bind and connect TCP (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets and signals beyond the process (ABI 6)
_PACKAGES = frozenset({"site-packages", "dist-packages"})
_DEVICES = ("/dev/null", "/dev/urandom", "/dev/zero")


@dataclass(frozen=True)
class Allowed:
    """What the child may read: whole directories, single files, and programs (the interpreter, libraries)."""

    directories: tuple[str, ...]
    files: tuple[str, ...]
    programs: tuple[str, ...]  # executed or mapped as code: the interpreter, its loader and libraries
    listable: tuple[str, ...] = ()  # directories whose names may be listed (imports look there), not read
    library_dirs: tuple[str, ...] = ()  # system library directories, read and mapped as code, whole

    @classmethod
    def from_json(cls, data: dict[str, list[str]]) -> Allowed:
        return cls(**{k: tuple(v) for k, v in data.items()})


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The Landlock ABI the kernel offers; 0 where there is none (or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(v for v in _FS_BY_ABI if v <= abi)]


def _ruleset(libc: ctypes.CDLL, abi: int) -> int:
    attr = _RulesetAttr(_fs_rights(abi), _NET_ALL if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    return int(libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))


def _add(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    """Allow ``rights`` on ``path`` (a directory: beneath it); a path that is not there is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def restrict(allowed: Allowed) -> bool:
    """In the forked child, before exec: allow reading ``allowed`` only, for good. False where it cannot."""
    abi = abi_version()
    if abi < 1:
        return False
    libc = _libc()
    ruleset = _ruleset(libc, abi)
    if ruleset < 0:
        return False
    try:
        for directory in allowed.directories:
            _add(libc, ruleset, directory, READ_FILE | READ_DIR)
        for directory in allowed.listable:
            _add(libc, ruleset, directory, READ_DIR)
        for path in (*allowed.files, f"/proc/{os.getpid()}/status"):  # its own status: is the filter on?
            _add(libc, ruleset, path, READ_FILE)
        for path in (*allowed.programs, *allowed.library_dirs):
            _add(libc, ruleset, path, READ_FILE | EXECUTE)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0
    finally:
        os.close(ruleset)


# ---- what the child needs, worked out in the grading process -------------------------------------------


def mapped_directories() -> list[str]:
    """Directories of the files this process has mapped: its program, libraries, NumPy's extensions.

    Called in the grading process, which has NumPy loaded (its libraries may live
    anywhere: a wheel's ``numpy.libs``, a conda ``lib``, the system's).
    """
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            fields = [line.split(maxsplit=5) for line in f.read().splitlines()]
    except OSError:
        return []
    paths = {f[5] for f in fields if len(f) == 6 and f[5].startswith("/")}
    return sorted({os.path.dirname(p) for p in paths if os.path.isfile(p)})


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _entries(directory: str) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            yield from it
    except OSError:
        return


def _libraries(directories: Iterable[str], keep_out: str, python: Iterable[str]) -> tuple[list[str], list[str]]:
    """(library directories allowed whole, single libraries) for the directories of mapped files.

    A directory inside or above Python's or the package's (``python``, ``keep_out``:
    a conda or pyenv ``lib`` holds ``python3.x/site-packages``) gets its shared
    libraries one by one; a system one (``/usr/lib/x86_64-linux-gnu``) is allowed
    whole. Nothing inside ``keep_out`` is allowed.
    """
    guarded = [keep_out, *python]
    whole, single = [], []
    for directory in sorted(directories):
        if _PACKAGES & set(directory.split("/")) or _inside(directory, keep_out):
            continue
        if not any(_inside(directory, g) or _inside(g, directory) for g in guarded):
            whole.append(directory)
            continue
        single += [e.path for e in _entries(directory) if ".so" in e.name and e.is_file()]
    return whole, single


def _stdlib(directory: str) -> tuple[list[str], list[str]]:
    """(directories, files) of the standard library at ``directory``, its site-packages left out."""
    dirs, files = [], []
    for e in _entries(directory):
        if e.name in _PACKAGES:
            continue
        (dirs if e.is_dir() else files).append(e.path)
    return dirs, files


def allowed_paths(
    numpy_dir: str, stdlib: Iterable[str], harness: Iterable[str], keep_out: str, mapped: Iterable[str]
) -> Allowed:
    """Everything the child reads, and nothing below ``keep_out`` (the package) but the ``harness`` files.

    ``mapped``: the directories of :func:`mapped_directories`, whose shared libraries the child may load.
    """
    dirs = [numpy_dir, os.path.join(os.path.dirname(numpy_dir), "numpy.libs"), "/usr/lib/locale"]
    files = [*harness, *_DEVICES, "/etc/ld.so.cache"]
    for directory in {os.path.realpath(d) for d in stdlib} | set(stdlib):
        more_dirs, more_files = _stdlib(directory)
        dirs += more_dirs
        files += more_files
    program = os.path.realpath(sys.executable)
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *stdlib, numpy_dir}
    python |= {os.path.realpath(d) for d in python}
    whole, single = _libraries({*mapped, os.path.dirname(program)}, keep_out, python)
    for cfg in (os.path.dirname(sys.executable), os.path.dirname(os.path.dirname(sys.executable))):
        files.append(os.path.join(cfg, "pyvenv.cfg"))
    listable = [*stdlib, os.path.dirname(numpy_dir)]  # names only: site-packages' files stay out of reach
    lists = (dirs, files, [program, *single], listable, whole)
    return Allowed(*(tuple(dict.fromkeys(paths)) for paths in lists))
