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
E[x^2] - E[x]^2 form that many textbook derivations use; it cancels catastrophically
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
from dataclasses import dataclass
from typing import Any

from microgradnorm.engine import DomainError, Value, cycle_collector_paused, tags
from microgradnorm.i18n import _

__all__ = [
    "GROUP_NODES",
    "NODE_NAMES",
    "SCALE_NODES",
    "STAGES",
    "NormGraph",
    "Normalized",
    "batch_norm",
    "build_graph",
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
        return _output(build_graph("layernorm", x, gamma, beta, eps, variance))


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
        return _output(build_graph("batchnorm", x, gamma, beta, eps, variance))


def rms_norm(x: Any, gamma: Sequence[Any] | None = None, eps: float = 1e-5) -> Normalized:
    """RMSNorm of a vector [D] or of each row of [N][D]: ``y = gamma * x / sqrt(mean(x^2) + eps)``."""
    with cycle_collector_paused():
        return _output(build_graph("rmsnorm", x, gamma, None, eps, "two_pass"))


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
        # Translators: the group a statistic is taken over, shown as {group} in the errors of the sqrt stage
        return _("the input") if len(shape) == 1 else _("row {r}").format(r=r)
    return _("column {r}").format(r=r) if len(shape) == 2 else _("channel {r}").format(r=r)


def _check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps: expected a number >= 0, got {type(eps).__name__} ({eps!r})")
    eps = float(eps)
    if not (eps >= 0.0 and math.isfinite(eps)):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps!r}")
    return eps


def build_graph(
    kind: str,
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    variance: str = "two_pass",
    nudge: Nudge | None = None,
) -> NormGraph:
    """Build the scalar graph of ``kind`` ("layernorm", "batchnorm" or "rmsnorm") on ``x``, stage by stage.

    Reads like the stage table of the module docstring: check the inputs, then the
    mean and variance stages (or RMSNorm's mean square), the sqrt and the divide,
    then the affine stage. ``nudge`` perturbs one named node right after it is
    computed (see :data:`Nudge`), so that the check can take finite differences.
    """
    inputs = _check_inputs(kind, x, gamma, beta, eps, variance)
    graph = _Builder(inputs, nudge)
    with tags("input"):  # leaves made here, so nudging x never touches a caller's Value
        xs = graph.named("x", [v if isinstance(v, Value) else Value(v, label="x") for v in inputs.flat])
    gammas, betas = graph.nudged_params(inputs.gammas, inputs.betas)
    if kind == "rmsnorm":
        centered, inverse = _rms_stages(graph, xs, inputs.eps)
    else:
        centered, inverse = _mean_var_stages(graph, xs, inputs.eps, variance)
    with tags("divide", "xhat"):
        xhat = graph.named("xhat", graph.per_group(centered, inverse, Value.__mul__))
    _affine_stage(graph, xhat, gammas, betas)
    return NormGraph(kind, inputs.shape, inputs.eps, variance, inputs.groups, graph.nodes)


@dataclass(frozen=True)
class _Inputs:
    """The checked inputs of a build: x flattened, its groups, and gamma and beta as leaves."""

    kind: str
    flat: list[Any]
    shape: tuple[int, ...]
    groups: list[Sequence[int]]  # the flat indices of x in each normalization group
    param_of: list[int]  # the index into gamma and beta of each element of x
    gammas: list[Value] | None
    betas: list[Value] | None
    eps: float


def _check_inputs(
    kind: str, x: Any, gamma: Sequence[Any] | None, beta: Sequence[Any] | None, eps: float, variance: str
) -> _Inputs:
    """eps, the variance form, x's rank and gamma's and beta's sizes, each refused with a clear error."""
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
    return _Inputs(kind, flat, shape, groups, param_of, gammas, betas, eps)


class _Builder:
    """A graph being built: its named nodes so far, its groups, and the nudge to apply."""

    def __init__(self, inputs: _Inputs, nudge: Nudge | None) -> None:
        self.inputs = inputs
        self.nudge = nudge
        self.nodes: dict[str, list[Value]] = {}
        self.n = len(inputs.groups[0])  # values per group

    def named(self, name: str, values: list[Value]) -> list[Value]:
        """Record ``values`` as the nodes called ``name``, nudging one of them if asked to."""
        if self.nudge is not None and self.nudge[0] == name:
            values[self.nudge[1]].data += self.nudge[2]
        self.nodes[name] = values
        return values

    def nudged_params(
        self, gammas: list[Value] | None, betas: list[Value] | None
    ) -> tuple[list[Value] | None, list[Value] | None]:
        """gamma and beta, one of them with a nudged copy of one leaf (the caller's Value stays as it is)."""
        if self.nudge is None or self.nudge[0] not in ("gamma", "beta"):
            return gammas, betas
        name, k, amount = self.nudge
        target = gammas if name == "gamma" else betas
        if target is not None:
            target[k] = Value(target[k].data + amount, label=name, stage=STAGES[self.inputs.kind][-1])
        return gammas, betas

    def per_group(self, values: list[Value], stats: list[Value], op: Any) -> list[Value]:
        """op(values[k], stats[group of k]) for every element k, in flat (C) order."""
        out: list[Value] = [None] * len(values)  # type: ignore[list-item]
        for group, stat in zip(self.inputs.groups, stats):
            for k in group:
                out[k] = op(values[k], stat)
        return out

    def group_means(self, terms: list[Value], inv_n: Value, stage: str, label: str) -> list[Value]:
        """One sum node per group (tagged ``stage``, "sum"), each times 1/n (tagged ``stage``, ``label``)."""
        with tags(stage, "sum"):
            sums = [Value.sum([terms[k] for k in group]) for group in self.inputs.groups]
        with tags(stage, label):
            return [t * inv_n for t in sums]

    def all_equal(self, r: int) -> bool:
        """Whether every value of x in group r is the same (x as built, nudge included)."""
        xs = self.nodes["x"]
        group = self.inputs.groups[r]
        first = xs[group[0]].data
        return all(xs[k].data == first for k in group)


