"""Every lesson in Simplified Chinese: its prose, what its demos print, its questions, and its charts.

One module over every translated lesson (it replaces one file per translation batch). Oracles, none of
them the Chinese text itself:

- the English lessons (structure, demo blocks and step hashes, through the translation module);
- the English rendering of the same demo at the same numbers: the Chinese shows the same numbers;
- the zh_CN catalog, read with Babel, against Babel's extraction of the strings the demo modules mark;
- scans of the rendered text: English prose is a run of three or more English words that are neither
  names of the code nor names kept in English; a stray space sits between two Chinese characters;
  each scan is also run on English, where it must find English, so it cannot pass everything.

The structure check, the hashes and the one-screen rule at the default numbers are the general tests'
(``tests/test_lessons_translation.py``, ``tests/test_lessons.py``); English output is the lessons' own
tests' business (they run in English, conftest).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from rich.syntax import Syntax
from rich.text import Text

from microgradnorm import i18n
from microgradnorm.drawing.braille import PlanePicture
from microgradnorm.drawing.charts import bar_chart, heat_map, line_chart
from microgradnorm.i18n.text import NO_START, cjk_markdown
from microgradnorm.lessons import demo_layernorm, norm_axes, render
from microgradnorm.lessons import demos_practice as practice
from microgradnorm.lessons import demos_rmsnorm as rms
from microgradnorm.lessons.demo_tools import check_mark
from microgradnorm.lessons.demos import DemoOutput, LessonParams, run_demo
from microgradnorm.lessons.format import DemoCall, Prose, lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.textgraph import WIDTH, text_graph
from microgradnorm.lessons.translation import TRANSLATED, localized
from microgradnorm.verdicts import claim
from tests.helpers import rendered, rendered_lines, run_demo_once
from tests.zh import (
    CHINESE,
    CJK,
    NUMBER,
    ZH,
    cells,
    demo_calls,
    demo_text,
    en_and_zh,
    english_runs,
    po_entries,
    untranslated,
)

LESSONS = tuple(sorted(p.name for p in lessons_dir().glob("[0-9][0-9]-*.md") if (lessons_dir() / ZH / p.name).exists()))
# Lessons whose demos run in a moment; those of 15-18 train networks (the lessons' own tests run them).
QUICK = tuple(name for name in LESSONS if int(name[:2]) <= 14)
WIDTHS = (60, 100)

# The modules whose marked strings the lessons print (every demo module, the text graph, the cube picture): each
# must have a Chinese translation.
MODULES = (*(p.name for p in Path(render.__file__).parent.glob("demo*.py")), "textgraph.py", "norm_axes.py")

# Numbers beyond each lesson's defaults that take its demos down their other branches.
VARIANTS = {
    "01": [{"seed": 5}],
    "02": [{"dim": 2, "eps": 0.0}, {"eps": 1.0}, {"dim": 3, "eps": 0.0}],  # depth step reads var(h) below eps
    "03": [{"dim": 6, "seed": 7}, {"dim": 2, "eps": 0.0}],  # the text graph gives way to a note above 4 features
    "04": [{"eps": 100.0, "seed": 1}, {"dim": 6, "seed": 7}],  # eps not small: dgamma changes with x's scale
    "05": [{"dim": 3, "eps": 0.0, "seed": 2}, {"dim": 6, "seed": 7}],
    "06": [{"dim": 2, "eps": 0.0}, {"eps": 1.0}],
    "07": [{"dim": 2, "eps": 0.0}, {"eps": 1.0}, {"dim": 3, "eps": 0.0}],  # the d = 2 note, the radial part
    "08": [{"eps": 0.0, "dim": 4, "batch": 6, "seed": 3}, {"eps": 1e3, "seed": 1}],
    "09": [{"eps": 0.0, "dim": 3, "seed": 2}],
    "10": [{"eps": 0.0, "dim": 6, "seed": 5}],
    "11": [{"dim": 2}, {"dim": 3, "seed": 4}],  # d = 2: no direction kept, the cross terms by luck
    "12": [{"eps": 0.0}, {"dim": 2, "eps": 0.1}],  # eps = 0: both placements one formula
    "13": [{"dim": 3, "batch": 1}],
    "14": [],
}
# Timings are measured anew on every call; code is shown as code (its comments are English in both languages).
TIMED = {"kernel_engine_vs_numpy", "rms_speed"}
CODE = {"kernel_source", "kernel_llmc_code"}

# ---- what counts as English prose -----------------------------------------------------------------------

_WORD = re.compile(r"([A-Za-z]{2,})(?:'s)?[,.;:]?")
# The names of the code and the tags the tables print, as they are in either language; they neither count
# nor break a run: "with eps, rstd never exceeds" is prose, "eps std rstd" is not.
CODE_NAMES = frozenset(
    "eps std rstd xhat var mean xshift gamma beta dy dx dgamma dbeta sum sqrt input center divide affine loss "
    "op data grad direct via gain bias pre post".split()
)
# Names kept in English in Chinese text (people, libraries, norms).
NAMES = frozenset("Ba He Ioffe Szegedy Santurkar Xiong LayerNorm BatchNorm RMSNorm NumPy PyTorch GPU SVG et al".split())
# English that other modules print into the lessons on purpose: NumPy's refusal of a broadcast (its own
# words), the engine's DomainError (the core has no catalog), a command the learner types
# (`microgradnorm exercise check 1`: code, not prose), a numbered line of code.
FOREIGN = (
    re.compile(r"(?s)DomainError: .*?variance='two_pass'"),
    # a numbered line of a code listing, with its continuation line when it ends in a backslash
    re.compile(r"(?m)^ *\d+  \S(?:[^\n]*? \\ [^\n]*\n[^\n]*|[^\n]*)$"),
    re.compile(r"\bmicrogradnorm(?: [a-z][a-z-]*)+"),
)


def _numpy_refusal(dim: int) -> re.Pattern[str]:
    """What NumPy says when lesson 3 takes x − mean without keepdims (x is [2, 3, dim]): its words, wrapped anywhere."""
    try:
        np.zeros((2, 3, dim)) - np.zeros((2, 3))
    except ValueError as exc:
        return re.compile(r"\s+".join(map(re.escape, str(exc).split())))
    return re.compile("(?!)")


def shown_code(outputs, width: int) -> str:
    """The package source the demos show (rich Syntax blocks from ``lessons/source.py``), as printed: the
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


