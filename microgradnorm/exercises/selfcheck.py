"""Small helpers the exercise files use when you run them on their own (``python FILE``).

They compare your gradient with a central finite difference, which needs no
calculus at all: nudge one input by +h and -h, see how the loss moves. It is
the honest referee of every backward pass (and what the grader's closed forms
were themselves checked against).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from types import TracebackType

import numpy as np

__all__ = ["numerical_gradient", "report"]


def _not_written_yet(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Say "not written yet" for a scaffold's NotImplementedError; any other error keeps its traceback."""
    if not issubclass(kind, NotImplementedError):
        _previous_hook(kind, exc, tb)
        return
    frames = traceback.extract_tb(tb)
    where = f"`{frames[-1].name}` (line {frames[-1].lineno})" if frames else "a function"
    print(f"{where} is not written yet: write your code where it says so, then run this file again.", file=sys.stderr)


# Running an exercise file on its own imports this module first: a function still to be
# written then gets one line instead of a traceback (the learner's own errors keep theirs).
_previous_hook = sys.excepthook
sys.excepthook = _not_written_yet


def numerical_gradient(loss: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """dloss/dx by central differences, (loss(x + h e_k) - loss(x - h e_k)) / 2h for every entry k."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        old = x[k]
        x[k] = old + h
        up = float(loss(x.copy()))
        x[k] = old - h
        down = float(loss(x.copy()))
        x[k] = old
        grad[k] = (up - down) / (2.0 * h)
    return grad


def report(name: str, yours: object, numerical: np.ndarray, rtol: float = 1e-5) -> bool:
    """Print how far ``yours`` is from the finite difference; True when they agree."""
    numerical = np.asarray(numerical, dtype=np.float64)
    try:
        mine = np.asarray(yours, dtype=np.float64)
    except (TypeError, ValueError):
        print(f"  {name}: could not be read as numbers: {yours!r}")
        return False
    if mine.shape != numerical.shape:
        print(f"  {name}: shape {mine.shape}, but the finite difference has shape {numerical.shape}")
        return False
    err = float(np.max(np.abs(mine - numerical))) if mine.size else 0.0
    scale = max(float(np.max(np.abs(numerical))) if mine.size else 0.0, 1e-12)
    ok = err <= rtol * scale + 1e-9
    verdict = "agrees" if ok else "DIFFERS"
    print(f"  {name:<14} max |yours - finite difference| = {err:.2e}  -> {verdict}")
    return ok
