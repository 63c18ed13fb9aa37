"""The one list of norms. The CLI, the check, the tests, the lessons and the exercises
all read it, so adding a norm means adding one entry here.

Entries name their NumPy parts as ``"module:function"`` strings that are imported
on first use, which keeps ``import microgradnorm`` and ``microgradnorm --help``
free of NumPy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from microgradnorm import norms
from microgradnorm.i18n import _

__all__ = ["NORMS", "NormSpec", "get_norm", "norm_names"]


@dataclass(frozen=True)
class NormSpec:
    """Everything the rest of the package needs to know about one norm."""

    name: str
    title: str
    aliases: tuple[str, ...]
    build: Callable[..., norms.Normalized]
    ranks: tuple[int, ...]
    has_beta: bool
    summary: str
    # NumPy parts, as "module:function", imported when first used.
    closed_form_ref: str
    forward_ref: str
    backward_ref: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def stages(self) -> tuple[str, ...]:
        return norms.STAGES[self.name]

    @property
    def node_names(self) -> tuple[str, ...]:
        return norms.NODE_NAMES[self.name]

    def axes(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The axes of x that one statistic is taken over."""
        if self.name == "batchnorm":
            return (0,) if len(shape) == 2 else (0, 2, 3)
        return (len(shape) - 1,)

    def param_axis(self, shape: tuple[int, ...]) -> int:
        """The axis of x that gamma and beta run along."""
        return 1 if self.name == "batchnorm" and len(shape) == 4 else len(shape) - 1

    def param_size(self, shape: tuple[int, ...]) -> int:
        return shape[self.param_axis(shape)]

    def default_shape(self, dim: int, batch: int | None) -> tuple[int, ...]:
        """The input shape the CLI uses for --dim and --batch."""
        if self.name == "batchnorm":
            return (batch or 4, dim)
        return (dim,) if batch is None else (batch, dim)

    def build_graph(
        self, x: Any, gamma: Any, beta: Any, eps: float, variance: str = "two_pass", nudge: Any = None
    ) -> norms.NormGraph:
        """Build the scalar graph (``nudge`` perturbs one named node, for finite differences)."""
        return norms.build_graph(self.name, x, gamma, beta if self.has_beta else None, eps, variance, nudge)

    def node_grads(
        self, x: Any, gamma: Any, beta: Any, eps: float, dy: Any, variance: str = "two_pass"
    ) -> dict[str, Any]:
        """The closed-form dL/d(node) of every named node for loss = sum(y * dy), in NumPy.

        ``x`` and ``dy`` are float64 arrays of the input's shape; gamma and beta are
        1-D arrays or None.
        """
        f = _load(self.closed_form_ref)
        return f(x, gamma, beta, eps, dy, self.axes(x.shape), self.param_axis(x.shape), variance)

    @property
    def forward(self) -> Callable[..., Any]:
        return _load(self.forward_ref)

    @property
    def backward(self) -> Callable[..., Any]:
        return _load(self.backward_ref)


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


NORMS: dict[str, NormSpec] = {
    spec.name: spec
    for spec in (
        NormSpec(
            name="layernorm",
            title="LayerNorm",
            aliases=("ln", "layer_norm"),
            build=norms.layer_norm,
            ranks=(1, 2),
            has_beta=True,
            summary="each row (one token's features) over its own D values",
            closed_form_ref="microgradnorm.formulas:normalization_node_grads",
            forward_ref="microgradnorm.vectorized:layer_norm_forward",
            backward_ref="microgradnorm.vectorized:layer_norm_backward",
        ),
        NormSpec(
            name="batchnorm",
            title="BatchNorm",
            aliases=("bn", "batch_norm"),
            build=norms.batch_norm,
            ranks=(2, 4),
            has_beta=True,
            summary="each feature (or channel) over the batch (and H, W)",
            closed_form_ref="microgradnorm.formulas:normalization_node_grads",
            forward_ref="microgradnorm.vectorized:batch_norm_forward",
            backward_ref="microgradnorm.vectorized:batch_norm_backward",
        ),
        NormSpec(
            name="rmsnorm",
            title="RMSNorm",
            aliases=("rms", "rms_norm"),
            build=norms.rms_norm,
            ranks=(1, 2),
            has_beta=False,
            summary="each row by its root mean square, no mean and no shift",
            closed_form_ref="microgradnorm.formulas:rms_node_grads",
            forward_ref="microgradnorm.vectorized:rms_norm_forward",
            backward_ref="microgradnorm.vectorized:rms_norm_backward",
        ),
    )
}


def norm_names() -> list[str]:
    return list(NORMS)


def get_norm(name: str) -> NormSpec:
    """The entry for ``name`` or one of its aliases; a ValueError listing the choices otherwise."""
    key = name.strip().lower().replace("-", "_")
    for spec in NORMS.values():
        if key == spec.name or key in spec.aliases:
            return spec
    raise ValueError(_("norm: expected one of {names}, got {name!r}").format(names=", ".join(NORMS), name=name))
