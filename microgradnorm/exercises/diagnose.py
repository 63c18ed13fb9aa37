"""Name the mistake in a wrong answer, from the numbers alone.

A wrong gradient is more useful with a reason attached. Four tools, used by the
grader in this order on the first output that fails:

1. **Shape.** A shape that differs only by axes of size 1 is a ``keepdims``
   mistake; a shape that is what summing over another set of axes gives is the
   wrong axis; the transpose is named as such.
2. **Known mistakes.** Each exercise computes the answers that common mistakes
   produce (the path through the mean left out, the unbiased variance, the
   (m-1)/m slip of a widely circulated derivation, gamma forgotten, the wrong
   axis, ...) from the closed forms; a learner's answer that matches one of
   them is that mistake.
3. **Geometry** (normalization backward only). For LayerNorm and BatchNorm the
   exact dx of a group is the direct path minus two components: one along the
   ones vector (the path through the mean; it makes sum(dx) = 0) and one along
   xhat (the path through the variance; it makes dx . xhat = 0 at eps = 0).
   So the error e = got - expected of each group is split by least squares into
   a * 1 + b * xhat + r. An error along 1 alone means the mean path is wrong,
   along xhat alone the variance path, and b compared with the true variance
   path's coefficient says how: -1 times it is a missing path, -1/m times it is
   the (m-1)/m slip. A residual r outside the plane blames no term: it only
   says that no single path explains the error (the trial that asked for this
   saw "the direct path is wrong" said of code whose mistake was elsewhere).
4. **Scale.** An answer that is a constant multiple s of the right one: s =
   n/(n-1) or its square root is the unbiased variance, s = -1 a sign, s = a
   ratio of two counts a division by the wrong one, ...

5. **Two at once.** Mistakes in separate terms add their errors: an answer that
   is the right one plus the errors of two known mistakes has both
   (:func:`match_pair`); a factor that is a named quantity (rstd, gamma, b) or
   varies row by row is said as such (:func:`factor_findings`).

A mistake is named only when the numbers single it out; the grader
(:mod:`.judge`) says which outputs are wrong and by how much otherwise. A
diagnosis is data: a :class:`Finding` holds a key and the numbers computed
from the learner's own answer; :mod:`.messages` turns it into words.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from microgradnorm import tolerances as tol
from microgradnorm.exercises import messages
from microgradnorm.exercises.messages import phrase
from microgradnorm.i18n import LazyText
from microgradnorm.i18n.text import sentences

__all__ = [
    "Count",
    "Finding",
    "Geometry",
    "Mistake",
    "exception_findings",
    "factor_findings",
    "finding",
    "geometry_findings",
    "match_mistake",
    "match_pair",
    "matches",
    "mistake",
    "scale_finding",
    "shape_findings",
    "staged",
    "worst_entry",
]

PAIR_SHARE = 1e-3  # two mistakes explain an error only if they leave at most this share of it unexplained
SMALL_SHARE = 1e-6  # a share of the squared error below this is rounding, not a component of the mistake


@dataclass(frozen=True)
class Finding:
    """One diagnosis: a message key, its parameters, and findings that explain it further."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)
    also: tuple[Finding, ...] = ()
    output: str = ""  # the output it is about, when several are wrong ("div_backward: db")
    held: int = 0  # the exercise's number when the explanation (the fix) is held back: a first failure

    @property
    def title(self) -> str:
        said = messages.title(self.key, self.params)
        return messages.say("about_output", name=self.output, title=said) if self.output else said

    @property
    def detail(self) -> str:
        if self.held:  # the title names the slip; the fix comes when it is found again (a note says so once)
            return ""
        return sentences([messages.detail(self.key, self.params), *(f.detail for f in self.also)])

    @property
    def keys(self) -> set[str]:
        """Its key and the keys of the findings that explain it further."""
        return {self.key}.union(*(f.keys for f in self.also))


def finding(key: str, **params: Any) -> Finding:
    return Finding(key, params)


def staged(findings: list[Finding], seen: set[str], number: int) -> list[Finding]:
    """The findings of one check with the fix held back where it is the first time this mistake was found."""
    return [replace(f, held=number) if f.key in messages.REVEALS and not f.keys & seen else f for f in findings]


