"""Lesson translations: one Markdown file per lesson per language, kept in step with the English.

A translation of ``lessons/03-layernorm-forward.md`` is
``lessons/zh-CN/03-layernorm-forward.md``: the same format (parsed by
:func:`microgradnorm.lessons.format.parse_lesson`), the same steps in the same
order, the same demo blocks with the same arguments and the same ``defaults``;
only the words change. Its front matter records which English it translates, one
hash per English step (title, prose and demo blocks) and one for the lesson's
title and summary::

    ---
    title: LayerNorm 的前向传播
    summary: ...
    defaults: {"dim": 4, "seed": 0}
    english: 03-layernorm-forward.md
      lesson: 5d1c0a9e27b4  # LayerNorm forward, node by node
      step 1: 9f8e7d6c5b4a  # Why build it from single numbers
      step 2: 0b1c2d3e4f5a  # The mean
    ---

``python -m microgradnorm.i18n_tools hashes 03`` prints that block for the current
English. When an English step changes, its hash changes, and :func:`check` (run by
the tests) names the translated step that is now out of date, until the
translator updates its words and then its hash.

A learner never sees an error from a translation: :func:`localize` shows the
English for a step whose translation is out of date, and the whole English lesson
when the two disagree in structure (or the translation does not exist).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from microgradnorm.i18n import ENGLISH, SIMPLIFIED_CHINESE, _
from microgradnorm.i18n.drift import HASH_LENGTH, KEY, MISSING, digest, marked_file, normalized
from microgradnorm.lessons.format import (
    LESSON_FILE,
    DemoCall,
    Lesson,
    LessonFormatError,
    Prose,
    Step,
    lessons_dir,
    load_lessons,
    parse_lesson,
)

__all__ = [
    "PAGES",
    "Localized",
    "Translation",
    "check",
    "english_hashes",
    "english_lesson",
    "front_matter_block",
    "localize",
    "localize_all",
    "localized",
    "localized_page",
    "page_mark",
    "read_translation",
    "step_hash",
    "translation_problems",
    "translations_dir",
]

_KEY_LINE = re.compile(rf"^{KEY}\s*:\s*(.*?)\s*$")
_HASH_LINE = re.compile(rf"^\s+(lesson|step (\d+))\s*:\s*([0-9a-f]{{{HASH_LENGTH}}})\s*(?:#.*)?$")


@dataclasses.dataclass
class Translation:
    """A parsed translation and the English it says it translates."""

    lesson: Lesson
    source: str | None  # the English file's name, as recorded
    hashes: dict[str, str]  # "lesson", "step 1", ... -> the English hash recorded

    @property
    def path(self) -> Path:
        return self.lesson.path


# ---- what a translation records -------------------------------------------------------------------------


def _block_payload(block: Prose | DemoCall) -> list[str]:
    if isinstance(block, DemoCall):
        return ["demo", block.name, repr(sorted(block.args.items()))]
    return ["prose", normalized(block.text)]


def step_hash(step: Step) -> str:
    """A short hash of what a step says: its title, prose and demo blocks (trailing spaces aside)."""
    return digest([step.title.strip(), [_block_payload(b) for b in step.blocks]])


def english_hashes(lesson: Lesson) -> dict[str, str]:
    """``{"lesson": hash of title and summary, "step 1": ..., ...}`` for an English lesson."""
    hashes = {"lesson": digest([lesson.title, lesson.summary])}
    hashes.update({f"step {k}": step_hash(step) for k, step in enumerate(lesson.steps, start=1)})
    return hashes


def front_matter_block(lesson: Lesson) -> str:
    """The ``english:`` block a translation of ``lesson`` carries, with each English title as a reminder."""
    titles = {"lesson": lesson.title} | {f"step {k}": s.title for k, s in enumerate(lesson.steps, start=1)}
    lines = [f"{KEY}: {lesson.path.name}"]
    lines += [f"  {key}: {value}  # {titles[key]}" for key, value in english_hashes(lesson).items()]
    return "\n".join(lines) + "\n"


# ---- reading a translation ----------------------------------------------------------------------------------


def _take_english_block(path: Path, lines: list[str]) -> tuple[list[str], str | None, dict[str, str]]:
    """The front matter's ``english:`` block, parsed, and the lines with it blanked out (so the lesson
    parser, which knows nothing of it, reports the other lines at their true numbers)."""
    out = list(lines)
    source: str | None = None
    hashes: dict[str, str] = {}
    inside = False
    if not lines or lines[0].strip() != "---":
        return out, source, hashes  # no front matter: the lesson parser says so
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            break
        key_line = _KEY_LINE.match(line)
        if key_line:
            source, inside, out[i] = key_line.group(1) or None, True, ""
        elif inside and line[:1].isspace() and line.strip():
            match = _HASH_LINE.match(line)
            if not match:
                raise LessonFormatError(
                    path, i + 1, f"expected '  step N: <{HASH_LENGTH} hex digits>' in the {KEY} block, got {line!r}"
                )
            hashes[match.group(1)] = match.group(3)
            out[i] = ""
        else:
            inside = False
    return out, source, hashes


def read_translation(path: str | Path, text: str | None = None) -> Translation:
    """Parse a translation file; a malformed one raises :class:`LessonFormatError` naming the line."""
    path = Path(path)
    if text is None:
        text = path.read_text(encoding="utf-8")
    lines, source, hashes = _take_english_block(path, text.lstrip("\ufeff").splitlines())
    lesson = parse_lesson(path, "\n".join(lines) + "\n", check_demos=False)  # its demos are the English's
    return Translation(lesson, source, hashes)


def translations_dir(language: str, english_dir: str | Path | None = None) -> Path:
    """Where the translations of the lessons in ``english_dir`` (default: the lessons folder) live."""
    return Path(english_dir if english_dir is not None else lessons_dir()) / language


# ---- checks -----------------------------------------------------------------------------------------------------


def _shape(step: Step) -> list[str]:
    return ["demo" if isinstance(b, DemoCall) else "prose" for b in step.blocks]


def _call(call: DemoCall) -> str:
    return f"{call.name}({', '.join(f'{k}={v!r}' for k, v in sorted(call.args.items()))})"


def _step_structure(where: str, k: int, english: Step, translated: Step) -> list[str]:
    label = f"{where}: step {k} ({translated.title!r}, English {english.title!r})"
    if [_call(c) for c in english.demos] != [_call(c) for c in translated.demos]:
        want = "; ".join(_call(c) for c in english.demos) or "none"
        have = "; ".join(_call(c) for c in translated.demos) or "none"
        return [f"{label}: its demo blocks differ from the English: English {want}, translation {have}"]
    if _shape(english) != _shape(translated):
        return [
            f"{label}: its blocks are {', '.join(_shape(translated))}; "
            f"the English's are {', '.join(_shape(english))} (keep prose and demos in the English order)"
        ]
    return []


def structure_problems(english: Lesson, translation: Translation) -> list[str]:
    """Where the translation does not have the English's shape: steps, demo blocks, defaults, file."""
    where = str(translation.path)
    found = []
    if translation.source != english.path.name:
        found.append(f"{where}: its '{KEY}:' line names {translation.source!r}, expected {english.path.name!r}")
    if translation.lesson.defaults != english.defaults:
        found.append(
            f"{where}: defaults {translation.lesson.defaults} differ from the English's {english.defaults} "
            "(the options and their defaults are the English's)"
        )
    if len(translation.lesson.steps) != len(english.steps):
        found.append(
            f"{where}: {len(translation.lesson.steps)} steps, the English {english.path.name} has "
            f"{len(english.steps)} (a translation has the English's steps, in order)"
        )
        return found
    for k, (en, tr) in enumerate(zip(english.steps, translation.lesson.steps), start=1):
        found += _step_structure(where, k, en, tr)
    return found


