"""Lessons 01, 03, 04 and 05 in Chinese: the translated prose, and everything their demos print, under zh-CN.

Also what the demos of lesson 06 print (they live in the same module as lessons 3-5's,
and their strings are marked and translated with them; lesson 06's prose is translated
separately).

Oracles: the English lessons (structure and step hashes, through the translation module);
the zh_CN catalog read back with Babel; the demos' own English output (which lines of a
step another module prints); and scans of the rendered text: English prose is a run of
three or more lowercase English words, a stray space is one between two Chinese
characters or next to full-width punctuation. English output is the lessons' own tests'
business: they run in English (conftest).
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
from rich.cells import cell_len
from rich.syntax import Syntax

from microgradnorm import i18n
from microgradnorm.i18n.text import NO_START, cjk_markdown
from microgradnorm.lessons import demos_core, render
from microgradnorm.lessons.demos import DemoOutput, LessonParams, run_demo
from microgradnorm.lessons.format import Prose, lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.textgraph import WIDTH, text_graph
from microgradnorm.lessons.translation import TRANSLATED, localized
from tests.zh import CJK, po_entries, rendered

ZH = i18n.SIMPLIFIED_CHINESE
LESSONS = (
    "01-value-and-chain-rule.md",
    "03-layernorm-forward.md",
    "04-layernorm-backward.md",
    "05-layernorm-backward-paths.md",
)
MODULES = ("demos_core.py", "demos_backward.py", "textgraph.py")  # whose marked strings these lessons print
WIDTHS = (60, 100)

_WORD = re.compile(r"([a-z]{2,})(?:'s)?[,.;:]?")
# The names of the code, printed as they are in either language (table heads, stage names, nodes).
CODE_NAMES = frozenset(
    "eps std rstd xhat var mean xshift gamma beta dy dx dgamma dbeta sum sqrt input center divide affine loss "
    "op data grad".split()
)


@pytest.fixture(autouse=True)
def _quiet(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)


def english_prose(text: str) -> list[str]:
    """Runs of three or more lowercase English words, one line at a time. The names of the code (``eps``,
    ``xhat``) neither count nor break a run: "with eps, rstd never exceeds" is prose, "eps std rstd" is not."""
    found = []
    for line in text.splitlines():
        run: list[str] = []
        for token in [*line.split(), ""]:
            word = _WORD.fullmatch(token)
            if word and word.group(1) in CODE_NAMES:
                continue
            if word:
                run.append(token)
                continue
            if len(run) >= 3:
                found.append(" ".join(run))
            run = []
    return found


def chinese(name: str):
    english = parse_lesson(lessons_dir() / name)
    return english, localized(english, ZH)


def prose_of(step) -> str:
    """A step's prose without its inline code and code blocks (formulas, identifiers)."""
    text = "\n".join(block.text for block in step.blocks if isinstance(block, Prose))
    text = re.sub(r"^    .*$", " ", text, flags=re.MULTILINE)  # indented formula blocks
    return re.sub(r"`[^`]*`", " ", text)


def test_english_prose_finds_what_it_should():
    """The scan itself: it must catch a sentence and let identifiers, formulas and lists pass."""
    assert english_prose("✓ the three paths add up to x.grad") == ["the three paths add up to"]
    assert english_prose("✓ with eps, rstd never exceeds 1/√eps") == ["with never exceeds"]
    assert english_prose("节点 = 值 ← 算式") == []
    assert english_prose("这里是 input、mean、center 阶段的") == []
    assert english_prose("stage  computes  value") == ["stage computes value"]
    assert english_prose("行  eps  std  rstd  xhat 的标准差") == []  # the names of the code are no prose


# ---- the translated lessons ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", LESSONS)
def test_the_translation_is_in_step_with_the_english_and_chinese_throughout(name):
    english, local = chinese(name)
    assert local.status == TRANSLATED and not local.english_steps and not local.problems, local.problems
    lesson = local.lesson
    assert CJK.search(lesson.title) and CJK.search(lesson.summary)
    assert lesson.title != english.title and lesson.summary != english.summary
    assert len(lesson.steps) == len(english.steps)
    for k, (step, en) in enumerate(zip(lesson.steps, english.steps), start=1):
        assert CJK.search(step.title), f"{name} step {k}: {step.title!r}"
        assert [c.name for c in step.demos] == [c.name for c in en.demos]
        prose = prose_of(step)
        assert CJK.search(prose), f"{name} step {k}: no Chinese prose"
        assert not english_prose(prose), f"{name} step {k}: English prose {english_prose(prose)}"


