"""Your own LayerNorm forward and backward, as a PyTorch function that drops into any model.

:func:`layer_norm_function` takes the pair you wrote for the LayerNorm exercise,
``(y, cache) = forward(x, gamma, beta, eps)`` and ``(dx, dgamma, dbeta) = backward(dy, cache)``
on NumPy arrays, and returns a :class:`LayerNormFunction` ``f(x, weight, bias, eps)``
whose gradient PyTorch takes from your backward. Use it as
``microgradnorm.torch.LayerNorm(d, function=f)`` in place of ``torch.nn.LayerNorm(d)``.

At its first call the function checks your backward (``check=True``, the
default): ``torch.autograd.gradcheck`` in float64 on a small problem ([2, 3, 5])
compares your backward with finite differences of your forward, and a wrong
backward is a :class:`GradientCheckError` naming which of dx, dgamma, dbeta are
wrong and at which entries, measured against ``torch.nn.functional.layer_norm``'s
gradient. A backward that misses a term still trains (only a little worse), so
without the check nothing would tell you. ``check=False`` skips it, to watch a
wrong backward train.

This wrapper is a ``torch.autograd.Function``, not a custom op like the built-in
layers: your cache can be any Python object, and an autograd.Function can keep
one between the passes. ``torch.compile`` runs it outside the compiled graph
(a graph break), as it must: it cannot trace arbitrary NumPy code. It gives
reverse mode only (your pair has no forward-mode rule), so ``torch.func``'s
transforms are refused with a message that says what to use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from microgradnorm.i18n import _, pgettext
from microgradnorm.torch.layers import check_tensor
from microgradnorm.torch.ops import SECOND_DERIVATIVE, to_numpy, to_torch

__all__ = ["GradientCheckError", "LayerNormFunction", "layer_norm_function"]

CHECK_SHAPE = (2, 3, 5)  # the problem your pair is checked on: small, so gradcheck is quick
CHECK_EPS = 1e-5
SHOWN_ENTRIES = 3  # wrong entries named in the message; the rest are counted


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
        x_dtype, *param_dtypes = ctx.dtypes
        dparams = [
            None if dtype is None else to_torch(_as_result(g, f"{fn.backward_name}'s {name}", shape[-1:]), dtype)
            for g, name, dtype in zip(out[1:], ("dgamma", "dbeta"), param_dtypes)
        ]
        return to_torch(dx, x_dtype), *dparams, None, None


class GradientCheckError(ValueError):
    """Your backward disagrees with the derivative of your forward (torch.autograd.gradcheck in float64)."""


class LayerNormFunction:
    """``f(x, weight=None, bias=None, eps=1e-5)``: LayerNorm over x's last axis with your forward and backward."""

    def __init__(self, forward: Callable, backward: Callable, check: bool = True) -> None:
        for name, f in (("forward", forward), ("backward", backward)):
            if not callable(f):
                raise TypeError(_("{name}: expected a function, got {given}").format(name=name, given=type(f).__name__))
        self.forward, self.backward = forward, backward
        self.forward_name = getattr(forward, "__name__", "forward")
        self.backward_name = getattr(backward, "__name__", "backward")
        self.checked = not check  # True once the check has passed (or was not asked for)

    def check(self) -> None:
        """Run the gradient check now (the first call does it otherwise); :class:`GradientCheckError` if it fails."""
        gen = torch.Generator().manual_seed(0)
        d = CHECK_SHAPE[-1]
        x = torch.randn(CHECK_SHAPE, generator=gen, dtype=torch.float64) * 2 + 0.5
        params = (
            torch.rand(d, generator=gen, dtype=torch.float64) + 0.5,
            torch.randn(d, generator=gen, dtype=torch.float64),
        )
        inputs = tuple(t.requires_grad_(True) for t in (x, *params))

        def yours(x, weight, bias):
            return _YourLayerNorm.apply(x, weight, bias, CHECK_EPS, self)

        if not torch.autograd.gradcheck(yours, inputs, raise_exception=False):
            raise GradientCheckError(self._wrong_entries(yours, inputs, gen))
        self.checked = True

    def _wrong_entries(self, yours, inputs, gen) -> str:
        """Which of dx, dgamma, dbeta are wrong and where, against torch.nn.functional.layer_norm's gradient."""
        dy = torch.randn(CHECK_SHAPE, generator=gen, dtype=torch.float64)
        got = torch.autograd.grad((yours(*inputs) * dy).sum(), inputs)
        want_y = torch.nn.functional.layer_norm(inputs[0], CHECK_SHAPE[-1:], *inputs[1:], CHECK_EPS)
        want = torch.autograd.grad((want_y * dy).sum(), inputs)
        parts = [_describe(name, g, w) for name, g, w in zip(("dx", "dgamma", "dbeta"), got, want)]
        return _(
            "{backward}: fails torch.autograd.gradcheck (float64, x of shape {shape}): {wrong}; "
            "in your own code, `layer_norm_function(forward, backward, check=False)` trains with it"
        ).format(
            backward=self.backward_name,
            shape=CHECK_SHAPE,
            wrong=pgettext("clause separator", "; ").join(p for p in parts if p),
        )

    @torch.compiler.disable  # NumPy code cannot be traced: torch.compile runs this part as it is
    def __call__(self, x: torch.Tensor, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
        _refuse_transforms(self)
        if not self.checked:
            self.check()
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


def _describe(name: str, got: torch.Tensor, want: torch.Tensor) -> str:
    """Where ``got`` differs from ``want``, as one phrase ("dx wrong at 30 of 30 entries: [0, 0, 0], ..."), or ""."""
    scale = float(want.abs().max())
    wrong = ((got - want).abs() > GRADCHECK_ATOL + GRADCHECK_RTOL * scale).nonzero().tolist()
    if not wrong:
        return ""
    first = tuple(wrong[0])
    shown = pgettext("list separator", ", ").join(str(list(i)) for i in wrong[:SHOWN_ENTRIES])
    return _(
        "{name} wrong at {count} of {total} entries: {entries} (at {first}: yours {got:.4g}, right {want:.4g})"
    ).format(
        name=name,
        count=len(wrong),
        total=want.numel(),
        entries=shown,
        first=list(first),
        got=float(got[first]),
        want=float(want[first]),
    )


# torch.autograd.gradcheck's own defaults (float64): an entry is wrong where gradcheck would call it so
GRADCHECK_ATOL, GRADCHECK_RTOL = 1e-5, 1e-3


_TRANSFORMS = {"Grad": "grad/vjp/jacrev", "Jvp": "jvp/jacfwd", "Vmap": "vmap", "Functionalize": "functionalize"}


def _refuse_transforms(fn: LayerNormFunction) -> None:
    """One line instead of torch.func's error about autograd.Function internals (or, for jvp, a zero tangent)."""
    level = torch._C._functorch.peek_interpreter_stack()
    if level is None:
        return
    key = str(level.key()).rsplit(".", 1)[-1]  # Grad, Jvp, Vmap, Functionalize
    transform = _TRANSFORMS.get(key, key.lower())
    raise RuntimeError(
        _(
            "torch.func.{transform}: {function} gives reverse mode only, through ordinary autograd "
            "(loss.backward(), torch.autograd.grad); for torch.func use microgradnorm.torch.LayerNorm "
            "without function=, which has forward-mode and vmap rules"
        ).format(transform=transform, function=repr(fn))
    )


def layer_norm_function(forward: Callable, backward: Callable, check: bool = True) -> LayerNormFunction:
    """Wrap ``(y, cache) = forward(x, gamma, beta, eps)`` and ``(dx, dgamma, dbeta) = backward(dy, cache)``.

    Your functions receive NumPy copies: x as [1, R, D] (every leading axis of
    the model's input folded into R, so code written for [B, T, D] works), gamma
    and beta as [D] (ones and zeros when the layer has none), dy like x.
    ``check=True`` runs ``torch.autograd.gradcheck`` on your pair at the first
    call and raises :class:`GradientCheckError` naming the wrong entries.
    """
    return LayerNormFunction(forward, backward, check)
