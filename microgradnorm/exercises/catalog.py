"""The exercises, in order of difficulty, and where their files live.

This module imports only the standard library, so ``microgradnorm exercise list``
stays fast. What each exercise asks is said in its solution's docstring, which
the scaffold the learner edits keeps; how it is graded lives in :mod:`.problems` (the
grading side) and :mod:`.runner` (the side that runs learner code).

Package data next to this file:

* ``solutions/NN_name.py``: the reference solution, shown by ``solution``; what ``init`` and
  ``reset`` give the learner is derived from it (:func:`derive_scaffold`), never stored;
* ``hints.md``: the hints, one section per exercise, given out one at a time;
* ``solutions/zh-CN/``, ``hints.zh-CN.md``: their translations (:mod:`.translation`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from microgradnorm.i18n import N_, _

__all__ = [
    "EXERCISES",
    "MARKERS",
    "Exercise",
    "UnknownExerciseError",
    "derive_scaffold",
    "get_exercise",
    "hints",
    "parse_hints",
]

PACKAGE_DIR = Path(__file__).resolve().parent

# What an exercise's code may import while it is graded (the sandbox enforces it; each file says it)
USES = {
    "numpy": N_("NumPy and the Python standard library"),
    "engine": N_("microgradnorm.Value (the scalar engine), NumPy and the Python standard library"),
}


class UnknownExerciseError(ValueError):
    """NAME did not match any exercise (a one-line message for the CLI)."""


@dataclass(frozen=True)
class Exercise:
    """One exercise: its number, its file name and what it is about."""

    number: int
    slug: str
    title: str
    topic: str
    functions: tuple[str, ...]  # the functions the learner writes
    uses: str = "numpy"  # what the graded code may use: "numpy", or "engine" (microgradnorm.Value)

    @property
    def uses_text(self) -> str:
        """What the learner's code may use while it is graded, as the exercise file says it."""
        return USES[self.uses]

    @property
    def name(self) -> str:
        """``05_layernorm_backward``: the file name without ``.py``, and the key in the progress file."""
        return f"{self.number:02d}_{self.slug}"

    @property
    def filename(self) -> str:
        return f"{self.name}.py"

    @property
    def scaffold_text(self) -> str:
        """What ``init`` and ``reset`` give the learner in English: the solution with its marked regions emptied."""
        return derive_scaffold(self.solution.read_text(encoding="utf-8"))

    @property
    def solution(self) -> Path:
        return PACKAGE_DIR / "solutions" / self.filename

    @property
    def lesson(self) -> int:
        """The lesson that teaches what this exercise needs (its file and its failures name it)."""
        return LESSONS[self.number]


# exercise -> its lesson: 1 the chain rule; 2 and 5 the paths into x; 3 the forward graph; 4 the affine step;
# 6 and 7 BatchNorm; 8 RMSNorm; 9 the Jacobian and P; 10 numerical traps; 11 pre-LN
LESSONS = {1: 1, 2: 5, 3: 3, 4: 4, 5: 5, 6: 8, 7: 8, 8: 9, 9: 7, 10: 12, 11: 11}


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        1,
        "local_derivatives",
        N_("Local derivatives of the primitives"),
        N_("mul, pow, sqrt, divide"),
        ("mul_backward", "pow_backward", "sqrt_backward", "div_backward"),
    ),
    Exercise(
        2,
        "mean_variance_backward",
        N_("Mean and variance backward"),
        N_("how one statistic spreads its gradient over a row"),
        ("mean_backward", "variance_backward"),
    ),
    Exercise(
        3,
        "layernorm_from_values",
        N_("LayerNorm from primitives"),
        N_("build it from Value nodes; backward() does the rest"),
        ("layer_norm",),
        uses="engine",
    ),
    Exercise(
        4,
        "affine_backward",
        N_("dgamma and dbeta"),
        N_("the affine step y = gamma * xhat + beta, backwards"),
        ("affine_backward",),
    ),
    Exercise(
        5,
        "layernorm_backward",
        N_("LayerNorm backward in closed form"),
        N_("vectorized NumPy forward with a cache, and its backward"),
        ("layernorm_forward", "layernorm_backward"),
    ),
    Exercise(
        6,
        "batchnorm_staged",
        N_("BatchNorm backward, staged"),
        N_("dxhat, dvar, dmean, then the three paths into dx"),
        ("batchnorm_backward_staged",),
    ),
    Exercise(
        7,
        "batchnorm_simplified",
        N_("BatchNorm backward, simplified"),
        N_("the three paths folded into one line"),
        ("batchnorm_backward",),
    ),
    Exercise(
        8,
        "rmsnorm_backward",
        N_("RMSNorm backward"),
        N_("no mean, no shift: only a multiple of xhat is taken away"),
        ("rmsnorm_forward", "rmsnorm_backward"),
    ),
    Exercise(
        9,
        "layernorm_jacobian",
        N_("The LayerNorm Jacobian and its projection"),
        N_("dy/dx = (1/std) diag(gamma) (I - P)"),
        ("projection", "layernorm_jacobian"),
    ),
    Exercise(
        10,
        "stable_variance",
        N_("A numerically stable variance"),
        N_("Welford's one-pass update, safe when the mean is huge"),
        ("welford_update",),
    ),
    Exercise(
        11,
        "preln_residual",
        N_("Gradient through a pre-LN residual block"),
        N_("out = x + LN(x) @ W: the identity path and the LN path"),
        ("preln_forward", "preln_backward"),
    ),
)


