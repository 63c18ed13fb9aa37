"""What the Chinese tests share: how output is rendered to text, what counts as Chinese or as an
English sentence, and where the catalog and the lessons are read.

Each ``tests/test_zh_*.py`` keeps its own lists (its lessons, its modules, the English it allows)
and its own assertions; the plumbing is written once here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from rich.cells import cell_len

from microgradnorm import i18n
from microgradnorm.lessons.demos import DemoOutput
from microgradnorm.lessons.format import DemoCall, parse_lesson
from tests.helpers import rendered

ZH = i18n.SIMPLIFIED_CHINESE
CJK = re.compile(r"[\u4e00-\u9fff]")
CHINESE = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")  # characters or full-width punctuation
NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:e[+-]\d+)?")
# Three or more English words in a row, one space apart (after a comma or not); names and code are one
# or two words ("pre-LN", "NumPy ms"), and table cells are two or more spaces apart.
ENGLISH_RUN = re.compile(r"\b[A-Za-z]{2,}(?:,? [A-Za-z]{2,}){2,}\b")
# English that Chinese text keeps on purpose, for english_runs: a chart's plot rows (their marker characters,
# "ooo ooo", are not words) and the authors cited by name
CHART_ROWS = re.compile(r"(?m)^.*│.*$")
CITED = frozenset({"Xiong et al", "Shleifer et al", "He et al", "Ba et al"})
T = TypeVar("T")


def en_and_zh(make: Callable[[], T]) -> tuple[T, T]:
    """(``make()`` with English current, ``make()`` with Simplified Chinese current): the same call in both."""
    with i18n.use_language(i18n.ENGLISH):
        english = make()
    with i18n.use_language(ZH):
        return english, make()


def demo_text(out: DemoOutput, width: int = 100) -> str:
    """Everything a demo shows: its renderable, and its question, choices and answer if it asks one."""
    parts = [rendered(out.renderable, width)]
    if out.prediction is not None:
        p = out.prediction
        parts += [p.question, *p.choices, p.why]
    return "\n".join(parts)


def cells(line: str) -> list[str]:
    """``line`` as terminal cells: a double-width character fills two (its second cell is '')."""
    return [part for char in line for part in [char, *[""] * (cell_len(char) - 1)]]


def english_runs(text: str) -> list[str]:
    """The runs of :data:`ENGLISH_RUN` in ``text``, but for the English Chinese text keeps on purpose
    (:data:`CHART_ROWS`, :data:`CITED`); a wrapped sentence joins again, table columns stay apart."""
    text = CHART_ROWS.sub(" ", text).replace("\n", " ")
    return [m for m in ENGLISH_RUN.findall(text) if m not in CITED]


def demo_calls(path: Path) -> list[DemoCall]:
    """Every demo block of the lesson at ``path``, once per distinct set of arguments, in order."""
    seen, calls = set(), []
    for step in parse_lesson(path).steps:
        for call in step.demos:
            key = (call.name, repr(sorted(call.args.items())))
            if key not in seen:
                seen.add(key)
                calls.append(call)
    return calls


def untranslated(modules: tuple[str, ...]) -> tuple[int, list[str]]:
    """(how many strings ``modules`` mark, the marked strings still shown in English under Chinese),
    from Babel's extraction of the code, not from the catalog."""
    pytest.importorskip("babel", reason="extracting the marked strings needs Babel (the test extra)")
    from microgradnorm.i18n_tools import catalogs

    zh = i18n.catalog(ZH)
    marked = [m for m in catalogs.extract() if any(loc.endswith(modules) for loc, _line in m.locations)]
    missing = []
    for message in marked:
        if isinstance(message.id, tuple):  # ngettext: singular and plural
            shown, english = zh.ngettext(message.id[0], message.id[1], 1), message.id[0]
        elif message.context:
            shown, english = zh.pgettext(message.context, message.id), message.id
        else:
            shown, english = zh.gettext(message.id), message.id
        if shown == english or not CHINESE.search(shown):  # "{gamma}：‖J‖₂ ≤ …" is a formula with a Chinese colon
            missing.append(english)
    return len(marked), missing


def po_entries(modules: tuple[str, ...]) -> list[Any]:
    """The Chinese catalog's entries whose source is one of ``modules`` (a part of its path: "render.py",
    "microgradnorm/viz/render.py", "exercise"), read from the .po."""
    pofile = pytest.importorskip("babel.messages.pofile", reason="reading the .po needs Babel (the test extra)")
    po = Path(i18n.LOCALE_DIR, "zh_CN", "LC_MESSAGES", "microgradnorm.po")
    with po.open("rb") as f:
        catalog = pofile.read_po(f)

    def ours(path: str) -> bool:
        return any(part in path.replace("\\", "/") for part in modules)

    return [m for m in catalog if m.id and any(ours(path) for path, _line in m.locations)]
