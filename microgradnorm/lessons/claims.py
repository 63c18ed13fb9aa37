"""Checked claims for the demos of lessons 08-14: a ✓/✗ line computed from the numbers it is about.

A lesson that shows numbers to make a point also says, in a line of its own,
whether the numbers make it: ``✓ column sums of dX are zero`` or ``✗ ...``.
The test for "zero" scales with the terms that cancel (a sum of numbers of
size 1 that should vanish is zero to about 1e-16 times their total size, not to
a fixed 1e-12), using the package's named tolerances.

The words of a claim are the caller's: each demo marks its own sentence for
translation where it has the numbers, as one whole sentence with named fields,
``claim(ok, _("dgamma: max error {error}").format(error=sci(err)))``, so that every
lesson's claims are catalog entries of their own. The line wraps the Chinese way
(:func:`microgradnorm.i18n.text.cjk_text`); English wraps as before.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm.i18n.text import CJKText, cjk_text
from microgradnorm.lessons.demo_tools import check_mark, sci
from microgradnorm.tolerances import cancellation_atol

__all__ = ["cancels", "claim", "claims"]


def cancels(total: float | np.ndarray, terms: float | np.ndarray, count: int = 64) -> bool:
    """True when ``total`` (a sum that should be zero) is zero up to rounding of ``terms``.

    ``terms`` is the total magnitude of what was added up (e.g. sum |a_i| for
    sum a_i); the test is :func:`~microgradnorm.tolerances.cancellation_atol` of ``terms``, elementwise (the
    terms' own roundings included: up to ``count`` of them), at least one ulp-sized floor.
    """
    total = np.abs(np.asarray(total, dtype=np.float64))
    scale = np.asarray(terms, dtype=np.float64)
    return bool(np.all(total <= cancellation_atol(scale, count) + np.finfo(np.float64).tiny))


def claim(ok: object, text: str | Text) -> CJKText:
    """One checked claim: ✓ or ✗, then what was checked (the words say it, not a colour).

    ``text`` is already in the reader's language: the caller's ``_("...").format(...)``.
    """
    return cjk_text(Text.assemble(check_mark(ok), " ", text))


def claims(lines: Iterable[tuple[object, str | Text]]) -> Group:
    """Several checked claims, one per line (each text translated by its caller, as for :func:`claim`)."""
    return Group(*(claim(ok, text) for ok, text in lines))


def maxabs(a: float | np.ndarray) -> str:
    """The largest magnitude in ``a``, in scientific notation (for error and residual lines)."""
    return sci(float(np.max(np.abs(a))))
