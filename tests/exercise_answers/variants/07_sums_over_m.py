"""Exercise 07 by a review: the folded formula with sums and one 1/m outside (the form of many course notes)."""

import numpy as np


def batchnorm_forward(x, gamma, beta, eps):
    mean = x.mean(axis=0, keepdims=True)  # 1,D
    xshift = x - mean  # M,D
    var = (xshift * xshift).mean(axis=0, keepdims=True)  # 1,D
    rstd = 1.0 / np.sqrt(var + eps)  # 1,D
    xhat = xshift * rstd  # M,D
    y = gamma * xhat + beta  # M,D
    return y, (xhat, rstd, gamma)


def batchnorm_backward(dy, cache):
    xhat, rstd, gamma = cache
    m = dy.shape[0]
    dxhat = dy * gamma
    dx = (1.0 / m) * rstd * (m * dxhat - dxhat.sum(axis=0) - xhat * np.sum(dxhat * xhat, axis=0))
    return dx, np.sum(dy * xhat, axis=0), np.sum(dy, axis=0)