@dataclass(frozen=True)
class Mistake:
    """A known mistake and the answer it produces on this input."""

    finding: Finding
    answer: np.ndarray

    @property
    def title(self) -> str:
        return self.finding.title


def mistake(key: str, answer: np.ndarray, **params: Any) -> Mistake:
    return Mistake(Finding(key, params), np.asarray(answer, dtype=np.float64))


@dataclass(frozen=True)
class Count:
    """A count a formula divides by, named for messages, e.g. Count(5, phrase("count_row_length")).

    ``divides`` False: a count the formula does not divide by at all, that a learner might divide by.
    """

    value: int
    what: LazyText
    divides: bool = True


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
    radial_name: str = "variance"  # "variance" or "rms": the path it is (a key of messages.SAYINGS after "path_")


def worst_entry(got: np.ndarray, expected: np.ndarray) -> tuple[tuple[int, ...], float, float]:
    """(index, expected, got) where the two differ most (NaN counts as the worst)."""
    diff = np.abs(np.asarray(got, dtype=np.float64) - expected)
    diff = np.where(np.isnan(diff), np.inf, diff)
    flat = int(np.argmax(diff))
    index = tuple(int(i) for i in np.unravel_index(flat, expected.shape)) if expected.ndim else ()
    return index, float(expected[index]), float(np.asarray(got)[index])


def match_mistake(got: np.ndarray, mistakes: list[Mistake]) -> Mistake | None:
    """The first known mistake whose answer ``got`` equals (within EXERCISE_MISTAKE_RTOL)."""
    return next((m for m in mistakes if matches(got, m.answer)), None)


def matches(got: np.ndarray, answer: np.ndarray) -> bool:
    """Whether ``got`` is ``answer``, to the tolerance of a named mistake (EXERCISE_MISTAKE_RTOL)."""
    return answer.shape == got.shape and tol.close(got, answer, tol.EXERCISE_MISTAKE_RTOL, tol.EXERCISE_MISTAKE_ATOL)


def match_pair(got: np.ndarray, expected: np.ndarray, mistakes: list[Mistake]) -> tuple[Mistake, Mistake] | None:
    """Two known mistakes made at once: ``got`` is the right answer plus both of their errors.

    Mistakes in separate terms of a sum (a path left out, a wrong W in another) add their
    errors exactly; an answer that is that sum, to the tolerance of a named mistake, has both.
    """
    error = float(np.linalg.norm(got - expected))
    errors = [(m, m.answer - expected) for m in mistakes if m.answer.shape == got.shape]
    errors = [(m, e) for m, e in errors if np.all(np.isfinite(e)) and np.any(e)]
    for (m1, e1), (m2, e2) in itertools.combinations(errors, 2):
        both = e1 + e2  # two mistakes whose errors cancel (a path left out, the same path doubled) explain nothing
        if m1.title == m2.title or float(np.linalg.norm(got - expected - both)) > PAIR_SHARE * error:
            continue
        if matches(got, expected + both):
            return m1, m2
    return None


