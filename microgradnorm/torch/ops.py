"""The norms as PyTorch operations: NumPy kernels, custom ops for torch.compile, an autograd.Function for torch.func.

Three layers, each for one reason:

* **Kernels** (:func:`forward_kernel`, :func:`backward_kernel`): plain Python that
  hands the tensors' memory to :mod:`microgradnorm.vectorized` and wraps the
  results as tensors, without copies where the dtypes agree. The forward pass
  runs in recompute mode and returns its statistics (mean, var, rstd); the
  backward pass rebuilds the cache from x and those (:func:`~microgradnorm.vectorized.saved_cache`),
  which is also what PyTorch's own LayerNorm keeps.
* **Custom ops** ``microgradnorm::norm_forward`` and ``norm_backward``
  (``torch.library.custom_op``, with a fake implementation and a registered
  backward): opaque to ``torch.compile``, which keeps each as one node and runs
  the NumPy kernel eagerly inside the compiled graph (``fullgraph=True``
  works), and testable with ``torch.library.opcheck``.
* **Autograd functions** (:class:`NormFunction`, :class:`NormBackward`) in the
  ``setup_context`` form, with a ``jvp`` rule and a ``vmap`` rule: what
  ``torch.func`` (grad, vjp, jacrev, jacfwd, jvp, vmap) and forward-mode AD need,
  and what a custom op's generated autograd does not give (torch 2.13 runs it
  as an autograd.Function without ``setup_context`` or ``jvp``, so
  ``torch.func.jvp`` would see a zero tangent). TorchDynamo refuses a custom
  ``jvp`` (a graph break), so :func:`norm` takes the custom op while compiling
  and the autograd function otherwise; both run the same kernels.

Forward mode is the course's maths. For one row, LayerNorm's Jacobian is
dxhat/dx = rstd * (I - P) with P = (1 1^T + xhat xhat^T) / D (lesson 7's
projection; exact for any eps). It is symmetric, so the Jacobian applied to a
tangent (forward mode) is the same formula as the gradient (reverse mode):
:func:`microgradnorm.formulas.dx_simplified`, called here on tensors. A norm
without a mean (RMSNorm) drops the ``1 1^T`` term (:func:`~microgradnorm.formulas.rms_dx`);
BatchNorm and GroupNorm are the same formula over their own groups.

One pair of ops serves every norm of the registry (``norm`` is its name:
"layernorm", "rmsnorm", "batchnorm", "groupnorm"; ``num_groups`` is GroupNorm's
G and 0 for the others): x is [..., D] for the row norms, [N, C] or
[N, C, H, W] for BatchNorm, [N, C, *spatial] for GroupNorm; what is reduced and
where gamma runs are the registry's facts (``view``, ``axes``, ``param_axis``),
so nothing here knows a norm by name. The statistics come back in float64 with
one value per group (the axes of the view that are not reduced); RMSNorm's
"mean" is zeros.
"""

from __future__ import annotations

import numpy as np
import torch

from microgradnorm import formulas as F
from microgradnorm import vectorized as V
from microgradnorm.registry import NORMS, NormSpec, get_norm
from microgradnorm.vectorized.cache import stat_shape

__all__ = [
    "NORMS",
    "SECOND_DERIVATIVE",
    "NormBackward",
    "NormFunction",
    "backward_kernel",
    "forward_kernel",
    "norm",
    "norm_backward",
    "norm_forward",
    "to_numpy",
    "to_torch",
]

SECOND_DERIVATIVE = (
    "microgradnorm.torch: second derivatives (double backward) of the norms are not implemented; "
    "use torch.nn's layer for gradient penalties or Hessian-vector products"
)


