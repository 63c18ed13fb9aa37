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
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "Check",
    "Checks",
    "Verdict",
    "above",
    "all_of",
    "at_least",
    "at_most",
    "below",
    "mark",
    "recording",
    "within",
]

RELATIONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


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
