"""``LayerNorm``, ``RMSNorm``, ``BatchNorm1d``, ``BatchNorm2d`` and ``GroupNorm`` on microgradnorm's vectorized path.

Each class subclasses its ``torch.nn`` namesake and replaces only ``forward``:
the constructor, the parameters and buffers (``weight``, ``bias``,
``running_mean``, ``running_var``, ``num_batches_tracked``), the ``state_dict``
keys, ``reset_parameters``, ``extra_repr`` and ``isinstance(m, torch.nn.LayerNorm)``
are PyTorch's own, so the layer drops into any model and loads its checkpoints;
only the repr's name differs (``microgradnorm.torch.LayerNorm``), so that
``print(model)`` shows which layers were swapped. The normalization itself
(forward and backward, and forward mode) runs in :mod:`microgradnorm.torch.ops`,
on the CPU, in NumPy (numba's fused kernels when numba is installed).

torch.nn's rules kept at the edges: half-precision input with float32
parameters (what CPU autocast hands a norm) computes in float32 and returns the
input's dtype; an empty batch gives an empty result; BatchNorm refuses eps <= 0
and a single value per channel in training; BatchNorm2d keeps channels_last.

What is simplified: BatchNorm in eval mode (running statistics, which are
constants there) is an affine map per channel done with torch ops; second
derivatives are not implemented (a clear error); tensors must be on the CPU;
``torch.jit.script`` and ``torch.fx.symbolic_trace`` are refused in one line
(they cannot record NumPy code; ``torch.compile`` can keep it as one op).
"""

from __future__ import annotations

import math

import torch