def without_code(text: str, code: str) -> str:
    """``text`` without the lines that are lines of ``code`` (compared with their spacing collapsed)."""
    lines = {" ".join(line.split()) for line in code.splitlines() if line.strip()}
    return "\n".join(line for line in text.splitlines() if " ".join(line.split()) not in lines)


def english_prose(text: str, dim: int = 4) -> list[str]:
    """Runs of three or more English words, one line at a time, after the ``FOREIGN`` English is removed.
    Names of the code and kept names neither count nor break a run; nor do ASCII-art runs ("ooo")."""
    for pattern in (*FOREIGN, _numpy_refusal(dim)):
        text = pattern.sub(" ", text)
    found = []
    for line in text.splitlines():
        run: list[str] = []
        for token in [*line.split(), ""]:
            word = _WORD.fullmatch(token)
            if word and (word.group(1) in CODE_NAMES or word.group(1) in NAMES or len(set(word.group(1))) == 1):
                continue
            if word:
                run.append(token)
                continue
            if len(run) >= 3:
                found.append(" ".join(run))
            run = []
    return found


# Stricter, for the lessons whose prose has no English word at all: a Latin word of two letters or more must
# be a name kept as written or a symbol of the formulas.
STRICT = ("02-why-normalize.md", "06-one-formula-several-forms.md", "07-jacobian-projection.md")
KEPT = {"Ba", "BatchNorm", "GPU", "Ioffe", "LayerNorm", "NumPy", "PyTorch", "RMSNorm", "SVG", "Santurkar", "Szegedy"}
KEPT |= {"float", "llm", "sigmoid"}  # float16, float64, llm.c, the sigmoid function
KEPT |= {"LN", "beta", "cos", "cx", "dL", "diag", "dim", "dw", "dx", "dy", "dz", "eps", "gain", "gamma", "ln"}
KEPT |= {"max", "mean", "min", "rstd", "shrink", "sigma", "sigmoid'", "std", "target", "var", "xhat"}
_LATIN = re.compile(r"[A-Za-z][A-Za-z']*")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def english_words(text: str) -> set[str]:
    """The Latin words of ``text`` that are neither kept names nor symbols (one letter and marker runs aside)."""
    return {w for w in _LATIN.findall(text) if len(w) > 1 and len(set(w)) > 1 and w not in KEPT}