def to_numpy(t: torch.Tensor | None) -> np.ndarray | None:
    """A CPU tensor as a NumPy array sharing its memory (bfloat16, which NumPy lacks, as a float32 copy)."""
    if t is None:
        return None
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def to_torch(a: np.ndarray | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A NumPy result as a tensor of ``dtype`` (no copy when the dtypes already agree)."""
    return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def _spec(norm: str, num_groups: int) -> NormSpec:
    """The registry's entry; num_groups 0 means the registry's default (one group for GroupNorm)."""
    spec = get_norm(norm, num_groups or None)
    return spec.with_groups(spec.options()["num_groups"]) if spec.grouped and not num_groups else spec


def _groups_shape(spec: NormSpec, shape: tuple[int, ...]) -> tuple[int, ...]:
    """One statistic per group: the axes of the registry's view that are not reduced."""
    axes = spec.axes(shape)
    return tuple(s for a, s in enumerate(spec.view(shape)) if a not in axes)


# ---- the kernels: NumPy on the tensors' memory ----------------------------------------------------------


def forward_kernel(
    norm: str, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float, num_groups: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, var, rstd) of ``norm`` on x, computed by microgradnorm.vectorized in recompute mode."""
    spec = _spec(norm, num_groups)
    forward, _ = V.public_pass(spec)
    y, cache = forward(to_numpy(x), to_numpy(weight), to_numpy(bias), eps, recompute=True)
    shape = _groups_shape(spec, tuple(x.shape))
    mean = np.zeros(shape) if cache.mean is None else cache.mean
    stats = [torch.from_numpy(np.asarray(s, dtype=np.float64).reshape(shape)) for s in (mean, cache.var, cache.rstd)]
    return (to_torch(y, x.dtype), *stats)


def _weight_or(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """The tensor whose dtype a parameter gradient takes: the weight's, or x's without one."""
    return x if weight is None else weight


def backward_kernel(
    norm: str,
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    has_bias: bool,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    eps: float,
    num_groups: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias); dweight and dbias are empty tensors where there is no weight or bias."""
    spec = _spec(norm, num_groups)
    xn, wn = to_numpy(x), to_numpy(weight)
    beta = np.zeros(spec.param_size(xn.shape), xn.dtype if wn is None else wn.dtype) if has_bias else None
    saved = V.saved_cache(norm, xn, wn, beta, to_numpy(mean), to_numpy(rstd), eps, num_groups=spec.num_groups)
    dx, dweight, dbias = V.public_pass(spec)[1](to_numpy(dy), saved)
    dweight = x.new_empty(0) if weight is None else to_torch(dweight, weight.dtype)  # empty: no weight
    dbias = x.new_empty(0) if dbias is None else to_torch(dbias, _weight_or(x, weight).dtype)
    return to_torch(dx, x.dtype), dweight, dbias


# ---- the custom ops (what torch.compile sees) ------------------------------------------------------------


@torch.library.custom_op("microgradnorm::norm_forward", mutates_args=())
def norm_forward(
    norm: str,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    num_groups: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, var, rstd) of ``norm`` on x: :func:`forward_kernel` as a custom op."""
    return forward_kernel(norm, x, weight, bias, eps, num_groups)


@norm_forward.register_fake
def _(norm, x, weight, bias, eps, num_groups=0):
    shape = _groups_shape(_spec(norm, num_groups), tuple(x.shape))
    return (torch.empty_like(x), *(x.new_empty(shape, dtype=torch.float64) for _ in range(3)))


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
    num_groups: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dweight, dbias): :func:`backward_kernel` as a custom op."""
    return backward_kernel(norm, dy, x, weight, has_bias, mean, rstd, eps, num_groups)


@norm_backward.register_fake
def _(norm, dy, x, weight, has_bias, mean, rstd, eps, num_groups=0):
    spec = _spec(norm, num_groups)
    size = spec.param_size(tuple(x.shape))
    dweight = x.new_empty(0) if weight is None else weight.new_empty(weight.shape)
    dbias = _weight_or(x, weight).new_empty((size,)) if has_bias and spec.has_beta else x.new_empty(0)
    return torch.empty_like(x), dweight, dbias


def _setup_forward(ctx, inputs, output) -> None:
    norm, x, weight, bias, eps, num_groups = inputs
    _, mean, _, rstd = output
    ctx.norm, ctx.eps, ctx.has_bias, ctx.num_groups = norm, eps, bias is not None, num_groups
    ctx.save_for_backward(x, weight, mean, rstd)


def _op_backward(ctx, dy, _dmean, _dvar, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    grads = norm_backward(ctx.norm, dy.contiguous(), x, weight, ctx.has_bias, mean, rstd, ctx.eps, ctx.num_groups)
    dx, dweight, dbias = grads
    return None, dx, None if weight is None else dweight, dbias if ctx.has_bias else None, None, None


torch.library.register_autograd("microgradnorm::norm_forward", _op_backward, setup_context=_setup_forward)


# ---- the autograd functions (what eager code and torch.func see) -----------------------------------------


def _loop_vmap(function, info, in_dims, *args):
    """A vmap rule: ``function`` once per entry of the batch, the results stacked on axis 0.

    Simple, and right under any nesting of transforms (each entry is its own
    batch, as torch.func gives torch.nn's norms); the price is one kernel call
    per entry.
    """
    outputs = []
    for i in range(info.batch_size):
        picked = [a if d is None else a.select(d, i) for a, d in zip(args, in_dims)]
        outputs.append(function.apply(*picked))
    stacked = tuple(torch.stack(column) for column in zip(*outputs))
    return stacked, (0,) * len(stacked)


def _tangent_xhat(spec: NormSpec, x, mean, rstd, x_t):
    """(xhat, the tangent of xhat), both in x's shape and compute precision: the closed-form Jacobian applied to x_t."""
    cdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    shape = tuple(x.shape)
    view, kept, axes = spec.view(shape), stat_shape(spec, shape), spec.axes(shape)  # kept: reduced axes as 1
    rstd = rstd.to(cdt).reshape(kept)
    xv = x.to(cdt).reshape(view)
    xhat = (xv - mean.to(cdt).reshape(kept)) * rstd if spec.centered else xv * rstd
    if x_t is None:
        return xhat.reshape(shape), None
    t = x_t.to(cdt).reshape(view)
    # rstd (I - P) t, the projection of lesson 7; without a mean, rrms (I - xhat xhat^T / D) t
    xhat_t = F.dx_simplified(t, xhat, rstd, axes) if spec.centered else F.rms_dx(t, xhat, rstd, axes)
    return xhat.reshape(shape), xhat_t.reshape(shape)


def _param_view(spec: NormSpec, x: torch.Tensor, p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """gamma (or beta) shaped to broadcast along x's parameter axis."""
    axis = spec.param_axis(tuple(x.shape)) % x.dim()
    return p.to(dtype).reshape([-1 if a == axis else 1 for a in range(x.dim())])


class _Positional(torch.autograd.Function):
    """Function.apply without the ``inspect.signature`` binding it does for the setup_context form.

    That binding fills in defaults, and these functions are always called with
    every argument given positionally, so it has nothing to do; it was about a
    seventh of a step on a small problem. Under a torch.func transform the full
    path runs (it unwraps the transform's tensors).
    """

    @classmethod
    def apply(cls, *args):
        if _transforms_active():
            return super().apply(*args)
        args = _unwrap_dead_wrappers(args)  # what Function.apply does before handing over (torch.func's leftovers)
        return super(torch.autograd.Function, cls).apply(*args)  # the C++ apply that Function.apply ends in


_transforms_active = torch._C._are_functorch_transforms_active
_unwrap_dead_wrappers = torch._functorch.utils.unwrap_dead_wrappers


class NormFunction(_Positional):
    """``apply(norm, x, weight, bias, eps, num_groups) -> (y, mean, var, rstd)`` with backward, jvp and vmap rules."""

    @staticmethod
    def forward(norm, x, weight, bias, eps, num_groups):
        return forward_kernel(norm, x, weight, bias, eps, num_groups)

    @staticmethod
    def setup_context(ctx, inputs, output):
        norm, x, weight, bias, eps, num_groups = inputs
        _, mean, var, rstd = output
        ctx.mark_non_differentiable(mean, var, rstd)  # statistics, read by BatchNorm's running averages only
        ctx.norm, ctx.eps, ctx.has_bias, ctx.num_groups = norm, eps, bias is not None, num_groups
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.save_for_forward(x, weight, mean, rstd)

    @staticmethod
    def backward(ctx, dy, _dmean, _dvar, _drstd):
        x, weight, mean, rstd = ctx.saved_tensors
        args = (ctx.norm, dy, x, weight, ctx.has_bias, mean, rstd, ctx.eps, ctx.num_groups)
        dx, dweight, dbias = NormBackward.apply(*args)
        return None, dx, None if weight is None else dweight, dbias if ctx.has_bias else None, None, None

    @staticmethod
    def jvp(ctx, _norm_t, x_t, weight_t, bias_t, _eps_t, _groups_t):
        """y_t = gamma * J x_t + xhat * gamma_t + beta_t, with J x_t the projection form (module docstring)."""
        x, weight, mean, rstd = ctx.saved_tensors
        spec = _spec(ctx.norm, ctx.num_groups)
        xhat, xhat_t = _tangent_xhat(spec, x, mean, rstd, x_t)
        y_t = torch.zeros_like(xhat) if xhat_t is None else xhat_t
        if weight is not None:
            y_t = y_t * _param_view(spec, x, weight, y_t.dtype)
            if weight_t is not None:
                y_t = y_t + xhat * _param_view(spec, x, weight_t, y_t.dtype)
        if bias_t is not None:
            y_t = y_t + _param_view(spec, x, bias_t, y_t.dtype)
        return y_t.to(x.dtype), None, None, None

    @staticmethod
    def vmap(info, in_dims, norm, x, weight, bias, eps, num_groups):
        return _loop_vmap(NormFunction, info, in_dims, norm, x, weight, bias, eps, num_groups)


class NormBackward(_Positional):
    """``apply(norm, dy, x, weight, has_bias, mean, rstd, eps, num_groups) -> (dx, dweight, dbias)``; no derivative."""

    @staticmethod
    def forward(norm, dy, x, weight, has_bias, mean, rstd, eps, num_groups):
        return backward_kernel(norm, dy, x, weight, has_bias, mean, rstd, eps, num_groups)

    @staticmethod
    def setup_context(ctx, inputs, output):
        return None

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(SECOND_DERIVATIVE)

    @staticmethod
    def jvp(ctx, *tangents):
        raise RuntimeError(SECOND_DERIVATIVE)

    @staticmethod
    def vmap(info, in_dims, *args):
        return _loop_vmap(NormBackward, info, in_dims, *args)


# the backward custom op has no derivative either: the same refusal as NormBackward's
torch.library.register_autograd(
    "microgradnorm::norm_backward", NormBackward.backward, setup_context=NormBackward.setup_context
)


def norm(
    norm: str,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    num_groups: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, mean, var, rstd): the custom op while torch.compile traces, the autograd function otherwise."""
    if torch.compiler.is_compiling():
        return norm_forward(norm, x, weight, bias, eps, num_groups)
    return NormFunction.apply(norm, x, weight, bias, eps, num_groups)
