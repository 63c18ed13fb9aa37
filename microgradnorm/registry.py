"""The one list of norms, and the only module that knows a norm by its name.

Each :class:`NormSpec` holds every fact about one norm that the rest of the
package needs: which values share a statistic (its :class:`~microgradnorm.inputs.Layout`),
its stages and named nodes, its titles, its scalar builder, its closed forms,
its textbook NumPy forward and backward, and the names of its public functions
and of its PyTorch layer (:func:`microgradnorm.vectorized.public_pass` finds the
tuned NumPy pass by that name). Adding a norm means adding one entry here, its
builder in :mod:`microgradnorm.norms` and its closed forms.

Every norm takes the same arguments, ``(x, gamma, beta, eps)`` with ``beta``
None for RMSNorm, and every backward pass returns ``(dx, dgamma, dbeta)``.
GroupNorm also takes ``num_groups``: :meth:`NormSpec.with_groups` gives the
entry with it filled in.

The NumPy parts (closed forms and the textbook file, both in the core) are
imported when first asked for (:meth:`NormSpec.numpy`), by the ordinary imports
in the ``_*_numpy`` functions below, so that ``import microgradnorm`` and
``microgradnorm --help`` load no NumPy.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from microgradnorm import norms
from microgradnorm.errors import N_, InputError
from microgradnorm.inputs import CHANNEL_GROUPS, CHANNELS, ROWS, Layout

__all__ = ["NORMS", "NormSpec", "NumpyParts", "get_norm", "spec_for"]


@dataclass(frozen=True)
class NumpyParts:
    """A norm's NumPy side in the core: closed forms for every node, and the textbook pass."""

    node_grads: Callable[..., dict[str, Any]]  # (x, gamma, beta, eps, dy, axes, param_axis, variance, view)
    textbook_forward: Callable[..., Any]  # (x, gamma, beta, eps) -> (y, cache)
    textbook_backward: Callable[..., Any]  # (dy, cache) -> (dx, dgamma, dbeta)


