"""Lessons 02, 06 and 07 in Simplified Chinese: the prose, what their demos print, and the charts they draw.

The structure check, the hashes and the one-screen rule at the default numbers are the general tests'
(``tests/test_lessons_translation.py``, ``tests/test_lessons.py``). Here: no English prose is left in a
translated step; everything the demos of lessons 02 and 07 print (tables, captions, ✓/✗ lines, the
questions, choices and answers) comes out in Chinese, at other numbers too (the d = 2 note, eps = 0, a
large eps); Chinese lines fit the terminal and wrap the Chinese way; and the charts, whose legends and
labels may now be Chinese (two cells a character), still line up. Lesson 06's demos belong to
``demos_core`` and are checked by its own translation, not here.

"What is English" is judged word by word: a Latin word of two letters or more must be a symbol or a
name the lessons keep as written (``eps``, ``xhat``, ``LayerNorm``, ...). Each such test also renders
the same thing in English and checks that the English has words the list rejects, so the list cannot
pass everything.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.cells import cell_len
from rich.console import Console

from microgradnorm import i18n
from microgradnorm.i18n.text import NO_START
from microgradnorm.lessons import render
from microgradnorm.lessons.braille import PlanePicture
from microgradnorm.lessons.charts import bar_chart, heat_map, line_chart
from microgradnorm.lessons.format import DemoCall, lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.translation import TRANSLATED, localized
from tests.zh import CJK

ZH = i18n.SIMPLIFIED_CHINESE
LESSONS = ("02-why-normalize.md", "06-one-formula-several-forms.md", "07-jacobian-projection.md")
WITH_OWN_DEMOS = ("02-why-normalize.md", "07-jacobian-projection.md")
# Numbers that take the demos down their other branches: the d = 2 note and eps = 0 (lesson 07), a large
# eps (lesson 02's depth step reads var(h) below eps; lesson 07's radial part), a cube for the picture.
VARIANTS = ({}, {"dim": 2, "eps": 0.0}, {"eps": 1.0}, {"dim": 3, "eps": 0.0})
WIDTHS = (60, 100)

# Latin words a Chinese step or demo may show: names kept in English, and the symbols of the formulas.
NAMES = {"Ba", "BatchNorm", "GPU", "Ioffe", "LayerNorm", "NumPy", "PyTorch", "RMSNorm", "SVG", "Santurkar", "Szegedy"}
NAMES |= {"float", "llm", "sigmoid"}  # float16, float64, llm.c, the sigmoid function
SYMBOLS = {"LN", "beta", "cos", "cx", "dL", "diag", "dim", "dw", "dx", "dy", "dz", "eps", "gain", "gamma", "ln"}
SYMBOLS |= {"max", "mean", "min", "rstd", "shrink", "sigma", "sigmoid'", "std", "target", "var", "xhat"}
KEPT = NAMES | SYMBOLS

_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    """Never touch the learner's real state folder."""
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))


def english_words(text: str) -> set[str]:
    """The Latin words of ``text`` that are neither kept names nor symbols (one letter and marker runs aside)."""
    return {w for w in _WORD.findall(text) if len(w) > 1 and len(set(w)) > 1 and w not in KEPT}


def _prose(blocks) -> str:
    """A step's prose without code: inline code, fenced blocks and indented formula blocks removed."""
    text = "\n".join(b.text for b in blocks if not isinstance(b, DemoCall))
    return "\n".join(line for line in _CODE.sub(" ", text).splitlines() if not line.startswith("    "))


def _chinese(name: str):
    english = parse_lesson(lessons_dir() / name)
    return english, localized(english, ZH)


# ---- the prose -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LESSONS)
def test_the_whole_lesson_is_shown_in_chinese(name):
    english, shown = _chinese(name)
    assert shown.status == TRANSLATED and not shown.english_steps, shown.notes
    lesson = shown.lesson
    assert CJK.search(lesson.title) and CJK.search(lesson.summary)
    assert (lesson.title, lesson.summary) != (english.title, english.summary)
    for k, step in enumerate(lesson.steps, start=1):
        assert CJK.search(step.title), f"{name} step {k}: title {step.title!r}"
        assert CJK.search(_prose(step.blocks)), f"{name} step {k} has no Chinese prose"


