"""The exercise files and hints in the learner's language, each translation kept in step with its English.

A translated exercise file lives beside the English one, in a folder named after
its language (``solutions/zh-CN/05_layernorm_backward.py``; the scaffold a learner
gets is derived from it, as the English one is from its solution); the
translated hints are one file, ``hints.zh-CN.md``. A
translation changes the words only (docstrings, comments, the text the file
prints when run on its own): its code is the English file's code, token for
token, so the grader grades it the same way (``tests/test_zh_exercises.py``
holds every file to that).

Each translation records which English it translates, as the lesson translations
do: a translated file's first line names its English file and a short hash of
that file's text, ``# english: 05_layernorm_backward.py 1a2b3c4d5e6f`` (the line
is left out of the copy a learner gets), and each section of translated hints
carries ``<!-- english: 1a2b3c4d5e6f -->``, the hash of that exercise's English
hints. When the English changes and the translation does not, the learner gets
the English file (or hints), with a note that says why, never code that drifted
from the English. ``python -m microgradnorm.exercises.translation`` prints the
lines a translation must carry; :func:`translation_problems` lists every drift
(``python -m microgradnorm.i18n_tools check`` includes it).

Standard library and :mod:`microgradnorm.i18n` only.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from microgradnorm.exercises.catalog import EXERCISES, PACKAGE_DIR, Exercise, derive_scaffold, parse_hints
from microgradnorm.exercises.catalog import hints as english_hints
from microgradnorm.i18n import ENGLISH, LANGUAGES, N_, SIMPLIFIED_CHINESE, _, current_language
from microgradnorm.i18n.drift import HASH_LENGTH, KEY, MARKED_FILE_STATES, digest, marked_file, normalized

__all__ = [
    "Localized",
    "english_hash",
    "file_mark",
    "hint_mark",
    "hints",
    "hints_hash",
    "main",
    "scaffold",
    "scaffold_texts",
    "solution",
    "translation_problems",
]

_FILE_MARK = re.compile(rf"\A# {KEY}: (\S+) ([0-9a-f]{{{HASH_LENGTH}}})[ \t]*\n")
TRANSLATED, MISSING, STALE, MISMATCHED = MARKED_FILE_STATES


@dataclass(frozen=True)
class Localized:
    """Text for the learner: in the language asked for, or English with a note that says why."""

    text: str
    language: str  # the language ``text`` is in
    note: str | None = None  # for the learner, when English is given in place of a translation


def english_hash(path: Path) -> str:
    """A short hash of an English exercise file's text (trailing spaces and blank lines at the ends aside)."""
    return digest(normalized(path.read_text(encoding="utf-8")))


def file_mark(english: Path) -> str:
    """The first line a translation of the English file ``english`` carries."""
    return f"# {KEY}: {english.name} {english_hash(english)}\n"


def translated_path(english: Path, language: str) -> Path:
    return english.parent / language / english.name


def _file_state(english: Path, language: str) -> tuple[str, str, list[str]]:
    """(state, the translation's text without its first line, problems) of one translated exercise file."""
    name = f"{english.parent.name}/{english.name}"
    expected, remedy = f"# {KEY}: {english.name} <hash>", f"python -m microgradnorm.exercises.translation {name}"
    path, now = translated_path(english, language), english_hash(english)
    return marked_file(path, _FILE_MARK, english.name, now, expected, remedy, label=name)


# what the learner is told when a file is given in English in place of its translation
_NOTES = {
    ("scaffolds", MISSING): N_("Exercise {number} is not translated yet, so its file is in English."),
    ("scaffolds", STALE): N_(
        "Exercise {number} changed in English after it was translated, so its file is in English for now."
    ),
    ("scaffolds", MISMATCHED): N_(
        "The translation of exercise {number} does not match the English, so its file is in English."
    ),
    ("solutions", MISSING): N_(
        "The reference solution of exercise {number} is not translated yet, so it is in English."
    ),
    ("solutions", STALE): N_(
        "The reference solution of exercise {number} changed in English after it was translated, so it is in "
        "English for now."
    ),
    ("solutions", MISMATCHED): N_(
        "The translation of the reference solution of exercise {number} does not match the English, so it is in "
        "English."
    ),
    ("hints", MISSING): N_("The hints of exercise {number} are not translated yet, so they are in English."),
    ("hints", STALE): N_(
        "The hints of exercise {number} changed in English after they were translated, so they are in English for now."
    ),
    ("hints", MISMATCHED): N_(
        "The translated hints of exercise {number} do not match the English, so they are in English."
    ),
}


def _note(kind: str, state: str, ex: Exercise) -> str:
    return _(_NOTES[kind, state]).format(number=ex.number)


def _localized_file(english: Path, kind: str, ex: Exercise, language: str | None) -> Localized:
    language = current_language() if language is None else language
    if language == ENGLISH:
        return Localized(english.read_text(encoding="utf-8"), ENGLISH)
    state, text, _problems = _file_state(english, language)
    if state == TRANSLATED:
        return Localized(text, language)
    return Localized(english.read_text(encoding="utf-8"), ENGLISH, _note(kind, state, ex))


