"""Exercise 05 by a review: the variance as mean(x^2) - mean^2 (fine here: the inputs are not offset)."""

import numpy as np


def layernorm_forward(x, gamma, beta, eps):
    m = x.mean(-1, keepdims=True)
    var = (x * x).mean(-1, keepdims=True) - m * m
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - m) * rstd
    return gamma * xhat + beta, (xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    g = dy * gamma
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).sum((0, 1)), dy.sum((0, 1))