@pytest.mark.parametrize("name", LESSONS)
def test_no_english_prose_is_left_in_a_translated_step(name):
    english, shown = _chinese(name)
    for k, (en, zh) in enumerate(zip(english.steps, shown.lesson.steps), start=1):
        left = english_words(f"{_CODE.sub(' ', zh.title)}\n{_prose(zh.blocks)}")
        assert not left, f"{name} step {k}: English words left: {sorted(left)}"
        assert english_words(_prose(en.blocks)), f"{name} step {k}: the check would not see English prose"


# ---- what the demos print --------------------------------------------------------------------------------


def _demo_text(name: str, change: dict, language: str) -> str:
    """Everything the demos of ``name`` show (with each question, its choices and the answer) at 60 columns."""
    lesson = parse_lesson(lessons_dir() / name)
    params = lesson.params().replace(**change)
    console = Console(file=io.StringIO(), width=60, no_color=True, record=True)
    with i18n.use_language(language):
        for index in range(len(lesson.steps)):
            for out in step_outputs(lesson, index, params):
                assert not isinstance(out, render.DemoFailure), f"{name} step {index + 1}: {out.message}"
                console.print(render._demo_renderable(out))
    return console.export_text()


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "defaults")
@pytest.mark.parametrize("name", WITH_OWN_DEMOS)
def test_what_the_demos_print_is_chinese(name, change):
    chinese = _demo_text(name, change, ZH)
    left = english_words(chinese)
    assert not left, f"{name} {change}: English left in the demos' output: {sorted(left)}"
    assert CJK.search(chinese)
    assert english_words(_demo_text(name, change, i18n.ENGLISH)), "the check would not see English"


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "defaults")
@pytest.mark.parametrize("name", LESSONS)
def test_chinese_steps_fit_the_terminal_and_wrap_the_chinese_way(name, change):
    """At the lesson's numbers and at others: no line wider than the terminal, none starting with '，' or '。'."""
    _english, shown = _chinese(name)
    lesson = shown.lesson
    params = lesson.params().replace(**change)
    with i18n.use_language(ZH):
        for index in range(len(lesson.steps)):
            outputs = step_outputs(lesson, index, params)
            for width in WIDTHS:
                console = Console(file=io.StringIO(), width=width, no_color=True, record=True)
                console.print(render.render_step(lesson, index, outputs, params))
                where = f"{name} {change} step {index + 1} at {width} columns"
                for line in console.export_text().splitlines():
                    assert cell_len(line) <= width, f"{where}: {line!r}"
                    wide = cell_len(line) != len(line)
                    assert not (wide and line.lstrip()[:1] in NO_START), f"{where}: {line!r}"


# ---- the charts' own words and their alignment -----------------------------------------------------------


def _render(renderable, width: int = 60) -> list[str]:
    console = Console(file=io.StringIO(), width=width, no_color=True, record=True)
    console.print(renderable)
    return console.export_text().splitlines()


def _charts():
    return [
        heat_map([[1.0, -0.5], [0.25, 0.0]]),
        bar_chart(["a", "b"], {"one": [1.0, 2.0], "two": [3.0, 0.5]}, log=True),
        bar_chart(["a", "b"], [1.0, 2.0]),
        line_chart({"one": [1.0, 0.1, 0.01], "two": [1.0, 0.5, 0.2]}, log=True),
        line_chart([1.0, float("nan"), 3.0]),
    ]


def test_the_charts_own_words_follow_the_language():
    """Legends, scale notes, the default x label and the default series name: English in English, Chinese in Chinese."""
    english = "\n".join("\n".join(_render(chart)) for chart in _charts())
    with i18n.use_language(ZH):
        chinese = "\n".join("\n".join(_render(chart)) for chart in _charts())
    own = {"cells", "ninths", "log", "linear", "scale", "longest", "bar", "step", "where", "curves", "overlap", "value"}
    assert own <= set(_WORD.findall(english))  # the words this test looks for are the charts' words
    assert not own & set(_WORD.findall(chinese)), sorted(own & set(_WORD.findall(chinese)))
    assert "non-finite" in english and "non-finite" not in chinese