from microgradnorm.torch.ops import norm

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "LayerNorm", "RMSNorm", "check_tensor"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensor(t: torch.Tensor, name: str, like: torch.Tensor | None = None) -> None:
    """A one-line error unless ``t`` is a floating CPU tensor (of ``like``'s dtype when given)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(
            f"{name}: microgradnorm.torch computes on the CPU with NumPy, got a tensor on {t.device}; "
            "move it with .cpu(), or use torch.nn's layer on this device"
        )
    if t.dtype not in _FLOATS:
        raise TypeError(
            f"{name}: expected a floating-point tensor (float16, bfloat16, float32, float64), got {t.dtype}"
        )
    if like is not None and t.dtype != like.dtype:
        raise TypeError(
            f"{name}: expected dtype {like.dtype} (the input's), got {t.dtype}; "
            f"convert the layer with .to({like.dtype})"
        )


_HALF = (torch.float16, torch.bfloat16)


def _check_parameters(module: torch.nn.Module, x: torch.Tensor) -> None:
    """x and the parameters as torch.nn accepts them: one dtype, or half-precision x with float32 parameters.

    The second is what CPU autocast gives a norm (a bfloat16 activation, float32
    parameters): the norm computes in float32, returns x's dtype, and the
    parameters and their gradients stay float32.
    """
    if isinstance(x, torch.fx.Proxy):
        raise TypeError(_traced_message(module, "torch.fx.symbolic_trace"))
    check_tensor(x, "x")
    for name in ("weight", "bias"):
        p = getattr(module, name, None)
        if p is not None:
            mixed = x.dtype in _HALF and p.dtype == torch.float32
            check_tensor(p, name, like=None if mixed else x)


def _rows(x: torch.Tensor, normalized_shape: tuple[int, ...], layer: str) -> torch.Tensor:
    """x [..., *normalized_shape] as [..., D]: a norm over the last k axes is one over their product."""
    k = len(normalized_shape)
    if tuple(x.shape[x.dim() - k :]) != tuple(normalized_shape) or x.dim() < k:
        want = ", ".join(["...", *map(str, normalized_shape)])
        raise ValueError(f"x: {layer}({list(normalized_shape)}) expects shape [{want}], got {tuple(x.shape)}")
    return x.reshape(*x.shape[: x.dim() - k], math.prod(normalized_shape))


def _flat(p: torch.Tensor | None) -> torch.Tensor | None:
    return None if p is None else p.reshape(-1)


def _traced_message(module: torch.nn.Module, tool: str) -> str:
    name = type(module).__name__
    return (
        f"{tool}: microgradnorm.torch.{name} computes in NumPy, which {tool} cannot record; "
        f"use torch.compile (it keeps the layer as one op), or torch.nn.{name} for TorchScript and FX graphs"
    )


def _scale_shift(xhat: torch.Tensor, weight, bias, shape) -> torch.Tensor:
    """weight * xhat + bias with the parameters shaped as ``shape``, in xhat's dtype.

    Also how an empty batch is answered as torch.nn answers it (the kernels refuse
    empty arrays): on no values it gives no values, and reaches the parameters
    with zero gradients (empty sums).
    """
    y = xhat if weight is None else xhat * weight.to(xhat.dtype).reshape(shape)
    return y if bias is None else y + bias.to(xhat.dtype).reshape(shape)


class _Microgradnorm:
    """What every layer adds to its torch.nn class: a name that says it was swapped in, and clear refusals."""

    def _get_name(self) -> str:  # the name repr prints: print(model) shows which layers are this package's
        return f"microgradnorm.torch.{type(self).__name__}"

    def __prepare_scriptable__(self):  # torch.jit.script calls this first: refuse in one line
        raise TypeError(_traced_message(self, "torch.jit.script"))


class LayerNorm(_Microgradnorm, torch.nn.LayerNorm):
    """torch.nn.LayerNorm whose forward and backward run on microgradnorm's vectorized LayerNorm.

    ``function``: optionally a :class:`~microgradnorm.torch.LayerNormFunction`
    (from :func:`~microgradnorm.torch.layer_norm_function`) to use instead, e.g.
    your own forward and backward.
    """

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        function=None,
    ) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, bias, device, dtype)
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_parameters(self, x)
        x2 = _rows(x, self.normalized_shape, "LayerNorm")
        if x.numel() == 0:
            return _scale_shift(x, self.weight, self.bias, self.normalized_shape)
        weight, bias = _flat(self.weight), _flat(self.bias)
        if self.function is not None:
            y = self.function(x2, weight, bias, self.eps)
        else:
            y = norm("layernorm", x2, weight, bias, self.eps)[0]
        return y.reshape(x.shape)


class RMSNorm(_Microgradnorm, torch.nn.RMSNorm):
    """torch.nn.RMSNorm on microgradnorm's vectorized RMSNorm; ``eps=None`` means the dtype's machine epsilon.

    As in PyTorch, ``eps=None`` uses ``torch.finfo`` of the computation type:
    float32's epsilon for float16, bfloat16 and float32 input, float64's for float64.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_parameters(self, x)
        x2 = _rows(x, self.normalized_shape, "RMSNorm")
        if x.numel() == 0:
            return _scale_shift(x, self.weight, None, self.normalized_shape)
        eps = self.eps
        if eps is None:
            eps = torch.finfo(torch.float64 if x.dtype == torch.float64 else torch.float32).eps
        return norm("rmsnorm", x2, _flat(self.weight), None, eps)[0].reshape(x.shape)


