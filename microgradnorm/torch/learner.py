"""Your own LayerNorm forward and backward, as a PyTorch function that drops into any model.

:func:`layer_norm_function` takes the pair you wrote for the LayerNorm exercise,
``(y, cache) = forward(x, gamma, beta, eps)`` and ``(dx, dgamma, dbeta) = backward(dy, cache)``
on NumPy arrays, and returns a :class:`LayerNormFunction` ``f(x, weight, bias, eps)``
whose gradient PyTorch takes from your backward. Use it as
``microgradnorm.torch.LayerNorm(d, function=f)`` in place of ``torch.nn.LayerNorm(d)``.

This wrapper is a ``torch.autograd.Function``, not a custom op like the built-in
layers: your cache can be any Python object, and an autograd.Function can keep
one between the passes. ``torch.compile`` runs it outside the compiled graph
(a graph break), as it must: it cannot trace arbitrary NumPy code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from microgradnorm.i18n import _
from microgradnorm.torch.layers import check_tensor
from microgradnorm.torch.ops import SECOND_DERIVATIVE, to_numpy, to_torch

__all__ = ["LayerNormFunction", "layer_norm_function"]


def _as_result(value: Any, what: str, shape: tuple[int, ...]) -> np.ndarray:
    """Your function's result as an array of ``shape``, or a one-line error saying what came back."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            _("{what}: expected a NumPy array of shape {shape}, got {given}").format(
                what=what, shape=shape, given=type(value).__name__
            )
        ) from None
    if arr.shape != shape:
        raise ValueError(
            _("{what}: expected shape {shape}, got shape {given}").format(what=what, shape=shape, given=arr.shape)
        )
    return arr


class _YourLayerNorm(torch.autograd.Function):
    """Calls your forward in ``forward`` and your backward in ``backward``; x is passed as [1, R, D]."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, fn):
        d = x.shape[-1]
        x3 = np.array(to_numpy(x), copy=True).reshape(1, -1, d)  # B,T,D  your own copy: you may write to it
        gamma = np.ones(d, x3.dtype) if weight is None else np.array(to_numpy(weight), copy=True)
        beta = np.zeros(d, x3.dtype) if bias is None else np.array(to_numpy(bias), copy=True)
        out = fn.forward(x3, gamma, beta, eps)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(
                _("{name}: expected to return (y, cache), got {given}").format(
                    name=fn.forward_name, given=type(out).__name__
                )
            )
        y = _as_result(out[0], f"{fn.forward_name}'s y", x3.shape)
        ctx.cache, ctx.fn, ctx.shape = out[1], fn, x3.shape
        ctx.dtypes = (x.dtype, None if weight is None else weight.dtype, None if bias is None else bias.dtype)
        return to_torch(y.reshape(x.shape), x.dtype)

    @staticmethod
    def backward(ctx, dy):
        if torch.is_grad_enabled():  # create_graph=True: a second derivative is on its way
            raise RuntimeError(SECOND_DERIVATIVE)
        fn, shape = ctx.fn, ctx.shape
        out = fn.backward(np.array(to_numpy(dy), copy=True).reshape(shape), ctx.cache)
        if not (isinstance(out, tuple) and len(out) == 3):
            raise TypeError(
                _("{name}: expected to return (dx, dgamma, dbeta), got {given}").format(
                    name=fn.backward_name, given=type(out).__name__
                )
            )
        dx = _as_result(out[0], f"{fn.backward_name}'s dx", shape).reshape(dy.shape)
        x_dtype, w_dtype, b_dtype = ctx.dtypes
        dw = (
            None
            if w_dtype is None
            else to_torch(_as_result(out[1], f"{fn.backward_name}'s dgamma", shape[-1:]), w_dtype)
        )
        db = (
            None
            if b_dtype is None
            else to_torch(_as_result(out[2], f"{fn.backward_name}'s dbeta", shape[-1:]), b_dtype)
        )
        return to_torch(dx, x_dtype), dw, db, None, None


class LayerNormFunction:
    """``f(x, weight=None, bias=None, eps=1e-5)``: LayerNorm over x's last axis with your forward and backward."""

    def __init__(self, forward: Callable, backward: Callable) -> None:
        for name, f in (("forward", forward), ("backward", backward)):
            if not callable(f):
                raise TypeError(_("{name}: expected a function, got {given}").format(name=name, given=type(f).__name__))
        self.forward, self.backward = forward, backward
        self.forward_name = getattr(forward, "__name__", "forward")
        self.backward_name = getattr(backward, "__name__", "backward")

    @torch.compiler.disable  # NumPy code cannot be traced: torch.compile runs this part as it is
    def __call__(self, x: torch.Tensor, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
        check_tensor(x, "x")
        for name, p in (("weight", weight), ("bias", bias)):
            if p is not None:
                check_tensor(p, name, like=x)
                if tuple(p.shape) != (x.shape[-1],):
                    raise ValueError(
                        _("{name}: expected shape ({d},) (x's last axis), got {given}").format(
                            name=name, d=x.shape[-1], given=tuple(p.shape)
                        )
                    )
        return _YourLayerNorm.apply(x, weight, bias, float(eps), self)

    def __repr__(self) -> str:
        return f"layer_norm_function({self.forward_name}, {self.backward_name})"


def layer_norm_function(forward: Callable, backward: Callable) -> LayerNormFunction:
    """Wrap ``(y, cache) = forward(x, gamma, beta, eps)`` and ``(dx, dgamma, dbeta) = backward(dy, cache)``.

    Your functions receive NumPy copies: x as [1, R, D] (every leading axis of
    the model's input folded into R, so code written for [B, T, D] works), gamma
    and beta as [D] (ones and zeros when the layer has none), dy like x.
    """
    return LayerNormFunction(forward, backward)