def scaffold(ex: Exercise, language: str | None = None) -> Localized:
    """The file ``init`` and ``reset`` give the learner, in ``language`` (default: the current one): the
    reference solution in that language with its marked regions emptied (:func:`.catalog.derive_scaffold`)."""
    given = _localized_file(ex.solution, "scaffolds", ex, language)
    return Localized(derive_scaffold(given.text), given.language, given.note)


def solution(ex: Exercise, language: str | None = None) -> Localized:
    """The reference solution ``solution`` shows, in ``language`` (default: the current one)."""
    return _localized_file(ex.solution, "solutions", ex, language)


def scaffold_texts(ex: Exercise) -> dict[str, str]:
    """The scaffold of ``ex`` as it is in every language that has one in step: a learner's file equal to one
    of them is untouched (``init`` may give it in another language; ``reset`` keeps no backup of it)."""
    given = [scaffold(ex, language) for language in LANGUAGES]  # English in place of one out of step
    return {s.language: s.text for s in given}


# ---- hints ----------------------------------------------------------------------------------------------------


def hints_hash(hints: tuple[str, ...]) -> str:
    """A short hash of one exercise's English hints, as parsed (so rewrapping a hint changes nothing)."""
    return digest("\n\n".join(hints))


def hint_mark(ex: Exercise) -> str:
    """The line under an exercise's heading in a translation of the hints."""
    return f"<!-- {KEY}: {hints_hash(english_hints(ex))} -->"


def hints_path(language: str) -> Path:
    return PACKAGE_DIR / f"hints.{language}.md"


def _translated_hints(language: str) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    path = hints_path(language)
    if not path.is_file():
        return {}, {}
    return parse_hints(path.read_text(encoding="utf-8"))


def _hints_state(ex: Exercise, language: str) -> tuple[str, tuple[str, ...], list[str]]:
    english = english_hints(ex)
    sections, marks = _translated_hints(language)
    where = f"{hints_path(language).name}, section {ex.name}"
    if ex.name not in sections:
        return MISSING, (), []
    if ex.name not in marks:
        return MISMATCHED, (), [f"{where}: expected a line '{hint_mark(ex)}' under its heading"]
    if len(sections[ex.name]) != len(english):
        found = f"{len(sections[ex.name])} hints where the English has {len(english)}"
        return MISMATCHED, (), [f"{where}: {found} (the hints seen are counted across languages)"]
    if marks[ex.name] != hints_hash(english):
        problem = (
            f"{where}: changed in the English since it was translated (recorded {marks[ex.name]}, now "
            f"{hints_hash(english)}); update the translation, then its mark ({hint_mark(ex)})"
        )
        return STALE, (), [problem]
    return TRANSLATED, sections[ex.name], []


def hints(ex: Exercise, language: str | None = None) -> tuple[tuple[str, ...], str | None]:
    """(the hints of ``ex``, easiest first, a note when they are shown in English in place of a translation)."""
    language = current_language() if language is None else language
    english = english_hints(ex)
    if language == ENGLISH or not english:
        return english, None
    state, translated, _problems = _hints_state(ex, language)
    if state == TRANSLATED:
        return translated, None
    return english, _note("hints", state, ex)


# ---- the translators' tools ----------------------------------------------------------------------------------------


def translation_problems(language: str = SIMPLIFIED_CHINESE) -> list[str]:
    """Every exercise translation out of step with its English (a missing translation is not a problem)."""
    found: list[str] = []
    for ex in EXERCISES:
        found += _file_state(ex.solution, language)[2]
        found += _hints_state(ex, language)[2]
    return found


USAGE = """python -m microgradnorm.exercises.translation              every mark a translation carries
python -m microgradnorm.exercises.translation FILE ...     the first line of each (solutions/05_layernorm_backward.py)
python -m microgradnorm.exercises.translation hints        the heading and mark of each section of the hints"""


def _marks(wanted: list[str]) -> list[str]:
    """The lines to copy: every mark (nothing wanted), or the first line of each file named, or the hints'."""
    lines = []
    for ex in EXERCISES:
        name, mark = f"{ex.solution.parent.name}/{ex.filename}", file_mark(ex.solution).rstrip()
        if not wanted:
            lines += [f"{name}: {mark}", f"hints.md {ex.name}: {hint_mark(ex)}"]
            continue
        if name in wanted:
            lines.append(mark)
        if "hints" in wanted:
            lines += [f"## {ex.name}", hint_mark(ex)]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the marks a translation carries."""
    wanted = sys.argv[1:] if argv is None else list(argv)
    lines = _marks(wanted)
    if not lines or any(arg.startswith("-") for arg in wanted):
        print(USAGE)
        return 0 if not wanted or "--help" in wanted or "-h" in wanted else 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