def stale_keys(english: Lesson, translation: Translation) -> list[str]:
    """The keys (``lesson``, ``step 3``) whose English changed since the translation recorded it."""
    return [key for key, value in english_hashes(english).items() if translation.hashes.get(key) != value]


def drift_problems(english: Lesson, translation: Translation) -> list[str]:
    """One line per translated step (or title and summary) that is older than its English."""
    current = english_hashes(english)
    found = []
    for key in stale_keys(english, translation):
        recorded = translation.hashes.get(key)
        what = (
            "the lesson's title or summary"
            if key == "lesson"
            else f"{key} ({english.steps[int(key.split()[1]) - 1].title!r})"
        )
        change = f"recorded {recorded}, now {current[key]}" if recorded else f"no hash recorded, now {current[key]}"
        found.append(
            f"{translation.path}: {what} changed in the English since it was translated ({change}); update the "
            f"translation, then its hash (python -m microgradnorm.i18n_tools hashes {english.number:02d})"
        )
    return found


def check(english: Lesson, translation: Translation) -> list[str]:
    """Every way ``translation`` is out of step with ``english``: structure first, then drift."""
    return structure_problems(english, translation) or drift_problems(english, translation)


def translation_problems(language: str = SIMPLIFIED_CHINESE, english_dir: str | Path | None = None) -> list[str]:
    """Check every translation into ``language`` (structure, drift); empty when in step. The glossary's
    terms are the translators' tools' check (:func:`microgradnorm.i18n_tools.glossary.lesson_term_problems`)."""
    folder = translations_dir(language, english_dir)
    if not folder.is_dir():
        return []
    english = {lesson.path.name: lesson for lesson in load_lessons(english_dir, check_demos=False)}
    found: list[str] = []
    for name in PAGES:
        if (folder / name).is_file():
            found += _page_state(folder.parent / name, folder / name)[2]
    for path in sorted(folder.glob("*.md")):
        if not LESSON_FILE.match(path.name):
            continue
        if path.name not in english:
            found.append(f"{path}: no English lesson {path.name} to translate")
            continue
        try:
            translation = read_translation(path)
        except LessonFormatError as exc:
            found.append(str(exc))
            continue
        found += check(english[path.name], translation)
    return found


