"""Verdicts that carry their measurement: what a ✓ or ✗ line, or a question's answer, rests on.

A demo that prints ``✓ post-LN, layer 0: 0.00168 ≤ 0.002`` decides the mark from
numbers. When it decides with a :class:`Check` instead of a bare bool, the
numbers travel with the mark::

    ok = at_most(ratio, bound, "post-LN layer 0 ÷ the product of 1/σ")
    claim(ok, _("post-LN, layer 0: {ratio} ≤ {bound}").format(...))

and :func:`recording` (opened by :func:`microgradnorm.lessons.demos.run_demo`)
collects every mark a demo printed with what it was measured against. The
option-grid test (``tests/test_option_grid.py``) runs each lesson over the
options it documents and fails when a printed mark disagrees with its
measurement, when a mark was printed from a bare bool (an unmeasured verdict),
or when a question's answer is not the choice its measured evidence supports.

Nothing here decides what is true: a Check only compares two numbers the demo
measured, so that the test can compare them again.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text

from microgradnorm.i18n.text import CJKText, cjk_text

__all__ = [
    "Check",
    "Checks",
    "Verdict",
    "above",
    "all_of",
    "at_least",
    "at_most",
    "below",
    "cancels",
    "check_mark",
    "claim",
    "claims",
    "close_to",
    "closest",
    "differs",
    "equal",
    "exactly",
    "first_holding",
    "largest",
    "mark",
    "mark_text",
    "nearest",
    "recording",
    "within",
]

RELATIONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_OPPOSITE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Check:
    """``measured relation bound``, e.g. 0.00168 <= 0.002: truthy when it holds (NaN never holds)."""

    what: str
    measured: float
    relation: str
    bound: float

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"relation: expected one of {', '.join(RELATIONS)}, got {self.relation!r}")

    def __bool__(self) -> bool:
        return bool(RELATIONS[self.relation](float(self.measured), float(self.bound)))

    def __and__(self, other: Check | Checks) -> Checks:
        return all_of(self, other)

    def __invert__(self) -> Check:
        """The opposite verdict on the same measurement (``<=`` becomes ``>``)."""
        return Check(self.what, self.measured, _OPPOSITE[self.relation], self.bound)

    def __str__(self) -> str:
        return f"{self.what}: {self.measured!r} {self.relation} {self.bound!r}"


@dataclass(frozen=True)
class Checks:
    """Several checks that must all hold (a verdict about several numbers at once)."""

    parts: tuple[Check, ...]

    def __bool__(self) -> bool:
        return all(bool(c) for c in self.parts)

    def __and__(self, other: Check | Checks) -> Checks:
        return all_of(self, other)

    def __str__(self) -> str:
        return " and ".join(str(c) for c in self.parts)


def all_of(*checks: Check | Checks) -> Checks:
    """One verdict that needs every one of ``checks``."""
    parts: list[Check] = []
    for c in checks:
        parts.extend(c.parts if isinstance(c, Checks) else (c,))
    return Checks(tuple(parts))


def at_most(measured: float, bound: float, what: str) -> Check:
    return Check(what, float(measured), "<=", float(bound))


def below(measured: float, bound: float, what: str) -> Check:
    return Check(what, float(measured), "<", float(bound))


def at_least(measured: float, bound: float, what: str) -> Check:
    return Check(what, float(measured), ">=", float(bound))


def above(measured: float, bound: float, what: str) -> Check:
    return Check(what, float(measured), ">", float(bound))


def within(measured: float, target: float, rtol: float, what: str) -> Check:
    """|measured - target| <= rtol·|target|, as a Check on the relative difference."""
    gap = abs(measured - target) / abs(target) if target else abs(measured)
    return Check(what + " (relative difference)", gap if math.isfinite(gap) else math.inf, "<=", rtol)


def _gap(a: object, b: object, rtol: float, atol: float) -> float:
    """max|a - b| ÷ (atol + rtol·max|b|), the normwise test of :func:`microgradnorm.tolerances.close` as a number."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.inf
    if a.size == 0:
        return 0.0
    diff = float(np.max(np.abs(a - b)))
    allowed = atol + rtol * float(np.max(np.abs(b)))
    return diff / allowed if allowed > 0 else (0.0 if diff == 0 else math.inf)


def close_to(a: object, b: object, rtol: float, atol: float, what: str) -> Check:
    """a equals b normwise (max|a - b| <= atol + rtol·max|b|): the measured gap in units of the tolerance, <= 1."""
    return Check(what + " (difference ÷ tolerance)", _gap(a, b, rtol, atol), "<=", 1.0)


def differs(a: object, b: object, rtol: float, atol: float, what: str) -> Check:
    """a is not b normwise: the measured gap in units of the tolerance, > 1."""
    return Check(what + " (difference ÷ tolerance)", _gap(a, b, rtol, atol), ">", 1.0)


