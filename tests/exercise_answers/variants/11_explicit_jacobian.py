"""Exercise 11 by a review: dx through the explicit Jacobian of each row, J^T @ dh."""

import numpy as np


def preln_forward(x, gamma, beta, W, eps):
    mu = x.mean(-1, keepdims=True)
    xs = x - mu
    var = (xs * xs).mean(-1, keepdims=True)
    s = np.sqrt(var + eps)
    xhat = xs / s
    h = gamma * xhat + beta
    return x + h @ W, (x, xhat, s, gamma, h, W)


def preln_backward(dout, cache):
    x, xhat, s, gamma, h, W = cache
    N, D = x.shape
    dh = dout @ W.T
    dx = dout.copy()
    for n in range(N):
        P = (np.ones((D, D)) + np.outer(xhat[n], xhat[n])) / D
        J = gamma[:, None] * (np.eye(D) - P) / s[n]
        dx[n] += J.T @ dh[n]
    return dx, (dh * xhat).sum(0), dh.sum(0), h.T @ dout
