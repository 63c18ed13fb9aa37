"""The exercises, in order of difficulty, and where their files live.

This module imports only the standard library, so ``microgradnorm exercise list``
stays fast. What each exercise asks is said in its scaffold's docstring (the
file the learner edits); how it is graded lives in :mod:`.problems` (the
grading side) and :mod:`.runner` (the side that runs learner code).

Package data next to this file:

* ``scaffolds/NN_name.py``: what ``init`` copies into the learner's workspace;
* ``solutions/NN_name.py``: the reference solution, shown by ``solution``;
* ``hints.md``: the hints, one section per exercise, given out one at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["EXERCISES", "Exercise", "UnknownExerciseError", "derive_scaffold", "get_exercise", "hints"]

PACKAGE_DIR = Path(__file__).resolve().parent

# What an exercise's code may import while it is graded (the sandbox enforces it; each file says it)
USES = {
    "numpy": "NumPy and the Python standard library",
    "engine": "microgradnorm.Value (the scalar engine), NumPy and the Python standard library",
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
    def scaffold(self) -> Path:
        return PACKAGE_DIR / "scaffolds" / self.filename

    @property
    def solution(self) -> Path:
        return PACKAGE_DIR / "solutions" / self.filename


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        1,
        "local_derivatives",
        "Local derivatives of the primitives",
        "mul, pow, sqrt, divide",
        ("mul_backward", "pow_backward", "sqrt_backward", "div_backward"),
    ),
    Exercise(
        2,
        "mean_variance_backward",
        "Mean and variance backward",
        "how one statistic spreads its gradient over a row",
        ("mean_backward", "variance_backward"),
    ),
    Exercise(
        3,
        "layernorm_from_values",
        "LayerNorm from primitives",
        "build it from Value nodes; backward() does the rest",
        ("layer_norm",),
        uses="engine",
    ),
    Exercise(
        4,
        "affine_backward",
        "dgamma and dbeta",
        "the affine step y = gamma * xhat + beta, backwards",
        ("affine_backward",),
    ),
    Exercise(
        5,
        "layernorm_backward",
        "LayerNorm backward in closed form",
        "vectorized NumPy forward with a cache, and its backward",
        ("layernorm_forward", "layernorm_backward"),
    ),
    Exercise(
        6,
        "batchnorm_staged",
        "BatchNorm backward, staged",
        "dxhat, dvar, dmean, then the three paths into dx",
        ("batchnorm_backward_staged",),
    ),
    Exercise(
        7,
        "batchnorm_simplified",
        "BatchNorm backward, simplified",
        "the three paths folded into one line",
        ("batchnorm_backward",),
    ),
    Exercise(
        8,
        "rmsnorm_backward",
        "RMSNorm backward",
        "no mean, no shift: only the radial part is removed",
        ("rmsnorm_forward", "rmsnorm_backward"),
    ),
    Exercise(
        9,
        "layernorm_jacobian",
        "The LayerNorm Jacobian and its projection",
        "dy/dx = (1/sigma) diag(gamma) (I - P)",
        ("projection", "layernorm_jacobian"),
    ),
    Exercise(
        10,
        "stable_variance",
        "A numerically stable variance",
        "Welford's one-pass update, safe when the mean is huge",
        ("welford_update",),
    ),
    Exercise(
        11,
        "preln_residual",
        "Gradient through a pre-LN residual block",
        "out = x + LN(x) @ W: the identity path and the LN path",
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
    if key.isdigit():
        for ex in EXERCISES:
            if ex.number == int(key):
                return ex
    for ex in EXERCISES:
        if key in (ex.name, ex.slug):
            return ex
    raise UnknownExerciseError(
        f"NAME: expected an exercise number (1-{len(EXERCISES)}) or name, got {str(name)!r}; "
        "`microgradnorm exercise list` shows them"
    )


_HINT_START = re.compile(r"^(\d+)\.\s+(.*)$")


@cache
def _all_hints() -> dict[str, tuple[str, ...]]:
    """Parse ``hints.md``: ``## NN_name`` sections of numbered hints (``1. ...``).

    A hint runs on over indented lines until the next number. Its lines are
    joined with spaces, so that the terminal wraps it once, at its own width;
    a blank line inside a hint starts a new paragraph.
    """
    sections: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    text = (PACKAGE_DIR / "hints.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
            continue
        if current is None:
            continue
        match = _HINT_START.match(line)
        if match:
            current.append([match.group(2)])
        elif current and (line.startswith("   ") or not line.strip()):
            current[-1].append(line.strip())
    return {name: tuple(_paragraphs(lines) for lines in hs) for name, hs in sections.items()}


def _paragraphs(lines: list[str]) -> str:
    """One hint's lines as text: a space between lines, a newline between paragraphs."""
    text = " ".join(line if line else "\n" for line in lines)
    return "\n".join(part.strip() for part in text.split("\n") if part.strip())


def hints(exercise: Exercise) -> tuple[str, ...]:
    """The hints of ``exercise``, easiest first."""
    return _all_hints().get(exercise.name, ())


# The learner writes between these two lines. A scaffold is its solution with
# everything between them replaced by one ``raise NotImplementedError``, so the
# two files cannot drift apart (an authoring test checks it).
CODE_START = "# ---- write your code here ----"
CODE_END = "# ---- end of your code ----"


def derive_scaffold(solution: str) -> str:
    """The scaffold text of a reference solution: each marked region emptied."""
    out: list[str] = []
    inside = False
    for line in solution.splitlines(keepends=True):
        mark = line.strip()
        if mark == CODE_START:
            indent = line[: len(line) - len(line.lstrip())]
            out += [line, f'{indent}raise NotImplementedError("write your code here")\n']
            inside = True
        elif mark == CODE_END:
            out.append(line)
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)
