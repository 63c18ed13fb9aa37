"""Exercise 01 by a review: the power rule through exp and log, the quotient with 1/b squared."""

import numpy as np


def mul_backward(a, b, dout):
    return np.multiply(b, dout), np.multiply(a, dout)


def pow_backward(a, p, dout):
    return p * np.exp((p - 1) * np.log(a)) * dout


def sqrt_backward(a, dout):
    return 0.5 * a**-0.5 * dout


def div_backward(a, b, dout):
    return dout / b, -(a / b) / b * dout
