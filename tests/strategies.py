"""Hypothesis strategies, all in one place (tests import them from here)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# Well-scaled float64 entries: big enough to be interesting, small enough that
# finite differences stay trustworthy (see microgradnorm.tolerances).
finite_floats = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False, allow_infinity=False, width=64)
positive_scales = st.floats(min_value=0.01, max_value=100.0)
shifts = st.floats(min_value=-50.0, max_value=50.0)
eps_values = st.sampled_from([0.0, 1e-5, 1e-3, 0.1])


MIN_STD = 0.1  # the spread a group needs for eps = 0 to be well defined in these tests


def spread(x: np.ndarray, axis: int | tuple[int, ...] = -1, min_std: float = MIN_STD) -> bool:
    """True when every group has a std of at least ``min_std`` (so eps = 0 is well defined)."""
    return bool(np.all(np.std(x, axis=axis) >= min_std))


@st.composite
def vectors(draw, min_dim: int = 2, max_dim: int = 8) -> np.ndarray:
    """A 1-D float64 vector whose values are not all (nearly) equal."""
    d = draw(st.integers(min_dim, max_dim))
    x = draw(hnp.arrays(np.float64, d, elements=finite_floats))
    if d > 1 and not spread(x):
        x = x + np.linspace(-1.0, 1.0, d)
    return x


@st.composite
def matrices(draw, min_rows: int = 1, max_rows: int = 4, min_dim: int = 2, max_dim: int = 6, axis: int = -1):
    """An [N, D] float64 matrix whose groups along ``axis`` all have some spread."""
    n = draw(st.integers(min_rows, max_rows))
    d = draw(st.integers(min_dim, max_dim))
    x = draw(hnp.arrays(np.float64, (n, d), elements=finite_floats))
    if x.shape[axis] > 1:
        # a ramp on the groups without spread only: added to every group, it could cancel the
        # spread of one that had some (a row [0, -2] plus the ramp [-1, 1] is constant)
        flat = np.moveaxis(x, axis, -1).copy()
        narrow = np.std(flat, axis=-1) < MIN_STD
        flat[narrow] += np.linspace(-1.0, 1.0, flat.shape[-1])  # the ramp's std is at least 0.57
        x = np.moveaxis(flat, -1, axis)
    return x


def params(draw, size: int) -> tuple[np.ndarray, np.ndarray]:
    """gamma (away from 0 and from 1) and beta of length ``size``."""
    gamma = draw(hnp.arrays(np.float64, size, elements=st.floats(0.25, 2.0))) * draw(
        hnp.arrays(np.float64, size, elements=st.sampled_from([-1.0, 1.0]))
    )
    beta = draw(hnp.arrays(np.float64, size, elements=finite_floats))
    return gamma, beta


@st.composite
def upstream(draw, shape: tuple[int, ...]) -> np.ndarray:
    """A random upstream gradient dy (never all ones: see microgradnorm.check)."""
    return draw(hnp.arrays(np.float64, shape, elements=st.floats(-2.0, 2.0)))


# ---- the vectorized path (issue 3) ----------------------------------------------------------


@st.composite
def norm_problems(draw, norm: str):
    """(x, gamma, beta, dy, eps) for the vectorized ``norm``, float64, sometimes non-contiguous.

    Shapes include a group of one value (D = 1 for LayerNorm/RMSNorm, a batch
    of one for BatchNorm [N, D]) and a batch of one; eps is then > 0, because a
    constant group with eps = 0 divides by zero. A third of the inputs are views
    with strides (every other column of a wider array, or a transpose), which
    must give the same numbers as their contiguous copies.
    """
    if norm == "batchnorm":
        four_d = draw(st.booleans())
        shape = (
            (draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3)))
            if four_d
            else (draw(st.integers(1, 6)), draw(st.integers(1, 5)))
        )
        groups_of_one = shape[0] * (shape[2] * shape[3] if four_d else 1) == 1
        p = shape[1]
    else:
        lead = draw(st.lists(st.integers(1, 3), min_size=norm == "groupnorm", max_size=2))
        shape = (*lead, draw(st.integers(1, 7)))
        groups_of_one = (math.prod(shape[1:]) if norm == "groupnorm" else shape[-1]) == 1
        p = shape[1] if norm == "groupnorm" else shape[-1]
    layout = draw(st.sampled_from(["contiguous", "strided", "transposed"]))
    if layout == "strided":
        base = draw(hnp.arrays(np.float64, (*shape[:-1], 2 * shape[-1]), elements=finite_floats))
    elif layout == "transposed":
        base = draw(hnp.arrays(np.float64, shape[::-1], elements=finite_floats))
    else:
        base = draw(hnp.arrays(np.float64, shape, elements=finite_floats))
    base += np.linspace(-1.0, 1.0, base.size).reshape(base.shape)  # in place, so views stay views
    x = base[..., ::2] if layout == "strided" else (base.T if layout == "transposed" else base)
    gamma, beta = params(draw, p)
    if draw(st.booleans()):
        gamma = None
    if norm == "rmsnorm" or draw(st.booleans()):
        beta = None
    dy = draw(upstream(x.shape))
    axes = ((0,) if x.ndim == 2 else (0, 2, 3)) if norm == "batchnorm" else (-1,)
    if norm == "groupnorm":  # one group (the registry's default): each example over all its values
        axes = tuple(range(1, x.ndim))
    well_spread = not groups_of_one and spread(x if norm != "rmsnorm" else np.abs(x) + 1.0, axis=axes)
    eps = draw(eps_values if well_spread else st.sampled_from([1e-5, 1e-3, 0.1]))
    return x, gamma, beta, dy, eps