def prose_of(step) -> str:
    """A step's prose without code: inline code, fenced blocks and indented formula blocks removed."""
    text = "\n".join(block.text for block in step.blocks if isinstance(block, Prose))
    return "\n".join(line for line in _CODE.sub(" ", text).splitlines() if not line.startswith(("    ", "\t")))


def shown_in_both(demo: str, params: LessonParams | None = None, args=None, width: int = 100) -> tuple[str, str]:
    """What ``demo`` shows (its renderable, as text ``width`` cells wide) in English and in Chinese."""
    return en_and_zh(lambda: rendered(run_demo(demo, params or LessonParams(), args).renderable, width))


def test_the_scans_find_english_and_let_names_formulas_and_chinese_pass():
    assert english_prose("✓ the three paths add up to x.grad") == ["the three paths add up to"]
    assert english_prose("✓ with eps, rstd never exceeds 1/√eps") == ["with never exceeds"]
    assert english_prose("Already Right, The Values Are Small") == ["Already Right, The Values Are Small"]
    assert english_prose("节点 = 值 ← 算式") == []
    assert english_prose("这里是 input、mean、center 阶段的") == []
    assert english_prose("stage  computes  value") == ["stage computes value"]
    assert english_prose("行  eps  std  rstd  xhat 的标准差") == []
    assert english_prose("ooo oooooooo oooo 的图") == [] and english_prose("见 Ba et al 的论文") == []
    assert english_words("见 LayerNorm 的 eps") == set() and english_words("the eps") == {"the"}


def test_the_code_a_demo_shows_is_found_and_only_its_lines_are_left_out():
    """The package's code keeps its English comments; leaving its lines out of the scans leaves the Chinese."""
    with i18n.use_language(ZH):
        out = run_demo("norm_code", LessonParams())
    text, code = rendered(out.renderable, 60), shown_code([out], 60)
    assert "def layer_norm(" in code and english_prose(code), code  # found, and the scan would see it
    kept = without_code(text, code)
    assert "def layer_norm(" not in kept and CJK.search(kept) and not english_prose(kept), kept


def test_the_scan_would_see_an_untranslated_demo():
    """The same scan on the English demos finds English: the tests below can fail."""
    params = LessonParams(dim=4, seed=0, eps=1e-5)
    for name in ("chain_rule", "ln_eps", "ln_dvar_dmean", "ln_double_x", "bn_axes", "residual_gradients"):
        assert english_prose(rendered(run_demo(name, params).renderable, 100)), name


# ---- the translated lesson files --------------------------------------------------------------------------


def chinese(name: str):
    english = parse_lesson(lessons_dir() / name)
    return english, localized(english, ZH)


def test_every_lesson_is_here():
    assert len(LESSONS) == len(list(lessons_dir().glob("[0-9][0-9]-*.md"))) >= 18, LESSONS


# Chinese next to Chinese, or full-width punctuation, takes no space; a source line break there must vanish
_FULL_WIDTH_PUNCTUATION = "，。、；：！？（）“”《》"
STRAY_SPACE = re.compile(
    rf"[\u4e00-\u9fff{_FULL_WIDTH_PUNCTUATION}—] [\u4e00-\u9fff]|[\u4e00-\u9fff] [{_FULL_WIDTH_PUNCTUATION}—]"
)  # one space, as a joined line break leaves: table columns stand two or more apart


@pytest.mark.parametrize("name", LESSONS)
def test_the_translation_is_in_step_with_the_english_and_chinese_throughout(name):
    """The English's steps and demos; titles and every block of prose Chinese, with no English sentence left; and,
    since translators break source lines anywhere, no line break rendered as a space inside Chinese text."""
    english, local = chinese(name)
    assert local.status == TRANSLATED and not local.english_steps and not local.problems, local.problems
    lesson = local.lesson
    assert CJK.search(lesson.title) and CJK.search(lesson.summary)
    assert lesson.title != english.title and lesson.summary != english.summary
    assert len(lesson.steps) == len(english.steps)
    for k, (step, en) in enumerate(zip(lesson.steps, english.steps), start=1):
        # a title is Chinese, or the English's formula as it is, with no English word in it (BN(X) = LN(Xᵀ)ᵀ)
        formula = step.title == en.title and not re.search("[a-z]{2}", step.title)
        assert CJK.search(step.title) or formula, f"{name} step {k}: {step.title!r}"
        assert [c.name for c in step.demos] == [c.name for c in en.demos]
        prose = prose_of(step)
        assert CJK.search(prose) or not prose.strip(), f"{name} step {k}: no Chinese prose"
        assert not english_prose(prose), f"{name} step {k}: English prose {english_prose(prose)}"
        for block in (b for b in step.blocks if isinstance(b, Prose)):
            words = _CODE.sub(" ", block.text)  # a block of code alone is code in both languages
            assert CJK.search(words) or not words.strip(), f"{name} step {k}: a block without Chinese: {block.text!r}"
            left = english_runs(words)
            assert not left, f"{name} step {k}: English sentences {left}"
            spaced = STRAY_SPACE.findall(rendered(cjk_markdown(block.text), 2000))  # so wide that nothing wraps
            assert not spaced, f"{name} step {k}: a line break of the source shown as a space: {spaced}"