def _mean_var_stages(graph: _Builder, xs: list[Value], eps: float, variance: str) -> tuple[list[Value], list[Value]]:
    """LayerNorm's and BatchNorm's mean, center, var and sqrt stages, and rstd: (xshift, rstd)."""
    with tags("mean", "1/n"):
        inv_n = Value(1.0 / graph.n, label="1/n")
    means = graph.named("mean", graph.group_means(xs, inv_n, "mean", "mean"))
    with tags("center", "xshift"):
        xshift = graph.named("xshift", graph.per_group(xs, means, Value.__sub__))
    variances = _var_stage(graph, xs, xshift, means, variance)
    std = _sqrt_stage(graph, variances, eps, "std", variance)
    with tags("divide", "rstd"):
        rstd = graph.named("rstd", [s**-1 for s in std])
    return xshift, rstd


def _var_stage(graph: _Builder, xs: list[Value], xshift: list[Value], means: list[Value], variance: str) -> list[Value]:
    """var = mean(xshift²) (two-pass), or E[x²] - E[x]² (naive)."""
    with tags("var", "1/n"):
        inv_n = Value(1.0 / graph.n, label="1/n")
    if variance == "two_pass":
        with tags("var", "xshift²"):
            sq = [v**2 for v in xshift]
        return graph.named("var", graph.group_means(sq, inv_n, "var", "var"))
    with tags("var", "x²"):
        sq = [v**2 for v in xs]
    mean_sq = graph.group_means(sq, inv_n, "var", "mean(x²)")
    with tags("var", "mean²"):
        sq_mean = [m**2 for m in means]
    with tags("var", "var"):
        return graph.named("var", [a - b for a, b in zip(mean_sq, sq_mean)])


def _rms_stages(graph: _Builder, xs: list[Value], eps: float) -> tuple[list[Value], list[Value]]:
    """RMSNorm's meansq and sqrt stages, and rrms: (x itself, which is not centered, rrms)."""
    with tags("meansq", "x²"):
        inv_n = Value(1.0 / graph.n, label="1/n")
        sq = [v**2 for v in xs]
    ms = graph.named("ms", graph.group_means(sq, inv_n, "meansq", "ms"))
    rms = _sqrt_stage(graph, ms, eps, "rms")
    with tags("divide", "rrms"):
        rrms = graph.named("rrms", [s**-1 for s in rms])
    return xs, rrms


def _sqrt_stage(graph: _Builder, stat: list[Value], eps: float, name: str, variance: str = "two_pass") -> list[Value]:
    """sqrt(stat + eps) per group, named ``name`` ("std" or "rms")."""
    with tags("sqrt", "var+eps" if name == "std" else "ms+eps"):
        eps_leaf = Value(eps, label="eps")
        shifted = [v + eps_leaf for v in stat]
    return graph.named(name, [_sqrt(graph, r, v, name, variance) for r, v in enumerate(shifted)])


def _sqrt(graph: _Builder, r: int, v: Value, name: str, variance: str) -> Value:
    """sqrt(var + eps) of group r, with the two ways it can fail explained in the error."""
    if v.data <= 0.0:
        kind = graph.inputs.kind
        group = _group_name(kind, graph.inputs.shape, r)
        if variance == "naive" and not graph.all_equal(r):
            raise DomainError(
                _(
                    "{norm}: the naive variance E[x^2] - E[x]^2 of {group} came out as {value} (after adding "
                    "eps) through cancellation; use variance='two_pass'"
                ).format(norm=_PUBLIC_NAME[kind], group=group, value=f"{v.data:.6g}")
            )
        if name == "std":
            message = _(
                "{norm}: the std of {group} is 0 (all its values are equal) and eps = 0, so the divide stage "
                "would divide by zero; use eps > 0"
            )
        else:
            message = _(
                "{norm}: the root mean square of {group} is 0 (all its values are zero) and eps = 0, so the "
                "divide stage would divide by zero; use eps > 0"
            )
        raise DomainError(message.format(norm=_PUBLIC_NAME[kind], group=group))
    with tags("sqrt", name):
        return v.sqrt()


def _affine_stage(graph: _Builder, xhat: list[Value], gammas: list[Value] | None, betas: list[Value] | None) -> None:
    """y = gamma * xhat + beta (either may be absent), tagged with the norm's last stage."""
    stage, param_of = STAGES[graph.inputs.kind][-1], graph.inputs.param_of
    ys = xhat
    if gammas is not None:
        with tags(stage, "gamma*xhat" if betas is not None else "y"):
            ys = [gammas[p] * v for p, v in zip(param_of, xhat)]
    if betas is not None:
        with tags(stage, "y"):
            ys = [v + betas[p] for p, v in zip(param_of, ys)]
    graph.named("y", list(ys) if ys is xhat else ys)
    if gammas is not None:
        graph.nodes["gamma"] = gammas
    if betas is not None:
        graph.nodes["beta"] = betas


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