# Chinese next to Chinese, or full-width punctuation, takes no space; a source line break there must vanish
_FULL_WIDTH_PUNCTUATION = "，。、；：！？（）“”《》"
STRAY_SPACE = re.compile(
    rf"[\u4e00-\u9fff{_FULL_WIDTH_PUNCTUATION}—] +[\u4e00-\u9fff]|[\u4e00-\u9fff] +[{_FULL_WIDTH_PUNCTUATION}—]"
)


@pytest.mark.parametrize("name", LESSONS)
def test_no_line_break_of_the_source_shows_as_a_space_between_chinese_characters(name):
    """Translators break source lines anywhere; rendered, a paragraph has no space inside Chinese text."""
    _english, local = chinese(name)
    for k, step in enumerate(local.lesson.steps, start=1):
        for block in step.blocks:
            if not isinstance(block, Prose):
                continue
            text = rendered(cjk_markdown(block.text), 2000)  # wide enough that no paragraph wraps
            assert not STRAY_SPACE.findall(text), f"{name} step {k}: {STRAY_SPACE.findall(text)}"


# at the defaults, and at parameters that take the demos' other branches
CASES = [
    ("01-value-and-chain-rule.md", {}),
    ("01-value-and-chain-rule.md", {"seed": 5}),
    ("03-layernorm-forward.md", {}),
    ("03-layernorm-forward.md", {"dim": 6, "seed": 7}),  # the text graph gives way to a note above 4 features
    ("03-layernorm-forward.md", {"dim": 2, "eps": 0.0}),  # --eps 0: the eps table uses PyTorch's eps
    ("04-layernorm-backward.md", {}),
    ("04-layernorm-backward.md", {"eps": 100.0, "seed": 1}),  # eps not small: dgamma changes with x's scale
    ("04-layernorm-backward.md", {"dim": 6, "seed": 7}),
    ("05-layernorm-backward-paths.md", {}),
    ("05-layernorm-backward-paths.md", {"dim": 3, "eps": 0.0, "seed": 2}),
    ("05-layernorm-backward-paths.md", {"dim": 6, "seed": 7}),
]


def _numpy_refusal(dim: int) -> re.Pattern[str]:
    """What NumPy says when lesson 3 takes x − mean without keepdims (x is [2, 3, dim]), as printed:
    NumPy's own words, wrapped anywhere."""
    try:
        np.zeros((2, 3, dim)) - np.zeros((2, 3))
    except ValueError as exc:
        return re.compile(r"\s+".join(map(re.escape, str(exc).split())))
    return re.compile("(?!)")  # no refusal: nothing to leave out


def _printed_elsewhere(name: str, params: LessonParams, width: int) -> str:
    """The lines that lesson 5's per-node check prints through present.check_table (the `check` command's
    table, outside these lessons' modules), in English at ``width``, to be left out of the scan."""
    return rendered(run_demo("ln_check_table", params).renderable, width) if name.startswith("05") else ""


def shown_code(outputs, width: int) -> str:
    """The package source the step's demos show (rich Syntax blocks from lessons/source.py), as printed: the
    package's own code and its comments stay English on purpose (docs/translating.md)."""
    found: list[str] = []

    def walk(renderable) -> None:
        if isinstance(renderable, Syntax):
            found.append(rendered(renderable, width))
        for child in getattr(renderable, "renderables", ()):
            walk(child)

    for out in outputs:
        walk(out.renderable if isinstance(out, DemoOutput) else out)
    return "\n".join(found)


def _scanned(text: str, elsewhere: str, dim: int) -> str:
    skip = {" ".join(line.split()) for line in elsewhere.splitlines()}
    kept = [line for line in text.splitlines() if " ".join(line.split()) not in skip]
    return _COMMAND.sub(" ", _numpy_refusal(dim).sub(" ", "\n".join(kept)))