@dataclass(frozen=True)
class NormSpec:
    """Everything the rest of the package needs to know about one norm."""

    name: str
    title: str
    aliases: tuple[str, ...]
    function: str  # the public name: microgradnorm.layer_norm, vectorized.layer_norm_forward
    summary: str
    layout: Layout
    builder: Callable[..., norms.Normalized]
    stages: tuple[str, ...]
    node_names: tuple[str, ...]
    has_beta: bool
    centered: bool  # subtracts a mean (LayerNorm, BatchNorm, GroupNorm) or not (RMSNorm)
    batch_statistics: bool  # its statistics mix the examples of a batch (so eval needs running averages)
    torch_layer: str  # the class in microgradnorm.torch and torch.nn
    torch_call: Callable[..., Any]  # (torch.nn.functional, x, gamma, beta, eps, num_groups) -> y
    load_numpy: Callable[[], NumpyParts]
    array_ranks: tuple[int, ...] | None  # the ranks the vectorized path takes (None: any)
    array_form: str  # how its errors describe them
    num_groups: int | None = None  # GroupNorm's G; None: not a grouped norm, or not chosen yet
    grouped: bool = False

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks of x the scalar builder accepts."""
        return tuple(self.layout.ranks)

    def with_groups(self, num_groups: int | None) -> NormSpec:
        """This entry with GroupNorm's ``num_groups`` filled in (other norms: the entry itself)."""
        return dataclasses.replace(self, num_groups=num_groups) if self.grouped else self

    def options(self) -> dict[str, Any]:
        """The norm's own keyword arguments beyond (x, gamma, beta, eps): GroupNorm's num_groups."""
        return {"num_groups": self.num_groups or 1} if self.grouped else {}

    def view(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The C-order view of x that the statistics are taken on (x's own shape except for GroupNorm)."""
        return self.layout.view(tuple(shape), self.num_groups)[0]

    def axes(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The axes of :meth:`view` that one statistic is taken over."""
        return self.layout.view(tuple(shape), self.num_groups)[1]

    def param_axis(self, shape: tuple[int, ...]) -> int:
        """The axis of x that gamma and beta run along."""
        return self.layout.param_axis(len(shape))

    def param_size(self, shape: tuple[int, ...]) -> int:
        return shape[self.param_axis(shape)]

    def default_shape(self, dim: int, batch: int | None) -> tuple[int, ...]:
        """The input shape the CLI uses for --dim and --batch: the smallest rank the builder takes."""
        rank = min(self.layout.ranks)
        if rank == 1:
            return (dim,) if batch is None else (batch, dim)
        return (batch or 4, dim, *([2] * (rank - 2)))

    def build_graph(
        self, x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5, variance: str = "two_pass"
    ) -> norms.NormGraph:
        """Build the scalar graph of this norm on x."""
        kw: dict[str, Any] = self.options()
        if self.centered:
            kw["variance"] = variance
        return self.builder(x, gamma=gamma, beta=beta if self.has_beta else None, eps=eps, **kw).graph

    def numpy(self) -> NumpyParts:
        """The NumPy parts (imports NumPy on first use)."""
        return self.load_numpy()

    def node_grads(
        self, x: Any, gamma: Any, beta: Any, eps: float, dy: Any, variance: str = "two_pass"
    ) -> dict[str, Any]:
        """The closed-form dL/d(node) of every named node for loss = sum(y * dy), in NumPy.

        ``x`` and ``dy`` are float64 arrays of the input's shape; gamma and beta
        are 1-D arrays or None. Per-group entries keep the reduced axes of
        :meth:`view` with size 1.
        """
        shape = x.shape
        f = self.numpy().node_grads
        return f(x, gamma, beta, eps, dy, self.axes(shape), self.param_axis(shape), variance, self.view(shape))

    def torch_functional(self, fn: Any, x: Any, gamma: Any, beta: Any, eps: float) -> Any:
        """The same norm by ``torch.nn.functional`` (passed in as ``fn``; the registry imports no torch)."""
        return self.torch_call(fn, x, gamma, beta if self.has_beta else None, eps, self.num_groups or 1)


# ---- the NumPy parts, imported on first use -----------------------------------------------


@functools.cache
def _centered_numpy(function: str) -> NumpyParts:
    """A centered norm's parts: the closed forms LayerNorm, BatchNorm and GroupNorm share, and its
    textbook pass, found in the textbook file by the norm's public name (``layer_norm_forward``, ...)."""
    from microgradnorm import formulas, textbook

    return NumpyParts(
        formulas.normalization_node_grads,
        getattr(textbook, f"{function}_forward"),
        getattr(textbook, f"{function}_backward"),
    )


@functools.cache
def _rms_norm_numpy() -> NumpyParts:
    from microgradnorm import formulas, textbook

    def node_grads(x, gamma, beta, eps, dy, axes, param_axis, variance, view):  # no beta, no variance form
        return formulas.rms_node_grads(x, gamma, eps, dy, axes, param_axis)

    return NumpyParts(
        node_grads,
        textbook.rms_norm_forward,
        textbook.rms_norm_backward,
    )


# ---- the same norms in torch.nn.functional (its module passed in, so no torch import here) -------


def _layer_norm_torch(fn: Any, x: Any, gamma: Any, beta: Any, eps: float, groups: int) -> Any:
    return fn.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def _batch_norm_torch(fn: Any, x: Any, gamma: Any, beta: Any, eps: float, groups: int) -> Any:
    return fn.batch_norm(x, None, None, gamma, beta, True, 0.1, eps)  # training-mode statistics


def _rms_norm_torch(fn: Any, x: Any, gamma: Any, beta: Any, eps: float, groups: int) -> Any:
    return fn.rms_norm(x, (x.shape[-1],), gamma, eps)


def _group_norm_torch(fn: Any, x: Any, gamma: Any, beta: Any, eps: float, groups: int) -> Any:
    if gamma is None and beta is not None:  # torch 2.13: a bias without a weight fails in backward
        gamma = x.new_ones(x.shape[1])  # ("tensor does not have a device"); a weight of ones is the same
    return fn.group_norm(x, groups, gamma, beta, eps)


NORMS: dict[str, NormSpec] = {
    spec.name: spec
    for spec in (
        NormSpec(
            name="layernorm",
            title="LayerNorm",
            aliases=("ln", "layer_norm"),
            function="layer_norm",
            summary="each row (one token's features) over its own D values",
            layout=ROWS,
            builder=norms.layer_norm,
            stages=norms.STAGES,
            node_names=norms.NODES,
            has_beta=True,
            centered=True,
            torch_layer="LayerNorm",
            torch_call=_layer_norm_torch,
            batch_statistics=False,
            load_numpy=functools.partial(_centered_numpy, "layer_norm"),
            array_ranks=None,
            array_form="an array [..., D] with D >= 1",
        ),
        NormSpec(
            name="batchnorm",
            title="BatchNorm",
            aliases=("bn", "batch_norm"),
            function="batch_norm",
            summary="each feature (or channel) over the batch (and H, W)",
            layout=CHANNELS,
            builder=norms.batch_norm,
            stages=norms.STAGES,
            node_names=norms.NODES,
            has_beta=True,
            centered=True,
            torch_layer="BatchNorm",
            torch_call=_batch_norm_torch,
            batch_statistics=True,
            load_numpy=functools.partial(_centered_numpy, "batch_norm"),
            array_ranks=(2, 4),
            array_form="a non-empty 2-D [N, D] or 4-D [N, C, H, W] array",
        ),
        NormSpec(
            name="rmsnorm",
            title="RMSNorm",
            aliases=("rms", "rms_norm"),
            function="rms_norm",
            summary="each row by its root mean square, no mean and no shift",
            layout=ROWS,
            builder=norms.rms_norm,
            stages=norms.RMS_STAGES,
            node_names=norms.RMS_NODES,
            has_beta=False,
            centered=False,
            torch_layer="RMSNorm",
            torch_call=_rms_norm_torch,
            batch_statistics=False,
            load_numpy=_rms_norm_numpy,
            array_ranks=None,
            array_form="an array [..., D] with D >= 1",
        ),
        NormSpec(
            name="groupnorm",
            title="GroupNorm",
            aliases=("gn", "group_norm"),
            function="group_norm",
            summary="each example's groups of channels, over the group's channels and positions",
            layout=CHANNEL_GROUPS,
            builder=norms.group_norm,
            stages=norms.STAGES,
            node_names=norms.NODES,
            has_beta=True,
            centered=True,
            torch_layer="GroupNorm",
            torch_call=_group_norm_torch,
            batch_statistics=False,
            load_numpy=functools.partial(_centered_numpy, "group_norm"),
            array_ranks=(2, 3, 4, 5),
            array_form="a non-empty array [N, C, *spatial] with at most 3 spatial axes",
            grouped=True,
        ),
    )
}


def get_norm(name: str, num_groups: int | None = None) -> NormSpec:
    """The entry for ``name`` or one of its aliases (GroupNorm's with ``num_groups``).

    An unknown name is an error that lists the choices.
    """
    key = name.strip().lower().replace("-", "_") if isinstance(name, str) else ""
    for spec in NORMS.values():
        if key == spec.name or key in spec.aliases:
            return spec.with_groups(num_groups)
    raise InputError(
        N_("{argument}: expected one of {expected}, got {given}"),
        argument="norm",
        expected=", ".join(NORMS),
        given=repr(name),
    )


def spec_for(graph: norms.NormGraph) -> NormSpec:
    """The entry that built ``graph``, with its options (GroupNorm's num_groups)."""
    return get_norm(graph.kind, graph.num_groups)