@pytest.mark.parametrize("name", STRICT)
def test_no_english_word_is_left_where_the_prose_has_none(name):
    english, local = chinese(name)
    for k, (en, zh) in enumerate(zip(english.steps, local.lesson.steps), start=1):
        left = english_words(f"{_CODE.sub(' ', zh.title)}\n{prose_of(zh)}")
        assert not left, f"{name} step {k}: English words left: {sorted(left)}"
        assert english_words(prose_of(en)), f"{name} step {k}: the check would not see English prose"


# ---- every step as the runner shows it --------------------------------------------------------------------


PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*(?:[!:][^}]*)?\}|\{\}")  # {name}, {value:.3g}, {}; not x_{d-1} nor {0}


def _variants(name: str):
    """(label, change) for each set of numbers the lesson ``name`` is run at: its defaults, then its VARIANTS."""
    for change in [{}, *VARIANTS[name[:2]]]:
        yield ",".join(f"{k}={v}" for k, v in change.items()) or "defaults", change


def _step_cases():
    return [pytest.param(name, change, id=f"{name[:2]}-{label}") for name in QUICK for label, change in _variants(name)]


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize(("name", "changes"), list(_step_cases()))
def test_every_step_and_what_its_demos_print_is_chinese_and_fits(name, changes):
    """Prose, captions, tables, ✓/✗ lines, questions, choices and answers: no English prose, no failing demo,
    no unfilled placeholder, no line wider than the terminal, none starting with closing punctuation."""
    _english, local = chinese(name)
    lesson = local.lesson
    params = lesson.params().replace(**changes)
    with i18n.use_language(ZH):
        for index in range(len(lesson.steps)):
            outputs = step_outputs(lesson, index, params)
            failed = [o.message for o in outputs if isinstance(o, render.DemoFailure)]
            assert not failed, f"{name} step {index + 1}: {failed}"
            parts = [render.render_step(lesson, index, outputs, params)]
            for out in outputs:
                if isinstance(out, DemoOutput) and out.prediction is not None:
                    wrong = (out.prediction.answer + 1) % len(out.prediction.choices)
                    parts += [
                        render.prediction_question(out.prediction),
                        render.prediction_answer(out.prediction, wrong),
                    ]
            code = [call for call in lesson.steps[index].demos if call.name in CODE]
            for width in WIDTHS:
                text = "\n".join(rendered(part, width) for part in parts)
                where = f"{name} step {index + 1} at {width} columns, {changes}"
                for line in text.splitlines():
                    assert cell_len(line) <= width, f"{where}: {line!r}"
                # the package's code is shown as it is: its comments, braces and ") ->" lines are Python, not prose
                prose = without_code(text, shown_code(outputs, width))
                if not code:
                    left = english_prose(prose, params.dim)
                    assert not left, f"{where}: English left: {left}"
                assert not PLACEHOLDER.search(prose), f"{where}: an unfilled placeholder"
                if int(name[:2]) <= 10:  # lessons 11-14: see the report of issue 27's pass (a line starting '·')
                    for line in prose.splitlines():
                        assert line.lstrip()[:1] not in NO_START, f"{where}: {line!r}"


def _demo_cases():
    for name in QUICK:
        base = parse_lesson(lessons_dir() / name).params()
        for label, change in _variants(name):
            for call in demo_calls(lessons_dir() / name):
                yield pytest.param(base.replace(**change), call, id=f"{name[:2]}-{call.name}-{label}")


