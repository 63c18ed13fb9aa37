"""The child side of the grader: run the learner's file, save what it returned.

The grader (:mod:`.grader`) starts this module in a fresh Python process with a
working directory that holds ``cases.json`` and ``inputs.npz``. Here we

1. cap the address space (``resource.setrlimit``, where the platform has it);
2. refuse imports of the answer keys (``microgradnorm.formulas`` and friends,
   PyTorch, JAX) so that the grade measures the learner's own derivation;
3. import the learner's file under the name ``exercise`` (so its
   ``if __name__ == "__main__":`` block does not run);
4. call the learner's functions on each case, three times in all (the first
   input, a second input drawn with another seed, the first input again), with
   read-only NumPy inputs;
5. save every returned value, and every input as it is after the call, to
   ``outputs.npz``, and a description of what came back (array, list, None,
   an exception with the learner's line) to ``result.json``, written last.

Nothing is judged here: this process only reports. The grading process reads
the files and compares them with the closed forms, so whatever the learner's
code prints, or leaves in this process, cannot change its grade.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# What the learner's code may not import while it is graded. Everything else in
# microgradnorm is refused too (see _Blocker), except the engine and the norms
# module it needs for Value, and this package's self-check helpers.
_REFUSED_TOP = frozenset({"torch", "jax", "jaxlib", "tensorflow", "autograd"})
_ALLOWED_OWN = frozenset(
    {
        "microgradnorm",
        "microgradnorm.engine",
        "microgradnorm.norms",
        "microgradnorm.exercises",
        "microgradnorm.exercises.catalog",
        "microgradnorm.exercises.runner",
        "microgradnorm.exercises.selfcheck",
    }
)

# the three calls, in order: (label in the result, case in inputs.npz)
CALLS = (("a", "a"), ("b", "b"), ("a2", "a"))


class DriverError(Exception):
    """The learner's function returned something of the wrong structure."""


class ForbiddenError(Exception):
    """The learner's code used a part of the library that gives the answer away."""


