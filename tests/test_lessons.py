"""Every step of every lesson file renders, at 60 and 100 columns, with NO_COLOR, without a failing demo.

The lesson files are found the way the command finds them (the repository's
``lessons/`` folder here), so a lesson added by anyone is covered without
touching this test.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from microgradnorm import i18n
from microgradnorm.i18n.text import NO_START
from microgradnorm.lessons import render
from microgradnorm.lessons.demos import DEMOS, DemoOutput, load_demos
from microgradnorm.lessons.format import LESSON_FILE, lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs
from microgradnorm.lessons.translation import TRANSLATED, localized, localized_page
from tests.helpers import asking_steps, rendered, syntax_blocks

LESSON_FILES = sorted(p for p in lessons_dir().iterdir() if LESSON_FILE.match(p.name))
WIDTHS = (60, 100)
# One screen per step (lessons/FORMAT.md): a step rendered at each of WIDTHS has at most this many lines.
# Taller terminals show it whole; smaller ones page it (the runner's pager), but a step is written for one screen.
MAX_STEP_LINES = 40
# A step that shows the package's own code (lessons/source.py) may be taller by that code, which the pager
# scrolls like any tall step; the code itself is held to a function a reader can take in at once.
MAX_CODE_LINES = 70

# SGR parameters that set a colour: 30-37, 38 (extended), 39, 40-47, 48, 49, 90-97, 100-107.
_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colour_codes(ansi: str) -> list[str]:
    found = []
    for params in _SGR.findall(ansi):
        for code in params.split(";"):
            if code and (30 <= int(code) <= 49 or 90 <= int(code) <= 107):
                found.append(code)
    return found


def _plain(text: str) -> str:
    """Collapse whitespace so that wrapped prose can be searched for."""
    return " ".join(text.split())


def _printed(renderable, width: int) -> tuple[str, str]:
    """(the text, what was written with its escape codes) of ``renderable`` on a truecolor terminal ``width``
    columns wide with NO_COLOR: the text is what a reader sees, the escape codes must set no colour."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=True, color_system="truecolor", no_color=True, record=True)
    console.print(renderable)
    return console.export_text(), buf.getvalue()