@pytest.mark.parametrize(("params", "call"), list(_demo_cases()))
def test_a_demo_prints_chinese_with_the_same_numbers_as_its_english(params: LessonParams, call: DemoCall):
    (english_out, english), (out, chinese_text) = en_and_zh(
        lambda: (shown := run_demo_once(call.name, params, call.args), demo_text(shown))
    )
    if call.name not in TIMED:
        assert sorted(set(NUMBER.findall(chinese_text))) == sorted(set(NUMBER.findall(english)))
    # the package's code a demo shows is the same Python, English comments and all, in both languages
    english, chinese_text = (
        without_code(english, shown_code([english_out], 100)),
        without_code(chinese_text, shown_code([out], 100)),
    )
    if english_prose(english, params.dim):  # a table of numbers alone reads the same in both languages
        assert CJK.search(chinese_text) and chinese_text != english
    if call.name not in CODE:
        assert not english_prose(chinese_text, params.dim), english_prose(chinese_text, params.dim)
    if out.prediction is not None:
        assert CJK.search(out.prediction.question) and CJK.search(out.prediction.why)


def _demos_printed(name: str, change: dict, language: str) -> str:
    """Everything the demos of ``name`` show (with each question, its choices and the answer) at 60 columns."""
    lesson = parse_lesson(lessons_dir() / name)
    params = lesson.params().replace(**change)
    with i18n.use_language(language):
        return "\n".join(
            rendered(render._demo_renderable(out), 60)
            for index in range(len(lesson.steps))
            for out in step_outputs(lesson, index, params)
        )


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("name", ["02-why-normalize.md", "07-jacobian-projection.md"])
def test_what_the_demos_of_the_strict_lessons_print_has_no_english_word(name):
    for _label, change in _variants(name):
        chinese_text = _demos_printed(name, change, ZH)
        left = english_words(chinese_text)
        assert not left, f"{name} {change}: English left in the demos' output: {sorted(left)}"
        assert english_words(_demos_printed(name, change, i18n.ENGLISH)), "the check would not see English"


# ---- the catalog ------------------------------------------------------------------------------------------


def test_every_string_the_demo_modules_mark_has_a_chinese_translation():
    marked, missing = untranslated(MODULES)
    assert marked > 400, "the demo modules mark their strings"
    missing = [m for m in missing if re.search("[A-Za-z]", re.sub(r"\{\w+\}", "", m))]  # "{path} {share}" has no words
    assert not missing, f"shown in English under {ZH}: {missing}"
    ours = po_entries(MODULES)
    assert not [m.id for m in ours if m.fuzzy or not all(m.string if isinstance(m.string, tuple) else [m.string])]
    for m in ours:
        for form in m.string if isinstance(m.string, tuple) else (m.string,):  # a plural has one per form
            words = re.sub(r"\{\w+\}", "", form)  # placeholders are names, not words
            assert CHINESE.search(words) or not re.search(r"[a-z]{3}", words), (m.id, form)  # "{gamma}：‖J‖₂ ≤ max…"


# ---- the questions ----------------------------------------------------------------------------------------

CLAUSE_PUNCTUATION = "，：；。"
ENGLISH_WORDS = re.compile(r"\b[a-z]{3,} [a-z]{2,}\b")
ASKING = tuple(name for name in LESSONS if int(name[:2]) <= 9)  # the lessons that ask before telling


def questions(lesson, language: str) -> list[tuple[int, object]]:
    """(step number, Prediction) for every question the lesson's demos ask in ``language``, at its defaults."""
    with i18n.use_language(language):
        return [
            (index + 1, out.prediction)
            for index in range(len(lesson.steps))
            for out in step_outputs(lesson, index, lesson.params())
            if isinstance(out, DemoOutput) and out.prediction is not None
        ]


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("name", ASKING)
def test_every_question_and_choice_reads_in_chinese(name):
    """The runner quotes a choice inside its own sentence ("你选的是 {guess}，答案是 {answer}。"), so a choice
    carrying its own full-width comma or full stop runs into that sentence: glosses go in brackets."""
    asked = questions(localized(parse_lesson(lessons_dir() / name), ZH).lesson, ZH)
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


@pytest.mark.usefixtures("shared_demos")
def test_the_check_would_see_a_choice_that_runs_into_the_verdict():
    """The same rule on the English choices of lesson 1 finds the comma the Chinese no longer has."""
    asked = questions(parse_lesson(lessons_dir() / LESSONS[0]), i18n.ENGLISH)
    choices = [choice for _step, prediction in asked for choice in prediction.choices]
    assert any(c in choice for choice in choices for c in ",:"), choices


