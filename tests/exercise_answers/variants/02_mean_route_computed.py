"""Exercise 02 by a review: the route through the mean computed (it is rounding noise), not left out."""

import numpy as np


def mean_backward(x, dmean):
    return np.broadcast_to(dmean / x.shape[1], x.shape)


def variance_backward(x, dvar):
    D = x.shape[1]
    xs = x - x.sum(1, keepdims=True) / D
    # direct route plus the (zero) route through the mean, computed honestly
    direct = 2.0 / D * xs * dvar
    via_mean = (-2.0 / D * xs.sum(1, keepdims=True)) * dvar / D
    return direct + via_mean
