"""Exercise 06, answered another way: dvar written with xhat (xshift = xhat * std)."""

import numpy as np


def batchnorm_forward(x, gamma, beta, eps):
    mean = x.mean(axis=0, keepdims=True)
    xshift = x - mean
    var = (xshift * xshift).mean(axis=0, keepdims=True)
    std = np.sqrt(var + eps)
    rstd = 1.0 / std
    xhat = xshift * rstd
    y = gamma * xhat + beta
    cache = {"xhat": xhat, "xshift": xshift, "var": var, "std": std, "rstd": rstd, "gamma": gamma, "eps": eps}
    return y, cache


def batchnorm_backward_staged(dy, cache):
    xhat, rstd, gamma = cache["xhat"], cache["rstd"], cache["gamma"]
    m = dy.shape[0]
    dxhat = dy * gamma
    dvar = -0.5 * rstd * rstd * np.sum(dxhat * xhat, axis=0, keepdims=True)
    dmean = -rstd * np.sum(dxhat, axis=0, keepdims=True)
    dx = dxhat * rstd + dmean / m + dvar * (2.0 / m) * cache["xshift"]
    return {
        "dbeta": np.sum(dy, axis=0),
        "dgamma": np.sum(dy * xhat, axis=0),
        "dxhat": dxhat,
        "dvar": dvar,
        "dmean": dmean,
        "dx": dx,
    }
