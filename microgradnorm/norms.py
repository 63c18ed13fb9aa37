"""LayerNorm, BatchNorm and RMSNorm built out of scalar :class:`Value` nodes.

Why build a norm from scalars at all? Because then every intermediate quantity
of the textbook derivation -- the mean, the centered values, the variance, the
standard deviation, the normalized values -- is a node you can point at, and
``backward()`` leaves the gradient of the loss on each of them. Those are the
numbers the closed-form formulas in :mod:`microgradnorm.formulas` predict and
the check in :mod:`microgradnorm.check` compares.

The graph of one normalization group (a row for LayerNorm, a column or channel
for BatchNorm) is made of six stages, and every node carries its stage tag::

    mean    mean   = sum(x) * 1/n
    center  xshift = x - mean
    var     var    = sum(xshift ** 2) * 1/n          (or E[x^2] - E[x]^2, see below)
    sqrt    std    = sqrt(var + eps)
    divide  rstd   = std ** -1 ;  xhat = xshift * rstd
    affine  y      = gamma * xhat + beta

RMSNorm has no mean and no shift: ``meansq`` (ms = sum(x ** 2) * 1/n), ``sqrt``
(rms = sqrt(ms + eps)), ``divide`` (rrms = rms ** -1, xhat = x * rrms) and
``scale`` (y = gamma * xhat).

The variance is centered ("two-pass") by default. ``variance="naive"`` builds the
E[x^2] - E[x]^2 form that seed derivations often use; it cancels catastrophically
when the mean is large compared with the spread (a lesson shows it).

Simplified compared with PyTorch: training-mode statistics only (no running
averages), the biased variance (divide by n, as PyTorch does for normalization),
and gamma/beta of one value per feature (LayerNorm) or per channel (BatchNorm).

Edge cases, on purpose:

* ``eps = 0`` is allowed (the derivations are cleanest without it), but a group
  whose values are all equal then has std 0 and the divide stage raises a
  :class:`DomainError` that says so.
* A group of one value (LayerNorm with D = 1, BatchNorm with a batch of one and
  no spatial extent) is a constant group: with ``eps > 0`` it gives
  ``xhat = 0``, ``y = beta`` and a zero gradient for x; with ``eps = 0`` it is the
  division by zero above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from microgradnorm.engine import DomainError, Value, cycle_collector_paused, tags

__all__ = [
    "GROUP_NODES",
    "NODE_NAMES",
    "SCALE_NODES",
    "STAGES",
    "NormGraph",
    "Normalized",
    "batch_norm",
    "layer_norm",
    "rms_norm",
]

STAGES: dict[str, tuple[str, ...]] = {
    "layernorm": ("mean", "center", "var", "sqrt", "divide", "affine"),
    "batchnorm": ("mean", "center", "var", "sqrt", "divide", "affine"),
    "rmsnorm": ("meansq", "sqrt", "divide", "scale"),
}

# The named nodes of each norm in forward order. Names in GROUP_NODES hold one
# node per normalization group; the others hold one node per element of x,
# except gamma and beta, which hold one node per feature or channel.
NODE_NAMES: dict[str, tuple[str, ...]] = {
    "layernorm": ("x", "mean", "xshift", "var", "std", "rstd", "xhat", "y", "gamma", "beta"),
    "batchnorm": ("x", "mean", "xshift", "var", "std", "rstd", "xhat", "y", "gamma", "beta"),
    "rmsnorm": ("x", "ms", "rms", "rrms", "xhat", "y", "gamma"),
}
GROUP_NODES = frozenset({"mean", "var", "std", "rstd", "ms", "rms", "rrms"})
# The per-group statistics that measure a spread and are positive (var and ms down to -eps):
# a finite difference moves them by a fraction of themselves, never across zero.
SCALE_NODES = frozenset({"var", "std", "rstd", "ms", "rms", "rrms"})
PARAM_NODES = frozenset({"gamma", "beta"})

VARIANCE_FORMS = ("two_pass", "naive")

# (name, flat index, amount): add ``amount`` to that node's value right after it
# is computed, so that everything downstream sees the change. This is how the
# check takes a finite difference with respect to an intermediate node.
Nudge = tuple[str, int, float]


class NormGraph:
    """The nodes of a built norm, by name.

    ``graph["xhat"]`` is a flat list (C order over the shape of x) of the xhat
    nodes; ``graph["mean"]`` has one node per normalization group (one per row
    for LayerNorm, per column or channel for BatchNorm); ``graph["gamma"]`` one
    per feature. ``graph.out`` is the output in the nesting of the input.
    """

    def __init__(
        self,
        kind: str,
        shape: tuple[int, ...],
        eps: float,
        variance: str,
        groups: list[Sequence[int]],
        nodes: dict[str, list[Value]],
    ) -> None:
        self.kind = kind
        self.shape = shape
        self.eps = eps
        self.variance = variance
        self.groups = groups
        self.nodes = nodes
        self._names: dict[int, str] | None = None

    def __getitem__(self, name: str) -> list[Value]:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"{self.kind} has no node named {name!r}; it has {', '.join(self.nodes)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    @property
    def stages(self) -> tuple[str, ...]:
        return STAGES[self.kind]

    @property
    def out(self) -> list[Any]:
        """The outputs y, nested like the input x."""
        return _nest(self.nodes["y"], self.shape)

    def roots(self) -> list[Value]:
        """The output nodes (the roots of the graph, for drawing it)."""
        return list(self.nodes["y"])

    def index_label(self, name: str, k: int) -> str:
        """A readable name for the k-th node of ``name``: ``xhat[1,2]``, ``mean[0]``, ``std``."""
        if name in GROUP_NODES:
            if len(self.groups) == 1:
                return name
            return f"{name}[{k}]"
        if name in PARAM_NODES:
            return f"{name}[{k}]"
        idx = _unravel(k, self.shape)
        return f"{name}[{','.join(map(str, idx))}]"

    def name_of(self, node: Value) -> str | None:
        """The indexed name of ``node`` (e.g. ``xhat[2]``) or None if it is not named."""
        if self._names is None:
            names: dict[int, str] = {}
            for name, values in self.nodes.items():
                for k, v in enumerate(values):
                    names.setdefault(id(v), self.index_label(name, k))
            self._names = names
        return self._names.get(id(node))

    def loss(self, dy: Sequence[Any]) -> Value:
        """``sum(y * dy)``: the loss whose gradient with respect to y is ``dy``.

        Use a random ``dy``, not ``loss = sum(y)``: with gamma = 1 a LayerNorm's
        input gradient for ``sum(y)`` is exactly zero, which hides every bug.
        """
        flat, shape = _flatten(dy, "dy")
        if shape != self.shape:
            raise ValueError(f"dy: expected shape {list(self.shape)} (the shape of x), got {list(shape)}")
        with tags("loss", "loss"):
            weights = [g if isinstance(g, Value) else Value(g, label="dy") for g in flat]
            return Value.dot(self.nodes["y"], weights)

    def __repr__(self) -> str:
        return f"NormGraph({self.kind}, shape={list(self.shape)}, eps={self.eps:g})"


class Normalized(list):
    """The output Values of a norm, nested like its input, with ``.graph`` attached."""

    graph: NormGraph


def layer_norm(
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
) -> Normalized:
    """LayerNorm of a vector [D] or of each row of a matrix [N][D], as scalar nodes.

    ``y = gamma * (x - mean) / sqrt(var + eps) + beta`` with mean and var taken over
    the last axis. Returns the y Values nested like ``x``; ``result.graph`` names
    every intermediate node (see :class:`NormGraph`).
    """
    with cycle_collector_paused():
        return _output(_build("layernorm", x, gamma, beta, eps, variance))


def batch_norm(
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
) -> Normalized:
    """BatchNorm (training-mode statistics) as scalar nodes.

    ``x`` is [N][D] (each column normalized over the batch) or [N][C][H][W] (each
    channel normalized over N, H and W); gamma and beta have one value per column
    or channel.
    """
    with cycle_collector_paused():
        return _output(_build("batchnorm", x, gamma, beta, eps, variance))


def rms_norm(x: Any, gamma: Sequence[Any] | None = None, eps: float = 1e-5) -> Normalized:
    """RMSNorm of a vector [D] or of each row of [N][D]: ``y = gamma * x / sqrt(mean(x^2) + eps)``."""
    with cycle_collector_paused():
        return _output(_build("rmsnorm", x, gamma, None, eps, "two_pass"))


# ---- building -----------------------------------------------------------------


def _output(graph: NormGraph) -> Normalized:
    result = Normalized(graph.out)
    result.graph = graph
    return result


_ACCEPTED_RANKS = {
    "layernorm": ((1, "[D]"), (2, "[N][D]")),
    "batchnorm": ((2, "[N][D]"), (4, "[N][C][H][W]")),
    "rmsnorm": ((1, "[D]"), (2, "[N][D]")),
}
_PUBLIC_NAME = {"layernorm": "layer_norm", "batchnorm": "batch_norm", "rmsnorm": "rms_norm"}


def _layout(kind: str, shape: tuple[int, ...]) -> tuple[list[Sequence[int]], list[int], int]:
    """The flat indices of each group, the parameter index of each element, the parameter count."""
    size = math.prod(shape)
    if kind in ("layernorm", "rmsnorm"):  # one group per row
        d = shape[-1]
        return [range(r * d, (r + 1) * d) for r in range(size // d)], [k % d for k in range(size)], d
    if len(shape) == 2:  # batchnorm [N][D]: one group per column
        d = shape[1]
        return [range(j, size, d) for j in range(d)], [k % d for k in range(size)], d
    _, c, h, w = shape  # batchnorm [N][C][H][W]: one group per channel
    hw = h * w
    param_of = [(k // hw) % c for k in range(size)]
    groups: list[list[int]] = [[] for _ in range(c)]
    for k, ch in enumerate(param_of):
        groups[ch].append(k)
    return groups, param_of, c


def _group_name(kind: str, shape: tuple[int, ...], r: int) -> str:
    """How an error message names group r: 'the input', 'row 2', 'column 1', 'channel 0'."""
    if kind != "batchnorm":
        return "the input" if len(shape) == 1 else f"row {r}"
    return f"column {r}" if len(shape) == 2 else f"channel {r}"


def _check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps: expected a number >= 0, got {type(eps).__name__} ({eps!r})")
    eps = float(eps)
    if not (eps >= 0.0 and math.isfinite(eps)):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps!r}")
    return eps


def _build(
    kind: str,
    x: Any,
    gamma: Sequence[Any] | None,
    beta: Sequence[Any] | None,
    eps: float,
    variance: str,
    nudge: Nudge | None = None,
) -> NormGraph:
    """Build the graph of ``kind``; ``nudge`` perturbs one named node (for finite differences)."""
    eps = _check_eps(eps)
    if variance not in VARIANCE_FORMS:
        raise ValueError(f"variance: expected one of {VARIANCE_FORMS}, got {variance!r}")
    flat, shape = _flatten(x, "x")
    ranks = _ACCEPTED_RANKS[kind]
    if len(shape) not in [r for r, _ in ranks]:
        wanted = " or ".join(f"{r}-D {s}" for r, s in ranks)
        raise ValueError(
            f"x: {_PUBLIC_NAME[kind]} expects a {wanted} input, got {len(shape)}-D with shape {list(shape)}"
        )
    groups, param_of, n_params = _layout(kind, shape)
    what = "channel" if len(shape) == 4 else "feature"
    affine_stage = STAGES[kind][-1]
    gammas = _params(gamma, "gamma", n_params, what, affine_stage)
    betas = _params(beta, "beta", n_params, what, affine_stage)

    nodes: dict[str, list[Value]] = {}

    def named(name: str, values: list[Value]) -> list[Value]:
        if nudge is not None and nudge[0] == name:
            values[nudge[1]].data += nudge[2]
        nodes[name] = values
        return values

    with tags("input"):  # leaves made here, so nudging x never touches a caller's Value
        xs = named("x", [v if isinstance(v, Value) else Value(v, label="x") for v in flat])
    if nudge is not None and nudge[0] in ("gamma", "beta"):
        target = gammas if nudge[0] == "gamma" else betas
        if target is not None:
            target[nudge[1]] = Value(target[nudge[1]].data + nudge[2], label=nudge[0], stage=affine_stage)
    n = len(groups[0])
    size = len(xs)

    def per_group(values: list[Value], stats: list[Value], op: Any) -> list[Value]:
        """op(values[k], stats[group of k]) for every element k, in flat (C) order."""
        out: list[Value] = [None] * size  # type: ignore[list-item]
        for g, stat in zip(groups, stats):
            for k in g:
                out[k] = op(values[k], stat)
        return out

    def group_sums(terms: Any, label: str) -> list[Value]:
        with tags(tags_stage[0], label):
            sums = [Value.sum([terms[k] for k in g]) for g in groups]
        return sums

    if kind == "rmsnorm":
        tags_stage = ["meansq"]
        with tags("meansq", "x²"):
            inv_n = Value(1.0 / n, label="1/n")
            sq = [v**2 for v in xs]
        sums = group_sums(sq, "sum")
        with tags("meansq", "ms"):
            stat = named("ms", [t * inv_n for t in sums])
        with tags("sqrt", "ms+eps"):
            eps_leaf = Value(eps, label="eps")
            stat_eps = [m + eps_leaf for m in stat]
        zero = [all(xs[k].data == 0.0 for k in g) for g in groups]
        spread = named(
            "rms", [_sqrt(v, "rms", kind, _group_name(kind, shape, r), zero[r]) for r, v in enumerate(stat_eps)]
        )
        with tags("divide", "rrms"):
            inverse = named("rrms", [s**-1 for s in spread])
        centered = xs
    else:
        tags_stage = ["mean"]
        with tags("mean", "1/n"):
            inv_n = Value(1.0 / n, label="1/n")
        sums = group_sums(xs, "sum")
        with tags("mean", "mean"):
            means = named("mean", [t * inv_n for t in sums])
        with tags("center", "xshift"):
            centered = named("xshift", per_group(xs, means, Value.__sub__))
        tags_stage = ["var"]
        with tags("var", "1/n"):
            inv_n = Value(1.0 / n, label="1/n")
        if variance == "two_pass":
            with tags("var", "xshift²"):
                sq = [v**2 for v in centered]
            sums = group_sums(sq, "sum")
            with tags("var", "var"):
                variances = named("var", [t * inv_n for t in sums])
        else:
            with tags("var", "x²"):
                sq = [v**2 for v in xs]
            sums = group_sums(sq, "sum")
            with tags("var", "mean(x²)"):
                mean_sq = [t * inv_n for t in sums]
            with tags("var", "mean²"):
                sq_mean = [m**2 for m in means]
            with tags("var", "var"):
                variances = named("var", [a - b for a, b in zip(mean_sq, sq_mean)])
        with tags("sqrt", "var+eps"):
            eps_leaf = Value(eps, label="eps")
            var_eps = [v + eps_leaf for v in variances]
        constant = [_constant(xs, g) for g in groups]
        spread = named(
            "std",
            [_sqrt(v, "std", kind, _group_name(kind, shape, r), constant[r], variance) for r, v in enumerate(var_eps)],
        )
        with tags("divide", "rstd"):
            inverse = named("rstd", [s**-1 for s in spread])
    with tags("divide", "xhat"):
        xhat = named("xhat", per_group(centered, inverse, Value.__mul__))

    ys = xhat
    if gammas is not None:
        with tags(affine_stage, "gamma*xhat" if betas is not None else "y"):
            ys = [gammas[p] * v for p, v in zip(param_of, xhat)]
    if betas is not None:
        with tags(affine_stage, "y"):
            ys = [v + betas[p] for p, v in zip(param_of, ys)]
    named("y", list(ys) if ys is xhat else ys)
    if gammas is not None:
        nodes["gamma"] = gammas
    if betas is not None:
        nodes["beta"] = betas
    return NormGraph(kind, shape, eps, variance, groups, nodes)


def _sqrt(v: Value, name: str, kind: str, group: str, constant: bool, variance: str = "two_pass") -> Value:
    """sqrt(var + eps) with the two ways it can fail explained in the error."""
    if variance == "naive" and v.data <= 0.0 and not constant:
        raise DomainError(
            f"{_PUBLIC_NAME[kind]}: the naive variance E[x^2] - E[x]^2 of {group} came out "
            f"as {v.data:.6g} (after adding eps) through cancellation; use variance='two_pass'"
        )
    if v.data <= 0.0:
        what = "std" if name == "std" else "root mean square"
        raise DomainError(
            f"{_PUBLIC_NAME[kind]}: the {what} of {group} is 0 (all its values are "
            f"{'equal' if name == 'std' else 'zero'}) and eps = 0, so the divide stage would "
            "divide by zero; use eps > 0"
        )
    with tags("sqrt", name):
        return v.sqrt()


def _constant(xs: list[Value], group: list[int]) -> bool:
    first = xs[group[0]].data
    return all(xs[k].data == first for k in group)


def _leaf(v: Any, label: str, stage: str) -> Value:
    return v if isinstance(v, Value) else Value(v, label=label, stage=stage)


def _params(p: Sequence[Any] | None, name: str, size: int, what: str, stage: str) -> list[Value] | None:
    if p is None:
        return None
    flat, shape = _flatten(p, name)
    if len(shape) != 1 or shape[0] != size:
        raise ValueError(f"{name}: expected {size} values (one per {what}), got shape {list(shape)}")
    return [_leaf(v, name, stage) for v in flat]


def _flatten(x: Any, name: str) -> tuple[list[Any], tuple[int, ...]]:
    """Flatten a nested sequence of numbers or Values and return it with its shape."""
    if hasattr(x, "tolist") and not isinstance(x, Value):
        x = x.tolist()  # NumPy arrays
    fast = _flat_floats(x)
    if fast is not None:
        return fast
    if not _is_sequence(x):
        _check_element(x, name, ())
        raise ValueError(f"{name}: expected a sequence of numbers, got a single number ({x!r})")
    shape: list[int] = []
    level = x
    while _is_sequence(level):
        if len(level) == 0:
            raise ValueError(f"{name}: expected a non-empty sequence, got an empty {type(level).__name__}")
        shape.append(len(level))
        level = level[0]
    flat: list[Any] = []

    def walk(node: Any, where: tuple[int, ...]) -> None:
        depth = len(where)
        if depth == len(shape):
            if _is_sequence(node):
                raise ValueError(
                    f"{name}: ragged input: {name}{_where(where)} is a sequence, "
                    f"but {name}{_where((0,) * depth)} is a number"
                )
            flat.append(_check_element(node, name, where))
            return
        if not _is_sequence(node):
            _check_element(node, name, where)
            raise ValueError(
                f"{name}: ragged input: {name}{_where(where)} is a number, "
                f"but {name}{_where((0,) * depth)} is a sequence of {shape[depth]}"
            )
        if len(node) != shape[depth]:
            raise ValueError(
                f"{name}: ragged input: {name}{_where(where)} has {len(node)} entries, "
                f"but {name}{_where((0,) * depth)} has {shape[depth]}"
            )
        for i, child in enumerate(node):
            walk(child, (*where, i))

    walk(x, ())
    return flat, tuple(shape)


def _flat_floats(x: Any) -> tuple[list[Any], tuple[int, ...]] | None:
    """The common case, quickly: a non-empty list of floats, or of equal-length lists of floats."""
    if type(x) is not list or not x:
        return None
    if all(type(v) is float for v in x):
        return x, (len(x),)
    if all(type(row) is list for row in x):
        d = len(x[0])
        if d and all(len(row) == d and all(type(v) is float for v in row) for row in x):
            return [v for row in x for v in row], (len(x), d)
    return None


def _is_sequence(v: Any) -> bool:
    t = type(v)
    if t is list or t is tuple:
        return True
    return t is not float and isinstance(v, Sequence) and not isinstance(v, (str, bytes))


def _check_element(v: Any, name: str, where: tuple[int, ...]) -> Any:
    t = type(v)
    if t is float or t is Value or (isinstance(v, (int, float, Value)) and t is not bool):
        return v
    raise TypeError(f"{name}{_where(where)}: expected a number or a Value, got {type(v).__name__} ({v!r})")


def _where(idx: tuple[int, ...]) -> str:
    return "".join(f"[{i}]" for i in idx)


def _unravel(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for s in reversed(shape):
        idx.append(k % s)
        k //= s
    return tuple(reversed(idx))


def _nest(flat: list[Any], shape: tuple[int, ...]) -> list[Any]:
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]
