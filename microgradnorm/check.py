"""The three-way gradient check: autograd, closed form and finite difference, per node.

For one norm, one input and a random upstream gradient ``dy``, the loss is
``L = sum(y * dy)``, so dL/dy = dy. (``L = sum(y)`` would be the obvious choice
and the wrong one: with gamma = 1 the LayerNorm input gradient of ``sum(y)`` is
exactly zero, and a backward pass that forgets a term still "passes".)

At every named node of the built graph (x, mean, xshift, var, std, rstd, xhat,
y, gamma, beta) three numbers are compared:

1. the gradient ``backward()`` accumulated on the node;
2. the closed form of :mod:`microgradnorm.formulas`, computed in NumPy from the
   inputs alone, never from the graph;
3. a central finite difference: the node's value is moved by +h and -h, every
   node computed from it is recomputed by its op's forward (the graph itself is
   left as it is), and (L+ - L-) / 2h is taken, all in float64. Taken at h and h/2
   and combined (Richardson extrapolation), its error shrinks from order h^2 to
   order h^4, which matters where the loss curves sharply (tiny var + eps).

The finite difference is trusted to FD_RTOL relative, plus what rounding leaves
in it: each loss L is computed in float64 and carries a rounding error dL, which
(L+ - L-) / 2h divides by the step. dL is estimated from the graph itself (each
op rounds its result once, and that error reaches L multiplied by the node's
gradient), so the allowance grows with the magnitude of the inputs and the size
of the graph, and shrinks as the step grows. Likewise a gradient that is zero
in exact arithmetic (LayerNorm's dx when y cannot depend on x) comes out of
autograd and of the closed form as rounding left over from terms that
cancelled, so the closed-form comparison allows a few rounding units of those
terms' size (:func:`absolute_gradients`) beside its fixed tolerance. By default only FD_MAX_ENTRIES
evenly spread entries per node get a finite difference (each one recomputes the
graph four times); the scalar graph is for small inputs, at most MAX_ENTRIES.

The result is a :class:`CheckReport` (data, not prints); :mod:`microgradnorm.present`
turns it into a table.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from microgradnorm import tolerances as tol
from microgradnorm.engine import Value, local_grads, topological_order
from microgradnorm.finite_diff import richardson_difference, step_for
from microgradnorm.i18n import _
from microgradnorm.norms import SCALE_NODES
from microgradnorm.registry import NormSpec, get_norm

__all__ = [
    "FD_MAX_ENTRIES",
    "MAX_ENTRIES",
    "CheckReport",
    "NodeCheck",
    "SlowCheckWarning",
    "absolute_gradients",
    "check_norm",
    "loss_rounding",
    "random_problem",
]

FD_MAX_ENTRIES = tol.FD_MAX_ENTRIES  # finite differences per node by default
# The largest input the scalar graph is checked on: at FD_MAX_ENTRIES entries per node a
# check of this size already takes tens of seconds, and memory grows with it.
MAX_ENTRIES = 10_000
# Finite differences times the entries of x above which check_norm warns that it will be slow
# (about a minute of recomputing the graph on a laptop).
SLOW_FD_WORK = 20_000_000


class SlowCheckWarning(UserWarning):
    """check_norm was asked for so many finite differences on so large a graph that it will be slow."""


@dataclass
class NodeCheck:
    """The three gradients of one named node (flat arrays, C order) and how well they agree."""

    name: str
    stage: str
    labels: list[str]
    autograd: np.ndarray
    closed_form: np.ndarray
    finite_diff: np.ndarray  # NaN where no finite difference was taken
    closed_form_abs: float
    closed_form_rel: float
    fd_abs: float
    fd_rel: float
    closed_form_ok: bool
    fd_ok: bool
    fd_count: int
    closed_form_atol: float = tol.CLOSED_FORM_ATOL  # the largest absolute allowance of an entry
    fd_atol: float = tol.FD_ATOL  # the largest absolute allowance of an entry (FD_ATOL + rounding / step)
    entry_ok: np.ndarray | None = None  # per entry: agrees with the closed form and (if taken) the fd

    @property
    def passed(self) -> bool:
        return self.closed_form_ok and self.fd_ok

    @property
    def closed_form_scale(self) -> float:
        """max|closed form|: what the closed-form verdict scales its relative tolerance by."""
        return float(np.max(np.abs(self.closed_form))) if self.closed_form.size else 0.0

    @property
    def fd_scale(self) -> float:
        """max|finite difference| over the entries where one was taken."""
        taken = self.finite_diff[~np.isnan(self.finite_diff)]
        return float(np.max(np.abs(taken))) if taken.size else 0.0

    @property
    def worst(self) -> int:
        """Index of the entry where autograd and the closed form differ most."""
        return int(np.argmax(np.abs(self.autograd - self.closed_form)))


@dataclass
class CheckReport:
    """The outcome of :func:`check_norm`: one :class:`NodeCheck` per named node."""

    norm: str
    title: str
    shape: tuple[int, ...]
    eps: float
    variance: str
    seed: int | None
    loss: float
    nodes: list[NodeCheck]
    tolerances: dict[str, float] = field(
        default_factory=lambda: {
            "closed_form_rtol": tol.CLOSED_FORM_RTOL,
            "closed_form_atol": tol.CLOSED_FORM_ATOL,
            "fd_rtol": tol.FD_RTOL,
            "fd_atol": tol.FD_ATOL,
            "fd_step": tol.FD_STEP,
        }
    )
    loss_rounding: float = 0.0  # the estimated rounding error of one evaluation of the loss
    pooled: int | None = None  # how many entries of x each mean is taken over (None: no mean)

    @property
    def passed(self) -> bool:
        return all(node.passed for node in self.nodes)

    @property
    def failures(self) -> list[NodeCheck]:
        return [node for node in self.nodes if not node.passed]

    def _repr_html_(self) -> str:
        """Jupyter shows the report as ``microgradnorm check``'s table (:func:`microgradnorm.present.check_html`)."""
        from microgradnorm.present import check_html

        return check_html(self)

    def node(self, name: str) -> NodeCheck:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node named {name!r}; the report has {[n.name for n in self.nodes]}")