# ---- what a learner sees ---------------------------------------------------------------------------------------

ORIGINAL = "original"  # English was asked for
TRANSLATED = "translated"  # a translation in step with the English structure (some steps may still be English)
UNTRANSLATED = "untranslated"  # no translation file
MISMATCHED = "mismatched"  # a translation that does not read, or differs from the English in structure


@dataclasses.dataclass(frozen=True)
class Localized:
    """A lesson as a reader of ``language`` sees it, and what of it is shown in English."""

    lesson: Lesson
    status: str  # one of ORIGINAL, TRANSLATED, UNTRANSLATED, MISMATCHED
    english_steps: frozenset[int] = frozenset()  # 0-based steps shown in English: their English changed since
    problems: tuple[str, ...] = ()  # for translators: what ``python -m microgradnorm.i18n_tools check`` says too

    def note(self) -> str | None:
        """One line for the learner when the whole lesson is shown in English although they chose another language."""
        if self.status == UNTRANSLATED:
            return _("This lesson is not translated yet, so it is shown in English.")
        if self.status == MISMATCHED:
            return _("This lesson's translation does not match the English lesson, so it is shown in English.")
        return None

    def step_notes(self) -> dict[int, str]:
        """Step index -> one line for the learner, for each step shown in English in a translated lesson."""
        note = _("This step changed in English after it was translated, so it is shown in English for now.")
        return {index: note for index in sorted(self.english_steps)}


def localized(english: Lesson, language: str) -> Localized:
    """``english`` in ``language`` (never an error; see :func:`localize`), with what is shown in English."""
    if language == ENGLISH:
        return Localized(english, ORIGINAL)
    path = translations_dir(language, english.path.parent) / english.path.name
    if not path.is_file():
        return Localized(english, UNTRANSLATED)
    try:
        translation = read_translation(path)
    except (LessonFormatError, OSError, UnicodeDecodeError) as exc:
        return Localized(english, MISMATCHED, problems=(str(exc),))
    problems = structure_problems(english, translation)
    if problems:
        return Localized(english, MISMATCHED, problems=tuple(problems))
    stale = set(stale_keys(english, translation))
    pairs = enumerate(zip(english.steps, translation.lesson.steps), start=1)
    steps = [en if f"step {k}" in stale else tr for k, (en, tr) in pairs]
    header = english if "lesson" in stale else translation.lesson
    lesson = dataclasses.replace(english, title=header.title, summary=header.summary, steps=steps)
    english_steps = frozenset(k - 1 for k in range(1, len(steps) + 1) if f"step {k}" in stale)
    return Localized(lesson, TRANSLATED, english_steps, tuple(drift_problems(english, translation)))


