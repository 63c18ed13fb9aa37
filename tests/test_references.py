"""A reference's "Used in" names exactly the lessons that cite it in a step, in English and in Chinese.

The citing lessons are computed from the lesson files: a lesson cites a source when
one of its steps names the first author (with the year, where two sources share
an author) or, for code and documentation, the project's name. A lesson that
starts or stops citing a source makes this test name the line to change.
"""

from __future__ import annotations

import collections
import re

import pytest

from microgradnorm.lessons.format import LESSON_FILE, lessons_dir

REFERENCES = lessons_dir() / "REFERENCES.md"
CHINESE = lessons_dir() / "zh-CN" / "REFERENCES.md"
# sources cited by a name that is not an author's
NAMES = {
    "Karpathy, micrograd": "micrograd",
    "Karpathy, llm.c": "llm.c",
    "Stanford CS231n course notes": "CS231n",
    "PyTorch documentation": "PyTorch",
}
NONE = "no lesson cites it in a step"


def _key(heading: str) -> tuple[str, str | None]:
    if heading in NAMES:
        return NAMES[heading], None
    first = re.match(r"([^,(]+?)(?:,| and | et al\.| \()", heading)
    year = re.search(r"\((\d{4})\)", heading)
    return (first.group(1) if first else heading).strip(), year.group(1) if year else None


def _steps(path) -> str:
    """The lesson's steps (front matter left out), on one line."""
    return " ".join(path.read_text(encoding="utf-8").split("\n---", 1)[1].split())


def citing_lessons() -> list[tuple[str, list[str]]]:
    """(each reference heading, the slugs of the lessons whose steps cite it), in the page's order."""
    headings = re.findall(r"^### (.+)$", REFERENCES.read_text(encoding="utf-8"), re.M)
    shared = collections.Counter(_key(h)[0] for h in headings)
    lessons = {LESSON_FILE.match(p.name).group(2): _steps(p) for p in sorted(lessons_dir().iterdir())
               if LESSON_FILE.match(p.name)}  # fmt: skip
    out = []
    for heading in headings:
        name, year = _key(heading)
        if year and shared[name] > 1:
            pattern = re.escape(name) + r"\b(?: et al\.)?[^.]{0,60}?\b" + year  # "He et al. 2015" too
        else:
            pattern = r"\b" + re.escape(name) + r"(?![\w.-]*\w)"
        out.append((heading, [slug for slug, text in lessons.items() if re.search(pattern, text)]))
    return out


def _used_in(text: str, label: str, stop: str) -> list[tuple[str, list[str] | None]]:
    """(each heading, the slugs its "Used in" line names), in the page's order."""
    found = []
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        line = re.search(label + r"(.*?)" + stop, block, re.S)
        found.append((block.splitlines()[0], re.findall(r"`([^`]+)`", line.group(1)) if line else None))
    return found


@pytest.mark.parametrize(
    ("page", "label", "stop"), [(REFERENCES, r"Used in: ", r"\.\n"), (CHINESE, r"用于：", r"。\n")], ids=["en", "zh-CN"]
)
def test_every_used_in_line_names_the_lessons_that_cite_the_source(page, label, stop):
    """The English page, whose headings the lessons are matched with, and its translation: the same sources in the
    same order (a few headings are translated), each naming the lessons that cite it."""
    computed = citing_lessons()
    said = _used_in(page.read_text(encoding="utf-8"), label, stop)
    assert len(said) == len(computed)
    wrong = [
        f"{h}: says {names}, the lessons citing it are {c or NONE}"
        for (h, c), (_, names) in zip(computed, said)
        if names != c
    ]
    assert not wrong, "\n".join(wrong)


def test_the_citation_finder_can_fail():
    """A heading no lesson names is cited by none; one every lesson names by all."""
    assert _key("Xiong et al. (2020)") == ("Xiong", "2020")
    assert _key("He, Zhang, Ren and Sun (2016)") == ("He", "2016")
    he = dict(citing_lessons())["He, Zhang, Ren and Sun (2015)"]  # cited as "He et al. 2015", with its dot
    assert "which-norm-and-how-big-a-batch" in he and "value-and-chain-rule" not in he
    xiong = dict(citing_lessons())["Xiong et al. (2020)"]
    assert xiong and "value-and-chain-rule" not in xiong
