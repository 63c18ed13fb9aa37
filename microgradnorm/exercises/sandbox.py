"""What the learner's code may do while it is graded, enforced from inside its process.

Two mechanisms, both in place before the first line of the learner's file runs,
and neither removable by any code in the process afterwards:

1. the kernel filter of :mod:`.seccomp` (Linux), installed by the supervisor
   between fork and exec: no new process, no program exec'd, no signal to
   another process, no raised resource limit, no file opened for writing;
2. an audit hook (``sys.addaudithook``; PEP 578), installed by :func:`install`
   once the harness has loaded what it needs (NumPy without ctypes, and the
   ``Value`` engine for the exercises about it). Python calls it before each
   sensitive operation. It refuses, with a message that says why:

   * imports other than NumPy and the standard library (minus the modules
     that start processes, reach C functions, the network or the terminal);
     the package itself is out of reach, apart from ``microgradnorm.Value``
     in the exercises that are about it, which the harness put in place;
   * opening any file outside the standard library and NumPy (so no solution,
     no closed form, no progress file, nothing under ``/proc``), and any file
     for writing; listing directories outside the same places;
   * starting processes, sending signals, changing resource limits, ctypes,
     sockets, ``gc.get_objects``, a new audit hook, and reading or replacing
     a function's defaults or code.

The hook cannot be talked out of a refusal by the code it watches: it and its
helpers look up no global and no builtin name when they run (everything they
use is bound as a default argument when they are made, and those cannot be
read or replaced while the hook is on), so patching ``os.path``, ``builtins``
or this module changes nothing; paths are checked as text (absolute, no ``..``,
no symbolic link below an allowed directory), never through ``os.path``.

The child holds no right answer at any point (the grading process computes and
compares them), so what the hook keeps out are the routes to one: the package's
own modules and files. What it cannot see, the kernel filters stop. And since
the hook lives in the child's memory, which NumPy's array interface lets code
write at any address, it is the line that explains, not the line that holds:
bubblewrap's namespaces (:mod:`.bubblewrap`; the package's files are not in the
child's view at all), or where it is missing the kernel's file filter
(:mod:`.landlock`), are what keep the package's files out of reach of code that
rewrites the hook.

Standard library only: the child process loads this module by its path.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Policy", "Refused", "RefusedImport", "install"]


class Refused(PermissionError):
    """An operation the learner's code may not do while it is graded (a file, a process, ...)."""


class RefusedImport(ImportError):
    """A module the learner's code may not import while it is graded."""


