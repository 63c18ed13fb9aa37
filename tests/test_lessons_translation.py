"""Lesson translations: the same steps and demos as the English, and a test that fails when the English moves on.

The sample is a two-step English lesson and its Chinese translation in
``tests/i18n_fixtures/lessons``; every test that edits them works on copies.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from microgradnorm.i18n import SIMPLIFIED_CHINESE
from microgradnorm.lessons.format import LessonFormatError, parse_lesson
from microgradnorm.lessons.translation import (
    english_hashes,
    front_matter_block,
    localize,
    localized_page,
    page_mark,
    read_translation,
    step_hash,
    translation_problems,
)
from tests.helpers import SAMPLE_LESSON, SAMPLE_LESSONS, edit, run_cli, sample_lessons
from tests.zh import CHINESE

FIXTURES, NAME = SAMPLE_LESSONS, SAMPLE_LESSON
ZH = SIMPLIFIED_CHINESE


@pytest.fixture
def copies(tmp_path):
    """The sample lesson and its translation, copied: (english file, translation file)."""
    return sample_lessons(tmp_path / "lessons")


def refresh_hash(english: Path, translation: Path, key: str) -> None:
    """What the translator does after updating the words: copy the current hash from `hashes`."""
    current = re.search(rf"^  {key}: (\w+)", front_matter_block(parse_lesson(english, check_demos=False)), re.M)
    text = translation.read_text(encoding="utf-8")
    translation.write_text(re.sub(rf"^  {key}: \w+", f"  {key}: {current.group(1)}", text, flags=re.M), "utf-8")


def problems(english: Path) -> list[str]:
    return translation_problems(ZH, english.parent)


# ---- the sample is in step --------------------------------------------------------------------------------------


def test_the_sample_translation_is_in_step_with_its_english():
    assert translation_problems(ZH, FIXTURES) == []


def test_the_sample_translation_is_shown_in_chinese_with_the_english_demos():
    english = parse_lesson(FIXTURES / NAME, check_demos=False)
    lesson, notes = localize(english, ZH)
    assert notes == [] and lesson.name == english.name  # the same progress key in both languages
    assert lesson.title.startswith("链式法则") and all(CHINESE.search(s.title) for s in lesson.steps)
    calls = [[(c.name, c.args) for c in s.demos] for s in lesson.steps]
    assert calls == [[(c.name, c.args) for c in s.demos] for s in english.steps]
    assert localize(english, "en") == (english, [])


# ---- drift: the English changes, the translation has not ------------------------------------------------------------


def squashed(text: str) -> str:
    """``text`` without whitespace: a message wrapped over lines is still found."""
    return "".join(text.split())


def test_editing_one_english_step_shows_it_in_english_until_its_translation_is_updated(copies, capsys, monkeypatch):
    """The drift check, and end to end through the command: the step falls back to English with a note, until the
    translator updates it and its hash."""
    english, translation = copies
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(english.parent))
    note = squashed("这一步的英文原文在翻译之后改过，译文更新之前先显示英文。")

    def shown() -> str:
        code, out, err = run_cli(capsys, "lesson", "1", "--auto", "--lang", "zh-CN")
        assert code == 0 and err == ""
        return out

    assert problems(english) == []
    out = shown()
    assert "第 1 步，共 2 步 · 一个小小的计算图" in out and "第 2 步，共 2 步 · 链式法则" in out
    assert note not in squashed(out)

    edit(english, "their products add up.", "their products add up, one term per path.")
    found = problems(english)
    assert len(found) == 1
    assert found[0].startswith(f"{translation}: step 2 ('The chain rule') changed in the English")
    assert "python -m microgradnorm.i18n_tools hashes 01" in found[0]
    assert localize(parse_lesson(english, check_demos=False), ZH)[1] == found
    out = shown()
    assert "第 1 步，共 2 步 · 一个小小的计算图" in out  # the step that did not change stays Chinese
    assert "第 2 步，共 2 步 · The chain rule" in out and "one term per path" in " ".join(out.split())
    assert note in squashed(out) and squashed(out).index(note) < squashed(out).index(squashed("第 2 步，共 2 步"))

    edit(translation, "就把各条路径的乘积加起来。", "就把各条路径的乘积加起来，每条路径一项。")
    refresh_hash(english, translation, "step 2")
    assert problems(english) == []
    out = shown()
    assert "第 2 步，共 2 步 · 链式法则" in out and "每条路径一项" in squashed(out)
    assert note not in squashed(out)


def test_a_changed_title_is_drift_of_the_lesson_header(copies):
    english, translation = copies
    edit(english, "title: The chain rule, in two steps", "title: The chain rule, step by step")
    (found,) = problems(english)
    assert "the lesson's title or summary changed in the English" in found
    lesson, _ = localize(parse_lesson(english, check_demos=False), ZH)
    assert lesson.title == "The chain rule, step by step" and CHINESE.search(lesson.steps[0].title)
    refresh_hash(english, translation, "lesson")
    assert problems(english) == []


def test_a_translation_without_its_hashes_is_out_of_date_everywhere(copies):
    english, translation = copies
    text = translation.read_text(encoding="utf-8")
    translation.write_text(re.sub(r"^  (lesson|step \d+): \w+.*\n", "", text, flags=re.M), encoding="utf-8")
    found = problems(english)
    assert len(found) == 3 and all("no hash recorded" in line for line in found)


@pytest.mark.parametrize(
    ("change", "same"),
    [
        (lambda t: t.replace("## The chain rule", "## The chain rule again"), False),
        (lambda t: t.replace("finite difference.", "finite difference!"), False),
        (lambda t: t.replace('chain_rule\nexample: "chain"', 'chain_rule\nexample: "shared"'), False),
        (lambda t: t.replace("the local\n", "the local   \n"), True),  # trailing spaces are not words
    ],
)
def test_a_step_hash_changes_with_its_words_and_demos_not_with_trailing_spaces(change, same):
    text = (FIXTURES / NAME).read_text(encoding="utf-8")
    before = parse_lesson(FIXTURES / NAME, text, check_demos=False)
    after = parse_lesson(FIXTURES / NAME, change(text), check_demos=False)
    assert change(text) != text
    assert (english_hashes(before) == english_hashes(after)) == same
    assert step_hash(before.steps[0]) == step_hash(after.steps[0])  # every change above is in step 2


# ---- structure: the same steps, demos, parameters and options -------------------------------------------------------


STRUCTURE = [
    (
        lambda t: t.replace('chain_rule\nexample: "chain"', 'chain_rule\nexample: "shared"'),
        "step 2 ('链式法则', English 'The chain rule'): its demo blocks differ from the English: "
        "English chain_rule(example='chain'), translation chain_rule(example='shared')",
    ),
    (
        lambda t: t[: t.index("## 链式法则")],
        "1 steps, the English 01-chain-rule-sample.md has 2 (a translation has the English's steps, in order)",
    ),
    (
        lambda t: t.replace('defaults: {"seed": 0}', 'defaults: {"seed": 0, "dim": 3}'),
        "defaults {'seed': 0, 'dim': 3} differ from the English's {'seed': 0}",
    ),
    (
        lambda t: t.replace(
            '一个节点。\n\n```demo\nvalue_graph\nexample: "chain"\n```',
            '一个节点。\n\n```demo\nvalue_graph\nexample: "chain"\n```\n\n多出来的一段。',
        ),
        "step 1 ('一个小小的计算图', English 'A small computation graph'): its blocks are prose, demo, prose; "
        "the English's are prose, demo",
    ),
    (
        lambda t: t.replace("english: 01-chain-rule-sample.md", "english: 02-other.md"),
        "its 'english:' line names '02-other.md', expected '01-chain-rule-sample.md'",
    ),
]


@pytest.mark.parametrize(("change", "expected"), STRUCTURE)
def test_a_translation_that_differs_in_structure_is_reported_and_shown_in_english(
    copies, capsys, monkeypatch, change, expected
):
    english, translation = copies
    translation.write_text(change(translation.read_text(encoding="utf-8")), encoding="utf-8")
    found = problems(english)
    assert any(line.startswith(f"{translation}: {expected}") for line in found), found
    english_lesson = parse_lesson(english, check_demos=False)
    assert localize(english_lesson, ZH)[0] is english_lesson
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(english.parent))  # the command says so, in Chinese
    code, out, err = run_cli(capsys, "lesson", "1", "--auto", "--lang", "zh-CN")
    assert code == 0 and err == "" and out.splitlines()[0] == "本课的中文译文与英文原文对不上，先以英文显示。"
    assert "第 1 步，共 2 步 · A small computation graph" in out


def test_a_malformed_hash_line_names_its_line_and_the_lesson_stays_english(copies):
    english, translation = copies
    edit(translation, "  step 2: ", "  step 2: xyz ")
    (found,) = problems(english)
    lines = translation.read_text(encoding="utf-8").splitlines()
    number = next(k for k, line in enumerate(lines, start=1) if "step 2: xyz" in line)
    assert found.startswith(f"{translation}:{number}: expected '  step N: <12 hex digits>' in the english block")
    english_lesson = parse_lesson(english, check_demos=False)
    lesson, notes = localize(english_lesson, ZH)
    assert lesson is english_lesson and notes == [found]


def test_an_error_in_the_translation_is_reported_at_its_true_line(copies):
    _english, translation = copies
    lines = translation.read_text(encoding="utf-8").splitlines()
    bad = lines.index("## 链式法则")
    lines[bad] = "# 链式法则"
    translation.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LessonFormatError) as info:
        read_translation(translation)
    assert info.value.line == bad + 1


def test_a_translation_without_front_matter_is_reported_at_line_one(copies):
    _english, translation = copies
    text = translation.read_text(encoding="utf-8")
    translation.write_text(text[text.index("## ") :] + "\n---\nenglish: x\n", encoding="utf-8")
    with pytest.raises(LessonFormatError) as info:
        read_translation(translation)
    assert info.value.line == 1 and "front matter" in str(info.value)


def test_a_translation_of_no_english_lesson_is_reported(copies):
    english, translation = copies
    shutil.copy(translation, translation.with_name("02-nothing-here.md"))
    assert any("no English lesson 02-nothing-here.md to translate" in line for line in problems(english))


def test_an_unreadable_translation_never_stops_the_lesson(copies):
    english, translation = copies
    translation.write_bytes(b"\xff\xfe not text")
    english_lesson = parse_lesson(english, check_demos=False)
    lesson, notes = localize(english_lesson, ZH)
    assert lesson is english_lesson and len(notes) == 1


def test_the_hashes_command_prints_the_block_the_translation_carries(capsys):
    from microgradnorm.i18n_tools.__main__ import main

    assert main(["hashes", str(FIXTURES / NAME)]) == 0
    block = capsys.readouterr().out
    translation = (FIXTURES / ZH / NAME).read_text(encoding="utf-8")
    assert block.startswith("english: 01-chain-rule-sample.md\n  lesson: ") and block in translation
    assert main(["hashes", "99"]) == 2
    assert "expected a lesson number or file name" in capsys.readouterr().err


# ---- the references and the glossary: one hash of the English page, on the translation's first line -------------


@pytest.fixture
def pages(tmp_path):
    """Copies of the English references page and its translation: (english, translation)."""
    from microgradnorm.lessons.format import lessons_dir

    folder = tmp_path / "lessons"
    (folder / ZH).mkdir(parents=True)
    shutil.copy(lessons_dir() / "REFERENCES.md", folder / "REFERENCES.md")
    shutil.copy(lessons_dir() / ZH / "REFERENCES.md", folder / ZH / "REFERENCES.md")
    return folder / "REFERENCES.md", folder / ZH / "REFERENCES.md"


def test_a_page_whose_english_changed_is_reported_until_its_mark_is_updated(pages):
    english, translation = pages
    assert translation_problems(ZH, english.parent) == []
    assert localized_page(english, ZH)[1] is None

    edit(english, "grouped by subject.", "grouped by subject, oldest first.")
    (found,) = translation_problems(ZH, english.parent)
    assert found.startswith(f"{translation}: REFERENCES.md changed in the English since it was translated")
    assert "python -m microgradnorm.i18n_tools hashes REFERENCES.md" in found
    text, note = localized_page(english, ZH)
    assert text == english.read_text(encoding="utf-8") and note is not None

    edit(translation, "按主题分组。", "按主题分组，最早的在前。")  # the translator follows the English ...
    lines = translation.read_text(encoding="utf-8").splitlines(keepends=True)
    translation.write_text(page_mark(english) + "".join(lines[1:]), encoding="utf-8")  # ... then its mark
    assert translation_problems(ZH, english.parent) == []
    text, note = localized_page(english, ZH)
    assert note is None and "最早的在前" in text and not text.startswith("<!--")


@pytest.mark.parametrize(
    ("first_line", "expected"),
    [
        ("", "expected a first line '<!-- english: REFERENCES.md <hash> -->'"),
        ("<!-- english: GLOSSARY.md 0123456789ab -->\n", "its 'english:' mark names 'GLOSSARY.md'"),
    ],
)
def test_a_page_without_its_mark_is_reported_and_shown_in_english(pages, first_line, expected):
    english, translation = pages
    lines = translation.read_text(encoding="utf-8").splitlines(keepends=True)
    translation.write_text(first_line + "".join(lines[1:]), encoding="utf-8")
    (found,) = translation_problems(ZH, english.parent)
    assert found.startswith(f"{translation}:1: {expected}")
    text, note = localized_page(english, ZH)
    assert text == english.read_text(encoding="utf-8") and note


@pytest.mark.parametrize("page", ["REFERENCES.md", "GLOSSARY.md"])
def test_the_hashes_command_prints_the_mark_a_translated_page_carries(capsys, page):
    from microgradnorm.i18n_tools.__main__ import main
    from microgradnorm.lessons.format import lessons_dir

    assert main(["hashes", page]) == 0
    mark = capsys.readouterr().out
    assert mark == (lessons_dir() / ZH / page).read_text(encoding="utf-8").splitlines(keepends=True)[0]
