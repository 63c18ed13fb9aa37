"""Learner-facing text never refers to the unpublished texts this project was written from.

A learner does not have them ("seed 001", "the seed texts"), and ``--seed`` already
means something else. Lessons, the package (strings, comments and names alike),
the READMEs and docs/ say what is meant, or cite published work instead
(lessons/REFERENCES.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_REFERENCE = re.compile(
    r"\bseed[\s_-]?0\d\d|seed\d{3}|\bseed\s+(texts?|derivations?|posts?|articles?|blogs?|sources?)\b|\bthe seeds\b",
    re.I,
)
SUFFIXES = {".md", ".py", ".txt", ".toml", ".po", ".pot", ".html", ".js", ".css", ".json"}


def learner_facing_files() -> list[Path]:
    """Every text file under lessons/, microgradnorm/ and docs/, and the READMEs."""
    files = [p for p in REPO.glob("README*.md")]
    for folder in ("lessons", "microgradnorm", "docs"):
        files += [p for p in (REPO / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return sorted(files)


def source_references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line of ``text`` that refers to a source text."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if SOURCE_REFERENCE.search(line)]


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ("Seed 003 derives the same three paths.", True),
        ("as seed 001 puts it", True),
        ('@demo("bn_seed003_slip")', True),
        ("the E[x^2] - E[x]^2 form that seed derivations often use", True),
        ("as the seed texts say", True),
        ("The seeds disagree here.", True),
        ("lesson 3 --dim 6 --seed 7 --eps 0", False),
        ("seed 0, dim 4, eps 1e-05 (change with --seed)", False),
        ('"seed": 0', False),
        ("random seed of the lesson's numbers", False),
    ],
)
def test_the_rule_flags_references_to_source_texts_and_not_the_seed_option(line, flagged):
    assert bool(source_references(line)) is flagged


def test_the_scan_covers_the_lessons_the_package_and_the_readme():
    names = {p.relative_to(REPO).parts[0] for p in learner_facing_files()}
    assert {"lessons", "microgradnorm", "README.md"} <= names


def test_no_learner_facing_text_refers_to_the_source_texts():
    found = [
        f"{path.relative_to(REPO)}:{n}: {line[:100]}"
        for path in learner_facing_files()
        for n, line in source_references(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, f"{len(found)} references to the source texts; say what is meant instead:\n" + "\n".join(found)