def test_the_lessons_folder_has_the_core_lessons():
    numbers = {int(p.name[:2]) for p in LESSON_FILES}
    assert {1, 2, 3, 4} <= numbers


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_step_renders_at_60_and_100_columns_without_colour(path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    lesson = parse_lesson(path)
    assert lesson.steps, f"{path.name} has no steps"
    params = lesson.params()
    for index, step in enumerate(lesson.steps):
        outputs = step_outputs(lesson, index, params)
        failures = [o for o in outputs if isinstance(o, render.DemoFailure)]
        assert not failures, f"{path.name} step {index + 1}: " + "; ".join(
            f"demo {f.call.name} failed: {f.message}" for f in failures
        )
        assert len(outputs) == len(step.demos)
        for width in WIDTHS:
            text, ansi = _printed(render.render_step(lesson, index, outputs, params), width)
            flat = _plain(text)
            where = f"{path.name} step {index + 1} at {width} columns"
            assert _plain(render.inline(step.title).plain) in flat, where
            assert f"Step {index + 1} of {len(lesson.steps)}" in flat, where
            assert not _colour_codes(ansi), f"{where}: colour codes despite NO_COLOR"
            assert max(len(line) for line in text.splitlines()) <= width, where
            for out, call in zip(outputs, step.demos):
                assert isinstance(out, DemoOutput)
                assert rendered(out.renderable, width).strip(), f"{where}: demo {call.name} rendered nothing"


def _rendered(lesson, index, outputs, params, width: int) -> str:
    """The step as the runner and ``--auto`` print it, at ``width`` columns, without colour."""
    return rendered(render.render_step(lesson, index, outputs, params), width)


def _code_lines(outputs, width: int) -> int:
    """How many of a step's lines are package code it shows (rich Syntax blocks), at most MAX_CODE_LINES."""
    blocks = [block for out in outputs for block in syntax_blocks(getattr(out, "renderable", out))]
    found = [len(rendered(block, width).splitlines()) for block in blocks]
    assert all(n <= MAX_CODE_LINES for n in found), f"code shown in {found} lines, more than {MAX_CODE_LINES}"
    return sum(found)


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_step_fits_one_screen_at_60_and_100_columns(path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    lesson = parse_lesson(path)
    params = lesson.params()
    too_long = []
    for index in range(len(lesson.steps)):
        outputs = step_outputs(lesson, index, params)
        heights = {
            width: len(_rendered(lesson, index, outputs, params, width).splitlines()) - _code_lines(outputs, width)
            for width in WIDTHS
        }
        if max(heights.values()) > MAX_STEP_LINES:
            shown = ", ".join(f"{h} lines at {w} columns" for w, h in heights.items())
            too_long.append(f"step {index + 1} ({shown})")
    assert not too_long, f"{path.name}: steps longer than {MAX_STEP_LINES} lines: " + "; ".join(too_long)


# The one-screen rule holds for every translation too (a Chinese character takes two cells, and Chinese wraps
# differently): each translated lesson of the lessons folder, and the sample translation of the tests, so the
# check runs even before the first real translation lands.
ZH = i18n.SIMPLIFIED_CHINESE
SAMPLE_TRANSLATION = Path(__file__).resolve().parent / "i18n_fixtures" / "lessons" / ZH / "01-chain-rule-sample.md"
TRANSLATIONS = [*sorted(p for p in (lessons_dir() / ZH).glob("*.md") if LESSON_FILE.match(p.name)), SAMPLE_TRANSLATION]


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("path", TRANSLATIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_translated_step_fits_one_screen_at_60_and_100_columns(path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    shown = localized(parse_lesson(path.parent.parent / path.name), ZH)
    assert shown.status == TRANSLATED and not shown.english_steps, f"{path} is not in step with its English"
    lesson, params = shown.lesson, shown.lesson.params()
    too_long = []
    with i18n.use_language(ZH):
        for index in range(len(lesson.steps)):
            outputs = step_outputs(lesson, index, params)
            failures = [o for o in outputs if isinstance(o, render.DemoFailure)]
            assert not failures, f"{path} step {index + 1}: " + "; ".join(f.message for f in failures)
            for width in WIDTHS:
                lines = _rendered(lesson, index, outputs, params, width).splitlines()
                where = f"{path.name} step {index + 1} at {width} columns"
                assert max(cell_len(line) for line in lines) <= width, where
                assert not [line for line in lines if line.lstrip()[:1] in NO_START and _wide(line)], where
                if len(lines) - _code_lines(outputs, width) > MAX_STEP_LINES:
                    too_long.append(f"step {index + 1} ({len(lines)} lines at {width} columns)")
    assert not too_long, f"{path}: steps longer than {MAX_STEP_LINES} lines: " + "; ".join(too_long)


def test_every_lesson_has_a_chinese_translation():
    """The whole course is offered in Chinese: a new English lesson needs its lessons/zh-CN/ file too."""
    missing = [p.name for p in LESSON_FILES if not (p.parent / ZH / p.name).is_file()]
    assert not missing, f"lessons without a Chinese translation in lessons/{ZH}/: {missing}"


def _wide(line: str) -> bool:
    return cell_len(line) != len(line)


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_lesson_asks_before_it_tells(path):
    """At least one step of every lesson has a demo with a Prediction (lessons/FORMAT.md, "Ask before telling")."""
    assert asking_steps(parse_lesson(path)), f"{path.name}: no step asks the learner to predict before it shows"


def _demo_text(lesson, params) -> str:
    """Everything the demos of ``lesson`` show for ``params`` (the prose does not depend on them)."""
    console = Console(file=io.StringIO(), width=100, no_color=True, record=True)
    for index in range(len(lesson.steps)):
        for out in step_outputs(lesson, index, params):
            console.print(out.renderable if isinstance(out, DemoOutput) else out.message)
    return console.export_text()


# A changed value for each option a lesson can take: another dim, seed, eps or batch.
CHANGED = {"dim": lambda p: p.dim + 1, "seed": lambda p: p.seed + 3, "eps": lambda p: 1e-3, "batch": lambda p: 5}


@pytest.mark.usefixtures("shared_demos")
@pytest.mark.parametrize("path", LESSON_FILES, ids=[p.stem for p in LESSON_FILES])
def test_every_option_a_lesson_takes_changes_what_it_shows(path):
    """The options in a lesson's defaults are the ones the CLI accepts and its header offers: each must matter."""
    lesson = parse_lesson(path)
    params = lesson.params()
    base = _demo_text(lesson, params)
    for key in lesson.options:
        changed = _demo_text(lesson, params.replace(**{key: CHANGED[key](params)}))
        assert changed != base, f"{path.name}: --{key} is offered but changes nothing; drop it from defaults"


def test_every_demo_named_in_a_lesson_is_registered_and_every_core_demo_is_used():
    load_demos()
    used = {call.name for path in LESSON_FILES for step in parse_lesson(path).steps for call in step.demos}
    assert used <= set(DEMOS)
    modules = {
        f"microgradnorm.lessons.{m}" for m in ("demos_chain_rule", "demos_ln_forward", "demos_backward", "demos_forms")
    }
    core = {name for name, spec in DEMOS.items() if spec.module in modules}
    assert core - used == set(), f"core demos no lesson uses: {sorted(core - used)}"


# ---- the references and the glossary --------------------------------------------------------------------

REFERENCES = lessons_dir() / "REFERENCES.md"
GLOSSARY = lessons_dir() / "GLOSSARY.md"
# the sources issue 14 names, by a phrase of each title
REQUIRED_SOURCES = (
    "Layer Normalization.*",  # Ba, Kiros and Hinton 2016
    "Batch Normalization: Accelerating Deep Network Training",  # Ioffe and Szegedy 2015
    "Root Mean Square Layer Normalization",  # Zhang and Sennrich 2019
    "On Layer Normalization in the Transformer Architecture",  # Xiong et al. 2020
    "How Does Batch Normalization Help Optimization?",  # Santurkar et al. 2018
    "Group Normalization",  # Wu and He 2018
    "Learning representations by back-propagating errors",  # Rumelhart, Hinton and Williams 1986
    "Note on a Method for Calculating Corrected Sums of Squares",  # Welford 1962
)
GLOSSARY_WORDS = (
    "gamma",
    "beta",
    "sigma",
    "rstd",
    "xhat",
    "mean",
    "centering",
    "projection",
    "Radial component",
    "Tangent plane",
    "Pre-LN",
    "Post-LN",
    "Running statistics",
    "Biased and unbiased variance",
    "Jacobian",
    "Vector-Jacobian product",
)


def test_neither_page_is_a_lesson():
    names = {p.name for p in LESSON_FILES}
    assert REFERENCES.is_file() and GLOSSARY.is_file()
    assert REFERENCES.name not in names and GLOSSARY.name not in names


def test_the_references_cite_the_sources_and_name_only_lessons_that_exist():
    text = " ".join(REFERENCES.read_text(encoding="utf-8").split())
    for title in REQUIRED_SOURCES:
        assert title in text, title
    assert "7% to 64% less time" in text and "whole models" in text  # Zhang and Sennrich's figure, as they give it
    slugs = {parse_lesson(p, check_demos=False).slug for p in LESSON_FILES}
    used = re.findall(r"Used in: ([^.]*)\.", text)
    assert len(used) >= len(REQUIRED_SOURCES)
    named = {name for entry in used for name in re.findall(r"`([^`]+)`", entry)}
    assert named - slugs == set(), f"REFERENCES.md names lessons that do not exist: {sorted(named - slugs)}"


def test_the_glossary_names_the_symbols_and_the_terms():
    text = GLOSSARY.read_text(encoding="utf-8")
    for word in (*GLOSSARY_WORDS, "**m**", "**n**", "**d** or **D**", "**N**", "**B**", "**T**", "**C, H, W**"):
        assert word in text, word


# ---- the references and the glossary in Chinese ----------------------------------------------------------


def _chinese_page(name: str) -> str:
    text, note = localized_page(lessons_dir() / name, ZH)
    assert note is None, f"lessons/{ZH}/{name}: {note}"
    return text


def test_the_chinese_references_cite_every_source_and_name_only_lessons_that_exist():
    text = " ".join(_chinese_page("REFERENCES.md").split())
    for title in REQUIRED_SOURCES:  # titles stay as published
        assert re.search(title, text), title
    english = " ".join(REFERENCES.read_text(encoding="utf-8").split())
    assert re.findall(r"^### (.+)$", english, re.M)[:3] == re.findall(r"^### (.+)$", text, re.M)[:3]
    assert "7% 到 64%" in text and "1/14" in text  # the figures, as the papers give them
    used = re.findall(r"用于：([^。]*)。", text)
    assert len(used) == len(re.findall(r"Used in: ([^.]*)\.", english))
    named = {name for entry in used for name in re.findall(r"`([^`]+)`", entry)}
    slugs = {parse_lesson(p, check_demos=False).slug for p in LESSON_FILES}
    assert named and named - slugs == set()


def test_the_chinese_glossary_names_every_symbol_and_term_and_keeps_the_english_name():
    text = _chinese_page("GLOSSARY.md")
    for word in ("**m**", "**n**", "**d** 或 **D**", "**N**", "**B**", "**T**", "**C, H, W**", "invstd"):
        assert word in text, word
    for word in GLOSSARY_WORDS:  # each term keeps its English name beside the Chinese, so both readers find it
        assert word.lower() in text.lower(), word
    english_rows = re.findall(r"^\| `([^`]+)`", GLOSSARY.read_text(encoding="utf-8"), re.M)
    assert re.findall(r"^\| `([^`]+)`", text, re.M) == english_rows  # the same quantities, in the same order


PAGE_TITLES = {"REFERENCES.md": ("References", "参考文献"), "GLOSSARY.md": ("Glossary", "术语表")}


@pytest.mark.parametrize("chinese", [False, True], ids=["en", "zh-CN"])
@pytest.mark.parametrize("name", ["REFERENCES.md", "GLOSSARY.md"])
@pytest.mark.parametrize("width", [40, 60, 100, 200])
def test_the_pages_render_at_any_width_without_colour_or_ellipsis(chinese, name, width):
    page = _chinese_page(name) if chinese else (lessons_dir() / name).read_text(encoding="utf-8")
    text, ansi = _printed(render.document(page), width)
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= width  # cells: x̂ is two characters, one cell
    assert not _colour_codes(ansi)
    assert lines[0].strip() == PAGE_TITLES[name][chinese]  # the page's title comes first
    assert "#" not in text and "**" not in text and "<!--" not in text  # Markdown shown as formatting, not as marks
    if width >= 60:  # at 40 a table cell of the glossary may have to cut a long formula
        assert "…" not in text.replace("……", "")
    assert not [line for line in lines if line.lstrip()[:1] in NO_START and _wide(line)]
