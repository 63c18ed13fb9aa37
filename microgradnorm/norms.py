"""LayerNorm, BatchNorm, GroupNorm and RMSNorm built out of scalar :class:`Value` nodes.

Why build a norm from scalars at all? Because then every intermediate quantity
of the textbook derivation -- the mean, the centered values, the variance, the
standard deviation, the normalized values -- is a node you can point at, and
``backward()`` leaves the gradient of the loss on each of them. Those are the
numbers the closed forms in :mod:`microgradnorm.formulas` predict and the check
in :mod:`microgradnorm.check` compares.

LayerNorm, BatchNorm and GroupNorm are the same six lines; they differ only in
which values share a statistic (a row; a column or channel over the batch; a
group of channels of one example, Wu & He 2018). Each line's nodes carry the
stage they belong to::

    mean    mean   = sum(x) * 1/n
    center  xshift = x - mean
    var     var    = sum(xshift ** 2) * 1/n          (or E[x^2] - E[x]^2, see below)
    sqrt    std    = sqrt(var + eps)
    divide  rstd   = std ** -1 ;  xhat = xshift * rstd
    affine  y      = gamma * xhat + beta

RMSNorm (Zhang & Sennrich 2019) has no mean and no shift: ``meansq``
(ms = sum(x ** 2) * 1/n), ``sqrt`` (rms = sqrt(ms + eps)), ``divide``
(rrms = rms ** -1, xhat = x * rrms) and ``scale`` (y = gamma * xhat).

The variance is centered ("two-pass") by default. ``variance="naive"`` builds the
E[x^2] - E[x]^2 form that many derivations use; it cancels catastrophically when
the mean is large compared with the spread (a lesson shows it).

Simplified compared with PyTorch: training-mode statistics only (no running
averages) and the biased variance (divide by n, as PyTorch does to normalize).
Reading the input (nested lists, ragged lists, bad types) is
:mod:`microgradnorm.inputs`' job; this module is the maths.

Edge cases, on purpose: ``eps = 0`` is allowed, but a group whose values are all
equal then has std 0, and the sqrt stage raises a :class:`NormDomainError` that
says so. A group of one value with ``eps > 0`` gives ``xhat = 0`` and ``y = beta``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from microgradnorm.engine import Value, cycle_collector_paused, tags
from microgradnorm.errors import N_, NormDomainError
from microgradnorm.inputs import CHANNEL_GROUPS, CHANNELS, ROWS, Inputs, flatten, nest, read, unravel

__all__ = [
    "GROUP_NODES",
    "NODES",
    "PARAM_NODES",
    "RMS_NODES",
    "RMS_STAGES",
    "SCALE_NODES",
    "STAGES",
    "NormGraph",
    "Normalized",
    "batch_norm",
    "group_norm",
    "layer_norm",
    "rms_norm",
]

# Names of nodes with one node per normalization group (the others: one per
# element of x, except gamma and beta, one per feature or channel).
GROUP_NODES = frozenset({"mean", "var", "std", "rstd", "ms", "rms", "rrms"})
# The per-group statistics that measure a spread and are positive (var and ms down to -eps):
# a finite difference moves them by a fraction of themselves, never across zero.
SCALE_NODES = frozenset({"var", "std", "rstd", "ms", "rms", "rrms"})
PARAM_NODES = frozenset({"gamma", "beta"})

# (name, flat index, amount): add ``amount`` to that node's value right after it
# is computed, so that everything downstream sees the change (the check's finite
# differences at an intermediate node).
Nudge = tuple[str, int, float]


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
    nudge: Nudge | None = None,
) -> Normalized:
    """LayerNorm of a vector [D] or of each row of [N][D]:
    ``y = gamma * (x - mean) / sqrt(var + eps) + beta``.

    Returns the y Values nested like ``x``; ``result.graph`` names every
    intermediate node (see :class:`NormGraph`).
    """
    p = read(ROWS, "layer_norm", x, gamma, beta, eps, variance)
    return standardize("layernorm", p, variance, nudge)


def batch_norm(
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
    nudge: Nudge | None = None,
) -> Normalized:
    """BatchNorm (training-mode statistics): x [N][D] per column,
    or [N][C][H][W] per channel over N, H and W.
    """
    p = read(CHANNELS, "batch_norm", x, gamma, beta, eps, variance)
    return standardize("batchnorm", p, variance, nudge)


def group_norm(
    x: Any,
    num_groups: int,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
    nudge: Nudge | None = None,
) -> Normalized:
    """GroupNorm of x [N][C], [N][C][L] or [N][C][H][W]: each example's
    channels in ``num_groups`` groups of C/G, each group normalized over
    its channels and positions (Wu & He, 2018).

    ``num_groups = 1`` is LayerNorm over (C, H, W); ``num_groups = C`` is
    InstanceNorm. gamma and beta have one value per channel.
    """
    p = read(CHANNEL_GROUPS, "group_norm", x, gamma, beta, eps, variance, num_groups)
    return standardize("groupnorm", p, variance, nudge, num_groups)


def standardize(
    kind: str,
    p: Inputs,
    variance: str = "two_pass",
    nudge: Nudge | None = None,
    num_groups: int | None = None,
) -> Normalized:
    """The lines of LayerNorm, BatchNorm and GroupNorm, on each group of ``p``."""
    named = _Names(nudge)
    xs = p.grouped(named("x", p.x))
    gamma, beta = named("gamma", p.gamma), named("beta", p.beta)
    with cycle_collector_paused():
        mean = named("mean", _mean(xs, "mean", "mean"))
        with tags("center", "xshift"):
            xshift = [[xi - m for xi in g] for g, m in zip(xs, mean)]
        named("xshift", p.ungrouped(xshift))
        if variance == "naive":
            var = named("var", _naive_variance(xs, mean))
        else:
            with tags("var", "xshift²"):
                sq = [[s**2 for s in g] for g in xshift]
            var = named("var", _mean(sq, "var", "var"))
        std = named("std", _sqrt(p, var, "std", variance))
        with tags("divide", "rstd"):
            rstd = named("rstd", [s**-1 for s in std])
        with tags("divide", "xhat"):
            xhat = [[s * r for s in g] for g, r in zip(xshift, rstd)]
        xhat = named("xhat", p.ungrouped(xhat))
        named("y", _affine(p, xhat, gamma, beta, "affine"))
    return _finish(kind, p, variance, named, num_groups, NODES)


def rms_norm(
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: None = None,
    eps: float = 1e-5,
    *,
    nudge: Nudge | None = None,
) -> Normalized:
    """RMSNorm (Zhang & Sennrich, 2019) of a vector [D] or of each row of
    [N][D]: ``y = gamma * x / sqrt(mean(x^2) + eps)``.

    No mean and no shift. ``beta`` is there so that every norm takes the
    same arguments; it must be None.
    """
    p = read(ROWS, "rms_norm", x, gamma, beta, eps, affine_stage="scale", shift=False)
    named = _Names(nudge)
    xs = p.grouped(named("x", p.x))
    gamma = named("gamma", p.gamma)
    with cycle_collector_paused():
        with tags("meansq", "x²"):
            sq = [[xi**2 for xi in g] for g in xs]
        ms = named("ms", _mean(sq, "meansq", "ms"))
        rms = named("rms", _sqrt(p, ms, "rms"))
        with tags("divide", "rrms"):
            rrms = named("rrms", [s**-1 for s in rms])
        with tags("divide", "xhat"):
            xhat = [[xi * r for xi in g] for g, r in zip(xs, rrms)]
        xhat = named("xhat", p.ungrouped(xhat))
        named("y", _affine(p, xhat, gamma, None, "scale"))
    return _finish("rmsnorm", p, "two_pass", named, None, RMS_NODES)


# The stages and the named nodes, in forward order, of the two kinds of graph.
STAGES = ("mean", "center", "var", "sqrt", "divide", "affine")
NODES = ("x", "mean", "xshift", "var", "std", "rstd", "xhat", "y", "gamma", "beta")
RMS_STAGES = ("meansq", "sqrt", "divide", "scale")
RMS_NODES = ("x", "ms", "rms", "rrms", "xhat", "y", "gamma")


# ---- the lines above that take more than one line -------------------------------------


def _mean(groups: list[list[Value]], stage: str, label: str) -> list[Value]:
    """sum(group) * 1/n for each group: one sum node with n children, times a 1/n leaf."""
    with tags(stage, "1/n"):
        inv_n = Value(1.0 / len(groups[0]), label="1/n")
    with tags(stage, "sum"):
        sums = [Value.sum(g) for g in groups]
    with tags(stage, label):
        return [s * inv_n for s in sums]


def _naive_variance(xs: list[list[Value]], mean: list[Value]) -> list[Value]:
    """E[x^2] - E[x]^2 per group: one pass in exact arithmetic, cancellation in floating point."""
    with tags("var", "x²"):
        sq = [[xi**2 for xi in g] for g in xs]
    mean_sq = _mean(sq, "var", "mean(x²)")
    with tags("var", "mean²"):
        sq_mean = [m**2 for m in mean]
    with tags("var", "var"):
        return [a - b for a, b in zip(mean_sq, sq_mean)]


def _sqrt(p: Inputs, stat: list[Value], name: str, variance: str = "two_pass") -> list[Value]:
    """sqrt(stat + eps) per group, refusing (with the reason) a group where it is not positive."""
    with tags("sqrt", "var+eps" if name == "std" else "ms+eps"):
        eps = Value(p.eps, label="eps")
        shifted = [v + eps for v in stat]
    for r, v in enumerate(shifted):
        if v.data <= 0.0:
            raise _zero_spread(p, r, name, variance, v.data)
    with tags("sqrt", name):
        return [v.sqrt() for v in shifted]


def _zero_spread(p: Inputs, r: int, name: str, variance: str, value: float) -> NormDomainError:
    """Why group r has no square root: cancellation in the naive variance, or a constant group at eps = 0."""
    group = p.group_name(r)
    xs = [p.x[k].data for k in p.groups[r]]
    if variance == "naive" and any(v != xs[0] for v in xs):
        template = N_(
            "{argument}: the naive variance E[x^2] - E[x]^2 of {group} came out as {given} (after adding "
            "eps) through cancellation; use variance='two_pass'"
        )
        return NormDomainError(template, argument=p.function, group=group, given=f"{value:.6g}")
    if name == "std":
        template = N_(
            "{argument}: the std of {group} is 0 (all its values are equal) and eps = 0, so the divide stage "
            "would divide by zero; use eps > 0"
        )
    else:
        template = N_(
            "{argument}: the root mean square of {group} is 0 (all its values are zero) and eps = 0, so the "
            "divide stage would divide by zero; use eps > 0"
        )
    return NormDomainError(template, argument=p.function, group=group, expected="eps > 0", given=0.0)


def _affine(
    p: Inputs, xhat: list[Value], gamma: list[Value] | None, beta: list[Value] | None, stage: str
) -> list[Value]:
    """y = gamma * xhat + beta (either may be absent), gamma and beta indexed by feature or channel."""
    y = list(xhat)
    if gamma is not None:
        with tags(stage, "gamma*xhat" if beta is not None else "y"):
            y = [gamma[c] * h for c, h in zip(p.param_of, y)]
    if beta is not None:
        with tags(stage, "y"):
            y = [h + beta[c] for c, h in zip(p.param_of, y)]
    return y


class _Names(dict):
    """The named nodes of a graph as it is built (and the one a finite difference nudges)."""

    def __init__(self, nudge: Nudge | None) -> None:
        super().__init__()
        self.nudge = nudge

    def __call__(self, name: str, values: list[Value] | None) -> Any:
        if values is None:
            return None
        if self.nudge is not None and self.nudge[0] == name:
            values = list(values)
            k, amount = self.nudge[1], self.nudge[2]
            v = values[k]
            if v.children:  # an op's result: everything downstream is built after this
                v.data += amount
            else:  # a leaf may be the caller's own Value: nudge a copy
                values[k] = Value(v.data + amount, label=v.label, stage=v.stage)
        self[name] = values
        return values


def _finish(
    kind: str, p: Inputs, variance: str, named: _Names, num_groups: int | None, order: tuple[str, ...]
) -> Normalized:
    nodes = {name: named[name] for name in order if name in named}
    stages = RMS_STAGES if order is RMS_NODES else STAGES
    graph = NormGraph(kind, p.shape, p.eps, variance, p.groups, nodes, stages, num_groups)
    result = Normalized(graph.out)
    result.graph = graph
    return result


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
        groups: list[list[int]],
        nodes: dict[str, list[Value]],
        stages: tuple[str, ...] = STAGES,
        num_groups: int | None = None,
    ) -> None:
        self.kind = kind
        self.shape = shape
        self.eps = eps
        self.variance = variance
        self.groups = groups
        self.nodes = nodes
        self.stages = stages
        self.num_groups = num_groups
        self._names: dict[int, str] | None = None

    def __getitem__(self, name: str) -> list[Value]:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"{self.kind} has no node named {name!r}; it has {', '.join(self.nodes)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    @property
    def out(self) -> list[Any]:
        """The outputs y, nested like the input x."""
        return nest(self.nodes["y"], self.shape)

    def roots(self) -> list[Value]:
        """The output nodes (the roots of the graph, for drawing it)."""
        return list(self.nodes["y"])

    def index_label(self, name: str, k: int) -> str:
        """A readable name for the k-th node of ``name``: ``xhat[1,2]``, ``mean[0]``, ``std``."""
        if name in GROUP_NODES:
            return name if len(self.groups) == 1 else f"{name}[{k}]"
        if name in PARAM_NODES:
            return f"{name}[{k}]"
        return f"{name}[{','.join(map(str, unravel(k, self.shape)))}]"

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
        flat, shape = flatten(dy, "dy")
        if shape != self.shape:
            raise ValueError(f"dy: expected shape {list(self.shape)} (the shape of x), got {list(shape)}")
        with tags("loss", "loss"):
            weights = [g if isinstance(g, Value) else Value(g, label="dy") for g in flat]
            return Value.dot(self.nodes["y"], weights)

    def __repr__(self) -> str:
        return f"NormGraph({self.kind}, shape={list(self.shape)}, eps={self.eps:g})"
