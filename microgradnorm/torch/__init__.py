"""PyTorch layers that run on microgradnorm's vectorized path, and your own backward in a real model.

``pip install "microgradnorm[torch]"`` (on a machine without a GPU, the CPU
build: ``pip install torch --index-url https://download.pytorch.org/whl/cpu``).
This is the only part of the package that imports torch::

    import microgradnorm.torch as mt
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), mt.LayerNorm(16), torch.nn.ReLU())

    f = mt.layer_norm_function(layernorm_forward, layernorm_backward)   # your exercise answer
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), mt.LayerNorm(16, function=f))

:class:`LayerNorm`, :class:`RMSNorm`, :class:`BatchNorm1d`, :class:`BatchNorm2d` and
:class:`GroupNorm` are torch.nn's classes with their forward replaced (see :mod:`.layers`); the
kernels run as two custom ops under ``torch.compile`` and as autograd functions with
forward-mode and vmap rules elsewhere, so ``torch.func`` works too (see :mod:`.ops`);
:func:`layer_norm_function` wraps a learner's pair of NumPy functions, checked by
``torch.autograd.gradcheck`` at its first call (see :mod:`.learner`); :mod:`.bench` times
the bridge beside torch.nn for ``microgradnorm bench``.
"""

from __future__ import annotations

from microgradnorm.i18n import _

try:
    import torch
except ImportError:  # pragma: no cover - exercised in a subprocess without torch
    raise ImportError(
        _("microgradnorm.torch needs PyTorch, which is not installed: pip install 'microgradnorm[torch]'")
    ) from None

_MINIMUM = (2, 4)  # torch.library.custom_op, register_fake and torch.nn.RMSNorm arrived in 2.4
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < _MINIMUM:  # pragma: no cover
    raise ImportError(
        _("microgradnorm.torch needs PyTorch >= 2.4, found {version}: pip install -U torch").format(
            version=torch.__version__
        )
    )

from microgradnorm.torch.layers import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm  # noqa: E402
from microgradnorm.torch.learner import GradientCheckError, LayerNormFunction, layer_norm_function  # noqa: E402
from microgradnorm.torch.ops import SECOND_DERIVATIVE  # noqa: E402

__all__ = [
    "SECOND_DERIVATIVE",
    "BatchNorm1d",
    "BatchNorm2d",
    "GradientCheckError",
    "GroupNorm",
    "LayerNorm",
    "LayerNormFunction",
    "RMSNorm",
    "layer_norm_function",
]