def random_problem(
    spec: NormSpec, shape: tuple[int, ...], seed: int | None = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """A random input x, gamma (not 1), beta (not 0) and upstream gradient dy, in float64.

    gamma is drawn around 1 but away from it, so that forgetting gamma shows;
    x has a nonzero mean and a spread that is not 1, so that forgetting the
    centering or the scaling shows too.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(0.5, 2.0, size=shape)
    p = spec.param_size(shape)
    gamma = rng.uniform(0.5, 1.5, size=p) * rng.choice([-1.0, 1.0], size=p)
    beta = rng.normal(0.0, 1.0, size=p) if spec.has_beta else None
    dy = rng.normal(0.0, 1.0, size=shape)
    return x, gamma, beta, dy


def check_norm(
    norm: str | NormSpec,
    x: Any,
    gamma: Any = None,
    beta: Any = None,
    eps: float = 1e-5,
    dy: Any = None,
    *,
    variance: str = "two_pass",
    fd_max_entries: int | None = FD_MAX_ENTRIES,
    seed: int | None = None,
) -> CheckReport:
    """Check every named node of ``norm`` built on ``x`` three ways; see the module docstring.

    ``dy`` defaults to a random upstream gradient drawn with ``seed``.
    ``fd_max_entries`` limits the finite differences to that many evenly spread
    entries per node (each recomputes the graph four times); None checks every entry
    (warning with :class:`SlowCheckWarning` when that will be slow). ``x`` may have
    at most :data:`MAX_ENTRIES` entries.
    """
    spec = norm if isinstance(norm, NormSpec) else get_norm(norm)
    _check_size(x)
    _check_cap(fd_max_entries)
    graph = spec.build_graph(x, gamma, beta, eps, variance)
    dy = _upstream(dy, graph.shape, seed)
    loss = graph.loss(dy.tolist())
    loss.backward()
    xs = np.array([v.data for v in graph["x"]], dtype=np.float64).reshape(graph.shape)
    closed = spec.node_grads(xs, _leaf_array(graph, "gamma"), _leaf_array(graph, "beta"), graph.eps, dy, variance)
    names = [name for name in spec.node_names if name in graph]
    _warn_if_slow(sum(len(_sample(len(graph[n]), fd_max_entries)) for n in names), len(graph["x"]))
    rounding = _Rounding(loss_rounding(loss), absolute_gradients(loss), _centering_amplification(graph))
    loss_with = _loss_with(graph, dy.ravel().tolist())
    nodes = [
        _check_node(graph, name, closed[name], loss_with, _sample(len(graph[name]), fd_max_entries), rounding)
        for name in names
    ]
    pooled = len(graph["x"]) // len(graph["mean"]) if "mean" in graph else None  # values per mean
    report = CheckReport(spec.name, spec.title, graph.shape, graph.eps, variance, seed, loss.data, nodes)
    report.loss_rounding, report.pooled = rounding.loss, pooled
    return report


def _check_cap(fd_max_entries: int | None) -> None:
    if fd_max_entries is not None and (isinstance(fd_max_entries, bool) or fd_max_entries < 1):
        raise ValueError(
            _("fd_max_entries: expected a whole number >= 1 or None (every entry), got {given!r}").format(
                given=fd_max_entries
            )
        )


def _loss_with(graph: Any, dy: list[float]) -> Callable[[str, int, float], float]:
    """``loss_with(name, k, h)``: sum(y * dy) with node ``name``[k] moved by h.

    Only the nodes computed from the moved one change; each is recomputed by its op's
    forward from its children's values, in the order the forward pass made them.
    """
    ys = graph["y"]
    order = topological_order(ys)
    position = {node: i for i, node in enumerate(order)}

    def loss_with(name: str, k: int, h: float) -> float:
        start = graph[name][k]
        moved = {start: start.data + h}
        for node in order[position[start] + 1 :]:
            if any(child in moved for child in node.children):
                moved[node] = node.operation.forward(*[moved.get(c, c.data) for c in node.children])
        return math.fsum(moved.get(y, y.data) * g for y, g in zip(ys, dy))

    return loss_with


@dataclass(frozen=True)
class _Rounding:
    """What rounding leaves in the three gradients, for the tolerances (see the functions below)."""

    loss: float  # the rounding error of one evaluation of the loss
    gradient_terms: dict[Value, float]  # per node: the sum of the magnitudes of its gradient's terms
    amplification: float  # how much centering magnifies the rounding of each term

    def closed_form_atol(self, values: list[Value]) -> np.ndarray:
        """Per entry: CLOSED_FORM_ATOL, or more where the gradient is what is left of cancelled terms."""
        terms = np.array([self.gradient_terms.get(v, 0.0) for v in values])
        return tol.CLOSED_FORM_ATOL + tol.cancellation_atol(1.0) * terms * self.amplification


def loss_rounding(loss: Value) -> float:
    """An estimate of the rounding error in ``loss``, from the graph that computed it (after backward).

    Each op rounds its result once, by at most EPS64 times its size: the result for a
    product or a function, the sum of the magnitudes of the terms for an addition, a
    subtraction, a sum or a dot product (where large terms cancel, their size is what
    is lost). That error reaches the loss multiplied by the node's gradient. Summed over
    every node, this is the first-order (running) error bound of numerical analysis
    (Higham, *Accuracy and Stability of Numerical Algorithms*), using the gradients
    ``backward()`` has just left on the nodes.
    """
    total = 0.0
    for node in topological_order(loss):
        children = node.children
        if not children or node.grad == 0.0:
            continue
        if node.op in ("+", "-", "sum"):
            size = math.fsum(abs(c.data) for c in children)
        elif node.op == "dot":
            n = len(children) // 2
            size = math.fsum(abs(a.data * b.data) for a, b in zip(children[:n], children[n:]))
        else:
            size = abs(node.data)
        total += abs(node.grad) * size
    return tol.cancellation_atol(total, units=1.0)


def absolute_gradients(loss: Value) -> dict[Value, float]:
    """Per node, the sum of the magnitudes of the terms its gradient adds up (a backward pass
    in which every local derivative and every gradient is replaced by its magnitude).

    A gradient that comes out about 0 (LayerNorm's dx when y cannot depend on x) is what
    is left of such terms cancelling, and keeps a few rounding units of their size.
    """
    order = topological_order(loss)
    size = dict.fromkeys(order, 0.0)
    size[loss] = 1.0
    for node in reversed(order):
        for child, d in zip(node.children, local_grads(node)):
            size[child] += abs(d) * size[node]
    return size


def _centering_amplification(graph: Any) -> float:
    """1 + max|x| * max(rstd): centering (x - mean) rounds by EPS64 * |x|, and rstd magnifies
    that in xhat and in every gradient computed from it (RMSNorm: rrms, and no centering,
    so this is only an upper bound there)."""
    inverse = graph["rstd"] if "rstd" in graph else graph["rrms"]
    return 1.0 + max(abs(v.data) for v in graph["x"]) * max(v.data for v in inverse)


def _check_node(
    graph: Any, name: str, closed: Any, loss_with: Any, entries: list[int], rounding: _Rounding
) -> NodeCheck:
    """The three gradients of one named node, with finite differences at ``entries``."""
    values = graph[name]
    auto = np.array([v.grad for v in values], dtype=np.float64)
    cf = np.asarray(closed, dtype=np.float64).ravel()
    fd = np.full(len(values), np.nan)
    fd_atol = np.full(len(values), np.nan)
    for k in entries:
        h = _step(name, values[k].data, graph.eps)
        fd[k] = richardson_difference(functools.partial(loss_with, name, k), h)
        fd_atol[k] = tol.FD_ATOL + tol.FD_ROUNDING_FACTOR * rounding.loss / h
    taken = ~np.isnan(fd)
    cf_abs, cf_rel = tol.normwise_error(auto, cf)
    fd_abs, fd_rel = tol.normwise_error(auto[taken], fd[taken])
    cf_atol = rounding.closed_form_atol(values)
    cf_entry = np.abs(auto - cf) <= cf_atol + tol.CLOSED_FORM_RTOL * np.max(np.abs(cf))
    fd_scale = float(np.max(np.abs(fd[taken]))) if taken.any() else 0.0
    fd_entry = ~taken | (np.abs(auto - fd) <= fd_atol + tol.FD_RTOL * fd_scale)  # NaN compares False
    return NodeCheck(
        name=name,
        stage=values[0].stage or "",
        labels=[graph.index_label(name, k) for k in range(len(values))],
        autograd=auto,
        closed_form=cf,
        finite_diff=fd,
        closed_form_abs=cf_abs,
        closed_form_rel=cf_rel,
        fd_abs=fd_abs,
        fd_rel=fd_rel,
        closed_form_ok=bool(cf_entry.all()),
        fd_ok=bool(fd_entry.all()),
        fd_count=int(taken.sum()),
        closed_form_atol=float(np.max(cf_atol)),
        fd_atol=float(np.max(fd_atol[taken])) if taken.any() else tol.FD_ATOL,
        entry_ok=cf_entry & fd_entry,
    )


def _step(name: str, value: float, eps: float) -> float:
    """The finite-difference step for one entry of node ``name``.

    FD_STEP * max(1, |value|) for most nodes; for a spread (var, std, rstd, ...) a
    fraction of the value itself, or of eps if larger: a variance of 2e-8 moved by
    1e-6 would turn negative, and the loss curves on the scale of the variance.
    """
    if name in SCALE_NODES:
        return tol.FD_STEP * max(abs(value), eps)
    return step_for(value)


def _upstream(dy: Any, shape: tuple[int, ...], seed: int | None) -> np.ndarray:
    """``dy`` as a float64 array of x's shape, or a random one drawn with ``seed``."""
    if dy is None:
        return np.random.default_rng(seed).normal(0.0, 1.0, size=shape)
    dy = np.asarray(dy, dtype=np.float64)
    if dy.shape != shape:
        raise ValueError(
            _("dy: expected shape {expected} (the shape of x), got {given}").format(
                expected=list(shape), given=list(dy.shape)
            )
        )
    return dy


def _check_size(x: Any) -> None:
    """A ValueError before anything is built when x has more than MAX_ENTRIES entries."""
    try:
        shape = np.shape(x)
    except ValueError:  # ragged: building the graph says where
        return
    size = math.prod(shape)
    if size > MAX_ENTRIES:
        raise ValueError(
            _(
                "x: the scalar graph is for small inputs (each finite difference recomputes it), so expected at most "
                "{limit} entries, got {size} (shape {shape}); check a smaller slice, or compare the "
                "vectorized path with its closed forms"
            ).format(limit=MAX_ENTRIES, size=size, shape=list(shape))
        )


def _warn_if_slow(fd_count: int, size: int) -> None:
    if fd_count * size > SLOW_FD_WORK:
        warnings.warn(
            f"check_norm: {fd_count} finite differences on a graph of {size} inputs recompute it "
            f"{4 * fd_count} times, which takes minutes; fd_max_entries={FD_MAX_ENTRIES} checks "
            f"{FD_MAX_ENTRIES} entries per node",
            SlowCheckWarning,
            stacklevel=3,
        )


def _leaf_array(graph: Any, name: str) -> np.ndarray | None:
    if name not in graph:
        return None
    return np.array([v.data for v in graph[name]], dtype=np.float64)


def _sample(size: int, limit: int | None) -> list[int]:
    if limit is None or size <= limit:
        return list(range(size))
    return sorted({round(i * (size - 1) / (limit - 1)) for i in range(limit)}) if limit > 1 else [0]