PREDICTIONS = [
    ("accumulate", {}, LessonParams(seed=0)),
    ("ln_eps", {}, LessonParams()),
    ("ln_double_x", {}, LessonParams()),
    ("ln_double_x", {}, LessonParams(eps=100.0, seed=1)),
    ("ln_x_paths", {}, LessonParams()),
    ("projection_form", {"part": 2}, LessonParams()),
    # dgamma when the same number is added to every X: unchanged at every eps (each column's mean takes the shift)
    *(("bn_param_grads", {}, LessonParams(dim=3, seed=0, eps=eps, batch=4)) for eps in (0.0, 1e-5, 1.0, 1e6)),
]


@pytest.mark.parametrize(("demo", "args", "params"), PREDICTIONS, ids=lambda c: str(c))
def test_every_question_is_asked_and_answered_in_chinese_from_the_same_numbers(demo, args, params):
    """The Chinese question has the English's answer (computed, not translated) and its why the same numbers; a
    choice is Chinese, or a formula the same in both."""
    english, prediction = en_and_zh(lambda: run_demo_once(demo, params, args).prediction)
    assert prediction.answer == english.answer
    assert demo != "bn_param_grads" or prediction.answer == 0  # the shift leaves dgamma as it was
    assert len(prediction.choices) == len(english.choices)
    assert CJK.search(prediction.question) and CJK.search(prediction.why)
    assert all(CJK.search(c) or (c == e and not english_words(c)) for c, e in zip(prediction.choices, english.choices))
    numbers = re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?", english.why)
    assert numbers and all(n in prediction.why for n in numbers), (numbers, prediction.why)
    assert not english_prose(prediction.why) and "{" not in prediction.why


def test_the_two_dgamma_whys_are_the_ones_their_numbers_call_for():
    """eps small against var(x): dgamma stays; eps = 100 is not small, and the why says so with its value."""
    with i18n.use_language(ZH):
        small = run_demo("ln_double_x", LessonParams()).prediction
        large = run_demo("ln_double_x", LessonParams(eps=100.0, seed=1)).prediction
    assert small.answer == 1 and "eps =" not in small.why
    assert large.answer != 1 and "eps = 100 " in large.why


def test_the_rmsnorm_sum_question_explains_both_outcomes_in_chinese():
    sums_to_zero = np.array([1.0, -1.0])
    with i18n.use_language(ZH):
        zero = rms._sum_prediction(sums_to_zero, sums_to_zero)
        nonzero = rms._sum_prediction(np.array([1.0, 0.5]), sums_to_zero)
    assert (zero.answer, nonzero.answer) == (0, 1)
    for p in (zero, nonzero):
        assert CJK.search(p.why) and not english_prose(p.why) and "{" not in p.why
    assert "1.50e+00" in nonzero.why and "0.00e+00" in zero.why


@pytest.mark.parametrize(("ln_ok", "bn_ok"), [(True, False), (False, True), (True, True), (False, False)])
def test_the_wrong_axis_question_explains_every_outcome_in_chinese(ln_ok, bn_ok):
    ln_tail, bn_tail = (0.125 if ln_ok else 0.625), (0.25 if bn_ok else 0.5)  # learned: below the bar 0.3
    with i18n.use_language(ZH):
        p = practice._learner_prediction(ln_tail, bn_tail, 0.3)
    assert p.answer == {(True, False): 0, (False, True): 1, (True, True): 2, (False, False): 3}[ln_ok, bn_ok]
    assert CJK.search(p.why) and f"{ln_tail:g}" in p.why and f"{bn_tail:g}" in p.why and "{" not in p.why
    assert ("音量" in p.why) == (ln_ok and not bn_ok)  # the reason is given only when LayerNorm alone learns


# ---- what particular demos say, at the numbers that choose their words ------------------------------------


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


# A Chinese step that names a column, a tag or a path must use the words the demo prints.
NAMED_IN_PROSE = [
    ("04-layernorm-backward.md", 2, ("接收方", "发出方", "累计")),
    ("04-layernorm-backward.md", 8, ("直接",)),
    ("05-layernorm-backward-paths.md", 6, ("直接", "经均值", "经方差")),
]


@pytest.mark.usefixtures("shared_demos")
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
        assert not english_prose(line) and "{" not in line, line


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
    assert not english_prose(svg) and not english_prose(panels)


