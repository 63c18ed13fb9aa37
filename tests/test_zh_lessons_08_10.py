"""Lessons 08-10 in Chinese: the translated prose, and everything their demos print, under zh-CN.

Oracles: the English lessons (structure and hashes, through the translation
module), the zh_CN catalog read with Babel (every string the demo modules of
these lessons mark has a Chinese translation), the catalog's plain gettext
lookups, and a scan of the rendered steps for English prose (a run of three or
more lowercase English words). English output is checked by the lessons' own
tests, which run in English (conftest).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from rich.text import Text

from microgradnorm import i18n
from microgradnorm.i18n.text import NO_START
from microgradnorm.lessons import demos_practice as practice
from microgradnorm.lessons import demos_rmsnorm as rms
from microgradnorm.lessons import norm_axes, render
from microgradnorm.lessons.claims import claim
from microgradnorm.lessons.demo_tools import check_mark
from microgradnorm.lessons.demos import DemoOutput, LessonParams, run_demo
from microgradnorm.lessons.format import Prose, lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.translation import TRANSLATED, localized
from tests.zh import CJK, po_entries, rendered

ZH = i18n.SIMPLIFIED_CHINESE
LESSONS = ("08-batchnorm.md", "09-rmsnorm.md", "10-ln-vs-bn.md")
# the modules whose marked strings these lessons print
MODULES = ("demos_batchnorm.py", "demos_rmsnorm.py", "demos_practice.py", "norm_axes.py", "claims.py")

# three or more lowercase English words in a row, one space apart: prose, not a formula, a name or a table
WORD = r"(?<![\w.])[a-z]{2,}(?![\w(])"
ENGLISH_RUN = re.compile(rf"{WORD}(?: {WORD}){{2,}}")
# Printed in these steps by microgradnorm.lessons.charts (the heat map's legend, the line chart's key), a
# module of the earlier lessons that these lessons' translator does not own; everything else must be Chinese.
CHART_LEGENDS = ("in ninths of", "where curves overlap")


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)


def english_runs(text: str) -> list[str]:
    """The English prose in ``text``: runs of three lowercase words, minus the charts' legends and ASCII art."""
    runs = [m.group(0) for line in text.splitlines() for m in ENGLISH_RUN.finditer(line)]
    return [r for r in runs if r not in CHART_LEGENDS and not all(len(set(w)) == 1 for w in r.split())]


def chinese(name: str):
    english = parse_lesson(lessons_dir() / name)
    return english, localized(english, ZH)


# ---- the translated lessons --------------------------------------------------------------------------


@pytest.mark.parametrize("name", LESSONS)
def test_the_translation_is_in_step_with_the_english_and_chinese_throughout(name):
    english, local = chinese(name)
    assert local.status == TRANSLATED and not local.english_steps and not local.problems, local.problems
    lesson = local.lesson
    assert CJK.search(lesson.title) and CJK.search(lesson.summary)
    assert len(lesson.steps) == len(english.steps)
    for k, step in enumerate(lesson.steps, start=1):
        prose = "\n".join(re.sub(r"`[^`]*`", " ", b.text) for b in step.blocks if isinstance(b, Prose))
        # a title is Chinese, or a formula with no English word in it (BN(X) = LN(Xᵀ)ᵀ)
        assert CJK.search(step.title) or not re.search("[a-z]{2}", step.title), f"{name} step {k}: {step.title!r}"
        assert CJK.search(prose) or not prose.strip(), f"{name} step {k}: no Chinese prose"
        assert not english_runs(prose), f"{name} step {k}: English prose {english_runs(prose)}"


# at the defaults, and at parameters that take the demos' other branches (eps = 0 notes, other sizes)
CASES = [
    ("08-batchnorm.md", {}),
    ("08-batchnorm.md", {"eps": 0.0, "dim": 4, "batch": 6, "seed": 3}),
    ("08-batchnorm.md", {"eps": 1e3, "seed": 1}),
    ("09-rmsnorm.md", {}),
    ("09-rmsnorm.md", {"eps": 0.0, "dim": 3, "seed": 2}),
    ("10-ln-vs-bn.md", {}),
    ("10-ln-vs-bn.md", {"eps": 0.0, "dim": 6, "seed": 5}),
]


