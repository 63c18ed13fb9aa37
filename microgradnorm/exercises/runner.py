"""The child process: run the learner's file in the sandbox and send back what it returned.

The supervisor (:mod:`.supervisor`) starts this module, loaded by its path, as

    python -I -S -B -X utf8 -c BOOT runner.py JOB_FD RESULT_FD NUMPY_PARENT

(isolated mode, no site-packages, no bytecode written). It never imports the
``microgradnorm`` package: with no site-packages on ``sys.path`` the package
cannot even be found, and the few sibling files this process needs (the wire
format, the drivers, the sandbox, and for some exercises the ``Value`` engine)
are loaded by their paths. NumPy is loaded without ctypes, so no route to C
functions is ever in the process. Then:

1. read the job (a :mod:`.wire` frame: the exercise, the learner's source, the
   inputs of both cases) from JOB_FD;
2. compile the learner's source; in the exercises about the engine, put a
   ``microgradnorm`` module in place that holds ``Value`` and nothing else;
3. install the audit hook of :mod:`.sandbox` (the kernel filters of
   :mod:`.seccomp` and :mod:`.landlock` are on already: the supervisor
   installed them before the exec that started this process); from here on the
   learner's code runs, and nothing can undo the kernel's;
4. run the learner's file as module ``exercise`` (so its ``__main__`` block
   does not run), and call its functions three times (the first case, the
   second, the first again) on read-only NumPy copies of the inputs;
5. send every returned value, every input as it was left, and a description of
   what came back (array, list, None, an exception with the learner's line) as
   one frame on RESULT_FD, and exit.

Nothing is judged here, and no right answer is ever in this process: the
grading process compares what comes back with the answers it computed.
"""

from __future__ import annotations

import errno
import importlib.util
import linecache
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JOB_LIMIT = 16 * 2**20  # bytes: the job holds the learner's source (at most 1 MiB) and small inputs
SAVED_ENTRIES = 2**20  # a returned array larger than this is described, not sent
CALLS = (("a", "a"), ("b", "b"), ("a2", "a"))  # (label of the call, case it runs on)
READY = b"R"  # first on the result pipe, just before the learner's code runs: the check's clock starts there
BOOT = (
    "import sys, importlib.util as u; s = u.spec_from_file_location('_microgradnorm_child_runner', sys.argv[1]); "
    "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); m.main(sys.argv[2:])"
)


def _load(name: str, path: Path) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _sibling(name: str) -> Any:
    return _load(f"_microgradnorm_child_{name}", HERE / f"{name}.py")


def _read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    raise SystemExit(f"the job is larger than {limit} bytes")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _offer_engine(refused: type[Exception]) -> Any:
    """``microgradnorm.Value`` and nothing else: a stand-in package around the engine file alone."""
    engine = _load("microgradnorm.engine", HERE.parent / "engine.py")
    package = types.ModuleType("microgradnorm", "While an exercise is graded: the Value engine, and only it.")
    package.__path__ = []  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise refused(f"`microgradnorm.{name}` cannot be used while an exercise is graded: only Value can")

    package.Value, package.engine, package.__getattr__ = engine.Value, engine, __getattr__  # type: ignore[attr-defined]
    sys.modules["microgradnorm"] = package
    return engine


# ---- what went wrong, as data for the grader ------------------------------------------------


def _text(get: Any, limit: int) -> str:
    """``get()`` as a plain str of at most ``limit`` characters, whatever the learner's object does.

    An exception's ``__str__``, its class's ``__name__`` (a metaclass can make it a property) and a
    ``SystemExit`` code are the learner's code: they may raise, loop through ``sys.exit`` or return a str
    subclass whose methods lie. Only ``str``'s own methods are used on what comes back.
    """
    try:
        text = get()
        if not issubclass(type(text), str):
            return "?"
        return str.encode(text, "utf-8", "replace")[: limit * 4].decode("utf-8", "replace")[:limit]
    except BaseException:  # whatever it raised, it is not the runner's to show
        return "(could not be shown)"


