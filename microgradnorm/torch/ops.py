"""Two PyTorch custom ops that run this package's vectorized norms: ``norm_forward`` and ``norm_backward``.

Why ``torch.library.custom_op`` and not a bare ``torch.autograd.Function``: an
op registered with a fake (shape-only) implementation and a backward formula is
opaque to ``torch.compile``, so a compiled model keeps it as one node and runs
the NumPy kernels eagerly inside the compiled graph (``fullgraph=True`` works);
``torch.library.opcheck`` can test the registration; and the backward is itself
an op, so a second derivative reaches a clear error instead of a silent zero.
The price is that an op can only pass tensors between the passes, not a Python
cache: the forward pass runs in recompute mode and returns its statistics (mean,
rstd), and the backward pass rebuilds the cache from x and those statistics
(:func:`microgradnorm.vectorized.saved_cache`). That is also what PyTorch's own
LayerNorm keeps.

One pair of ops serves the three norms (``norm`` is "layernorm", "rmsnorm" or
"batchnorm"): x is [..., D] for the first two and [N, C] or [N, C, H, W] for
BatchNorm; the statistics come back in float64 with one value per group
(shape ``x.shape[:-1]``, or [C]); RMSNorm's "mean" is zeros.
"""

from __future__ import annotations

import numpy as np
import torch

from microgradnorm import vectorized as V
from microgradnorm.registry import NORMS, get_norm

__all__ = ["NORMS", "norm_backward", "norm_forward", "to_numpy", "to_torch"]


def to_numpy(t: torch.Tensor | None) -> np.ndarray | None:
    """A CPU tensor as a NumPy array sharing its memory (bfloat16, which NumPy lacks, as a float32 copy)."""
    if t is None:
        return None
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def to_torch(a: np.ndarray | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A NumPy result as a tensor of ``dtype`` (no copy when the dtypes already agree)."""
    return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def _stat_shape(norm: str, x: torch.Tensor) -> tuple[int, ...]:
    """One statistic per group: the axes of the registry's view that are not reduced."""
    spec = get_norm(norm)
    axes = spec.axes(tuple(x.shape))
    return tuple(s for a, s in enumerate(spec.view(tuple(x.shape))) if a not in axes)


@torch.library.custom_op("microgradnorm::norm_forward", mutates_args=())
def norm_forward(
    norm: str, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, var, rstd) of ``norm`` on x, computed by microgradnorm.vectorized in recompute mode."""
    forward, _ = V.public_pass(get_norm(norm))
    y, cache = forward(to_numpy(x), to_numpy(weight), to_numpy(bias), eps, recompute=True)
    shape = _stat_shape(norm, x)
    mean = np.zeros(shape) if cache.mean is None else cache.mean.reshape(shape)
    stats = [torch.from_numpy(np.array(s, dtype=np.float64).reshape(shape)) for s in (mean, cache.var, cache.rstd)]
    return (to_torch(y, x.dtype), *stats)


@norm_forward.register_fake
def _(norm, x, weight, bias, eps):
    shape = _stat_shape(norm, x)
    return (torch.empty_like(x), *(x.new_empty(shape, dtype=torch.float64) for _ in range(3)))


def weight_or(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The tensor whose dtype a parameter gradient takes: the weight's, or x's without one."""
    return x if weight is None else weight


@torch.library.custom_op("microgradnorm::norm_backward", mutates_args=())
def norm_backward(
    norm: str,
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    has_bias: bool,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias); dweight and dbias are empty tensors where there is no weight or bias."""
    xn = to_numpy(x)
    spec = get_norm(norm)
    beta = np.zeros(spec.param_size(xn.shape), xn.dtype) if has_bias else None
    saved = V.saved_cache(norm, xn, to_numpy(weight), beta, mean.numpy(), rstd.numpy(), eps)
    dx, dweight, dbias = V.public_pass(spec)[1](to_numpy(dy), saved)
    dweight = x.new_empty(0) if weight is None else to_torch(dweight, weight.dtype)  # empty: no weight
    dbias = x.new_empty(0) if dbias is None else to_torch(dbias, weight_or(x, weight).dtype)
    return to_torch(dx, x.dtype), dweight, dbias


@norm_backward.register_fake
def _(norm, dy, x, weight, has_bias, mean, rstd, eps):
    spec = get_norm(norm)
    size = spec.param_size(tuple(x.shape))
    dweight = x.new_empty(0) if weight is None else weight.new_empty(weight.shape)
    dbias = weight_or(x, weight).new_empty((size,)) if has_bias and spec.has_beta else x.new_empty(0)
    return torch.empty_like(x), dweight, dbias


def _setup_forward(ctx, inputs, output) -> None:
    norm, x, weight, bias, eps = inputs
    _, mean, _, rstd = output
    ctx.norm, ctx.eps, ctx.has_bias = norm, eps, bias is not None
    ctx.save_for_backward(x, weight, mean, rstd)


def _backward(ctx, dy, _dmean, _dvar, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dweight, dbias = norm_backward(ctx.norm, dy.contiguous(), x, weight, ctx.has_bias, mean, rstd, ctx.eps)
    return None, dx, None if weight is None else dweight, dbias if ctx.has_bias else None, None


torch.library.register_autograd("microgradnorm::norm_forward", _backward, setup_context=_setup_forward)

SECOND_DERIVATIVE = (
    "microgradnorm.torch: second derivatives (double backward) of the norms are not implemented; "
    "use torch.nn's layer for gradient penalties or Hessian-vector products"
)


def _no_double_backward(ctx, *grads):
    raise RuntimeError(SECOND_DERIVATIVE)


def _setup_nothing(ctx, inputs, output) -> None:
    return None


torch.library.register_autograd("microgradnorm::norm_backward", _no_double_backward, setup_context=_setup_nothing)