# ---- shapes ---------------------------------------------------------------------


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reductions_giving(x_shape: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The sets of axes whose reduction of an array of ``x_shape`` gives ``shape`` (keepdims or not)."""
    found = []
    for r in range(1, len(x_shape) + 1):
        for axes in itertools.combinations(range(len(x_shape)), r):
            if shape in (_reduced_shape(x_shape, axes, False), _reduced_shape(x_shape, axes, True)):
                found.append(axes)
    return found


def axes_text(axes: tuple[int, ...]) -> str:
    """``1`` for one axis, ``(0, 1)`` for several: as a learner writes ``axis=`` in NumPy."""
    return str(axes[0]) if len(axes) == 1 else str(axes)


def shape_findings(
    name: str,
    got: tuple[int, ...],
    expected: tuple[int, ...],
    x_shape: tuple[int, ...] | None = None,
    values_match_squeezed: bool = False,
    x_name: str = "x",
) -> list[Finding]:
    """Why ``got`` is not ``expected``: keepdims, the wrong axis (of ``x_name``), a transpose, or just different."""
    got, expected = tuple(got), tuple(expected)
    if tuple(s for s in got if s != 1) == tuple(s for s in expected if s != 1):
        extra = phrase("keepdims_values_ok" if values_match_squeezed else "keepdims_values_differ")
        how = phrase("keepdims_kept" if len(got) > len(expected) else "keepdims_dropped")
        return [finding("keepdims", name=name, got=got, expected=expected, how=how, extra=extra)]
    if len(got) == len(expected) and all(g in (1, e) for g, e in zip(got, expected)):
        return [finding("not_broadcast", name=name, got=got, expected=expected)]  # a statistic's shape, kept
    if x_shape is not None:
        want, have = _reductions_giving(tuple(x_shape), expected), _reductions_giving(tuple(x_shape), got)
        if want and have:
            axes = {"got_axes": axes_text(have[0]), "want_axes": axes_text(want[0])}
            shapes = {"got": got, "expected": expected, "x_shape": tuple(x_shape), "x_name": x_name}
            return [finding("wrong_axis_shape", name=name, **shapes, **axes)]
    if len(got) == 2 and got == expected[::-1]:
        return [finding("transposed_shape", name=name, got=got, expected=expected)]
    return [finding("wrong_shape", name=name, got=got, expected=expected)]


# ---- scale ----------------------------------------------------------------------


def _named_factors(n: int | None, counts: tuple[Count, ...]) -> list[tuple[float, Finding]]:
    named: list[tuple[float, Finding]] = [(-1.0, finding("sign_flipped"))]
    if n is not None and n > 1:
        u = n / (n - 1)
        named += [
            (u, finding("scale_unbiased", factor=u, n=n)),
            (1 / u, finding("scale_unbiased_inverse", factor=1 / u, n=n)),
            (math.sqrt(u), finding("scale_unbiased_std", factor=math.sqrt(u), n=n)),
            (1 / math.sqrt(u), finding("scale_unbiased_std", factor=1 / math.sqrt(u), n=n)),
        ]
    for extra in counts:
        if not extra.divides and extra.value > 1:
            named.append((1.0 / extra.value, finding("scale_extra_count", n=extra.value, what=extra.what)))
    for right, wrong in itertools.permutations([c for c in counts if c.divides], 2):
        if right.value != wrong.value:
            f = right.value / wrong.value
            said = {"right_what": right.what, "wrong_what": wrong.what}
            named.append((f, finding("scale_count", factor=f, right=right.value, wrong=wrong.value, **said)))
    if n is not None and n > 1:
        named += [(float(n), finding("scale_missing_1_over_n", n=n)), (1.0 / n, finding("scale_extra_1_over_n", n=n))]
    return [*named, (2.0, finding("scale_two")), (0.5, finding("scale_half"))]


def scale_finding(
    got: np.ndarray, expected: np.ndarray, n: int | None, counts: tuple[Count, ...] = ()
) -> Finding | None:
    """A finding when ``got`` is a constant multiple s != 1 of ``expected``.

    ``n`` is the group size of a normalization (for the unbiased factors);
    ``counts`` are the counts the output's formula could divide by, the right
    one first: a ratio of two of them is a division by the wrong one.
    """
    denom = float(np.vdot(expected, expected))
    if denom == 0.0 or not np.all(np.isfinite(got)):
        return None
    s = float(np.vdot(got, expected)) / denom
    if not tol.close(got, s * expected, tol.EXERCISE_MISTAKE_RTOL, tol.EXERCISE_MISTAKE_ATOL):
        return None
    for value, named in _named_factors(n, counts):
        if abs(s - value) <= 1e-6 * abs(value):
            return named
    return finding("scale_other", factor=s)


def _ratio_along(got: np.ndarray, expected: np.ndarray, axis: int) -> np.ndarray | None:
    """The one factor per index of ``axis`` (constant along the other axes) with got = factor * expected, or None."""
    others = tuple(a for a in range(expected.ndim) if a != axis)
    denom = (expected * expected).sum(axis=others, keepdims=True)
    if np.any(denom == 0):
        return None
    r = (got * expected).sum(axis=others, keepdims=True) / denom
    return r if tol.close(got, r * expected, tol.EXERCISE_MISTAKE_RTOL, tol.EXERCISE_MISTAKE_ATOL) else None


def factor_findings(
    name: str, got: np.ndarray, expected: np.ndarray, quantities: list[tuple[str, np.ndarray]]
) -> list[Finding]:
    """``got`` is ``expected`` times a factor that differs from row to row (or column to column).

    A named quantity (rstd, gamma, b, ...) that is that factor, or its inverse, is an extra
    factor or a missing one; otherwise the factor is described by the axis it varies along.
    """
    if not np.all(np.isfinite(got)) or not np.any(expected):
        return []
    for label, q in quantities:
        q = np.asarray(q, dtype=np.float64)
        try:
            extra, missing = np.broadcast_to(expected * q, got.shape), np.broadcast_to(expected / q, got.shape)
        except ValueError:
            continue
        if np.ptp(q) == 0 and q.size > 1:
            continue  # a constant: the scale finding names it
        if matches(got, extra):
            return [finding("factor_extra", name=name, q=label)]
        if matches(got, missing):
            return [finding("factor_missing", name=name, q=label)]
    if expected.ndim < 2:
        return []
    for axis in range(expected.ndim):
        r = _ratio_along(got, expected, axis)
        if r is not None and float(np.ptp(r)) > 1e-6 * float(np.max(np.abs(r))):
            where = phrase(
                "per_row" if axis == 0 else "per_column" if axis == expected.ndim - 1 else "per_axis", axis=axis
            )
            low, high = _distinct(float(np.min(r)), float(np.max(r)))
            return [finding("factor_per_axis", name=name, where=where, low=low, high=high)]
    return []


def _distinct(low: float, high: float) -> tuple[str, str]:
    """Two numbers with as few digits (3 at least) as tell them apart: not "from 1 to 1" for 0.9996 and 0.9999."""
    for digits in range(3, 16):
        said = f"{low:.{digits}g}", f"{high:.{digits}g}"
        if said[0] != said[1]:
            break
    return said


# ---- geometry of a normalization dx ---------------------------------------------------


@dataclass(frozen=True)
class _Split:
    """The error e = a * 1 + b * xhat + rest of each group, and each part's share of |e|^2."""

    a: np.ndarray
    b: np.ndarray
    n: int
    along_1: float
    along_xhat: float
    rest: float

    @property
    def share(self) -> LazyText:
        xhat, ones, rest = f"{self.along_xhat:.0%}", f"{self.along_1:.0%}", f"{self.rest:.0%}"
        return phrase("share", xhat=xhat, ones=ones, rest=rest)


def _split(e: np.ndarray, xhat: np.ndarray, axes: tuple[int, ...]) -> _Split | None:
    """Per-group least squares of e on the basis (1, xhat): a 2x2 system per group."""
    n = int(np.prod([e.shape[a] for a in axes]))
    s1, s2 = xhat.sum(axis=axes, keepdims=True), (xhat * xhat).sum(axis=axes, keepdims=True)
    r1, r2 = e.sum(axis=axes, keepdims=True), (e * xhat).sum(axis=axes, keepdims=True)
    det = n * s2 - s1 * s1
    safe = np.where(det == 0, 1.0, det)
    a = np.where(det == 0, r1 / n, (s2 * r1 - s1 * r2) / safe)
    b = np.where(det == 0, 0.0, (n * r2 - s1 * r1) / safe)
    along_1, along_x = np.broadcast_to(a, e.shape), b * xhat
    rest = e - along_1 - along_x
    total = float((e * e).sum())
    if total == 0.0 or not math.isfinite(total):
        return None
    return _Split(a, b, n, *(float((p * p).sum()) / total for p in (along_1, along_x, rest)))


def _consistent_ratio(got: np.ndarray, true: np.ndarray) -> float | None:
    """The one factor r with got = r * true over every group, or None."""
    true = np.broadcast_to(true, got.shape)
    ok = np.abs(true) > 1e-12
    if not ok.any():
        return None
    ratios = got[ok] / true[ok]
    r = float(np.median(ratios))
    return r if np.allclose(ratios, r, rtol=1e-6, atol=1e-9) else None


def _mean_finding(split: _Split, geom: Geometry, sum_got: float) -> Finding | None:
    if split.along_1 <= SMALL_SHARE:
        return None
    if geom.mean_path is None:
        return finding("geometry_rms_mean_term", share=split.share, sum_got=sum_got)
    ratio = _consistent_ratio(split.a, geom.mean_path)
    if ratio is not None and abs(ratio + 1) < 1e-6:
        return finding("geometry_mean_missing", share=split.share, sum_got=sum_got)
    if ratio is not None:
        return finding("geometry_mean_scaled", share=split.share, sum_got=sum_got, ratio=ratio, yours=1 + ratio)
    return finding("geometry_mean_wrong", share=split.share, sum_got=sum_got)


def _radial_finding(split: _Split, geom: Geometry, dot_got: float) -> Finding | None:
    if split.along_xhat <= SMALL_SHARE:
        return None
    at_zero = phrase("at_zero", dot_got=dot_got) if geom.eps == 0.0 else ""
    common = {"share": split.share, "path": phrase(f"path_{geom.radial_name}"), "at_zero": at_zero}
    ratio = _consistent_ratio(split.b, geom.radial_coef)
    if ratio is not None and abs(ratio + 1) < 1e-6:
        return finding("geometry_radial_missing", **common)
    if ratio is not None and split.n > 1 and abs(ratio + 1 / split.n) < 1e-6:
        return finding("geometry_radial_slip", m=split.n, **common)
    if ratio is not None:
        return finding("geometry_radial_scaled", ratio=ratio, yours=1 + ratio, **common)
    return finding("geometry_radial_wrong", **common)


def _one_count(found: list[Finding], split: _Split, geom: Geometry) -> list[Finding]:
    """Both paths scaled by the same factor n/k: one finding, the means over the group divided by k, not n."""
    if [f.key for f in found] != ["geometry_mean_scaled", "geometry_radial_scaled"]:
        return found
    a, b = (float(f.params["yours"]) for f in found)
    if a <= 0 or abs(a - b) > 1e-6 * a:
        return found
    k, n = split.n / a, split.n
    if abs(k - round(k)) > 1e-6 * k or round(k) == n:
        return found
    k = round(k)
    key = "geometry_count_sum" if k == 1 else "geometry_count_unbiased" if k == n - 1 else "geometry_count"
    return [finding(key, share=split.share, path=phrase(f"path_{geom.radial_name}"), yours=a, n=n, k=k)]


def geometry_findings(
    got: np.ndarray, expected: np.ndarray, geom: Geometry, explain_outside: bool = True
) -> list[Finding]:
    """Split the error of dx along 1 and xhat per group and say which path it points to.

    With ``explain_outside`` False, an error that leaves the plane of 1 and xhat
    gets no finding (used when a named mistake already explains it).
    """
    split = _split(got - expected, geom.xhat, geom.axes)
    if split is None:
        return []
    if split.rest > SMALL_SHARE:  # not a path's fault alone: say so, and blame no term
        key = "not_paths_alone" if geom.mean_path is not None else "not_paths_alone_rms"  # RMSNorm has no mean path
        return [finding(key, share=split.share)] if explain_outside else []
    sum_got = float(np.max(np.abs(got.sum(axis=geom.axes))))
    dot_got = float(np.max(np.abs((got * geom.xhat).sum(axis=geom.axes))))
    paths = (_mean_finding(split, geom, sum_got), _radial_finding(split, geom, dot_got))
    return _one_count([f for f in paths if f is not None], split, geom)


# ---- exceptions -----------------------------------------------------------------------


def _lost_an_axis(message: str) -> bool:
    """Whether NumPy's broadcast error names two shapes, one of them the other without one of its axes."""
    shapes = [tuple(int(n) for n in inside.split(",") if n.strip()) for inside in re.findall(r"\(([\d, ]*)\)", message)]
    for a, b in itertools.permutations(shapes, 2):
        if len(a) == len(b) + 1 and any(a[:i] + a[i + 1 :] == b for i in range(len(a))):
            return True
    return False


def exception_findings(error_type: str, message: str) -> list[Finding]:
    """Extra explanation for exceptions whose cause is usually one classic mistake."""
    if "could not be broadcast" in message:
        return [finding("keepdims_broadcast")] if _lost_an_axis(message) else []
    if error_type in ("ValueError", "LinAlgError") and "matmul" in message:
        return [finding("matmul_shapes")]
    return []
