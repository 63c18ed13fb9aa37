"""Exercise 02, answered another way: broadcast_to, and the variance written with np.mean."""

import numpy as np


def mean_backward(x, dmean):
    return np.broadcast_to(dmean / x.shape[-1], x.shape).copy()


def variance_backward(x, dvar):
    centred = x - np.mean(x, axis=-1, keepdims=True)
    return (2.0 / x.shape[-1]) * dvar * centred
