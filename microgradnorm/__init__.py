"""microgradnorm: watch the gradients flow through LayerNorm, BatchNorm, GroupNorm and RMSNorm.

The scalar engine and the scalar norms are imported eagerly (they are pure
Python); everything that needs NumPy is imported on first use.
"""

from __future__ import annotations

from typing import Any

from microgradnorm.engine import DomainError, Value, local_grads, tags, topological_order
from microgradnorm.norms import Normalized, NormGraph, batch_norm, group_norm, layer_norm, rms_norm

__version__ = "0.1.0"

__all__ = [
    "DomainError",
    "NormGraph",
    "Normalized",
    "Value",
    "batch_norm",
    "check_norm",
    "group_norm",
    "layer_norm",
    "local_grads",
    "rms_norm",
    "tags",
    "to_html",
    "topological_order",
]

# name -> module that defines it, imported when the name is first used
_LAZY = {
    "check_norm": "microgradnorm.check",
    "CheckReport": "microgradnorm.check",
    "NORMS": "microgradnorm.registry",
    "get_norm": "microgradnorm.registry",
    "to_dot": "microgradnorm.viz",
    "render": "microgradnorm.viz",
    "to_html": "microgradnorm.page",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'microgradnorm' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _repr_mimebundle_(self: Any, include: Any = None, exclude: Any = None) -> dict[str, str]:
    """Jupyter shows a Value or a built norm as its graph (SVG), or as text without Graphviz.

    Attached here rather than in engine.py, which imports nothing from the package;
    the drawing code is imported only when a notebook asks for it.
    """
    from microgradnorm.viz import mimebundle

    return mimebundle(self, include, exclude)


def _repr_html_(self: Any) -> str | None:
    """Jupyter shows a graph as the page that steps through it (see :func:`microgradnorm.page.repr_html`)."""
    from microgradnorm.page import repr_html

    return repr_html(self)


Value._repr_mimebundle_ = _repr_mimebundle_  # type: ignore[attr-defined]
NormGraph._repr_mimebundle_ = _repr_mimebundle_  # type: ignore[attr-defined]
Normalized._repr_mimebundle_ = _repr_mimebundle_  # type: ignore[attr-defined]
Value._repr_html_ = _repr_html_  # type: ignore[attr-defined]
NormGraph._repr_html_ = _repr_html_  # type: ignore[attr-defined]
Normalized._repr_html_ = _repr_html_  # type: ignore[attr-defined]