def localize(english: Lesson, language: str) -> tuple[Lesson, list[str]]:
    """``english`` in ``language``, and notes on what is shown in English instead (never an error).

    Steps whose translation is current are translated; a step whose English has
    changed since is shown in English; a translation that is missing, malformed or
    differs in structure leaves the whole lesson in English. The result keeps the
    English lesson's path, number, slug and defaults, so progress is shared across
    languages.
    """
    shown = localized(english, language)
    return shown.lesson, list(shown.problems)


def localize_all(lessons: Sequence[Lesson], language: str) -> list[Lesson]:
    """Each lesson in ``language`` (the lesson list's titles and summaries)."""
    return [localized(lesson, language).lesson for lesson in lessons]


# ---- pages of the lessons folder (the references, the glossary) ------------------------------------------------

PAGES = ("REFERENCES.md", "GLOSSARY.md")
# the first line of a translated page: which English page it translates, and a hash of that English
_PAGE_MARK = re.compile(rf"\A\ufeff?<!--\s*{KEY}:\s*(\S+)\s+([0-9a-f]{{{HASH_LENGTH}}})\s*-->[ \t]*(?:\n|\Z)")


def page_hash(text: str) -> str:
    """A short hash of a page's English text (trailing spaces and blank lines at the ends aside)."""
    return digest(["page", normalized(text)])


def page_mark(english_path: Path) -> str:
    """The first line a translation of the page ``english_path`` carries."""
    return f"<!-- {KEY}: {english_path.name} {page_hash(english_path.read_text(encoding='utf-8'))} -->\n"


def _page_state(english_path: Path, path: Path) -> tuple[str, str, list[str]]:
    """(state, the translation's text without its mark, problems), as :func:`.drift.marked_file` tells them."""
    now = page_hash(english_path.read_text(encoding="utf-8"))
    expected = f"<!-- {KEY}: {english_path.name} <hash> -->"
    remedy = f"python -m microgradnorm.i18n_tools hashes {english_path.name}"
    return marked_file(path, _PAGE_MARK, english_path.name, now, expected, remedy)


def localized_page(english_path: Path, language: str) -> tuple[str, str | None]:
    """The page's text in ``language``, and a note for the reader when the English is shown instead.

    An unreadable English page raises :class:`OSError`; a translation never raises.
    """
    english = english_path.read_text(encoding="utf-8")
    if language == ENGLISH:
        return english, None
    state, text, _problems = _page_state(
        english_path, translations_dir(language, english_path.parent) / english_path.name
    )
    if state == MISSING:
        return english, _("This page is not translated yet, so it is shown in English.")
    if state == MISMATCHED:
        return english, _("This page's translation does not match the English page, so it is shown in English.")
    if state != TRANSLATED:
        return english, _("This page changed in English after it was translated, so it is shown in English for now.")
    return text, None


def english_lesson(reference: str, english_dir: str | Path | None = None) -> Lesson:
    """An English lesson by number (``3``, ``03``) or file name (``03-layernorm-forward.md``) or path."""
    given = Path(reference)
    if given.suffix == ".md" and given.is_file():
        return parse_lesson(given, check_demos=False)
    folder = Path(english_dir) if english_dir is not None else lessons_dir()
    for path in sorted(folder.glob("*.md")):
        match = LESSON_FILE.match(path.name)
        if match and (path.name == reference or (reference.isdecimal() and int(reference) == int(match.group(1)))):
            return parse_lesson(path, check_demos=False)
    raise ValueError(f"lesson: expected a lesson number or file name in {folder}, got {reference!r}")