# a command the learner types (`microgradnorm exercise check 1`) is code, not prose
_COMMAND = re.compile(r"\bmicrogradnorm(?: [a-z][a-z-]*)+")


@pytest.mark.parametrize(("name", "changes"), CASES, ids=lambda c: str(c))
def test_every_step_and_what_its_demos_print_is_chinese(name, changes):
    """Prose, captions, tables, ✓/✗ lines, questions, choices and answers: no English prose, no failing demo."""
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
                    wrong = (out.prediction.answer + 1) % len(out.prediction.choices)
                    parts += [
                        render.prediction_question(out.prediction),
                        render.prediction_answer(out.prediction, wrong),
                    ]
            for width in WIDTHS:
                text = "\n".join(rendered(part, width) for part in parts)
                where = f"{name} step {index + 1} at {width} columns, {changes}"
                code = shown_code(outputs, width)
                elsewhere = _printed_elsewhere(name, params, width) + "\n" + code
                left = english_prose(_scanned(text, elsewhere, params.dim))
                assert not left, f"{where}: English left: {left}"
                assert max(cell_len(line) for line in text.splitlines()) <= width, where
                # the package's code is shown as it is: its braces and its ") ->" lines are Python, not prose
                code_lines = {line.rstrip() for line in code.splitlines()}
                prose = [line for line in text.splitlines() if line.rstrip() not in code_lines]
                assert "{" not in "\n".join(prose), f"{where}: an unfilled placeholder"
                assert not [line for line in prose if line.lstrip()[:1] in NO_START], where


def test_the_scan_would_see_an_untranslated_demo():
    """The same scan on the English demos finds English: the test above can fail."""
    params = LessonParams(dim=4, seed=0, eps=1e-5)
    for name in ("chain_rule", "ln_eps", "ln_dvar_dmean", "ln_double_x"):
        assert english_prose(rendered(run_demo(name, params).renderable, 100)), name


# ---- what the prose calls the tables' columns -----------------------------------------------------------

# A Chinese step that names a column, a tag or a path must use the words the demo prints.
NAMED_IN_PROSE = [
    ("04-layernorm-backward.md", 2, ("接收方", "发出方", "累计")),
    ("04-layernorm-backward.md", 7, ("直接",)),
    ("05-layernorm-backward-paths.md", 6, ("直接", "经均值", "经方差")),
]


@pytest.mark.parametrize(("name", "step", "words"), NAMED_IN_PROSE, ids=lambda c: str(c))
def test_the_prose_names_columns_and_paths_as_the_tables_print_them(name, step, words):
    _english, local = chinese(name)
    lesson = local.lesson
    prose = "\n".join(b.text for b in lesson.steps[step - 1].blocks if isinstance(b, Prose))
    with i18n.use_language(ZH):
        outputs = step_outputs(lesson, step - 1, lesson.params())
        printed = "\n".join(rendered(o.renderable, 100) for o in outputs)
    for word in words:
        assert word in prose, (name, step, word)
        assert word in printed, (name, step, word)


# ---- the demos' marked strings ---------------------------------------------------------------------------


def test_every_string_these_demos_mark_has_a_chinese_translation():
    ours = po_entries(MODULES)
    assert len(ours) > 150  # a marking that went missing shows here
    assert not [m.id for m in ours if m.fuzzy or not m.string]
    for m in ours:
        for form in m.string if isinstance(m.string, tuple) else (m.string,):  # a plural has one per form
            words = re.sub(r"\{\w+\}", "", form)  # placeholders are names, not words
            assert CJK.search(words) or not re.search(r"[a-z]{3}", words), (m.id, form)


PREDICTIONS = [
    ("accumulate", {}, LessonParams(seed=0)),
    ("ln_eps", {}, LessonParams()),
    ("ln_double_x", {}, LessonParams()),
    ("ln_double_x", {}, LessonParams(eps=100.0, seed=1)),
    ("ln_x_paths", {}, LessonParams()),
    ("projection_form", {"part": 2}, LessonParams()),
]


