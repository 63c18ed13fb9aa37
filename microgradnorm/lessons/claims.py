"""Checked claims for the demos: a ✓/✗ line computed from the numbers it is about.

The line itself and the zero test are :mod:`microgradnorm.verdicts`' (one
implementation, which records each mark with its measurement); this module keeps the
names the demos import.

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

import numpy as np

from microgradnorm.lessons.demo_tools import sci
from microgradnorm.verdicts import cancels, claim, claims

__all__ = ["cancels", "claim", "claims", "maxabs"]


def maxabs(a: float | np.ndarray) -> str:
    """The largest magnitude in ``a``, in scientific notation (for error and residual lines)."""
    return sci(float(np.max(np.abs(a))))
