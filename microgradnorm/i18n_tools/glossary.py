"""The glossary: one Chinese term for each English term of the field, and checks that translations use it.

``microgradnorm/locale/glossary.tsv`` has one term per line, tab-separated::

    English (variants joined by |)   Chinese   not to be used (joined by |)   checked   note

- English variants are one term (``backward pass|backpropagation`` -> 反向传播);
  matching ignores case and allows a plural ``s``/``es``.
- "not to be used" lists the other renderings a translator may reach for (the
  d2l-zh or colloquial ones): a translation that uses one is reported.
- "checked" is ``yes`` when a translated step must contain the Chinese term
  whenever its English step uses the English one (outside code). Terms that are
  also ordinary words (``mean`` the verb, ``batch`` the option) say ``no``.

The mapping must be one to one (:func:`glossary_problems`): no English variant and
no Chinese term appears in two entries, and no entry's term is another's
"not to be used".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from microgradnorm.i18n import LOCALE_DIR

if TYPE_CHECKING:
    from microgradnorm.lessons.format import Lesson

__all__ = ["GLOSSARY", "Term", "glossary_problems", "lesson_term_problems", "load_glossary", "term_problems"]

GLOSSARY = LOCALE_DIR / "glossary.tsv"
COLUMNS = 5
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Term:
    english: tuple[str, ...]  # lowercase variants
    chinese: str
    avoid: tuple[str, ...]
    checked: bool
    note: str
    line: int

    def pattern(self) -> re.Pattern[str]:
        words = "|".join(re.escape(v).replace(r"\ ", r"[\s-]+") for v in sorted(self.english, key=len, reverse=True))
        return re.compile(rf"(?<![\w-])(?:{words})(?:s|es)?(?![\w-])", re.IGNORECASE)


def _split(cell: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in cell.split("|") if part.strip())


def load_glossary(path: Path = GLOSSARY) -> list[Term]:
    """The glossary's entries; a line without its five columns is a ``ValueError`` naming the line."""
    terms = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != COLUMNS or cells[3] not in ("yes", "no") or not cells[0].strip() or not cells[1].strip():
            raise ValueError(
                f"{path}:{number}: expected {COLUMNS} tab-separated columns (English, Chinese, not to be used, "
                f"yes/no, note) with the first two filled, got {line!r}"
            )
        english, chinese, avoid, checked, note = cells
        terms.append(
            Term(
                tuple(v.lower() for v in _split(english)),
                chinese.strip(),
                _split(avoid),
                checked == "yes",
                note,
                number,
            )
        )
    return terms


def glossary_problems(path: Path = GLOSSARY) -> list[str]:
    """Everything that keeps the glossary from mapping one to one."""
    try:
        terms = load_glossary(path)
    except (OSError, ValueError) as exc:
        return [str(exc)]
    found = []
    first_english: dict[str, Term] = {}
    first_chinese: dict[str, Term] = {}
    for term in terms:
        for variant in term.english:
            if variant in first_english:
                found.append(f"{path}:{term.line}: {variant!r} is also on line {first_english[variant].line}")
            first_english.setdefault(variant, term)
        if term.chinese in first_chinese:
            other = first_chinese[term.chinese]
            found.append(f"{path}:{term.line}: {term.chinese} is also the term of line {other.line}")
        first_chinese.setdefault(term.chinese, term)
    for other in terms:
        for word in other.avoid:
            for term in (t for t in terms if word in t.chinese):  # it would flag every use of that term
                found.append(f"{path}:{other.line}: {word!r} is to be avoided, but it is part of {term.chinese}")
    return found


def _prose(step_blocks: Iterable[object]) -> str:
    from microgradnorm.lessons.format import Prose

    return "\n".join(_CODE.sub(" ", b.text) for b in step_blocks if isinstance(b, Prose))


def term_problems(english: Lesson, translated: Lesson, terms: list[Term], where: str) -> list[str]:
    """Per step: a checked term the English uses whose Chinese term the translation lacks, and any avoided term."""
    found = []
    pairs = zip(english.steps, translated.steps)
    for k, (en, tr) in enumerate(pairs, start=1):
        english_text = f"{en.title}\n{_prose(en.blocks)}"
        chinese_text = f"{tr.title}\n{_prose(tr.blocks)}"
        for term in terms:
            for word in term.avoid:
                if word in chinese_text:
                    found.append(f"{where}: step {k}: uses {word}; the glossary's term is {term.chinese}")
            if term.checked and term.pattern().search(english_text) and term.chinese not in chinese_text:
                found.append(
                    f"{where}: step {k}: the English says {term.english[0]!r}; the translation lacks {term.chinese}"
                )
    return found


def lesson_term_problems(language: str, english_dir: str | Path | None = None) -> list[str]:
    """:func:`term_problems` for every translated lesson into ``language`` whose structure matches its English
    (the structure itself is :func:`microgradnorm.lessons.translation.translation_problems`' to report)."""
    from microgradnorm.lessons.format import LESSON_FILE, LessonFormatError, load_lessons
    from microgradnorm.lessons.translation import read_translation, translations_dir

    folder = translations_dir(language, english_dir)
    if not folder.is_dir():
        return []
    english = {lesson.path.name: lesson for lesson in load_lessons(english_dir, check_demos=False)}
    terms = load_glossary()
    found: list[str] = []
    for path in sorted(folder.glob("*.md")):
        if not LESSON_FILE.match(path.name) or path.name not in english:
            continue
        try:
            translation = read_translation(path)
        except LessonFormatError:
            continue
        found += term_problems(english[path.name], translation.lesson, terms, str(path))
    return found
