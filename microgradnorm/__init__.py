"""microgradnorm: watch the gradients flow through LayerNorm, BatchNorm and RMSNorm.

The scalar engine and the scalar norms are imported eagerly (they are pure
Python); everything that needs NumPy is imported on first use.
"""

from __future__ import annotations

from typing import Any

from microgradnorm.engine import DomainError, Value, local_grads, topological_order
from microgradnorm.norms import Normalized, NormGraph, batch_norm, layer_norm, rms_norm

__version__ = "0.1.0"

__all__ = [
    "DomainError",
    "NormGraph",
    "Normalized",
    "Value",
    "batch_norm",
    "check_norm",
    "layer_norm",
    "local_grads",
    "rms_norm",
    "topological_order",
]

# name -> module that defines it, imported when the name is first used
_LAZY = {
    "check_norm": "microgradnorm.check",
    "CheckReport": "microgradnorm.check",
    "NORMS": "microgradnorm.registry",
    "get_norm": "microgradnorm.registry",
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
