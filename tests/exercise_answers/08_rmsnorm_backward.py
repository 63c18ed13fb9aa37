"""Exercise 08, answered another way: the two paths separately, through the mean square."""

import numpy as np


def rmsnorm_forward(x, gamma, eps):
    ms = np.mean(x * x, axis=-1, keepdims=True)
    rrms = (ms + eps) ** -0.5
    return gamma * x * rrms, (x, ms, eps, gamma)


def rmsnorm_backward(dy, cache):
    x, ms, eps, gamma = cache
    d = x.shape[-1]
    rrms = (ms + eps) ** -0.5
    dxhat = dy * gamma
    dms = -0.5 * (ms + eps) ** -1.5 * np.sum(dxhat * x, axis=-1, keepdims=True)
    dx = dxhat * rrms + dms * 2.0 * x / d
    return dx, np.sum(dy * x * rrms, axis=0)