def _error(kind: str, exc: BaseException, filename: str, call: str | None = None) -> dict[str, Any]:
    frames = [
        {
            "line": fs.lineno,
            "function": _text(lambda fs=fs: fs.name, 60),
            "code": _text(lambda fs=fs: fs.line or "", 200).strip(),
        }
        for fs in traceback.extract_tb(exc.__traceback__)
        if fs.filename == filename
    ]
    message = _text(lambda: str(exc), 2000)
    info: dict[str, Any] = {
        "kind": kind,
        "type": _text(lambda: type(exc).__name__, 60),
        "message": next((line for line in message.splitlines() if line.strip()), "")[:500],  # first said line
        "frames": frames[-5:],
        "call": call,
    }
    if issubclass(type(exc), SyntaxError):
        lineno = getattr(exc, "lineno", None)
        info["line"] = lineno if type(lineno) is int else None
        info["code"] = _text(lambda: (exc.text or "").strip(), 200)  # type: ignore[attr-defined]
    if issubclass(type(exc), SystemExit):
        code = getattr(exc, "code", None)
        info["code"] = code if type(code) is int or code is None else _text(lambda: str(code), 200)
    return info


def _classify(exc: BaseException, refused: tuple[type[BaseException], ...], driver_error: type) -> str:
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (NotImplementedError, "not_written"),
        (SystemExit, "sys_exit"),
        (MemoryError, "memory"),
        (driver_error, "bad_return"),
        (refused, "forbidden"),
    )
    cls = type(exc)  # never exc.__class__, which the learner's class may make anything
    for types_, kind in kinds:
        if issubclass(cls, types_):
            return kind
    if issubclass(cls, ValueError) and "read-only" in _text(lambda: str(exc), 500):  # NumPy has no own type
        return "mutates_input"
    if issubclass(cls, PermissionError) and getattr(exc, "errno", None) in (errno.EPERM, errno.EACCES):
        return "kernel_refused"  # the kernel filters: a process, a signal, a limit, a file
    return "exception"


def _failure(exc: BaseException, refused: tuple[type[BaseException], ...], driver_error: type) -> str:
    """:func:`_classify`, guarded: an exception whose attributes raise is an "exception", never a crash here."""
    try:
        return _classify(exc, refused, driver_error)
    except BaseException:
        return "exception"


# ---- what came back -------------------------------------------------------------------------