def equal(a: object, b: object, what: str) -> Check:
    """a equals b exactly: the largest difference, <= 0."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    gap = float(np.max(np.abs(a - b))) if a.shape == b.shape and a.size else (0.0 if a.shape == b.shape else math.inf)
    return Check(what + " (largest difference)", gap if gap == gap else math.inf, "<=", 0.0)


def exactly(measured: float, value: float, what: str) -> Checks:
    """measured == value (for counts): at least and at most ``value``."""
    return all_of(at_least(measured, value, what), at_most(measured, value, what))


def _one_nearest(off: list[float], what: str, targets: tuple[float, ...]) -> tuple[Checks, ...]:
    """Per target i: off[i] < off[j] for every earlier j and off[i] <= off[j] for every later j (a tie goes to
    the first), so that exactly one target's check holds whenever the distances are finite."""
    return tuple(
        all_of(*((below if j < i else at_most)(off[i], off[j], f"{what}: distance to {targets[i]:g} vs {targets[j]:g}")
                 for j in range(len(targets)) if j != i))
        for i in range(len(targets))
    )  # fmt: skip


def nearest(measured: float, targets: tuple[float, ...], what: str) -> tuple[Checks, ...]:
    """One check per target: that ``measured`` is nearer to it than to every other, on a log scale."""
    off = [abs(math.log(measured / t)) if measured > 0 and t > 0 else math.inf for t in targets]
    return _one_nearest(off, what + " (log scale)", tuple(targets))


def closest(measured: float, targets: tuple[float, ...], what: str) -> tuple[Checks, ...]:
    """One check per target: that ``measured`` is nearer to it than to every other (plain distance)."""
    off = [abs(float(measured) - float(t)) for t in targets]
    off = [d if math.isfinite(d) else math.inf for d in off]
    return _one_nearest(off, what, tuple(float(t) for t in targets))


def largest(sizes: tuple[float, ...], names: tuple[str, ...], what: str) -> tuple[Checks, ...]:
    """One check per entry: that it is the largest of ``sizes`` (above every earlier one, at least every later
    one, so a tie goes to the first and exactly one check holds)."""
    return tuple(
        all_of(*((above if j < i else at_least)(sizes[i], sizes[j], f"{what}: {names[i]} vs {names[j]}")
                 for j in range(len(sizes)) if j != i))
        for i in range(len(sizes))
    )  # fmt: skip


def first_holding(evidence: tuple[object, ...], default: int = 0) -> int:
    """The index of the first choice whose evidence holds (``default`` when none does)."""
    return next((i for i, e in enumerate(evidence) if e is not None and bool(e)), default)


def cancels(total: object, terms: object, what: str = "a sum that should be 0", count: int = 64) -> Check:
    """A sum that should be zero is zero up to the rounding of its terms: max |total| ÷ bound <= 1.

    ``terms`` is the total magnitude of what was added up (sum |a_i| for sum a_i), elementwise like
    ``total``; the bound is the package's one rounding bound,
    :func:`~microgradnorm.tolerances.cancellation_atol` (``count`` roundings of ``terms``), with a floor
    of the smallest normal float, so exact zeros always pass.
    """
    import numpy as np

    from microgradnorm.tolerances import cancellation_atol

    total = np.abs(np.asarray(total, dtype=np.float64))
    allowed = cancellation_atol(np.asarray(terms, dtype=np.float64), count) + np.finfo(np.float64).tiny
    worst = float(np.max(total / allowed)) if total.size else 0.0
    return Check(what + " (sum ÷ its rounding bound)", worst if worst == worst else math.inf, "<=", 1.0)


@dataclass(frozen=True)
class Verdict:
    """One mark a demo printed: ✓ (``ok``) or ✗, and the check it was decided by (None: a bare bool)."""

    ok: bool
    check: Check | Checks | None


_RECORD: contextvars.ContextVar[list[Verdict] | None] = contextvars.ContextVar("verdicts", default=None)


def mark(ok: object) -> bool:
    """The mark for ``ok`` (a Check, Checks or bool), recorded when a demo is being recorded."""
    value = bool(ok)
    record = _RECORD.get()
    if record is not None:
        record.append(Verdict(value, ok if isinstance(ok, (Check, Checks)) else None))
    return value


@contextlib.contextmanager
def recording() -> Iterator[list[Verdict]]:
    """Collect the marks printed inside the block (nested blocks collect their own)."""
    record: list[Verdict] = []
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)


def mark_text(ok: bool) -> Text:
    """✓ in green or ✗ in bold red: the mark of every checked line (lessons, the check's table, the lab, exercises)."""
    return Text("✓", style="green") if ok else Text("✗", style="bold red")


def check_mark(ok: Check | Checks) -> Text:
    """✓ or ✗ for a measured verdict, recorded with its check: the one ✓/✗ of the lessons."""
    return mark_text(mark(ok))


def claim(ok: Check | Checks, text: str | Text) -> CJKText:
    """One checked claim: ✓ or ✗, then what was checked (the words say it, not a colour).

    ``text`` is already in the reader's language (the caller's ``_("...").format(...)``); the
    line wraps the Chinese way (:func:`microgradnorm.i18n.text.cjk_text`).
    """
    return cjk_text(Text.assemble(check_mark(ok), " ", cjk_text(text)))


def claims(lines: Iterable[tuple[Check | Checks, str | Text]]) -> Group:
    """Several checked claims, one per line."""
    return Group(*(claim(ok, text) for ok, text in lines))
