"""How each exercise's functions are called, in the child process.

One driver per exercise: it calls the learner's functions on one case's inputs
and returns what they gave back, by name (keys starting with ``_in_`` are inputs
as the learner's code left them). A result of the wrong structure (two values
where three are due, a dict without its keys) is a :class:`DriverError` with a
message for the learner. Nothing here knows a right answer.

Standard library and NumPy only: the child process loads this module by its path.
"""

from __future__ import annotations

import decimal
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["DRIVERS", "DriverError"]


class DriverError(Exception):
    """The learner's function returned something of the wrong structure."""


def _function(mod: Any, name: str) -> Callable[..., Any]:
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise DriverError(f"your file has no function named `{name}`: keep the name and signature from the scaffold")
    return fn


def describe_type(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"a {type(v).__name__}"


def _unpack(result: Any, names: tuple[str, ...], fn: str) -> tuple[Any, ...]:
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        raise DriverError(f"`{fn}` must return {len(names)} values ({', '.join(names)}), got {describe_type(result)}")
    return tuple(result)


def _number(v: Any, what: str) -> float:
    cls = type(v)
    if issubclass(cls, (int, float, np.integer, np.floating)) and not issubclass(cls, (bool, np.bool_)):
        return float(v)
    if issubclass(cls, np.ndarray) and v.size == 1 and v.dtype.kind in "iuf":
        return float(v.reshape(()))
    if issubclass(cls, (numbers.Real, decimal.Decimal)):  # a right value of another type (Fraction, Decimal)
        raise DriverError(f"{what} must be a float or an int, got {describe_type(v)}: convert it with float()")
    raise DriverError(f"{what} must be a number, got {describe_type(v)}")


Driver = Callable[[Any, dict[str, Any], Any], dict[str, Any]]


def _local_derivatives(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
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


def _mean_variance(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
    return {
        "dx_mean": _function(mod, "mean_backward")(inp["x"], inp["dmean"]),
        "dx_var": _function(mod, "variance_backward")(inp["x"], inp["dvar"]),
    }


def _values(out: Any, d: int, value: type) -> list[Any]:
    """The D output Values of ``layer_norm`` for one row, or a DriverError that says what came back instead."""
    if not isinstance(out, (list, tuple)) or len(out) != d:
        raise DriverError(f"`layer_norm` must return a list of {d} Values (one per input), got {describe_type(out)}")
    strays = [type(v).__name__ for v in out if not isinstance(v, value)]
    if strays:
        raise DriverError(
            f"`layer_norm` must return a list of {d} Values; {len(strays)} of yours are {strays[0]}, not Value: "
            "build every y from Value operations (.data or float() leaves the graph, so backward() cannot reach x)"
        )
    return list(out)


def _layernorm_values(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
    """Build every row with the learner's ``layer_norm`` from Values, backpropagate sum(y * dy)."""
    value = engine.Value
    fn = _function(mod, "layer_norm")
    x, gamma, beta, dy, eps = inp["x"], inp["gamma"], inp["beta"], inp["dy"], inp["eps"]
    xs = [[value(float(v)) for v in row] for row in x]
    gs, bs = [value(float(v)) for v in gamma], [value(float(v)) for v in beta]
    ys = []
    for row in xs:
        ys.append(_values(fn(row, gs, bs, eps), x.shape[1], value))
    value.sum([y * float(g) for row, grow in zip(ys, dy) for y, g in zip(row, grow)]).backward()
    return {
        "y": np.array([[v.data for v in row] for row in ys]),
        "dx": np.array([[v.grad for v in row] for row in xs]),
        "dgamma": np.array([v.grad for v in gs]),
        "dbeta": np.array([v.grad for v in bs]),
        "_in_x": np.array([[v.data for v in row] for row in xs]),  # x as the learner's code left it
    }


def _affine(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
    result = _function(mod, "affine_backward")(inp["dy"], inp["xhat"], inp["gamma"])
    names = ("dgamma", "dbeta", "dxhat")
    return dict(zip(names, _unpack(result, names, "affine_backward")))


def _forward(mod: Any, norm: str, inp: dict[str, Any], inputs: tuple[str, ...]) -> tuple[Any, ...]:
    """(y, cache) of the learner's ``{norm}_forward`` on ``inputs``."""
    forward = f"{norm}_forward"
    return _unpack(_function(mod, forward)(*(inp[k] for k in inputs)), ("y", "cache"), forward)


def _forward_backward(norm: str, inputs: tuple[str, ...], grads: tuple[str, ...]) -> Driver:
    """The driver of an exercise that writes ``{norm}_forward(*inputs) -> (y, cache)`` and
    ``{norm}_backward(dy, cache) -> grads``."""

    def drive(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
        y, cache = _forward(mod, norm, inp, inputs)
        backward = f"{norm}_backward"
        return {"y": y, **dict(zip(grads, _unpack(_function(mod, backward)(inp["dy"], cache), grads, backward)))}

    return drive


_NORM_INPUTS, _NORM_GRADS = ("x", "gamma", "beta", "eps"), ("dx", "dgamma", "dbeta")
STAGED_KEYS = ("dbeta", "dgamma", "dxhat", "dvar", "dmean", "dx")


def _batchnorm_staged(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
    y, cache = _forward(mod, "batchnorm", inp, _NORM_INPUTS)
    stages = _function(mod, "batchnorm_backward_staged")(inp["dy"], cache)
    if not isinstance(stages, dict):
        raise DriverError(
            f"`batchnorm_backward_staged` must return a dict with keys {', '.join(STAGED_KEYS)}, "
            f"got {describe_type(stages)}"
        )
    missing = [k for k in STAGED_KEYS if k not in stages]
    if missing:
        raise DriverError(f"the dict `batchnorm_backward_staged` returns has no {', '.join(map(repr, missing))}")
    return {"y": y, **{k: stages[k] for k in STAGED_KEYS}}


def _jacobian(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
    return {
        "P": _function(mod, "projection")(inp["xhat"]),
        "J": _function(mod, "layernorm_jacobian")(inp["x"], inp["gamma"], inp["eps"]),
    }


def _welford_row(
    update: Callable[..., Any], state: tuple[int, float, float], row: np.ndarray
) -> tuple[int, float, float]:
    count, mean, m2 = state
    for value in row:
        new = _unpack(update(count, mean, m2, float(value)), ("count", "mean", "m2"), "welford_update")
        if _number(new[0], "the count `welford_update` returns") != count + 1:
            raise DriverError(f"`welford_update` returned count {new[0]!r} after count {count} and one more value")
        count = count + 1
        mean = _number(new[1], "the mean `welford_update` returns")
        m2 = _number(new[2], "the m2 `welford_update` returns")
    return count, mean, m2


def _welford(mod: Any, inp: dict[str, Any], engine: Any) -> dict[str, Any]:
    """Each row starts mid-stream, from the (count, mean, m2) of values the learner's code never sees."""
    update = _function(mod, "welford_update")
    means, variances = [], []
    for row, count, mean, m2 in zip(inp["x"], inp["count0"], inp["mean0"], inp["m2_0"]):
        count, mean, m2 = _welford_row(update, (int(count), float(mean), float(m2)), row)
        means.append(mean)
        variances.append(m2 / count)
    return {"mean": np.array(means), "var": np.array(variances)}


DRIVERS: dict[str, Driver] = {
    "01_local_derivatives": _local_derivatives,
    "02_mean_variance_backward": _mean_variance,
    "03_layernorm_from_values": _layernorm_values,
    "04_affine_backward": _affine,
    "05_layernorm_backward": _forward_backward("layernorm", _NORM_INPUTS, _NORM_GRADS),
    "06_batchnorm_staged": _batchnorm_staged,
    "07_batchnorm_simplified": _forward_backward("batchnorm", _NORM_INPUTS, _NORM_GRADS),
    "08_rmsnorm_backward": _forward_backward("rmsnorm", ("x", "gamma", "eps"), ("dx", "dgamma")),
    "09_layernorm_jacobian": _jacobian,
    "10_stable_variance": _welford,
    "11_preln_residual": _forward_backward("preln", ("x", "gamma", "beta", "W", "eps"), (*_NORM_GRADS, "dW")),
}