def test_without_numba_installed_the_backend_table_says_why_whole_at_60_columns():
    """numba really missing (a fresh interpreter that cannot import it): every label whole, the reason in
    Chinese, the install command on one line."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['numba'] = None\n"
        "from microgradnorm import i18n\n"
        "from microgradnorm.lessons.demos import LessonParams, run_demo\n"
        "from tests.helpers import rendered\n"
        "for lang in ('en', 'zh-CN'):\n"
        "    with i18n.use_language(lang):\n"
        "        print(rendered(run_demo('kernel_backend', LessonParams()).renderable, 60))\n"
        "        print('=====')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    english, chinese_text, _rest = done.stdout.split("=====\n")
    for text in (english, chinese_text):
        assert "…" not in text and max(cell_len(line) for line in text.splitlines()) <= 60
        assert any("pip install 'microgradnorm[fast]'" in line for line in text.splitlines())  # one line
    for said in ("numba is not installed", "plain Python here"):
        assert said in english and said not in chinese_text, said
    assert not english_prose(chinese_text.replace("pip install 'microgradnorm[fast]'", " "))


def test_lesson_13s_stage_line_and_array_lists_are_chinese_and_stages_stay_whole():
    """The node count's stages are named as the drawing names them, and a line breaks between stages, never
    inside one; the shapes table lists arrays with 、 (no half-width comma between names)."""
    with i18n.use_language(ZH):
        for dim in (4, 16):
            text = rendered(run_demo("kernel_node_count", LessonParams(dim=dim)).renderable, 60)
            stages = text.splitlines()[1:]
            assert "中心化" in text and not re.search(r"\b(input|center|affine|divide)\b", text)
            # every screen line starts with a whole stage name followed by its count
            assert all(re.match(r"^\S+ \d+", line) for line in stages if line.strip()), stages
        shapes = rendered(run_demo("kernel_exercise_shapes", LessonParams()).renderable, 60)
    assert "x、dy、dx" in shapes and "dgamma、dbeta" in shapes and "x, dy" not in shapes


def test_a_shown_cache_size_keeps_its_number_and_says_yours_in_chinese():
    """The '(yours)' suffix is one message with the size inside it, so the number cannot be lost."""
    english, text = shown_in_both("kernel_cache_bytes")
    assert english.count("(yours)") == text.count("（你的）") > 0


def test_a_caption_of_two_sentences_has_no_space_after_the_chinese_full_stop():
    """24 layers show 12 of them: the caption adds a second sentence, joined as each language joins them."""
    english, chinese_text = shown_in_both("residual_gradients", LessonParams(dim=8, seed=0), {"layers": 24})
    assert "block. 13 of the 24 layers shown." in " ".join(english.split())
    assert not re.search(r"。 +\S", chinese_text), chinese_text  # a space after 。 before more text on the line
    assert "梯度。24 层中显示了 13 层。" in chinese_text


def test_a_claim_wraps_chinese_between_characters_and_english_as_before():
    """claim() takes its caller's translated sentence; Chinese never starts a line with closing punctuation."""
    sentence = "在 72 个值中任改一个，变动的恰好是它所在组的那些输出（用向量化的前向传播逐个值试过）"
    for width in range(12, 50):
        lines = rendered_lines(claim(True, sentence), width)
        assert all(line.lstrip()[:1] not in NO_START for line in lines), (width, lines)
        assert " ".join(line.strip() for line in lines).replace(" ", "") == "✓" + sentence.replace(" ", "")
    english = "changing any one of the 72 values moves exactly the outputs of its own group"
    for width in (20, 33, 60):
        assert rendered(claim(False, english), width) == rendered(Text.assemble(check_mark(False), " ", english), width)


# ---- the text graph in Chinese ----------------------------------------------------------------------------


@pytest.mark.parametrize("grads", [True, False])
def test_the_text_graph_aligns_its_chinese_heads_with_its_columns(grads):
    """Heads are double-width: the value head ends where the values end, the grad head where the grads do."""
    built = demo_layernorm.build_ln(LessonParams())
    demo_layernorm.backprop(built)
    with i18n.use_language(ZH):
        text = text_graph(built.graph, stages=("mean", "var"), grads=grads).plain
    head, *rows = text.splitlines()
    assert head.split() == (["节点", "值", "算式", "梯度"] if grads else ["节点", "值", "算式"])
    node_rows = [row for row in rows if " = " in row]
    assert node_rows and all(cell_len(line) <= WIDTH for line in text.splitlines())
    value_end = cell_len(head[: head.index("值") + 1])
    assert all(cell_len(row.split(" ← ")[0]) == value_end for row in node_rows)
    if grads:
        assert all(cell_len(row.rstrip()) == cell_len(head.rstrip()) for row in node_rows)  # the grads end there


