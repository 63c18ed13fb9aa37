"""Numbers as the package shows them, written once: significant digits, scientific notation, byte counts.

Standard library only, so every floor may use it (the check's table, the lessons, the lab, the drawings).
NaN is shown as a dash and -0 as 0 (a sign the value does not have is noise to a reader).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["bracketed", "count", "err", "fmt", "ms", "nbytes_text", "plain", "ratio", "sci"]


def fmt(v: float, digits: int = 6) -> str:
    """A compact number: ``digits`` significant digits (``1.23457``, ``1e-07``); NaN, a value not computed: —."""
    return "—" if v != v else plain(v, digits)


def plain(v: float, digits: int = 6) -> str:
    """A value as it is, ``digits`` significant digits, nan and inf spelled out (a loss gone to nan is news)."""
    return f"{v + 0.0:.{digits}g}"  # + 0.0 turns -0.0 into 0.0


def sci(v: float, digits: int = 2) -> str:
    """A number in scientific notation with ``digits`` decimals (``1.23e-05``): errors and residuals."""
    if v != v:
        return "—"
    return f"{v + 0.0:.{digits}e}"


def err(v: float) -> str:
    """An error or a difference: two significant digits, in scientific notation (``1.2e-09``)."""
    return sci(v, 1)


def bracketed(values: Iterable[int]) -> str:
    """A shape or an index as the lessons and the grader print it: ``[2, 3, 4]``."""
    return "[" + ", ".join(map(str, values)) + "]"


def nbytes_text(n: float) -> str:
    """A byte count for people: 512 B, 3.0 KiB, 12.0 MiB (powers of 1024, so the binary prefixes)."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def ms(v: float | None) -> str:
    """Milliseconds in a table: three significant digits, whole with thousands separators from 100 on; None: -."""
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def ratio(v: float | None) -> str:
    """A ratio of two times, at most 5 characters (``0.93x``, ``12.3x``); None: -."""
    if v is None:
        return "-"
    return f"{v:.2f}x" if round(v, 2) < 10 else f"{v:.3g}x"  # (9.996 would be 10.00x)


def count(v: float | None) -> str:
    """A count, or a mean of counts, whole with thousands separators (``1,234``); None: -."""
    return "-" if v is None else f"{v:,.0f}"
