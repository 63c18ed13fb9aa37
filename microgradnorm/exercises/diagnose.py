"""Name the mistake in a wrong answer, from the numbers alone.

A wrong gradient is more useful with a reason attached. Four tools, used by the
grader in this order on the first output that fails:

1. **Shape.** A shape that differs only by axes of size 1 is a ``keepdims``
   mistake; a shape that is what summing over another set of axes gives is the
   wrong axis; the transpose is named as such.
2. **Known mistakes.** Each exercise computes the answers that common mistakes
   produce (the path through the mean left out, the unbiased variance, seed
   003's (m-1)/m slip, gamma forgotten, the wrong axis, ...) from the closed
   forms; a learner's answer that matches one of them is that mistake.
3. **Geometry** (normalization backward only). For LayerNorm and BatchNorm the
   exact dx of a group is the direct path minus two components: one along the
   ones vector (the path through the mean; it makes sum(dx) = 0) and one along
   xhat (the path through the variance; it makes dx . xhat = 0 at eps = 0).
   So the error e = got - expected of each group is split by least squares into
   a * 1 + b * xhat + r. An error along 1 alone means the mean path is wrong,
   along xhat alone the variance path, and b compared with the true variance
   path's coefficient says how: -1 times it is a missing path, -1/m times it is
   seed 003's factor (m-1)/m. A residual r outside the plane means the direct
   path itself (or gamma, or the axis) is wrong.
4. **Scale.** An answer that is a constant multiple s of the right one: s =
   n/(n-1) or its square root is the unbiased variance, s = -1 a sign, ...

Every finding carries numbers computed from the learner's own answer.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from microgradnorm import tolerances as tol

__all__ = [
    "Finding",
    "Geometry",
    "Mistake",
    "exception_findings",
    "geometry_findings",
    "match_mistake",
    "scale_finding",
    "shape_findings",
    "worst_entry",
]


@dataclass(frozen=True)
class Finding:
    """One diagnosis: a short title and an explanation with live numbers."""

    title: str
    detail: str


@dataclass(frozen=True)
class Mistake:
    """A known mistake and the answer it produces on this input."""

    title: str
    detail: str
    answer: np.ndarray


@dataclass(frozen=True)
class Geometry:
    """What the error decomposition of a normalization dx needs.

    ``xhat`` has the shape of x; ``mean_path`` is the true contribution of the
    path through the mean (constant over each group; None for RMSNorm, which has
    no mean); the true contribution of the path through the variance (or the
    rms) is ``radial_coef * xhat``, with ``radial_coef`` of the keepdims shape.
    """

    axes: tuple[int, ...]
    xhat: np.ndarray
    mean_path: np.ndarray | None
    radial_coef: np.ndarray
    eps: float
    radial_name: str = "variance"


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _idx(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def worst_entry(got: np.ndarray, expected: np.ndarray) -> tuple[tuple[int, ...], float, float]:
    """(index, expected, got) where the two differ most (NaN counts as the worst)."""
    diff = np.abs(np.asarray(got, dtype=np.float64) - expected)
    diff = np.where(np.isnan(diff), np.inf, diff)
    flat = int(np.argmax(diff))
    index = tuple(int(i) for i in np.unravel_index(flat, expected.shape)) if expected.ndim else ()
    return index, float(expected[index]), float(np.asarray(got)[index])


def match_mistake(got: np.ndarray, mistakes: list[Mistake]) -> Mistake | None:
    """The first known mistake whose answer ``got`` equals (within EXERCISE_MISTAKE_RTOL)."""
    for m in mistakes:
        if m.answer.shape == got.shape and tol.close(
            got, m.answer, tol.EXERCISE_MISTAKE_RTOL, tol.EXERCISE_MISTAKE_ATOL
        ):
            return m
    return None


# ---- shapes ---------------------------------------------------------------------


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def shape_findings(
    name: str,
    got: tuple[int, ...],
    expected: tuple[int, ...],
    x_shape: tuple[int, ...] | None = None,
    values_match_squeezed: bool = False,
) -> list[Finding]:
    """Why ``got`` is not ``expected``: keepdims, the wrong axis, a transpose, or just different."""
    got, expected = tuple(got), tuple(expected)
    found: list[Finding] = []
    if tuple(s for s in got if s != 1) == tuple(s for s in expected if s != 1):
        extra = (
            " The values themselves are right: only the shape is off."
            if values_match_squeezed
            else " (The values differ too, see below once the shape is fixed.)"
        )
        if len(got) > len(expected):
            how = "a reduction kept its axis (keepdims=True) where the result should drop it"
        else:
            how = "a reduction dropped an axis (keepdims=False) that the result should keep with size 1"
        found.append(
            Finding(
                "keepdims shape mistake",
                f"{name} has shape {got}, expected {expected}: {how}; use keepdims= to match, or reshape.{extra}",
            )
        )
        return found
    if x_shape is not None:
        x_shape = tuple(x_shape)
        axes_all = range(len(x_shape))
        want = [
            (ax, k)
            for r in range(1, len(x_shape) + 1)
            for ax in itertools.combinations(axes_all, r)
            for k in (False, True)
            if _reduced_shape(x_shape, ax, k) == expected
        ]
        have = [
            (ax, k)
            for r in range(1, len(x_shape) + 1)
            for ax in itertools.combinations(axes_all, r)
            for k in (False, True)
            if _reduced_shape(x_shape, ax, k) == got
        ]
        if want and have:
            (wax, _), (gax, _) = want[0], have[0]
            found.append(
                Finding(
                    "reduced over the wrong axis",
                    f"{name} has shape {got}, which is what reducing x {x_shape} over axis {_axes(gax)} gives; "
                    f"{name} is reduced over axis {_axes(wax)}, giving {expected}.",
                )
            )
            return found
    if len(got) == 2 and got == expected[::-1]:
        found.append(Finding("transposed", f"{name} has shape {got}, expected {expected}: it is transposed."))
        return found
    found.append(Finding("wrong shape", f"{name} has shape {got}, expected {expected}."))
    return found


def _axes(axes: tuple[int, ...]) -> str:
    return str(axes[0]) if len(axes) == 1 else str(axes)


# ---- scale ----------------------------------------------------------------------


def scale_finding(got: np.ndarray, expected: np.ndarray, n: int | None) -> Finding | None:
    """A finding when ``got`` is a constant multiple s != 1 of ``expected``."""
    denom = float(np.vdot(expected, expected))
    if denom == 0.0 or not np.all(np.isfinite(got)):
        return None
    s = float(np.vdot(got, expected)) / denom
    if not tol.close(got, s * expected, tol.EXERCISE_MISTAKE_RTOL, tol.EXERCISE_MISTAKE_ATOL):
        return None
    named: list[tuple[float, str, str]] = [(-1.0, "sign flipped", "your answer is the right one times -1.")]
    if n is not None and n > 1:
        u = n / (n - 1)
        named += [
            (
                u,
                "unbiased variance",
                f"your answer is the right one times n/(n-1) = {_fmt(u)} (n = {n}): the variance was divided by "
                "n-1 (unbiased). Normalization layers use the biased variance: divide by n.",
            ),
            (
                1 / u,
                "unbiased variance",
                f"your answer is the right one times (n-1)/n = {_fmt(1 / u)} (n = {n}): a variance divided by "
                "n-1 somewhere, or an extra factor (n-1)/n. Normalization layers divide by n.",
            ),
            (
                math.sqrt(u),
                "unbiased variance",
                f"your output is off by sqrt(n/(n-1)) = {_fmt(math.sqrt(u))} (n = {n}): the standard deviation "
                "used the unbiased variance (divided by n-1). Use the biased one: divide by n.",
            ),
            (
                1 / math.sqrt(u),
                "unbiased variance",
                f"your output is off by sqrt((n-1)/n) = {_fmt(1 / math.sqrt(u))} (n = {n}): the standard deviation "
                "used the unbiased variance (divided by n-1). Use the biased one: divide by n.",
            ),
            (float(n), "missing 1/n", f"your answer is n = {n} times the right one: a sum where a mean belongs."),
            (1.0 / n, "extra 1/n", f"your answer is 1/n = 1/{n} of the right one: a mean where a sum belongs."),
        ]
    named += [
        (2.0, "factor 2", "your answer is twice the right one."),
        (0.5, "factor 1/2", "your answer is half the right one: a factor 2 (from a square) or 1/2 is missing."),
    ]
    for value, title, detail in named:
        if abs(s - value) <= 1e-6 * abs(value):
            return Finding(title, detail)
    return Finding("off by a constant factor", f"your answer is the right one times {_fmt(s)} everywhere.")


# ---- geometry of a normalization dx ---------------------------------------------------


def geometry_findings(
    got: np.ndarray, expected: np.ndarray, geom: Geometry, explain_outside: bool = True
) -> list[Finding]:
    """Split the error of dx along 1 and xhat per group and say which path it points to.

    With ``explain_outside`` False, an error that leaves the plane of 1 and xhat
    gets no finding (used when a named mistake already explains it).
    """
    axes = geom.axes
    e = got - expected
    xhat = geom.xhat
    n = int(np.prod([e.shape[a] for a in axes]))
    # per-group least squares of e on the basis (1, xhat): a 2x2 system per group
    s1 = xhat.sum(axis=axes, keepdims=True)
    s2 = (xhat * xhat).sum(axis=axes, keepdims=True)
    r1 = e.sum(axis=axes, keepdims=True)
    r2 = (e * xhat).sum(axis=axes, keepdims=True)
    det = n * s2 - s1 * s1
    safe = np.where(det == 0, 1.0, det)
    a = np.where(det == 0, r1 / n, (s2 * r1 - s1 * r2) / safe)
    b = np.where(det == 0, 0.0, (n * r2 - s1 * r1) / safe)
    along_1 = np.broadcast_to(a, e.shape)
    along_x = b * xhat
    rest = e - along_1 - along_x
    total = float((e * e).sum())
    if total == 0.0 or not math.isfinite(total):
        return []
    f1 = float((along_1 * along_1).sum()) / total
    fx = float((along_x * along_x).sum()) / total
    fr = float((rest * rest).sum()) / total
    small = 1e-6
    sum_got = float(np.max(np.abs(got.sum(axis=axes))))
    dot_got = float(np.max(np.abs((got * xhat).sum(axis=axes))))
    found: list[Finding] = []
    share = f"{fx:.0%} of it along xhat, {f1:.0%} along the ones vector, {fr:.0%} elsewhere"

    if fr > small:
        if not explain_outside:
            return found
        found.append(
            Finding(
                "the direct path is wrong",
                f"The error is not only along 1 and xhat ({share}), so it is not just a missing mean or "
                "variance path: check the per-element term dxhat * rstd (gamma included, the right axis).",
            )
        )
        return found

    if geom.mean_path is not None and f1 > small:
        true_a = np.broadcast_to(geom.mean_path, a.shape)
        if np.allclose(a, -true_a, rtol=1e-6, atol=1e-12):
            title = "the path through the mean is missing"
            how = "exactly minus the mean path's contribution"
        else:
            title = "the path through the mean is wrong"
            how = "not the mean path's contribution"
        found.append(
            Finding(
                title,
                f"Your dx is off along the ones vector ({share}), by {how}. "
                f"Over each group the true dx sums to 0; yours sums to up to {_fmt(sum_got)}. "
                "The mean feeds every xhat_j, so each x_i gets -mean_j(dxhat_j) * rstd from it.",
            )
        )
    elif geom.mean_path is None and f1 > small:
        found.append(
            Finding(
                "a mean term in RMSNorm",
                f"Your dx is off along the ones vector ({share}) (it sums to up to {_fmt(sum_got)} per row). "
                "RMSNorm subtracts no mean, so no term of its dx is constant over the row: "
                "drop the -mean(dxhat) term of the LayerNorm formula.",
            )
        )

    if fx > small:
        c = np.broadcast_to(geom.radial_coef, b.shape)
        ok = np.abs(c) > 1e-12
        ratio = float(np.median(b[ok] / c[ok])) if ok.any() else float("nan")
        consistent = ok.any() and np.allclose(b[ok] / c[ok], ratio, rtol=1e-6, atol=1e-9)
        path = f"the path through the {geom.radial_name}"
        if consistent and abs(ratio + 1) < 1e-6:
            title, how = f"{path} is missing", "exactly minus that path's contribution"
        elif consistent and n > 1 and abs(ratio + 1 / n) < 1e-6:
            title = f"{path} carries a factor (m-1)/m (seed 003's slip)"
            how = (
                f"that path times -1/m (m = {n}): your variance path is (m-1)/m of the right one. "
                "The route from the mean into the variance contributes nothing: dvar/dmean = 0"
            )
        elif consistent:
            title, how = f"{path} is scaled wrongly", f"that path times {_fmt(ratio)}: yours is {_fmt(1 + ratio)} x it"
        else:
            title, how = f"{path} is wrong", "a multiple of xhat that is not a fixed multiple of that path"
        at_zero = (
            f" At eps = 0 the true dx is orthogonal to xhat; yours has dx . xhat up to {_fmt(dot_got)}."
            if geom.eps == 0.0
            else ""
        )
        found.append(Finding(title, f"Your dx is off along xhat ({share}), by {how}.{at_zero}"))
    return found


# ---- exceptions -----------------------------------------------------------------------


def exception_findings(error_type: str, message: str) -> list[Finding]:
    """Extra explanation for exceptions whose cause is usually one classic mistake."""
    if "could not be broadcast" in message:
        return [
            Finding(
                "a statistic lost its axis (keepdims)",
                "NumPy could not line up two arrays. A mean or sum over the last axis of an [N, D] array has "
                "shape [N]; to subtract it from each row it must be [N, 1]: pass keepdims=True.",
            )
        ]
    if error_type in ("ValueError", "LinAlgError") and "matmul" in message:
        return [Finding("matrix shapes", "A matrix product got operands whose inner sizes differ: check transposes.")]
    return []
