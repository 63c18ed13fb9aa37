"""Lessons 11-14 in Simplified Chinese: their prose, their titles, and everything their demos print.

Oracles, none of them the Chinese text itself:

- the catalog's own list of the strings marked in the three demo modules of these
  lessons (Babel's extraction): each must have a Chinese translation;
- the English rendering of the same demo with the same parameters: the Chinese
  rendering shows the same numbers, no more and no fewer (a translation that drops,
  duplicates or invents a value fails), and it is not the English;
- runs of English words: a translated step or a demo's Chinese output may name
  things in English (LayerNorm, pre-LN, NumPy, float32, code), but three or more
  English words in a row is a sentence someone forgot, unless it is one of the few
  strings other modules print that are listed below with their owner.
"""

from __future__ import annotations

import re

import pytest

from microgradnorm import i18n
from microgradnorm.lessons.demos import LessonParams, run_demo
from microgradnorm.lessons.format import Prose, lessons_dir, parse_lesson
from microgradnorm.lessons.translation import TRANSLATED, localized
from tests.zh import CJK, NUMBER, ZH, demo_calls, demo_text, english_runs, rendered, untranslated

LESSONS = ("11-pre-ln-vs-post-ln", "12-numerical-traps", "13-graph-to-kernel", "14-fused-kernel-line-by-line")
MODULES = ("demos_residual.py", "demos_traps.py", "demos_kernel.py")

# Demo parameters beyond each lesson's defaults that reach the other branches of what the demos say:
# d = 2 (no direction kept, the cross terms by luck), eps = 0 (both placements one formula), another batch.
VARIANTS = {
    "11-pre-ln-vs-post-ln": [{}, {"dim": 2}, {"dim": 3, "seed": 4}],
    "12-numerical-traps": [{}, {"eps": 0.0}, {"dim": 2, "eps": 0.1}],
    "13-graph-to-kernel": [{}, {"dim": 3, "batch": 1}],
    "14-fused-kernel-line-by-line": [{}],
}
# Timings: measured anew on every call, so the English and Chinese runs show different numbers.
TIMED = {"kernel_engine_vs_numpy"}
# Code shown as code (its comments are English in both languages): only checked for numbers.
CODE = {"kernel_source", "kernel_llmc_code"}

# English that other modules print into these lessons' demos: the engine's DomainError (engine.py, which
# imports nothing from the package, so it has no catalog). Removed before looking for untranslated English.
FOREIGN = (
    re.compile(r"DomainError: .*?variance='two_pass'", re.DOTALL),
    re.compile(r"(?m)^ *\d+  \S.*$"),  # a numbered line of code in the trips-to-memory listing
)
ALLOWED_RUNS = {"Xiong et al"}


def _path(stem: str):
    return lessons_dir() / f"{stem}.md"


def _english_runs(text: str) -> list[str]:
    return english_runs(text, FOREIGN, ALLOWED_RUNS)


# ---- the catalog -------------------------------------------------------------------------------------


def test_every_string_marked_in_the_demo_modules_has_a_chinese_translation():
    marked, missing = untranslated(MODULES)
    assert marked > 100, "the demo modules of lessons 11-14 mark their strings"
    assert not missing, f"shown in English under {ZH}: {missing}"


# ---- the lesson files --------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", LESSONS)
def test_the_lesson_is_translated_and_in_step_with_its_english(stem):
    shown = localized(parse_lesson(_path(stem)), ZH)
    assert shown.status == TRANSLATED, shown.problems
    assert not shown.english_steps, f"steps still in English: {sorted(k + 1 for k in shown.english_steps)}"
    lesson = shown.lesson
    for text in (lesson.title, lesson.summary, *(step.title for step in lesson.steps)):
        assert CJK.search(text), f"{stem}: {text!r} has no Chinese"


@pytest.mark.parametrize("stem", LESSONS)
def test_no_english_sentence_is_left_in_the_prose(stem):
    lesson = localized(parse_lesson(_path(stem)), ZH).lesson
    for number, step in enumerate(lesson.steps, start=1):
        for block in step.blocks:
            if not isinstance(block, Prose):
                continue
            prose = re.sub(r"```.*?```|`[^`\n]*`", " ", block.text, flags=re.DOTALL)  # code stays as it is
            prose = re.sub(r"(?m)^(?: {4}|\t).*$", " ", prose)  # indented code blocks too
            assert CJK.search(prose), f"{stem} step {number}: a block without Chinese: {block.text[:60]!r}"
            assert not _english_runs(prose), f"{stem} step {number}: {_english_runs(prose)}"


# ---- what the demos print ----------------------------------------------------------------------------


def _calls(stem: str) -> list:
    """Every demo block of the lesson, once per distinct set of arguments."""
    return demo_calls(_path(stem))


def _cases():
    for stem in LESSONS:
        base = parse_lesson(_path(stem)).params()
        for change in VARIANTS[stem]:
            for call in _calls(stem):
                label = ",".join(f"{k}={v}" for k, v in change.items()) or "defaults"
                yield pytest.param(base.replace(**change), call, id=f"{stem[:2]}-{call.name}-{label}")


@pytest.mark.parametrize(("params", "call"), list(_cases()))
def test_a_demo_prints_chinese_with_the_same_numbers_as_its_english(params: LessonParams, call):
    english = demo_text(run_demo(call.name, params, call.args))
    with i18n.use_language(ZH):
        out = run_demo(call.name, params, call.args)
        chinese = demo_text(out)
    assert CJK.search(chinese) and chinese != english
    if call.name not in TIMED:
        assert sorted(set(NUMBER.findall(chinese))) == sorted(set(NUMBER.findall(english)))
    if call.name not in CODE:
        assert not _english_runs(chinese), _english_runs(chinese)
    if out.prediction is not None:
        assert CJK.search(out.prediction.question) and CJK.search(out.prediction.why)


def test_without_numba_the_backend_table_says_so_in_chinese(monkeypatch):
    from microgradnorm import fused

    monkeypatch.setattr(fused, "AVAILABLE", False)
    english = rendered(run_demo("kernel_backend", LessonParams()).renderable)
    with i18n.use_language(ZH):
        chinese = rendered(run_demo("kernel_backend", LessonParams()).renderable)
    assert "plain Python here" in english and "plain Python here" not in chinese
    reason = fused.UNAVAILABLE_REASON
    assert not _english_runs(chinese.replace(reason, " ")), _english_runs(chinese)


def test_a_shown_cache_size_keeps_its_number_and_says_yours_in_chinese():
    """The '(yours)' suffix is one message with the size inside it, so the number cannot be lost."""
    with i18n.use_language(ZH):
        text = rendered(run_demo("kernel_cache_bytes", LessonParams()).renderable)
    english = rendered(run_demo("kernel_cache_bytes", LessonParams()).renderable)
    assert english.count("(yours)") == text.count("（你的）") > 0


def test_a_caption_of_two_sentences_has_no_space_after_the_chinese_full_stop():
    """24 layers show 12 of them: the caption adds a second sentence, joined as each language joins them."""
    params = LessonParams(dim=8, seed=0)
    english = rendered(run_demo("residual_gradients", params, {"layers": 24}).renderable)
    with i18n.use_language(ZH):
        chinese = rendered(run_demo("residual_gradients", params, {"layers": 24}).renderable)
    assert "block. 13 of the 24 layers shown." in " ".join(english.split())
    assert not re.search(r"。 +\S", chinese), chinese  # a space after 。 before more text on the same line
    assert "梯度。24 层中显示了 13 层。" in chinese