class _BatchNormMixin:
    """The forward pass shared by BatchNorm1d and BatchNorm2d, with torch.nn's running-statistics rules."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_parameters(self, x)
        self._check_input_dim(x)
        if x.shape[1] != self.num_features:
            raise ValueError(
                f"x: {type(self).__name__}({self.num_features}) expects {self.num_features} channels on axis 1, "
                f"got shape {tuple(x.shape)}"
            )
        batch = self.training or self.running_mean is None
        if batch:  # checked before any state changes, with torch.nn's rules
            _check_batch(self, x)
        factor = self._average_factor()
        if x.numel() == 0:  # torch.nn: the batch counted, the running averages left alone
            return _scale_shift(x, self.weight, self.bias, (1, -1) + (1,) * (x.dim() - 2))
        if batch:
            return self._batch_statistics(x, factor)
        return self._running_statistics(x)

    def _average_factor(self) -> float:
        """The weight of this batch in the running averages; counts the batch (momentum None: a plain average)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        return factor

    def _batch_statistics(self, x: torch.Tensor, factor: float) -> torch.Tensor:
        m = x.numel() // self.num_features
        if _is_channels_last(x):  # [N, C, H, W] stored as [N, H, W, C]: the same channels as [N*H*W, C], no copy
            n, c, h, w = x.shape
            rows = x.permute(0, 2, 3, 1).reshape(n * h * w, c)  # NHW,C
            y2, mean, var, _ = norm("batchnorm", rows, self.weight, self.bias, self.eps)
            y = y2.reshape(n, h, w, c).permute(0, 3, 1, 2)  # N,C,H,W in channels_last memory, as x
        else:
            x4 = x if x.dim() in (2, 4) else x.unsqueeze(-1)  # [N, C, L] as [N, C, L, 1]
            y, mean, var, _ = norm("batchnorm", x4, self.weight, self.bias, self.eps)
            y = y.reshape(x.shape)
        if self.training and self.track_running_stats:
            _refuse_batched(self, mean)
            with torch.no_grad():  # the unbiased batch variance, as torch.nn keeps
                self.running_mean.mul_(1.0 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
                unbiased = (var * (m / (m - 1))).to(self.running_var.dtype)
                self.running_var.mul_(1.0 - factor).add_(unbiased, alpha=factor)
        return y

    def _running_statistics(self, x: torch.Tensor) -> torch.Tensor:
        """Eval mode: the statistics are constants, so y = (x - running_mean) * rstd * weight + bias, in torch ops.

        Computed in float32 for half-precision x (as the kernels do), returned in x's dtype.
        """
        cdt = torch.float32 if x.dtype in _HALF else x.dtype
        shape = (1, -1) + (1,) * (x.dim() - 2)  # broadcast per channel
        rstd = torch.rsqrt(self.running_var.to(cdt) + self.eps).reshape(shape)
        xhat = (x.to(cdt) - self.running_mean.to(cdt).reshape(shape)) * rstd
        return _scale_shift(xhat, self.weight, self.bias, shape).to(x.dtype)


def _check_batch(layer: torch.nn.Module, x: torch.Tensor) -> None:
    """torch.nn's two refusals in training: one value per channel, and eps <= 0."""
    if x.numel() // layer.num_features == 1:
        raise ValueError(f"x: expected more than 1 value per channel when training, got shape {tuple(x.shape)}")
    if not layer.eps > 0:
        raise ValueError(f"eps: {type(layer).__name__} expects eps > 0 when training (as torch.nn), got {layer.eps}")


def _is_channels_last(x: torch.Tensor) -> bool:
    return x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)


def _refuse_batched(layer: torch.nn.Module, mean: torch.Tensor) -> None:
    """Under torch.func.vmap the statistics differ per entry, and one running average cannot hold them all."""
    if torch._C._functorch.is_batchedtensor(mean):
        raise RuntimeError(
            f"torch.func.vmap: {type(layer).__name__} updates its running statistics in place, one set for the "
            "whole batch; use track_running_stats=False, .eval(), or torch.func.replace_all_batch_norm_modules_"
        )


class BatchNorm1d(_Microgradnorm, _BatchNormMixin, torch.nn.BatchNorm1d):
    """torch.nn.BatchNorm1d (x [N, C] or [N, C, L]) on microgradnorm's vectorized BatchNorm in training mode."""


class BatchNorm2d(_Microgradnorm, _BatchNormMixin, torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d (x [N, C, H, W]) on microgradnorm's vectorized BatchNorm in training mode."""


class GroupNorm(_Microgradnorm, torch.nn.GroupNorm):
    """torch.nn.GroupNorm (x [N, C, *]) on microgradnorm's vectorized GroupNorm.

    Each example's C channels fall in ``num_groups`` groups of C / G; each group
    is normalized over its channels and positions, then gamma and beta act per
    channel. No running statistics: training and eval compute the same.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_parameters(self, x)
        if x.dim() < 2 or x.shape[1] != self.num_channels:
            raise ValueError(
                f"x: GroupNorm({self.num_groups}, {self.num_channels}) expects shape [N, {self.num_channels}, ...], "
                f"got {tuple(x.shape)}"
            )
        if x.numel() == 0:
            return _scale_shift(x, self.weight, self.bias, (1, -1) + (1,) * (x.dim() - 2))
        return norm("groupnorm", x, self.weight, self.bias, self.eps, self.num_groups)[0]
