"""Finite differences: the derivative measured by moving the input, written once.

A central difference (f(+h) - f(-h)) / 2h errs by about h² f'''/6; taking it at
h and at h/2 and combining the two (Richardson) cancels that term, leaving h⁴.
The check, the lessons, the grader's self-check and the lab all measure their
derivatives here, in float64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from microgradnorm.tolerances import FD_STEP

__all__ = ["central_difference", "numerical_gradient", "richardson_difference", "step_for"]


def step_for(value: float, step: float = FD_STEP) -> float:
    """The step for an entry of size ``value``: ``step`` times max(1, |value|)."""
    return step * max(1.0, abs(value))


def central_difference(moved: Callable[[float], float], h: float) -> float:
    """d f / d v from ``moved(delta)`` = f with v moved by delta: (f(+h) - f(-h)) / 2h."""
    return (moved(h) - moved(-h)) / (2.0 * h)


def richardson_difference(moved: Callable[[float], float], h: float) -> float:
    """The central difference at h and at h/2, combined so that the h² error term cancels."""
    wide, narrow = central_difference(moved, h), central_difference(moved, h / 2)
    return (4.0 * narrow - wide) / 3.0


def numerical_gradient(loss: Callable[[np.ndarray], float], x: np.ndarray, step: float = FD_STEP) -> np.ndarray:
    """d loss / d x, entry by entry, by central differences (a float64 copy of x is moved, never x)."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        old = x[k]

        def moved(delta: float, k: tuple[int, ...] = k, old: float = old) -> float:
            x[k] = old + delta
            value = float(loss(x.copy()))
            x[k] = old
            return value

        grad[k] = central_difference(moved, step_for(old, step))
    return grad