class _Blocker:
    """A meta path finder that refuses the answer keys with a clear ImportError."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        top = fullname.partition(".")[0]
        if top in _REFUSED_TOP or (top == "microgradnorm" and fullname not in _ALLOWED_OWN):
            raise ImportError(
                f"`{fullname}` cannot be imported while an exercise is graded: "
                "the point is to write the gradient yourself (NumPy and microgradnorm.Value are fine)"
            )
        return None


def _limit_memory(megabytes: int) -> bool:
    try:
        import resource
    except ImportError:  # not on Windows
        return False
    limit = megabytes * 2**20
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY and hard < limit:
            limit = hard
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError, OverflowError, AttributeError):
        return False
    return True


def _die_with(parent: int, cpu_seconds: int) -> None:
    """Never outlive the grader: killed with it (Linux), and never more than ``cpu_seconds`` of CPU.

    The grader kills this process when a check times out or is interrupted; these
    two limits are for when the grader itself is killed without a chance to clean
    up (kill -9): the kernel then stops an endless loop in the learner's code.
    """
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard == resource.RLIM_INFINITY or hard > cpu_seconds:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    except (ImportError, ValueError, OSError, OverflowError, AttributeError):
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the grader was gone before the line above took effect
        os._exit(1)


# ---- helpers for the drivers ---------------------------------------------------


def _function(mod: Any, name: str) -> Callable[..., Any]:
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise DriverError(f"your file has no function named `{name}`: keep the name and signature from the scaffold")
    return fn


def _describe_type(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"a {type(v).__name__}"


def _unpack(result: Any, names: tuple[str, ...], fn: str) -> tuple[Any, ...]:
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        raise DriverError(f"`{fn}` must return {len(names)} values ({', '.join(names)}), got {_describe_type(result)}")
    return tuple(result)


def _number(v: Any, what: str) -> float:
    import numpy as np

    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, np.ndarray) and v.size == 1:
        return float(v.reshape(()))
    raise DriverError(f"{what} must be a number, got {_describe_type(v)}")


# ---- one driver per exercise: call the learner, return the named results ----------


def _drive_local_derivatives(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    a, b, p, dout = inp["a"], inp["b"], inp["p"], inp["dout"]
    mul_da, mul_db = _unpack(_function(mod, "mul_backward")(a, b, dout), ("da", "db"), "mul_backward")
    pow_da = _function(mod, "pow_backward")(a, p, dout)
    sqrt_da = _function(mod, "sqrt_backward")(a, dout)
    div_da, div_db = _unpack(_function(mod, "div_backward")(a, b, dout), ("da", "db"), "div_backward")
    return {
        "mul_da": mul_da,
        "mul_db": mul_db,
        "pow_da": pow_da,
        "sqrt_da": sqrt_da,
        "div_da": div_da,
        "div_db": div_db,
    }


def _drive_mean_variance(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    return {
        "dx_mean": _function(mod, "mean_backward")(inp["x"], inp["dmean"]),
        "dx_var": _function(mod, "variance_backward")(inp["x"], inp["dvar"]),
    }


def _drive_layernorm_values(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from microgradnorm.engine import Value, topological_order
    from microgradnorm.norms import STAGES

    fn = _function(mod, "layer_norm")
    x, gamma, beta, dy, eps = inp["x"], inp["gamma"], inp["beta"], inp["dy"], inp["eps"]
    d = x.shape[1]
    xs = [[Value(float(v)) for v in row] for row in x]
    gs = [Value(float(v)) for v in gamma]
    bs = [Value(float(v)) for v in beta]
    ys = []
    for row in xs:
        out = fn(row, gs, bs, eps)
        if not isinstance(out, (list, tuple)) or len(out) != d or not all(isinstance(v, Value) for v in out):
            raise DriverError(
                f"`layer_norm` must return a list of {d} Values (one per input), got {_describe_type(out)}"
            )
        ys.append(list(out))
    terms = [y * float(g) for row, grow in zip(ys, dy) for y, g in zip(row, grow)]
    loss = Value.sum(terms)
    library_stages = {s for stages in STAGES.values() for s in stages}
    if any(node.stage in library_stages for node in topological_order(loss)):
        raise ForbiddenError(
            "your layer_norm calls microgradnorm's own norm builder; build it from Value operations "
            "(+, -, *, /, **, .sqrt(), Value.sum)"
        )
    loss.backward()
    return {
        "y": np.array([[v.data for v in row] for row in ys]),
        "dx": np.array([[v.grad for v in row] for row in xs]),
        "dgamma": np.array([v.grad for v in gs]),
        "dbeta": np.array([v.grad for v in bs]),
        # the inputs as the learner's code left them (compared in the grader)
        "_in_x": np.array([[v.data for v in row] for row in xs]),
    }


def _drive_affine(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    result = _function(mod, "affine_backward")(inp["dy"], inp["xhat"], inp["gamma"])
    dgamma, dbeta, dxhat = _unpack(result, ("dgamma", "dbeta", "dxhat"), "affine_backward")
    return {"dgamma": dgamma, "dbeta": dbeta, "dxhat": dxhat}


def _forward_backward(
    mod: Any, forward: str, backward: str, fargs: tuple[Any, ...], dy: Any, names: tuple[str, ...]
) -> dict[str, Any]:
    y, cache = _unpack(_function(mod, forward)(*fargs), ("y", "cache"), forward)
    grads = _unpack(_function(mod, backward)(dy, cache), names, backward)
    return {"y": y, **dict(zip(names, grads))}


def _drive_layernorm_backward(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    args = (inp["x"], inp["gamma"], inp["beta"], inp["eps"])
    return _forward_backward(mod, "layernorm_forward", "layernorm_backward", args, inp["dy"], ("dx", "dgamma", "dbeta"))


_STAGED_KEYS = ("dbeta", "dgamma", "dxhat", "dvar", "dmean", "dx")


def _drive_batchnorm_staged(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    y, cache = _unpack(
        _function(mod, "batchnorm_forward")(inp["x"], inp["gamma"], inp["beta"], inp["eps"]),
        ("y", "cache"),
        "batchnorm_forward",
    )
    stages = _function(mod, "batchnorm_backward_staged")(inp["dy"], cache)
    if not isinstance(stages, dict):
        raise DriverError(
            f"`batchnorm_backward_staged` must return a dict with keys {', '.join(_STAGED_KEYS)}, "
            f"got {_describe_type(stages)}"
        )
    missing = [k for k in _STAGED_KEYS if k not in stages]
    if missing:
        raise DriverError(f"the dict `batchnorm_backward_staged` returns has no {', '.join(map(repr, missing))}")
    return {"y": y, **{k: stages[k] for k in _STAGED_KEYS}}


def _drive_batchnorm_simplified(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    args = (inp["x"], inp["gamma"], inp["beta"], inp["eps"])
    return _forward_backward(mod, "batchnorm_forward", "batchnorm_backward", args, inp["dy"], ("dx", "dgamma", "dbeta"))


def _drive_rmsnorm(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    args = (inp["x"], inp["gamma"], inp["eps"])
    return _forward_backward(mod, "rmsnorm_forward", "rmsnorm_backward", args, inp["dy"], ("dx", "dgamma"))


def _drive_jacobian(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    return {
        "P": _function(mod, "projection")(inp["xhat"]),
        "J": _function(mod, "layernorm_jacobian")(inp["x"], inp["gamma"], inp["eps"]),
    }


def _drive_welford(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    update = _function(mod, "welford_update")
    x = inp["x"]
    means, variances = [], []
    for row in x:
        count, mean, m2 = 0, 0.0, 0.0
        for value in row:
            state = _unpack(update(count, mean, m2, float(value)), ("count", "mean", "m2"), "welford_update")
            count = state[0]
            mean = _number(state[1], "the mean `welford_update` returns")
            m2 = _number(state[2], "the m2 `welford_update` returns")
            if _number(count, "the count `welford_update` returns") < 1:
                raise DriverError(f"`welford_update` returned count {count!r} after seeing a value")
        means.append(mean)
        variances.append(m2 / float(count))
    return {"mean": np.array(means), "var": np.array(variances)}


def _drive_preln(mod: Any, inp: dict[str, Any]) -> dict[str, Any]:
    args = (inp["x"], inp["gamma"], inp["beta"], inp["W"], inp["eps"])
    return _forward_backward(mod, "preln_forward", "preln_backward", args, inp["dy"], ("dx", "dgamma", "dbeta", "dW"))


DRIVERS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "01_local_derivatives": _drive_local_derivatives,
    "02_mean_variance_backward": _drive_mean_variance,
    "03_layernorm_from_values": _drive_layernorm_values,
    "04_affine_backward": _drive_affine,
    "05_layernorm_backward": _drive_layernorm_backward,
    "06_batchnorm_staged": _drive_batchnorm_staged,
    "07_batchnorm_simplified": _drive_batchnorm_simplified,
    "08_rmsnorm_backward": _drive_rmsnorm,
    "09_layernorm_jacobian": _drive_jacobian,
    "10_stable_variance": _drive_welford,
    "11_preln_residual": _drive_preln,
}


# ---- running and reporting ------------------------------------------------------


def _learner_frames(exc: BaseException, learner: Path) -> list[dict[str, Any]]:
    frames = []
    for fs in traceback.extract_tb(exc.__traceback__):
        try:
            same = Path(fs.filename).resolve() == learner
        except OSError:
            same = False
        if same:
            frames.append({"line": fs.lineno, "function": fs.name, "code": (fs.line or "").strip()})
    return frames


def _error(kind: str, exc: BaseException, learner: Path, call: str | None = None) -> dict[str, Any]:
    message = str(exc).splitlines()[0] if str(exc) else ""
    frames = _learner_frames(exc, learner)
    info: dict[str, Any] = {
        "kind": kind,
        "type": type(exc).__name__,
        "message": message,
        "frames": frames,
        "call": call,
        "traceback": "".join(traceback.format_exception_only(type(exc), exc)).strip(),
    }
    if isinstance(exc, SyntaxError):
        info["line"] = exc.lineno
        info["code"] = (exc.text or "").strip()
    return info


def _classify(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return "not_written"
    if isinstance(exc, SystemExit):
        return "sys_exit"
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, DriverError):
        return "bad_return"
    if isinstance(exc, ForbiddenError):
        return "forbidden"
    if isinstance(exc, ValueError) and "read-only" in str(exc):
        return "mutates_input"
    if isinstance(exc, ImportError) and "cannot be imported while an exercise is graded" in str(exc):
        return "forbidden"
    return "exception"


def _describe(value: Any) -> tuple[dict[str, Any], Any]:
    """(JSON description, array to save or None) of one returned value."""
    import numpy as np

    if isinstance(value, np.ndarray):
        info = {"kind": "array", "dtype": str(value.dtype), "shape": list(value.shape)}
        if value.dtype.kind in "biufc":
            return info, value
        return info, None
    if value is None:
        return {"kind": "none"}, None
    if isinstance(value, (bool, np.bool_)):
        return {"kind": "other", "type": type(value).__name__}, None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return {"kind": "scalar", "type": type(value).__name__}, np.asarray(value, dtype=np.float64)
    if isinstance(value, (list, tuple)):
        info = {"kind": "list", "type": type(value).__name__, "length": len(value)}
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return info, None
        info["shape"] = list(arr.shape)
        return info, arr
    return {"kind": "other", "type": type(value).__name__}, None


def _read_only(inputs: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    out = {}
    for k, v in inputs.items():
        if isinstance(v, np.ndarray) and v.ndim == 0:
            out[k] = float(v)
        else:
            arr = np.array(v, dtype=np.float64, copy=True)
            arr.flags.writeable = False
            out[k] = arr
    return out


def run(exercise: str, learner: Path, workdir: Path, memory_mb: int) -> int:
    """Run ``learner`` for ``exercise`` on the cases in ``workdir``; always write result.json."""
    learner = learner.resolve()
    result: dict[str, Any] = {"memory_limited": _limit_memory(memory_mb), "calls": {}, "error": None}
    arrays: dict[str, Any] = {}

    import numpy as np

    # imported before the blocker goes in: the learner may use Value (the package imports engine and norms)
    importlib.import_module("microgradnorm")

    sys.meta_path.insert(0, _Blocker())  # type: ignore[arg-type]
    driver = DRIVERS[exercise]
    with np.load(workdir / "inputs.npz") as data:
        cases: dict[str, dict[str, Any]] = {}
        for key in data.files:
            case, _, name = key.partition(":")
            cases.setdefault(case, {})[name] = data[key]

    try:
        spec = importlib.util.spec_from_file_location("exercise", learner)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {learner}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["exercise"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:
        kind = "syntax" if isinstance(exc, SyntaxError) else _classify(exc)
        result["error"] = _error("import" if kind == "exception" else kind, exc, learner)
        result["error"]["stage"] = "import"
        return _finish(workdir, result, arrays)

    for label, case in CALLS:
        inputs = _read_only(cases[case])
        try:
            outputs = driver(module, inputs)
        except BaseException as exc:
            result["error"] = _error(_classify(exc), exc, learner, call=label)
            if isinstance(exc, SystemExit):
                result["error"]["code"] = exc.code if isinstance(exc.code, (int, str, type(None))) else str(exc.code)
            return _finish(workdir, result, arrays)
        described = {}
        for name, value in outputs.items():
            if name.startswith("_in_"):
                arrays[f"{label}:in:{name[4:]}"] = np.asarray(value, dtype=np.float64)
                continue
            info, arr = _describe(value)
            described[name] = info
            if arr is not None:
                arrays[f"{label}:out:{name}"] = arr
        for name, value in inputs.items():
            if isinstance(value, np.ndarray) and f"{label}:in:{name}" not in arrays:
                arrays[f"{label}:in:{name}"] = np.array(value)
        result["calls"][label] = described
    return _finish(workdir, result, arrays)


def _finish(workdir: Path, result: dict[str, Any], arrays: dict[str, Any]) -> int:
    import numpy as np

    tmp = workdir / "outputs.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, workdir / "outputs.npz")
    text = json.dumps(result, default=str)
    with open(workdir / "result.json.tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(workdir / "result.json.tmp", workdir / "result.json")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    exercise, learner, workdir, memory_mb, parent, cpu_seconds = args
    _die_with(int(parent), int(cpu_seconds))
    return run(exercise, Path(learner), Path(workdir), int(memory_mb))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