# standard-library modules that start processes, reach C functions, sockets, files beyond open(), or the
# terminal (modules built on these, such as urllib.request or asyncio, are refused when they import them)
_DENIED_STDLIB = frozenset(
    {
        "_ctypes", "ctypes", "_posixsubprocess", "subprocess", "multiprocessing", "_multiprocessing",
        "_posixshmem", "pty", "tty", "termios", "socket", "_socket", "ssl", "_ssl", "resource", "mmap",
        "fcntl", "sqlite3", "_sqlite3", "dbm", "_dbm", "_gdbm", "curses", "_curses", "_curses_panel",
        "readline", "tkinter", "_tkinter", "_winapi", "msvcrt", "winreg",
    }
)  # fmt: skip
_AUTOGRAD = frozenset({"torch", "jax", "jaxlib", "tensorflow", "autograd", "sympy", "mxnet", "chainer", "theano"})
_PROCESS_EVENTS = frozenset(
    {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.startfile",
     "subprocess.Popen", "pty.spawn", "_winapi.CreateProcess"}
)  # fmt: skip
_SIGNAL_EVENTS = frozenset({"os.kill", "os.killpg", "signal.pthread_kill"})
_LIMIT_EVENTS = frozenset({"resource.setrlimit", "resource.prlimit"})
_FILE_CHANGE_EVENTS = frozenset(
    {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.chmod",
     "os.chown", "os.utime", "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr", "os.mkfifo",
     "os.mknod"}
)  # fmt: skip
_INTROSPECTION_EVENTS = frozenset(
    {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.addaudithook", "sys._current_frames"}
)
_REFUSED_PREFIXES = ("ctypes.", "socket.", "shutil.", "sqlite3.", "_winapi.", "winreg.", "webbrowser.", "urllib.")
_WRITE_MODES = frozenset("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


@dataclass(frozen=True)
class Policy:
    """What one graded exercise may use. ``uses`` is said in messages ("NumPy and the standard library")."""

    exercise: str
    uses: str
    readable: tuple[str, ...]  # directories (ending with a separator) whose files may be read


_SPECIAL_FILES = ("/dev/null", "/dev/urandom")
_PACKAGES = ("site-packages", "dist-packages")
_DEFAULTS_ATTRIBUTES = frozenset({"__defaults__", "__kwdefaults__"})
_WRITTEN_ATTRIBUTES = frozenset({"__defaults__", "__kwdefaults__", "__code__"})
_ATTRIBUTE_EVENTS = frozenset({"object.__getattr__", "object.__setattr__", "object.__delattr__"})


def default_readable(numpy_dir: str) -> tuple[str, ...]:
    """The standard library (not its site-packages) and NumPy, as given and resolved, without a final '/'."""
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")} | {numpy_dir}
    return tuple(sorted({os.path.normpath(d) for d in dirs} | {os.path.realpath(d) for d in dirs}))


def _canonical(value: Any, _type: Any = type, _str: Any = str, _bytes: Any = bytes) -> str | None:
    """An exact str or bytes absolute path without '.' or '..' parts, as '/a/b'; None for anything else.

    No global or builtin name is looked up here (nor in the other helpers of
    the hook): every one is a default argument, bound when the module loads.
    """
    if _type(value) is _bytes:
        value = _bytes.decode(value, "utf-8", "surrogateescape")
    if _type(value) is not _str or not _str.startswith(value, "/"):
        return None
    parts = []
    for part in _str.split(value, "/"):
        if part == ".." or part == ".":
            return None
        if part:
            parts.append(part)
    return "/" + "/".join(parts)


def _plainly_below(
    path: str,
    base: str,
    _str: Any = str,
    _len: Any = len,
    _lstat: Any = os.lstat,
    _oserror: Any = OSError,
    _packages: tuple[str, ...] = _PACKAGES,
) -> bool:
    """``path`` is ``base`` or inside it, through no site-packages and no symbolic link."""
    if path != base and not _str.startswith(path, base + "/"):
        return False
    current = base
    for part in _str.split(path[_len(base) :], "/"):
        if not part:
            continue
        if part in _packages:
            return False
        current = current + "/" + part
        try:
            if (_lstat(current).st_mode & 0o170000) == 0o120000:  # a symbolic link
                return False
        except _oserror:  # not there: opening it will fail by itself
            return True
    return True


def _path_ok(
    value: Any,
    readable: tuple[str, ...],
    _canonical: Any = _canonical,
    _below: Any = _plainly_below,
    _special: tuple[str, ...] = _SPECIAL_FILES,
) -> bool:
    """Whether a file or directory named by an open or list event may be read: inside a readable directory."""
    path = _canonical(value)
    if path is None:
        return False
    if path in _special:
        return True
    for base in readable:
        if _below(path, base):
            return True
    return False


def _import_message(name: str, exercise: str, uses: str, autograd: frozenset[str] = _AUTOGRAD) -> str:
    """Why ``name`` is refused. Called by the hook: no global or builtin lookups here either."""
    top = name.partition(".")[0]
    if top == "microgradnorm":
        why = f"the package's own code (its closed forms and solutions) is out of reach; {exercise} may use {uses}"
    elif top in autograd:
        why = "the point is to write the gradient yourself, not to have a library derive it"
    else:
        why = f"{exercise} may use {uses}"
    return f"`{name}` cannot be imported while an exercise is graded: {why}"


def _refusal(event: str, groups: tuple[tuple[frozenset[str], str], ...], prefixes: tuple[str, ...]) -> str | None:
    """The reason to refuse an event that is refused whatever its arguments, or None."""
    for events, why in groups:
        if event in events:
            return why
    if event.startswith(prefixes):
        return f"your code may not use {event} while it is graded"
    return None


_GROUPS = (
    (_PROCESS_EVENTS, "your code may not start processes while it is graded"),
    (_SIGNAL_EVENTS, "your code may not send signals while it is graded"),
    (_LIMIT_EVENTS, "your code may not change its resource limits while it is graded"),
    (_FILE_CHANGE_EVENTS, "your code may not change files while it is graded"),
    (_INTROSPECTION_EVENTS, "your code may not look through the interpreter's objects while it is graded"),
)


def _on_open(
    args: tuple[Any, ...],
    readable: tuple[str, ...],
    _type: Any = type,
    _str: Any = str,
    _int: Any = int,
    _path_ok: Any = _path_ok,
    _refused: Any = Refused,
    _write_modes: frozenset[str] = _WRITE_MODES,
    _write_flags: int = _WRITE_FLAGS,
) -> None:
    path, mode, flags = args[0], args[1], args[2]
    if _type(path) is _int and 0 <= path <= 2:  # stdin, stdout, stderr
        return
    if (_type(mode) is _str and not _write_modes.isdisjoint(mode)) or (_type(flags) is _int and flags & _write_flags):
        raise _refused(f"your code may not write files while it is graded (it tried to open {path!r} to write)")
    if not _path_ok(path, readable):
        raise _refused(f"your code may not open {path!r} while it is graded: it needs no file, only its arguments")


def _on_import(
    args: tuple[Any, ...],
    readable: tuple[str, ...],
    exercise: str,
    uses: str,
    _type: Any = type,
    _str: Any = str,
    _stdlib: frozenset[str] = frozenset(sys.stdlib_module_names),
    _denied: frozenset[str] = _DENIED_STDLIB,
    _path_ok: Any = _path_ok,
    _message: Any = _import_message,
    _refused_import: Any = RefusedImport,
) -> None:
    name, filename = args[0], args[1]
    if _type(name) is not _str:
        raise _refused_import("an import by a name that is not a plain string is refused while grading")
    top = _str.partition(name, ".")[0]
    allowed = top == "numpy" or (top in _stdlib and top not in _denied)
    if not allowed or (filename is not None and not _path_ok(filename, readable)):
        raise _refused_import(_message(name, exercise, uses), name=name)


def _on_attribute(
    event: str,
    args: tuple[Any, ...],
    _type: Any = type,
    _str: Any = str,
    _read: frozenset[str] = _DEFAULTS_ATTRIBUTES,
    _written: frozenset[str] = _WRITTEN_ATTRIBUTES,
    _refused: Any = Refused,
) -> None:
    """A function's defaults may not be read, nor its defaults or code replaced (the hook's helpers live there)."""
    names = _read if event == "object.__getattr__" else _written
    if _type(args[1]) is _str and args[1] in names:
        raise _refused(f"your code may not touch {args[1]} while it is graded")


def make_hook(policy: Policy) -> Callable[[str, tuple[Any, ...]], None]:
    """The audit hook for ``policy``: everything it uses is bound now, as default arguments."""

    def hook(
        event: str,
        args: tuple[Any, ...],
        _readable: tuple[str, ...] = policy.readable,
        _exercise: str = policy.exercise,
        _uses: str = policy.uses,
        _on_open: Any = _on_open,
        _on_import: Any = _on_import,
        _on_attribute: Any = _on_attribute,
        _path_ok: Any = _path_ok,
        _refusal: Any = _refusal,
        _groups: Any = _GROUPS,
        _prefixes: tuple[str, ...] = _REFUSED_PREFIXES,
        _refused: Any = Refused,
        _attribute_events: frozenset[str] = _ATTRIBUTE_EVENTS,
    ) -> None:
        if event == "open":
            _on_open(args, _readable)
        elif event == "import":
            _on_import(args, _readable, _exercise, _uses)
        elif event in _attribute_events:
            _on_attribute(event, args)
        elif event == "os.listdir" or event == "os.scandir":
            if args and args[0] is not None and not _path_ok(args[0], _readable):
                raise _refused(f"your code may not list {args[0]!r} while it is graded")
        elif event == "mmap.__new__" and args and args[0] != -1:
            raise _refused("your code may not map files into memory while it is graded")
        else:
            why = _refusal(event, _groups, _prefixes)
            if why is not None:
                raise _refused(why)

    return hook


class _Blocker:
    """First on ``sys.meta_path``: refuses by name what ``importlib.import_module`` asks for.

    ``import x`` is refused by the audit hook before any finder runs; this only
    gives the same clear message on the importlib route. Removing it gains
    nothing: reading the module's file is refused too.
    """

    def __init__(self, policy: Policy) -> None:
        self._stdlib = frozenset(sys.stdlib_module_names)
        self._policy = policy

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        top = fullname.partition(".")[0]
        if top != "numpy" and (top not in self._stdlib or top in _DENIED_STDLIB):
            raise RefusedImport(_import_message(fullname, self._policy.exercise, self._policy.uses), name=fullname)


def _module_of(finder: Any) -> str:
    """Where a finder comes from (the standard ones are classes, others instances)."""
    return str(getattr(finder if isinstance(finder, type) else type(finder), "__module__", ""))


def kernel_filter_on() -> bool:
    """Whether this process runs under a seccomp filter (read before the hook forbids /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            return any(line.split() == ["Seccomp:", "2"] for line in f)
    except OSError:
        return False


def install(policy: Policy) -> None:
    """Install the audit hook, for good; narrow ``sys.path`` to the standard library.

    Refuses to start (RuntimeError) if a module the hook must keep out is already
    loaded: a module in ``sys.modules`` is imported again without an audit event.
    """
    loaded = sorted(_DENIED_STDLIB & {name.partition(".")[0] for name in sys.modules})
    if loaded:
        raise RuntimeError(f"the sandbox cannot start: {', '.join(loaded)} already loaded")
    sys.path[:] = [p for p in sys.path if not set(p.split(os.sep)) & set(_PACKAGES)]
    sys.meta_path[:] = [f for f in sys.meta_path if _module_of(f).startswith("_frozen_importlib")]
    sys.meta_path.insert(0, _Blocker(policy))  # type: ignore[arg-type]
    sys.path_importer_cache.clear()
    sys.addaudithook(make_hook(policy))