def _describe(value: Any) -> tuple[dict[str, Any], Any]:
    """(description, array to send or None) of one returned value."""
    import numpy as np

    cls = type(value)  # its real type: isinstance would ask the object's __class__, which it may fake
    name = _text(lambda: cls.__name__, 60)
    if issubclass(cls, np.ndarray):
        value = np.asarray(value)  # a subclass's methods are the learner's: only NumPy's own from here
        info = {"kind": "array", "dtype": str(value.dtype), "shape": list(value.shape)}
        ok = value.dtype.kind in "biuf" and value.size <= SAVED_ENTRIES
        return info, (value if ok else None)
    if value is None:
        return {"kind": "none"}, None
    if issubclass(cls, (bool, np.bool_)):
        return {"kind": "other", "type": name}, None
    if cls in (int, float) or issubclass(cls, (np.integer, np.floating)):
        return {"kind": "scalar", "type": name}, np.asarray(value, dtype=np.float64)
    if issubclass(cls, (list, tuple)):
        info: dict[str, Any] = {
            "kind": "list",
            "type": name,
            "length": (list.__len__ if issubclass(cls, list) else tuple.__len__)(value),
        }
        try:
            arr = np.asarray(list(value) if cls in (list, tuple) else [], dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return info, None
        if cls not in (list, tuple):  # a subclass may compute its items: described, not sent
            return info, None
        info["shape"] = list(arr.shape)
        return info, (arr if arr.size <= SAVED_ENTRIES else None)
    return {"kind": "other", "type": name}, None


def read_only(inputs: dict[str, Any]) -> dict[str, Any]:
    """Fresh copies of one case's inputs: 0-d arrays as floats, the rest as read-only float64 arrays."""
    import numpy as np

    out: dict[str, Any] = {}
    for k, v in inputs.items():
        if v.ndim == 0:
            out[k] = float(v)
        else:
            arr = np.array(v, dtype=np.float64, copy=True)
            arr.flags.writeable = False
            out[k] = arr
    return out


_UNSENT = {
    "kind": "exception",
    "type": "RuntimeError",
    "message": "your code changed a module the grader needs to send the result back (json, struct or numpy)",
    "frames": [],
    "call": None,
    "stage": "call",
}


class _Unreadable(Exception):
    """A returned value could not be read; the failure is already in the result."""


class _Run:
    """The job, the learner's module, and what has come back so far."""

    def __init__(self, job: dict[str, Any], arrays: dict[str, Any], wire: Any) -> None:
        self.job, self.wire = job, wire
        self.filename: str = job["filename"]
        self.cases: dict[str, dict[str, Any]] = {}
        for k, v in arrays.items():
            case, _, name = wire.split_key(k)
            self.cases.setdefault(case, {})[name] = v
        self.result: dict[str, Any] = {"calls": {}, "error": None, "kernel_filter": False, "file_filter": False}
        self.arrays: dict[str, Any] = {}

    def fail(self, kind: str, exc: BaseException, call: str | None = None, stage: str = "call") -> None:
        try:
            error = _error(kind, exc, self.filename, call)
        except BaseException:  # e.g. a traceback whose frames' objects raise
            error = {"kind": kind, "type": "?", "message": "", "frames": [], "call": call}
        self.result["error"] = {**error, "stage": stage}

    def record(self, label: str, outputs: dict[str, Any], inputs: dict[str, Any]) -> None:
        """What one call returned; whatever a returned object does while it is read, it ends as a failure."""
        try:
            self._record(label, outputs, inputs)
        except BaseException as exc:  # e.g. __array__, __len__ or __float__ that raise or exit
            self.result["error"] = {
                "kind": "exception",
                "type": _text(lambda e=exc: type(e).__name__, 60),
                "message": "what your function returned could not be read: "
                + _text(lambda e=exc: str(e), 300).replace("\n", " "),
                "frames": [],
                "call": label,
                "stage": "call",
            }
            raise _Unreadable from None

    def _record(self, label: str, outputs: dict[str, Any], inputs: dict[str, Any]) -> None:
        import numpy as np

        described = {}
        for name, value in outputs.items():
            if name.startswith("_in_"):
                self.arrays[self.wire.key(label, "in", name[4:])] = np.asarray(value, dtype=np.float64)
                continue
            described[name], arr = _describe(value)
            if arr is not None:
                self.arrays[self.wire.key(label, "out", name)] = arr
        for name, value in inputs.items():
            k = self.wire.key(label, "in", name)
            if isinstance(value, np.ndarray) and k not in self.arrays:
                self.arrays[k] = np.array(value)
        self.result["calls"][label] = described


def _run_learner(run: _Run, code: Any, engine: Any, parts: dict[str, Any]) -> None:
    """Import the learner's module and make the three calls; everything from here is learner code."""
    refused = (parts["sandbox"].Refused, parts["sandbox"].RefusedImport)
    module = types.ModuleType("exercise")
    module.__file__ = run.filename
    sys.modules["exercise"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as exc:
        kind = _failure(exc, refused, parts["drivers"].DriverError)
        run.fail("import" if kind == "exception" else kind, exc, stage="import")
        return
    driver = parts["drivers"].DRIVERS[run.job["exercise"]]
    for label, case in CALLS:
        inputs = read_only(run.cases[case])
        try:
            outputs = driver(module, inputs, engine)
        except BaseException as exc:
            run.fail(_failure(exc, refused, parts["drivers"].DriverError), exc, call=label)
            return
        try:
            run.record(label, outputs, inputs)
        except _Unreadable:
            return


def _file_filter_on() -> bool:
    """Whether the kernel keeps the package's other files from this process (:mod:`.landlock`)."""
    try:
        os.close(os.open(HERE.parent / "formulas.py", os.O_RDONLY))
    except PermissionError:
        return True
    except OSError:
        return False
    return False


class _NoCtypes:
    """While NumPy loads: no ctypes (NumPy does without), so that the learner's code never finds it loaded."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] in ("ctypes", "_ctypes"):
            raise ImportError("ctypes is kept out of the process that runs learner code")


# Python 3.10's platform module (which NumPy imports) imports subprocess at its top and uses it only in
# functions NumPy does not call while loading; numpy.testing imports subprocess (for building extensions) and,
# through importlib.metadata and email, socket (for a host name in message ids), and calls neither in its
# assertions. They get empty modules instead while they load, dropped once they are in: the learner's code
# still cannot import either.
_STAND_INS = ("subprocess", "socket")


def _import_without(name: str, parent: str) -> Any:
    """Import ``name`` (NumPy, or a part of it) with no ctypes and with empty stand-ins for ``_STAND_INS``."""
    blocker = _NoCtypes()
    sys.meta_path.insert(0, blocker)  # type: ignore[arg-type]
    stand_ins = [n for n in _STAND_INS if n not in sys.modules]
    for n in stand_ins:
        sys.modules[n] = types.ModuleType(n, "an empty stand-in while NumPy loads")
    sys.path.append(parent)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(parent)
        sys.meta_path.remove(blocker)  # type: ignore[arg-type]
        for n in stand_ins:
            del sys.modules[n]


def main(argv: list[str]) -> None:
    job_fd, result_fd = int(argv[0]), int(argv[1])
    numpy = _import_without("numpy", argv[2])
    parts = {name: _sibling(name) for name in ("wire", "drivers", "sandbox")}
    job, arrays = parts["wire"].decode(_read_all(job_fd, JOB_LIMIT))
    os.close(job_fd)
    if "testing" in job["source"]:  # numpy.testing: loaded before the hook (a fifth of a second: only if named)
        _import_without("numpy.testing", argv[2])
    run = _Run(job, arrays, parts["wire"])
    engine = _offer_engine(parts["sandbox"].RefusedImport) if job["engine"] else None
    try:
        code = compile(job["source"], run.filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        run.fail("syntax", exc, stage="import")
        code = None
    # what the end needs, taken before the learner's code can replace it (json, struct, numpy, os are theirs
    # to patch): the functions themselves, and a frame that says the result could not be sent
    write, exit_ = os.write, os._exit
    unsent = parts["wire"].encode({"calls": {}, "error": _UNSENT}, {})
    ready = False
    if code is not None:
        linecache.cache[run.filename] = (len(job["source"]), None, job["source"].splitlines(True), run.filename)
        readable = parts["sandbox"].default_readable(os.path.dirname(numpy.__file__))
        policy = parts["sandbox"].Policy(job["title"], job["uses"], readable)
        run.result["kernel_filter"] = parts["sandbox"].kernel_filter_on()
        run.result["file_filter"] = _file_filter_on()
        parts["sandbox"].install(policy)
        ready = True
        _write_all(result_fd, READY)  # from here the learner's time runs
        _run_learner(run, code, engine, parts)
    for stream in (sys.stdout, sys.stderr):  # os._exit does not flush what the learner printed
        try:
            stream.flush()
        except BaseException:  # the learner's code may have replaced them with anything
            pass
    try:
        data = parts["wire"].encode(run.result, run.arrays)
    except BaseException:  # a module the encoder uses was changed by the learner's code
        data = unsent
    try:
        view = memoryview(data if ready else READY + data)
        while view:
            view = view[write(result_fd, view) :]
    except BaseException:  # the learner's code closed or replaced the result's pipe: no result, said as such
        pass
    exit_(0)