def test_a_bar_chart_lines_up_chinese_labels_and_series_names():
    labels = ["单元 0", "x", "单元 10"]
    chart = bar_chart(labels, {"原始 σ'": [1.0, 2.0, 4.0], "标准化后 σ'": [0.5, 0.25, 3.0]}, title="标题")
    lines = _render(chart)
    header, rows = lines[1], lines[2:5]
    ends = {cell_len(row[: row.index(label) + len(label)]) for row, label in zip(rows, labels)}
    assert ends == {cell_len("单元 10")}, ends  # labels right-aligned to the widest, in cells
    assert cell_len(header[: header.index("原始")]) == cell_len("单元 10") + 1  # a name starts over its bars
    assert all(cell_len(line) <= 60 for line in lines)
    # the second series' name sits over its own bars: where its column starts, the rows' second bar starts
    second = cell_len(header[: header.index("标准化后")])
    for row in rows:
        assert row[_index_at_cell(row, second) - 1] == " " and row[_index_at_cell(row, second)] in "█▏▎▍▌▋▊▉"


def _index_at_cell(line: str, cells: int) -> int:
    """The index of the character that starts at cell ``cells`` of ``line``."""
    for k in range(len(line) + 1):
        if cell_len(line[:k]) == cells:
            return k
    raise AssertionError(f"no character starts at cell {cells} of {line!r}")


@pytest.mark.parametrize("width", [40, 60, 100])
def test_a_line_chart_centres_a_chinese_axis_label_within_the_plot(width):
    lines = _render(line_chart({"原始": [1.0, 0.5, 0.25]}, x_label="深度", x_values=[0, 1, 32]), width)
    border = next(line for line in lines if "└" in line)
    axis = lines[lines.index(border) + 1]
    # the last x value ends where the axis ends (measured in cells, the label's two characters are four)
    assert axis.rstrip().endswith("32") and cell_len(axis.rstrip()) == cell_len(border.rstrip())
    left, right = axis.rstrip().split("深度")
    assert left.rstrip().endswith("0")
    gap_left, gap_right = len(left) - len(left.rstrip()), len(right) - len(right.lstrip())
    assert abs(gap_left - gap_right) <= 1, (gap_left, gap_right)  # centred between the first and last value


def _picture(words: list[str]) -> PlanePicture:
    pic = PlanePicture(2.0, cols=20, rows=10, title="正对平面 x + y + z = 0 看（d = 3，eps = 0）")
    pic.circle(1.5)
    for letter, (at, text) in zip("oxh", zip([(0.0, 0.0), (1.0, 1.0), (-1.0, 0.5)], words)):
        pic.point(at, letter, text)
    return pic


def test_a_chinese_legend_sits_beside_the_picture_when_it_fits():
    words = ["原点", "x − mean", "xhat，在圆上"]
    lines = _render(_picture(words), 60)
    for word in words:
        line = next(line for line in lines if word in line)
        # each legend entry starts two cells after the picture's 20 columns, whatever the width of its words
        assert cell_len(line[: line.index(word)]) == 20 + 2 + len("o  "), line
    assert all(cell_len(line) <= 60 for line in lines)


def test_a_legend_that_fits_in_characters_but_not_in_cells_goes_below():
    words = ["原点", "x − mean", "xhat，在圆上"]
    widest = max(cell_len(f"o  {w}") for w in words)
    width = 20 + 2 + widest - 1  # one cell short: counted in characters it would fit (a CJK character is 2 cells)
    lines = _render(_picture(words), width)
    assert all(cell_len(line) <= width for line in lines), lines
    assert any(line.startswith("h  xhat") for line in lines)  # on a line of its own, below the picture


def test_a_chinese_legend_too_wide_to_sit_beside_goes_below_and_wraps_the_chinese_way():
    # 15 characters (30 cells) before the '，': wrapped at spaces and cut at 30 cells, the comma would start a line
    words = ["原点出发的向量全都在这个平面里，也就是圆所在的平面", "x − mean", "xhat，在半径为 √3 的圆上"]
    lines = _render(_picture(words), 30)
    assert all(cell_len(line) <= 30 for line in lines), lines
    assert not [line for line in lines if line.lstrip()[:1] in NO_START and cell_len(line) != len(line)]
    assert lines.index(next(line for line in lines if line.startswith("o "))) > 3  # below the picture
