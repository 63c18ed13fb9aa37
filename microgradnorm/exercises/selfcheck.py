"""Small helpers the exercise files use when you run them on their own (``python FILE``).

They compare your gradient with a central finite difference
(:func:`microgradnorm.finite_diff.numerical_gradient`), which needs no calculus at all:
nudge one input by +h and -h, see how the loss moves. It is
the honest referee of every backward pass (and what the grader's closed forms
were themselves checked against).

They speak the language the exercise file is written in (a file ``init`` gave in
Chinese prints Chinese when run), so that one run never mixes two languages.
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType

import numpy as np

from microgradnorm.finite_diff import numerical_gradient  # the package's own, for the exercise files
from microgradnorm.i18n import ENGLISH, SIMPLIFIED_CHINESE, _, use_language

__all__ = ["numerical_gradient", "report"]


def _file_language() -> str:
    """The language of the exercise file being run: Chinese if its docstring has Chinese characters in it."""
    doc = getattr(sys.modules.get("__main__"), "__doc__", None) or ""
    return SIMPLIFIED_CHINESE if any("\u4e00" <= c <= "\u9fff" for c in doc) else ENGLISH


def _not_written_yet(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Say "not written yet" for a scaffold's NotImplementedError; any other error keeps its traceback."""
    if not issubclass(kind, NotImplementedError):
        _previous_hook(kind, exc, tb)
        return
    frames = traceback.extract_tb(tb)
    with use_language(_file_language()):
        if frames:
            line = _(
                "`{function}` (line {line}) is not written yet: write your code where it says so, then run "
                "this file again."
            ).format(function=frames[-1].name, line=frames[-1].lineno)
        else:
            line = _("A function is not written yet: write your code where it says so, then run this file again.")
    print(line, file=sys.stderr)


# Running an exercise file on its own imports this module first: a function still to be
# written then gets one line instead of a traceback (the learner's own errors keep theirs).
_previous_hook = sys.excepthook
sys.excepthook = _not_written_yet


_said = False  # whether what the comparison is against has been said in this run


def report(name: str, yours: object, numerical: np.ndarray, rtol: float = 1e-5) -> bool:
    """Print how far ``yours`` is from the finite difference; True when they agree.

    The first report of a run first says what is compared with what: the finite
    differences are of the learner's own forward pass, so a mistake the forward
    pass makes is one this check cannot see (the grader compares with the right answers).
    """
    global _said
    with use_language(_file_language()):
        if not _said:
            print(
                "  "
                + _(
                    "(each line: your backward pass against finite differences of your own forward pass; a mistake "
                    "in the forward pass shows in neither, the grader compares with the right answers)"
                )
            )
            _said = True
        line, ok = _compare(name, yours, np.asarray(numerical, dtype=np.float64), rtol)
    print(line)
    return ok


def _compare(name: str, yours: object, numerical: np.ndarray, rtol: float) -> tuple[str, bool]:
    try:
        mine = np.asarray(yours, dtype=np.float64)
    except (TypeError, ValueError):
        return "  " + _("{name}: could not be read as numbers: {yours!r}").format(name=name, yours=yours), False
    if mine.shape != numerical.shape:
        line = _("{name}: shape {got}, but the finite difference has shape {expected}")
        return "  " + line.format(name=name, got=mine.shape, expected=numerical.shape), False
    err = float(np.max(np.abs(mine - numerical))) if mine.size else 0.0
    scale = max(float(np.max(np.abs(numerical))) if mine.size else 0.0, 1e-12)
    ok = err <= rtol * scale + 1e-9
    verdict = _("agrees") if ok else _("DIFFERS")
    # Translators: one line per gradient; keep the columns: {name:<14} pads the name to 14 characters
    line = _("{name:<14} max |yours - finite difference| = {err:.2e}  -> {verdict}")
    return "  " + line.format(name=name, err=err, verdict=verdict), ok
