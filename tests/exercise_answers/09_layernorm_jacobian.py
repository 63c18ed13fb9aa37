"""Exercise 09, answered another way: entry by entry formulas, without building I - P first."""

import numpy as np


def projection(xhat):
    d = xhat.shape[0]
    return (1.0 + xhat[:, None] * xhat[None, :]) / d


def layernorm_jacobian(x, gamma, eps):
    d = x.shape[0]
    centred = x - np.mean(x)
    sigma = np.sqrt(np.mean(centred**2) + eps)
    xhat = centred / sigma
    return (gamma[:, None] / sigma) * (np.eye(d) - (1.0 + np.outer(xhat, xhat)) / d)