@pytest.mark.parametrize(("name", "changes"), CASES, ids=lambda c: str(c))
def test_every_step_and_what_its_demos_print_is_chinese(name, changes):
    """Prose, captions, tables, ✓/✗ lines, questions, choices and answers: no English prose left, no failing demo."""
    _english, local = chinese(name)
    lesson = local.lesson
    params = lesson.params().replace(**changes)
    with i18n.use_language(ZH):
        for index in range(len(lesson.steps)):
            outputs = step_outputs(lesson, index, params)
            assert not [o for o in outputs if isinstance(o, render.DemoFailure)], f"{name} step {index + 1}"
            parts = [render.render_step(lesson, index, outputs, params)]
            for out in outputs:
                if isinstance(out, DemoOutput) and out.prediction is not None:
                    parts += [render.prediction_question(out.prediction), render.prediction_answer(out.prediction, 0)]
            for width in (60, 100):
                text = "\n".join(rendered(part, width) for part in parts)
                where = f"{name} step {index + 1} at {width} columns, {changes}"
                assert not english_runs(text), f"{where}: English left: {english_runs(text)}"
                assert "{" not in text.replace("{0}", ""), f"{where}: an unfilled placeholder"
                assert not [line for line in text.splitlines() if line.lstrip()[:1] in NO_START], where


# ---- the demos' marked strings ----------------------------------------------------------------------


def test_every_string_these_lessons_demos_mark_has_a_chinese_translation():
    ours = po_entries(MODULES)
    assert len(ours) > 100  # the demos of three lessons: a marking that went missing shows here
    missing = [m.id for m in ours if m.fuzzy or not all(m.string if isinstance(m.string, tuple) else [m.string])]
    assert not missing, missing
    for m in ours:
        for text in m.string if isinstance(m.string, tuple) else [m.string]:
            words = re.sub(r"\{\w+\}", "", text)  # placeholders are names, not words
            assert CJK.search(words) or not re.search(r"[a-z]{3}", words), (m.id, text)


@pytest.mark.parametrize(("eps", "answer"), [(0.0, 2), (1e-5, 2), (1.0, 3), (1e6, 0)])
def test_the_doubling_question_explains_each_outcome_in_chinese(eps, answer):
    """dgamma when X doubles: the four ways the answer can come out (eps = 0, small, comparable, dominant)."""
    with i18n.use_language(ZH):
        prediction = run_demo("bn_param_grads", LessonParams(dim=3, seed=0, eps=eps, batch=4)).prediction
    assert prediction.answer == answer
    assert CJK.search(prediction.question) and all(CJK.search(c) for c in prediction.choices)
    assert CJK.search(prediction.why) and not english_runs(prediction.why) and "{" not in prediction.why
    assert f"eps = {eps:g}" in prediction.why or eps == 0


def test_the_rmsnorm_sum_question_explains_both_outcomes_in_chinese():
    sums_to_zero = np.array([1.0, -1.0])
    with i18n.use_language(ZH):
        zero = rms._sum_prediction(sums_to_zero, sums_to_zero)
        nonzero = rms._sum_prediction(np.array([1.0, 0.5]), sums_to_zero)
    assert (zero.answer, nonzero.answer) == (0, 1)
    for p in (zero, nonzero):
        assert CJK.search(p.why) and not english_runs(p.why) and "{" not in p.why
    assert "1.50e+00" in nonzero.why and "0.00e+00" in zero.why


@pytest.mark.parametrize(("ln_ok", "bn_ok"), [(True, False), (False, True), (True, True), (False, False)])
def test_the_wrong_axis_question_explains_every_outcome_in_chinese(ln_ok, bn_ok):
    ln_tail, bn_tail = (0.125 if ln_ok else 0.625), (0.25 if bn_ok else 0.5)  # learned: below the bar 0.3
    with i18n.use_language(ZH):
        p = practice._learner_prediction(ln_tail, bn_tail, 0.3)
    assert p.answer == {(True, False): 0, (False, True): 1, (True, True): 2, (False, False): 3}[ln_ok, bn_ok]
    assert CJK.search(p.why) and f"{ln_tail:g}" in p.why and f"{bn_tail:g}" in p.why and "{" not in p.why
    assert ("音量" in p.why) == (ln_ok and not bn_ok)  # the reason is given only when LayerNorm alone learns


