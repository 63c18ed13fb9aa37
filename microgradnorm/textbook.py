"""The four norms on whole NumPy arrays, as a textbook writes them (after llm.c's layernorm.py).

Each forward pass returns ``(out, cache)`` and each backward pass takes
``(dout, cache)`` and returns ``(dx, dgamma, dbeta)``. Every line that makes an
array says its shape: ``B,T,d`` for LayerNorm's input, ``N,C,...`` for a batch
of images, ``N,G,M`` for GroupNorm's view (M = C/G times the positions).

The backward passes use the xhat form of the gradient (derived in lesson 6):
with ``dxhat = gamma * dout``,

    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))

the means taken over the values that shared a statistic. RMSNorm has no mean to
subtract, so its form lacks the middle term.

Simplified compared with :mod:`microgradnorm.vectorized` (what to call in real
code): gamma and beta are required arrays (RMSNorm: beta is None), no dtype
handling, no argument checks, and none of the repairs for values whose squares
overflow or whose mean rounds badly. The tuned backends are tested against
these functions.
"""

from __future__ import annotations

__all__ = [
    "batch_norm_backward",
    "batch_norm_forward",
    "group_norm_backward",
    "group_norm_forward",
    "layer_norm_backward",
    "layer_norm_forward",
    "rms_norm_backward",
    "rms_norm_forward",
]


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    """Each row of x [..., d] over its own d values (Ba, Kiros & Hinton, 2016)."""
    mean = x.mean(-1, keepdims=True)  # B,T,1
    xshift = x - mean  # B,T,d
    var = (xshift**2).mean(-1, keepdims=True)  # B,T,1
    rstd = (var + eps) ** -0.5  # B,T,1
    xhat = xshift * rstd  # B,T,d
    out = xhat * gamma + beta  # B,T,d
    cache = (xhat, gamma, rstd)
    return out, cache


def layer_norm_backward(dout, cache):
    xhat, gamma, rstd = cache
    d = dout.shape[-1]
    dbeta = dout.reshape(-1, d).sum(0)  # d
    dgamma = (dout * xhat).reshape(-1, d).sum(0)  # d
    dxhat = dout * gamma  # B,T,d
    dx = dxhat - dxhat.mean(-1, keepdims=True)  # B,T,d
    proj = (dxhat * xhat).mean(-1, keepdims=True)  # B,T,1
    dx -= xhat * proj  # B,T,d
    dx *= rstd  # B,T,d
    return dx, dgamma, dbeta


def batch_norm_forward(x, gamma, beta, eps=1e-5):
    """Each channel of x [N, C, ...] over the batch and the positions (Ioffe & Szegedy, 2015)."""
    axes = (0, *range(2, x.ndim))  # all but the channel axis
    p = (1, -1) + (1,) * (x.ndim - 2)  # gamma, beta: 1,C,1..
    mean = x.mean(axes, keepdims=True)  # 1,C,1..
    xshift = x - mean  # N,C,...
    var = (xshift**2).mean(axes, keepdims=True)  # 1,C,1..
    rstd = (var + eps) ** -0.5  # 1,C,1..
    xhat = xshift * rstd  # N,C,...
    out = xhat * gamma.reshape(p) + beta.reshape(p)  # N,C,...
    cache = (xhat, gamma, rstd)
    return out, cache


def batch_norm_backward(dout, cache):
    xhat, gamma, rstd = cache
    axes = (0, *range(2, dout.ndim))
    dbeta = dout.sum(axes)  # C
    dgamma = (dout * xhat).sum(axes)  # C
    dxhat = dout * gamma.reshape(rstd.shape)  # N,C,...
    dx = dxhat - dxhat.mean(axes, keepdims=True)  # N,C,...
    dx -= xhat * (dxhat * xhat).mean(axes, keepdims=True)  # N,C,...
    dx *= rstd  # N,C,...
    return dx, dgamma, dbeta


def group_norm_forward(x, num_groups, gamma, beta, eps=1e-5):
    """Each example's channels of x [N, C, ...] in num_groups groups,
    each group over its channels and positions (Wu & He, 2018)."""
    n, c = x.shape[:2]
    xg = x.reshape(n, num_groups, -1)  # N,G,M
    mean = xg.mean(-1, keepdims=True)  # N,G,1
    xshift = xg - mean  # N,G,M
    var = (xshift**2).mean(-1, keepdims=True)  # N,G,1
    rstd = (var + eps) ** -0.5  # N,G,1
    xhat = (xshift * rstd).reshape(x.shape)  # N,C,...
    p = (1, c) + (1,) * (x.ndim - 2)  # gamma, beta: 1,C,1..
    out = xhat * gamma.reshape(p) + beta.reshape(p)  # N,C,...
    cache = (xhat, gamma, rstd)
    return out, cache


def group_norm_backward(dout, cache):
    xhat, gamma, rstd = cache
    n, g = rstd.shape[:2]
    axes = (0, *range(2, dout.ndim))
    dbeta = dout.sum(axes)  # C
    dgamma = (dout * xhat).sum(axes)  # C
    p = (1, -1) + (1,) * (dout.ndim - 2)
    dxhat = (dout * gamma.reshape(p)).reshape(n, g, -1)  # N,G,M
    xh = xhat.reshape(n, g, -1)  # N,G,M
    dx = dxhat - dxhat.mean(-1, keepdims=True)  # N,G,M
    dx -= xh * (dxhat * xh).mean(-1, keepdims=True)  # N,G,M
    dx *= rstd  # N,G,M
    return dx.reshape(dout.shape), dgamma, dbeta


def rms_norm_forward(x, gamma, beta=None, eps=1e-5):
    """Each row of x [..., d] by its root mean square, no mean and no shift (Zhang & Sennrich, 2019)."""
    ms = (x**2).mean(-1, keepdims=True)  # B,T,1
    rrms = (ms + eps) ** -0.5  # B,T,1
    xhat = x * rrms  # B,T,d
    out = xhat * gamma  # B,T,d
    cache = (xhat, gamma, rrms)
    return out, cache


def rms_norm_backward(dout, cache):
    xhat, gamma, rrms = cache
    dgamma = (dout * xhat).reshape(-1, dout.shape[-1]).sum(0)  # d
    dxhat = dout * gamma  # B,T,d
    dx = dxhat - xhat * (dxhat * xhat).mean(-1, keepdims=True)  # B,T,d
    dx *= rrms  # B,T,d
    return dx, dgamma, None
