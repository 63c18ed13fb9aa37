"""Every step of every lesson file renders, at 60 and 100 columns, with NO_COLOR, without a failing demo.

The lesson files are found the way the command finds them (the repository's
``lessons/`` folder here), so a lesson added by anyone is covered without
touching this test.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from microgradnorm.lessons import render
from microgradnorm.lessons.demos import DEMOS, DemoOutput, load_demos
from microgradnorm.lessons.format import LESSON_FILE, lessons_dir, parse_lesson
from microgradnorm.lessons.runner import step_outputs


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    """Never touch the learner's real state folder."""
    monkeypatch.setenv("MICROGRADNORM_HOME", str(tmp_path / "state"))


LESSON_FILES = sorted(p for p in lessons_dir().iterdir() if LESSON_FILE.match(p.name))
WIDTHS = (60, 100)
# One screen per step (lessons/FORMAT.md): a step rendered at each of WIDTHS has at most this many lines.
# Taller terminals show it whole; smaller ones page it (the runner's pager), but a step is written for one screen.
MAX_STEP_LINES = 40

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


def test_the_lessons_folder_has_the_core_lessons():
    numbers = {int(p.name[:2]) for p in LESSON_FILES}
    assert {1, 2, 3, 4} <= numbers


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_step_renders_at_60_and_100_columns_without_colour(path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)
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
            buf = io.StringIO()
            console = Console(
                file=buf, width=width, force_terminal=True, color_system="truecolor", no_color=True, record=True
            )
            console.print(render.render_step(lesson, index, outputs, params))
            text = console.export_text()
            flat = _plain(text)
            where = f"{path.name} step {index + 1} at {width} columns"
            assert _plain(render.inline(step.title).plain) in flat, where
            assert f"Step {index + 1} of {len(lesson.steps)}" in flat, where
            assert not _colour_codes(buf.getvalue()), f"{where}: colour codes despite NO_COLOR"
            assert max(len(line) for line in text.splitlines()) <= width, where
            for out, call in zip(outputs, step.demos):
                assert isinstance(out, DemoOutput)
                shown = Console(file=io.StringIO(), width=width, no_color=True, record=True)
                shown.print(out.renderable)
                assert shown.export_text().strip(), f"{where}: demo {call.name} rendered nothing"


def _rendered(lesson, index, outputs, params, width: int) -> str:
    """The step as the runner and ``--auto`` print it, at ``width`` columns, without colour."""
    console = Console(file=io.StringIO(), width=width, no_color=True, record=True)
    console.print(render.render_step(lesson, index, outputs, params))
    return console.export_text()


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_step_fits_one_screen_at_60_and_100_columns(path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)
    lesson = parse_lesson(path)
    params = lesson.params()
    too_long = []
    for index in range(len(lesson.steps)):
        outputs = step_outputs(lesson, index, params)
        heights = {width: len(_rendered(lesson, index, outputs, params, width).splitlines()) for width in WIDTHS}
        if max(heights.values()) > MAX_STEP_LINES:
            shown = ", ".join(f"{h} lines at {w} columns" for w, h in heights.items())
            too_long.append(f"step {index + 1} ({shown})")
    assert not too_long, f"{path.name}: steps longer than {MAX_STEP_LINES} lines: " + "; ".join(too_long)


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_lesson_asks_before_it_tells(path, monkeypatch):
    """At least one step of every lesson has a demo with a Prediction (lessons/FORMAT.md, "Ask before telling")."""
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)
    lesson = parse_lesson(path)
    params = lesson.params()
    asking = [
        index + 1
        for index in range(len(lesson.steps))
        if any(isinstance(o, DemoOutput) and o.prediction is not None for o in step_outputs(lesson, index, params))
    ]
    assert asking, f"{path.name}: no step asks the learner to predict before it shows the numbers"


def _demo_text(lesson, params) -> str:
    """Everything the demos of ``lesson`` show for ``params`` (the prose does not depend on them)."""
    console = Console(file=io.StringIO(), width=100, no_color=True, record=True)
    for index in range(len(lesson.steps)):
        for out in step_outputs(lesson, index, params):
            console.print(out.renderable if isinstance(out, DemoOutput) else out.message)
    return console.export_text()


# A changed value for each option a lesson can take: another dim, seed, eps or batch.
CHANGED = {"dim": lambda p: p.dim + 1, "seed": lambda p: p.seed + 3, "eps": lambda p: 1e-3, "batch": lambda p: 5}


@pytest.mark.parametrize("path", LESSON_FILES, ids=[p.stem for p in LESSON_FILES])
def test_every_option_a_lesson_takes_changes_what_it_shows(path, monkeypatch):
    """The options in a lesson's defaults are the ones the CLI accepts and its header offers: each must matter."""
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)
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
    core = {name for name, spec in DEMOS.items() if spec.module == "microgradnorm.lessons.demos_core"}
    assert core - used == set(), f"core demos no lesson uses: {sorted(core - used)}"