def _medians(ratios: dict[str, float]) -> dict[str, dict[str, float]]:
    return {k: {"ln_f": 1.0, "rms_f": r, "ln_b": 2.0, "rms_b": 2.0 * r} for k, r in ratios.items()}


def test_the_timing_reading_is_chinese_and_follows_the_numbers():
    with i18n.use_language(ZH):
        mixed = rms.speed_reading(_medians({"numpy": 0.6, "fused": 0.99, "torch": 2.0}))
        agree = rms.speed_reading(_medians({"numpy": 0.5, "torch": 0.8}))
        alone = rms.speed_reading(_medians({"numpy": 0.5}))
        split = rms.speed_reading({"torch": {"ln_f": 2.0, "rms_f": 1.0, "ln_b": 3.0, "rms_b": 6.0}})
        busy = {"ln_f": 0.56, "rms_f": 0.14, "ln_b": 0.47, "rms_b": 0.30}  # forward + backward below forward
        noisy = rms.speed_reading({k: busy for k in ("numpy", "fused")})
    assert mixed[0] == "NumPy：RMSNorm 的用时是 LayerNorm 的 60%（前向）、60%（前向 + 反向）：更快。"
    assert (
        mixed[1]
        == "融合（numba）：RMSNorm 的用时是 LayerNorm 的 99%（前向）、99%（前向 + 反向）：与 LayerNorm 差不多。"
    )
    assert mixed[2].startswith("PyTorch：") and mixed[2].endswith("200%（前向 + 反向）：更慢。")
    assert mixed[3] == (
        "公式相同，结论却不同（融合（numba）：与 LayerNorm 差不多；NumPy：更快；PyTorch：更慢）：起决定作用的是实现。"
    )
    assert agree[-1] == "这里计时的每种实现结论一致：RMSNorm 更快（前向 + 反向）。"
    assert alone[-1].startswith("这里只对一种实现计了时")
    assert split[0] == "PyTorch：RMSNorm 的用时是 LayerNorm 的 50%（前向，更快）、200%（前向 + 反向，更慢）。"
    assert noisy[-1].startswith("NumPy、融合（numba）：前向 + 反向用的时间比单独前向还少")
    for line in mixed + agree + alone + split + noisy:
        assert not english_runs(line) and "{" not in line, line


@pytest.mark.parametrize(
    ("demo", "params", "expected"),
    [
        ("bn_axes", LessonParams(dim=3, batch=1), "batch：批量里只有 1 个样本时"),
        ("rms_vs_ln_forward", LessonParams(dim=1), "dim：这一课至少需要 2 个特征，给的是 1"),
    ],
)
def test_a_parameter_the_learner_can_set_is_refused_in_chinese(demo, params, expected):
    with i18n.use_language(ZH), pytest.raises(ValueError) as caught:
        run_demo(demo, params)
    assert str(caught.value).startswith(expected)


@pytest.mark.parametrize("layout", sorted(norm_axes.LAYOUTS))
def test_the_cube_picture_is_labelled_in_chinese(layout):
    lay = norm_axes.LAYOUTS[layout]
    with i18n.use_language(ZH):
        svg = norm_axes.axes_figure(lay).svg()
        panels = rendered(norm_axes.axes_panels(lay))
    assert "哪些值共用一个均值和方差" in svg and "着色的格子" in svg and svg.count(">在 ") == len(lay.norms)
    assert panels.count("在 ") == len(lay.norms) and "组，每组" in panels
    assert not english_runs(svg) and not english_runs(panels)


# ---- the claim lines ----------------------------------------------------------------------------------


def test_a_claim_wraps_chinese_between_characters_and_english_as_before():
    """claim() takes its caller's translated sentence; Chinese never starts a line with closing punctuation."""
    sentence = "在 72 个值中任改一个，变动的恰好是它所在组的那些输出（用向量化的前向传播逐个值试过）"
    for width in range(12, 50):
        lines = rendered(claim(True, sentence), width).splitlines()
        assert all(line.lstrip()[:1] not in NO_START for line in lines), (width, lines)
        assert " ".join(line.strip() for line in lines).replace(" ", "") == "✓" + sentence.replace(" ", "")
    english = "changing any one of the 72 values moves exactly the outputs of its own group"
    for width in (20, 33, 60):
        assert rendered(claim(False, english), width) == rendered(Text.assemble(check_mark(False), " ", english), width)