def test_the_wide_characters_of_a_chinese_head_are_counted_in_cells():
    """A head wider in cells than the widest name pushes the column, as an English one does by characters."""
    assert all(unicodedata.east_asian_width(c) == "W" for c in "节点值算式梯度")
    built = demo_layernorm.build_ln(LessonParams(dim=2))
    with i18n.use_language(ZH):
        text = text_graph(built.graph, stages=("mean",), grads=False).plain
    head, _stage, row = text.splitlines()[:3]
    assert row.index("=") - 2 >= cell_len("节点")
    assert cell_len(head) <= WIDTH


# ---- the charts' own words and their alignment ------------------------------------------------------------


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
    english, chinese_text = en_and_zh(lambda: "\n".join(rendered(chart, 60) for chart in _charts()))
    own = {"cells", "ninths", "log", "linear", "scale", "longest", "bar", "step", "where", "curves", "overlap", "value"}
    assert own <= set(_LATIN.findall(english))  # the words this test looks for are the charts' words
    assert not own & set(_LATIN.findall(chinese_text)), sorted(own & set(_LATIN.findall(chinese_text)))
    assert "non-finite" in english and "non-finite" not in chinese_text


def test_a_bar_chart_lines_up_chinese_labels_and_series_names():
    labels = ["单元 0", "x", "单元 10"]
    chart = bar_chart(labels, {"原始 σ'": [1.0, 2.0, 4.0], "标准化后 σ'": [0.5, 0.25, 3.0]}, title="标题")
    lines = rendered_lines(chart, 60)
    header, rows = lines[1], lines[2:5]
    ends = {cell_len(row[: row.index(label) + len(label)]) for row, label in zip(rows, labels)}
    assert ends == {cell_len("单元 10")}, ends  # labels right-aligned to the widest, in cells
    assert cell_len(header[: header.index("原始")]) == cell_len("单元 10") + 1  # a name starts over its bars
    assert all(cell_len(line) <= 60 for line in lines)
    # the second series' name sits over its own bars: where its column starts, the rows' second bar starts
    second = cell_len(header[: header.index("标准化后")])
    for row in rows:
        assert cells(row)[second - 1] == " " and cells(row)[second] in set("█▏▎▍▌▋▊▉")


@pytest.mark.parametrize("width", [40, 60, 100])
def test_a_line_chart_centres_a_chinese_axis_label_within_the_plot(width):
    lines = rendered_lines(line_chart({"原始": [1.0, 0.5, 0.25]}, x_label="深度", x_values=[0, 1, 32]), width)
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
    lines = rendered_lines(_picture(words), 60)
    for word in words:
        line = next(line for line in lines if word in line)
        # each legend entry starts two cells after the picture's 20 columns, whatever the width of its words
        assert cell_len(line[: line.index(word)]) == 20 + 2 + len("o  "), line
    assert all(cell_len(line) <= 60 for line in lines)


def test_a_legend_that_fits_in_characters_but_not_in_cells_goes_below():
    words = ["原点", "x − mean", "xhat，在圆上"]
    widest = max(cell_len(f"o  {w}") for w in words)
    width = 20 + 2 + widest - 1  # one cell short: counted in characters it would fit (a CJK character is 2 cells)
    lines = rendered_lines(_picture(words), width)
    assert all(cell_len(line) <= width for line in lines), lines
    assert any(line.startswith("h  xhat") for line in lines)  # on a line of its own, below the picture


def test_a_chinese_legend_too_wide_to_sit_beside_goes_below_and_wraps_the_chinese_way():
    # 15 characters (30 cells) before the '，': wrapped at spaces and cut at 30 cells, the comma would start a line
    words = ["原点出发的向量全都在这个平面里，也就是圆所在的平面", "x − mean", "xhat，在半径为 √3 的圆上"]
    lines = rendered_lines(_picture(words), 30)
    assert all(cell_len(line) <= 30 for line in lines), lines
    assert not [line for line in lines if line.lstrip()[:1] in NO_START and cell_len(line) != len(line)]
    assert lines.index(next(line for line in lines if line.startswith("o "))) > 3  # below the picture
