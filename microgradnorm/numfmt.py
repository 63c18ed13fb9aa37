"""Numbers as the package shows them, written once: significant digits, scientific notation, byte counts.

Standard library only, so every floor may use it (the check's table, the lessons, the lab, the drawings).
NaN is shown as a dash and -0 as 0 (a sign the value does not have is noise to a reader).
"""

from __future__ import annotations

__all__ = ["err", "fmt", "nbytes_text", "sci"]


def fmt(v: float, digits: int = 6) -> str:
    """A compact number: ``digits`` significant digits (``1.23457``, ``1e-07``)."""
    if v != v:
        return "—"
    return f"{v + 0.0:.{digits}g}"  # + 0.0 turns -0.0 into 0.0


def sci(v: float, digits: int = 2) -> str:
    """A number in scientific notation with ``digits`` decimals (``1.23e-05``): errors and residuals."""
    if v != v:
        return "—"
    return f"{v + 0.0:.{digits}e}"


def err(v: float) -> str:
    """An error or a difference: two significant digits, in scientific notation (``1.2e-09``)."""
    return sci(v, 1)


def nbytes_text(n: float) -> str:
    """A byte count for people: 512 B, 3.0 KiB, 12.0 MiB (powers of 1024, so the binary prefixes)."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