@pytest.mark.parametrize(("demo", "args", "params"), PREDICTIONS, ids=lambda c: str(c))
def test_every_question_is_asked_and_answered_in_chinese_from_the_same_numbers(demo, args, params):
    """The Chinese question has the English's answer (computed, not translated) and its why the same numbers."""
    english = run_demo(demo, params, args).prediction
    with i18n.use_language(ZH):
        prediction = run_demo(demo, params, args).prediction
    assert prediction.answer == english.answer
    assert len(prediction.choices) == len(english.choices)
    assert CJK.search(prediction.question) and CJK.search(prediction.why)
    assert all(CJK.search(c) or c == e for c, e in zip(prediction.choices, english.choices))
    numbers = re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?", english.why)
    assert numbers and all(n in prediction.why for n in numbers), (numbers, prediction.why)
    assert not english_prose(prediction.why)


def test_the_two_dgamma_whys_are_the_ones_their_numbers_call_for():
    """eps small against var(x): dgamma stays; eps = 100 is not small, and the why says so with its value."""
    with i18n.use_language(ZH):
        small = run_demo("ln_double_x", LessonParams()).prediction
        large = run_demo("ln_double_x", LessonParams(eps=100.0, seed=1)).prediction
    assert small.answer == 1 and "eps =" not in small.why
    assert large.answer != 1 and "eps = 100 " in large.why


def test_lesson_6_demos_print_chinese_in_both_of_their_verdicts():
    """forms_agree's relative verdict, and its absolute one where dx is 0 up to rounding (d = 2, eps = 0)."""
    with i18n.use_language(ZH):
        relative = rendered(run_demo("forms_agree", LessonParams()).renderable, 60)
        absolute = rendered(run_demo("forms_agree", LessonParams(dim=2, eps=0.0)).renderable, 60)
        terms = rendered(run_demo("three_path_terms", LessonParams()).renderable, 60)
        matrix = rendered(run_demo("projection_form", LessonParams(), {"part": 1}).renderable, 60)
    assert "最大相对差" in relative and "相对误差" in relative and "绝对" not in relative
    assert "最大绝对差" in absolute and "绝对误差" in absolute
    for text in (relative, absolute, terms, matrix):
        assert CJK.search(text) and not english_prose(text), english_prose(text)


# ---- the text graph in Chinese ------------------------------------------------------------------------------


def _column_ends(line: str) -> list[int]:
    """The terminal cell at which each run of non-space characters ends."""
    ends, cells = [], 0
    for k, char in enumerate(line):
        cells += cell_len(char)
        if not char.isspace() and (k + 1 == len(line) or line[k + 1].isspace()):
            ends.append(cells)
    return ends


@pytest.mark.parametrize("grads", [True, False])
def test_the_text_graph_aligns_its_chinese_heads_with_its_columns(grads):
    """Heads are double-width: the value head ends where the values end, the grad head where the grads do."""
    built = demos_core.build_ln(LessonParams())
    demos_core.backprop(built)
    with i18n.use_language(ZH):
        text = text_graph(built.graph, stages=("mean", "var"), grads=grads).plain
    head, *rows = text.splitlines()
    assert head.split() == (["节点", "值", "算式", "梯度"] if grads else ["节点", "值", "算式"])
    node_rows = [row for row in rows if " = " in row]
    assert node_rows and all(cell_len(line) <= WIDTH for line in text.splitlines())
    value_end = cell_len(head[: head.index("值") + 1])
    assert all(cell_len(row.split(" ← ")[0]) == value_end for row in node_rows)
    if grads:
        grad_end = _column_ends(head)[-1]
        assert all(_column_ends(row)[-1] == grad_end for row in node_rows)


def test_the_wide_characters_of_a_chinese_head_are_counted_in_cells():
    """A head wider in cells than the widest name pushes the column, as an English one does by characters."""
    assert all(unicodedata.east_asian_width(c) == "W" for c in "节点值算式梯度")
    built = demos_core.build_ln(LessonParams(dim=2))
    with i18n.use_language(ZH):
        text = text_graph(built.graph, stages=("mean",), grads=False).plain
    head, _stage, row = text.splitlines()[:3]
    assert row.index("=") - 2 >= cell_len("节点")
    assert cell_len(head) <= WIDTH
