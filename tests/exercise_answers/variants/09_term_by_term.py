"""Exercise 09 by a review: the Jacobian term by term from the staged derivatives, no projection used."""

import numpy as np


def projection(xhat):
    D = len(xhat)
    return 1.0 / D + xhat[:, None] * xhat[None, :] / D


def layernorm_jacobian(x, gamma, eps):
    D = len(x)
    mu = x.mean()
    xs = x - mu
    var = (xs**2).mean()
    s = np.sqrt(var + eps)
    # staged: dxhat_i/dx_j = (delta - 1/D)/s - xs_i xs_j / (D s^3)
    J = (np.eye(D) - 1.0 / D) / s - np.outer(xs, xs) / (D * s**3)
    return gamma[:, None] * J