def _key(text: str) -> str:
    return text.strip().lower().removesuffix(".py").replace("-", "_")


def get_exercise(name: str | int) -> Exercise:
    """The exercise named by its number (``5``, ``05``), full name or slug.

    Raises :class:`UnknownExerciseError` with a one-line message otherwise.
    """
    key = _key(str(name))
    for ex in EXERCISES:
        if (key.isdecimal() and ex.number == int(key)) or key in (ex.name, ex.slug):
            return ex
    raise UnknownExerciseError(
        _(
            "NAME: expected an exercise number (1-{last}) or name, got {given!r}; "
            "`microgradnorm exercise list` shows them"
        ).format(last=len(EXERCISES), given=str(name))
    )


_HINT_START = re.compile(r"^(\d+)\.\s+(.*)$")
_HINT_MARK = re.compile(r"^<!--\s*english:\s*([0-9a-f]+)\s*-->\s*$")


def parse_hints(text: str) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Parse a hints file: ``## NN_name`` sections of numbered hints (``1. ...``).

    A hint runs on over indented lines until the next number. Its lines are
    joined (with a space, except between Chinese characters), so that the
    terminal wraps it once, at its own width; a blank line inside a hint starts
    a new paragraph. Returns the hints by exercise name, and the
    ``<!-- english: HASH -->`` mark of each section of a translation (see
    :mod:`.translation`).
    """
    sections: dict[str, list[list[str]]] = {}
    marks: dict[str, str] = {}
    current: list[list[str]] | None = None
    name = ""
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            current = sections.setdefault(name, [])
            continue
        if current is None:
            continue
        match, mark = _HINT_START.match(line), _HINT_MARK.match(line)
        if mark and not current:
            marks[name] = mark.group(1)
        elif match:
            current.append([match.group(2)])
        elif current and (line.startswith("   ") or not line.strip()):
            current[-1].append(line.strip())
    return {name: tuple(_paragraphs(lines) for lines in hs) for name, hs in sections.items()}, marks


def _joined(before: str, after: str) -> str:
    """Two source lines of one paragraph: a space between them, none between Chinese characters or next to
    full-width punctuation (which carries its own space), as the lessons' Markdown joins them."""
    from microgradnorm.i18n.text import joins_without_space  # rich: loaded when hints are shown, not listed

    if before and after and not joins_without_space(before[-1], after[0]):
        return f"{before} {after}"
    return before + after


def _paragraphs(lines: list[str]) -> str:
    """One hint's lines as text: lines joined, a newline between paragraphs."""
    paragraphs: list[str] = [""]
    for line in lines:
        if not line:
            paragraphs.append("")
        else:
            paragraphs[-1] = _joined(paragraphs[-1], line)
    return "\n".join(p.strip() for p in paragraphs if p.strip())


def hints(exercise: Exercise) -> tuple[str, ...]:
    """The hints of ``exercise``, easiest first, in English (:func:`.translation.hints`: in the learner's)."""
    return parse_hints((PACKAGE_DIR / "hints.md").read_text(encoding="utf-8"))[0].get(exercise.name, ())


# The learner writes between these two lines (a translated file has them in its language). A scaffold is its
# solution with everything between them replaced by one ``raise NotImplementedError``, derived when it is
# given out, so there is no second file to drift apart from the solution.
CODE_START = "# ---- write your code here ----"
CODE_END = "# ---- end of your code ----"
MARKERS = {"en": (CODE_START, CODE_END), "zh-CN": ("# ---- 在这里写你的代码 ----", "# ---- 你的代码到此为止 ----")}


def derive_scaffold(solution: str) -> str:
    """The scaffold text of a reference solution: each marked region emptied."""
    starts, ends = {m[0] for m in MARKERS.values()}, {m[1] for m in MARKERS.values()}
    out: list[str] = []
    inside = False
    for line in solution.splitlines(keepends=True):
        mark = line.strip()
        if mark in starts:
            indent = line[: len(line) - len(line.lstrip())]
            out += [line, f'{indent}raise NotImplementedError("write your code here")\n']
            inside = True
        elif mark in ends:
            out.append(line)
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)
