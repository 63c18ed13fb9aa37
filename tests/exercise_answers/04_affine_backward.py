"""Exercise 04, answered another way: einsum and a reshape."""

import numpy as np


def affine_backward(dy, xhat, gamma):
    d = dy.shape[-1]
    dgamma = np.einsum("btd,btd->d", dy, xhat)
    dbeta = dy.reshape(-1, d).sum(axis=0)
    return dgamma, dbeta, dy * gamma[None, None, :]
