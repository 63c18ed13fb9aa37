"""The questions of lessons 01-09 in Chinese read as questions, and their choices as short phrases.

The runner quotes a choice inside its own sentence ("✗ 这次没猜中：你选的是 {guess}，答案是 {answer}。"),
so a choice that carries its own full-width comma, colon, semicolon or full stop runs into that
sentence and the reader cannot tell where the choice ends. The review of the Chinese put each
choice's gloss in brackets instead ("a（只有一条边的那一份）"); this test keeps it that way.

Oracle: the questions themselves, asked by the demos of every step of the nine lessons under
zh-CN at the lessons' own defaults (the runner's ``step_outputs``), and the lessons' list of
which steps ask (every lesson asks at least once: the "ask before telling" rule).
"""

from __future__ import annotations

import re

import pytest

from microgradnorm import i18n
from microgradnorm.lessons.demos import DemoOutput
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.translation import localized
from tests.zh import CJK

ZH = i18n.SIMPLIFIED_CHINESE
LESSONS = tuple(sorted(path.name for path in lessons_dir().glob("0[1-9]-*.md")))
CLAUSE_PUNCTUATION = "，：；。"
ENGLISH_WORDS = re.compile(r"\b[a-z]{3,} [a-z]{2,}\b")


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)


def questions(name: str) -> list[tuple[int, object]]:
    """(step number, Prediction) for every question the lesson's demos ask, in Chinese."""
    lesson = localized(parse_lesson(lessons_dir() / name), ZH).lesson
    params = lesson.params()
    found = []
    with i18n.use_language(ZH):
        for index in range(len(lesson.steps)):
            for out in step_outputs(lesson, index, params):
                if isinstance(out, DemoOutput) and out.prediction is not None:
                    found.append((index + 1, out.prediction))
    return found


def test_the_nine_lessons_are_here():
    assert len(LESSONS) == 9, LESSONS


@pytest.mark.parametrize("name", LESSONS)
def test_every_question_and_choice_reads_in_chinese(name):
    asked = questions(name)
    assert asked, f"{name}: no question found (every lesson asks before telling)"
    for step, prediction in asked:
        where = f"{name} step {step}"
        assert CJK.search(prediction.question), f"{where}: question not in Chinese: {prediction.question!r}"
        assert prediction.question.rstrip()[-1] in "？：", f"{where}: {prediction.question!r}"
        for choice in prediction.choices:
            assert choice.strip(), f"{where}: an empty choice"
            assert CJK.search(choice) or not ENGLISH_WORDS.search(choice), f"{where}: choice in English: {choice!r}"
            inside = [c for c in choice if c in CLAUSE_PUNCTUATION]
            assert not inside, f"{where}: choice {choice!r} carries {inside}, which runs into the verdict sentence"
        assert CJK.search(prediction.why), f"{where}: the answer's reason is not in Chinese"


def test_the_check_would_see_a_choice_that_runs_into_the_verdict():
    """The same rule on the English choices of lesson 1 finds the comma the Chinese no longer has."""
    lesson = parse_lesson(lessons_dir() / LESSONS[0])
    with i18n.use_language("en"):
        choices = [
            choice
            for index in range(len(lesson.steps))
            for out in step_outputs(lesson, index, lesson.params())
            if isinstance(out, DemoOutput) and out.prediction is not None
            for choice in out.prediction.choices
        ]
    assert any(c in choice for choice in choices for c in ",:"), choices
