"""LayerNorm, BatchNorm, GroupNorm and RMSNorm built out of scalar :class:`Value` nodes.

Why build a norm from scalars at all? Because then every intermediate quantity
of the textbook derivation -- the mean, the centered values, the variance, the
standard deviation, the normalized values -- is a node you can point at, and
``backward()`` leaves the gradient of the loss on each of them. Those are the
numbers the closed forms in :mod:`microgradnorm.formulas` predict and the check
in :mod:`microgradnorm.check` compares.

LayerNorm (Ba, Kiros & Hinton 2016), BatchNorm (Ioffe & Szegedy 2015) and
GroupNorm (Wu & He 2018) are the same six lines; they differ only in which
values share a statistic (a row; a column or channel over the batch; a group
of channels of one example). Each line's nodes carry the
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
from microgradnorm.errors import N_, InputError, NormDomainError
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


class Normalized(list):
    """The output Values of a norm, nested like its input, with ``.graph`` attached."""

    graph: NormGraph


@cycle_collector_paused()  # building makes many small objects: no cycle-collector passes meanwhile
def layer_norm(  # readable-core: whole -- the formulas in order, one line each: split, they stop reading as the maths
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
) -> Normalized:
    """LayerNorm of a vector [D] or of each row of [N][D]:
    ``y = gamma * (x - mean) / sqrt(var + eps) + beta``.

    Returns the y Values nested like ``x``; ``result.graph`` names every
    intermediate node (see :class:`NormGraph`). ``x`` may also be the
    :class:`~microgradnorm.inputs.Inputs` of another grouping: that is how
    BatchNorm and GroupNorm run these same lines on their own groups.
    """
    p = read(
        ROWS, "layer_norm", x, gamma, beta, eps, variance
    )  # fmt: skip
    xs, n, c = p.grouped(p.x), len(p.groups[0]), p.param_of
    with tags("mean", "1/n"):
        inv_n = Value(1.0 / n, label="1/n")
    with tags("mean", "sum"):
        sums = [Value.sum(g) for g in xs]
    with tags("mean", "mean"):
        mean = [s * inv_n for s in sums]
    with tags("center", "xshift"):
        xshift = [[xi - m for xi in g]
                  for g, m in zip(xs, mean)]  # fmt: skip
    if variance == "naive":
        var = _naive_variance(xs, mean)
    else:
        with tags("var", "1/n"):
            inv_n = Value(1.0 / n, label="1/n")
        with tags("var", "xshift²"):
            sq = [[s**2 for s in g] for g in xshift]
        with tags("var", "sum"):
            sums = [Value.sum(g) for g in sq]
        with tags("var", "var"):
            var = [s * inv_n for s in sums]
    with tags("sqrt", "var+eps"):
        eps_ = Value(p.eps, label="eps")
        var_eps = [v + eps_ for v in var]
    _check_positive(p, var_eps, "std", variance)
    with tags("sqrt", "std"):
        std = [v.sqrt() for v in var_eps]
    with tags("divide", "rstd"):
        rstd = [s**-1 for s in std]
    with tags("divide", "xhat"):
        xhat = [[s * r for s in g]
                for g, r in zip(xshift, rstd)]  # fmt: skip
    xhat = p.ungrouped(xhat)
    y, gamma, beta = xhat, p.gamma, p.beta
    if gamma is not None:
        with tags("affine", "γ·xhat" if beta else "y"):
            y = [gamma[ci] * h for ci, h in zip(c, y)]
    if beta is not None:
        with tags("affine", "y"):
            y = [v + beta[ci] for ci, v in zip(c, y)]
    return _graph(
        p, STAGES, variance,
        x=p.x, mean=mean, xshift=p.ungrouped(xshift),
        var=var, std=std, rstd=rstd, xhat=xhat,
        y=list(y), gamma=gamma, beta=beta,
    )  # fmt: skip


def batch_norm(
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
) -> Normalized:
    """BatchNorm (training-mode statistics; Ioffe & Szegedy, 2015): x [N][D]
    per column, or [N][C][H][W] per channel over N, H and W.

    The lines of :func:`layer_norm`, on the columns (or channels) instead
    of the rows.
    """
    p = read(
        CHANNELS, "batch_norm",
        x, gamma, beta, eps, variance,
    )  # fmt: skip
    return layer_norm(p, variance=variance)


def group_norm(
    x: Any,
    num_groups: int,
    gamma: Sequence[Any] | None = None,
    beta: Sequence[Any] | None = None,
    eps: float = 1e-5,
    *,
    variance: str = "two_pass",
) -> Normalized:
    """GroupNorm (Wu & He, 2018) of x [N][C], [N][C][L] or [N][C][H][W]:
    each example's channels in ``num_groups`` groups of C/G, each group
    normalized over its channels and positions.

    ``num_groups = 1`` is LayerNorm over (C, H, W); ``num_groups = C`` is
    InstanceNorm. gamma and beta have one value per channel. The lines of
    :func:`layer_norm`, on the groups instead of the rows.
    """
    p = read(CHANNEL_GROUPS, "group_norm", x, gamma, beta, eps, variance, num_groups)
    return layer_norm(p, variance=variance)


@cycle_collector_paused()
def rms_norm(
    x: Any,
    gamma: Sequence[Any] | None = None,
    beta: None = None,
    eps: float = 1e-5,
) -> Normalized:
    """RMSNorm (Zhang & Sennrich, 2019) of a vector [D] or of each row of
    [N][D]: ``y = gamma * x / sqrt(mean(x^2) + eps)``.

    No mean and no shift. ``beta`` is there so that every norm takes the
    same arguments; it must be None.
    """
    p = read(
        ROWS, "rms_norm", x, gamma, beta, eps, shift=False
    )  # fmt: skip
    xs, n, c = p.grouped(p.x), len(p.groups[0]), p.param_of
    with tags("meansq", "1/n"):
        inv_n = Value(1.0 / n, label="1/n")
    with tags("meansq", "x²"):
        sq = [[xi**2 for xi in g] for g in xs]
    with tags("meansq", "sum"):
        sums = [Value.sum(g) for g in sq]
    with tags("meansq", "ms"):
        ms = [s * inv_n for s in sums]
    with tags("sqrt", "ms+eps"):
        eps_ = Value(p.eps, label="eps")
        ms_eps = [m + eps_ for m in ms]
    _check_positive(p, ms_eps, "rms")
    with tags("sqrt", "rms"):
        rms = [v.sqrt() for v in ms_eps]
    with tags("divide", "rrms"):
        rrms = [s**-1 for s in rms]
    with tags("divide", "xhat"):
        xhat = [[xi * r for xi in g]
                for g, r in zip(xs, rrms)]  # fmt: skip
    xhat = p.ungrouped(xhat)
    y, gamma = xhat, p.gamma
    if gamma is not None:
        with tags("scale", "y"):
            y = [gamma[ci] * h for ci, h in zip(c, y)]
    return _graph(
        p, RMS_STAGES, "two_pass",
        x=p.x, ms=ms, rms=rms, rrms=rrms,
        xhat=xhat, y=list(y), gamma=gamma,
    )  # fmt: skip


# The stages and the named nodes, in forward order, of the two kinds of graph.
STAGES = ("mean", "center", "var", "sqrt", "divide", "affine")
NODES = ("x", "mean", "xshift", "var", "std", "rstd", "xhat", "y", "gamma", "beta")
RMS_STAGES = ("meansq", "sqrt", "divide", "scale")
RMS_NODES = ("x", "ms", "rms", "rrms", "xhat", "y", "gamma")


# ---- the naive variance, the refusals of the sqrt stage, the named nodes ----------------


def _graph(p: Inputs, stages: tuple[str, ...], variance: str, **nodes: list[Value] | None) -> Normalized:
    """The output nested like x, with ``.graph`` naming ``nodes`` (those that are not None)."""
    named = {name: values for name, values in nodes.items() if values is not None}
    graph = NormGraph(p.kind, p.shape, p.eps, variance, p.groups, named, stages, p.num_groups)
    result = Normalized(graph.out)
    result.graph = graph
    return result


def _naive_variance(rows: list[list[Value]], mean: list[Value]) -> list[Value]:
    """E[x^2] - E[x]^2 per group: one pass in exact arithmetic, cancellation in floating point."""
    with tags("var", "1/n"):
        inv_n = Value(1.0 / len(rows[0]), label="1/n")
    with tags("var", "x²"):
        sq = [[xi**2 for xi in row] for row in rows]
    with tags("var", "sum"):
        sums = [Value.sum(row) for row in sq]
    with tags("var", "mean(x²)"):
        mean_sq = [s * inv_n for s in sums]
    with tags("var", "mean²"):
        sq_mean = [m**2 for m in mean]
    with tags("var", "var"):
        return [a - b for a, b in zip(mean_sq, sq_mean)]


def _check_positive(p: Inputs, shifted: list[Value], name: str, variance: str = "two_pass") -> None:
    """Refuse (and say why) a group whose var + eps (or ms + eps) is not positive: no square root."""
    for r, v in enumerate(shifted):
        if v.data <= 0.0:
            raise _zero_spread(p, r, name, variance, v.data)


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
            raise InputError(
                N_("{argument}: expected shape {expected} (the shape of x), got {given}"),
                argument="dy",
                expected=list(self.shape),
                given=list(shape),
            )
        with tags("loss", "loss"):
            weights = [g if isinstance(g, Value) else Value(g, label="dy") for g in flat]
            return Value.dot(self.nodes["y"], weights)

    def __repr__(self) -> str:
        return f"NormGraph({self.kind}, shape={list(self.shape)}, eps={self.eps:g})"
