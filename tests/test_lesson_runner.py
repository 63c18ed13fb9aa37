"""The interactive runner driven by an injected key stream, progress on disk, and the lesson command."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from microgradnorm import cli
from microgradnorm.lessons import runner as runner_mod
from microgradnorm.lessons.demos import DemoOutput, LessonParams, demo
from microgradnorm.lessons.format import load_lessons, parse_lesson
from microgradnorm.lessons.progress import FILE_NAME, ProgressStore
from microgradnorm.lessons.runner import LessonRunner, action_of, run_auto


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch):
    home = tmp_path / "state"
    monkeypatch.setenv("MICROGRADNORM_HOME", str(home))
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)
    monkeypatch.delenv("MICROGRADNORM_LESSONS", raising=False)
    return home


@demo("t_run_boom")
def _boom(p: LessonParams) -> DemoOutput:
    """A test demo that fails."""
    raise ArithmeticError("the demo broke on purpose")


@demo("t_run_graph")
def _with_graph(p: LessonParams) -> DemoOutput:
    """A test demo with a tiny graph."""
    from microgradnorm.engine import Value

    a = Value(2.0, label="a")
    b = a * a
    b.label = "b"
    return DemoOutput(f"square of {p.dim}", graph=b)


LESSON_TEXT = """---
title: Three steps
summary: A lesson for the runner tests.
---

## Alpha step

The first step.

```demo
t_run_graph
```

## Beta step

The second step, without a graph.

## Gamma step

The third step.
"""


@pytest.fixture
def lesson(tmp_path):
    path = tmp_path / "lessons" / "01-three-steps.md"
    path.parent.mkdir()
    path.write_text(LESSON_TEXT)
    return parse_lesson(path)


def make(lesson, keys, store=None, **kwargs):
    buf = io.StringIO()
    console = Console(file=buf, width=60, no_color=True)
    store = store if store is not None else ProgressStore()
    r = LessonRunner(lesson, LessonParams(), console, keys, progress=store, **kwargs)
    return r, buf, store


def titles_in(text: str) -> list[str]:
    return [line.split("· ", 1)[1].strip() for line in text.splitlines() if line.startswith("Step ")]


def test_keys_map_to_actions():
    assert [action_of(k) for k in ("\r", "\n", " ", "n", "N", "RIGHT")] == ["next"] * 6
    assert [action_of(k) for k in ("b", "p", "P", "LEFT")] == ["back"] * 4
    assert [action_of(k) for k in ("r", "g", "q", "Q", "\x03", "\x04", "")] == [
        "restart",
        "graph",
        "quit",
        "quit",
        "quit",
        "quit",
        "quit",
    ]
    assert action_of("x") is None and action_of("ESC") is None


def test_next_back_and_quit_move_between_steps_and_save_the_place(lesson):
    r, buf, store = make(lesson, ["n", "\r", "b", "q"])
    assert r.run() == 0
    out = buf.getvalue()
    assert titles_in(out) == ["Alpha step", "Beta step", "Gamma step", "Beta step"]
    assert "Stopped at step 2 of 3" in out
    saved = store.get(lesson.name)
    assert (saved.step, saved.steps, saved.completed) == (2, 3, False)


def test_a_second_run_resumes_where_the_first_stopped(lesson):
    make(lesson, [" ", " ", "q"])[0].run()
    r, buf, _ = make(lesson, ["q"])
    r.run()
    out = buf.getvalue()
    assert "Resuming at step 3 of 3" in out
    assert titles_in(out) == ["Gamma step"]


def test_restart_back_at_the_start_and_unknown_keys(lesson):
    r, buf, _ = make(lesson, ["n", "n", "r", "b", "z", "q"])
    r.run()
    out = buf.getvalue()
    assert titles_in(out) == ["Alpha step", "Beta step", "Gamma step", "Alpha step"]
    assert "This is the first step." in out
    assert "Keys: Enter, n or space: next" in out


def test_finishing_marks_the_lesson_done_and_the_next_run_starts_over(lesson):
    r, buf, store = make(lesson, ["n", "n", "n"])
    assert r.run() == 0
    assert "Lesson complete: Three steps" in buf.getvalue()
    assert store.get(lesson.name).completed
    r2, buf2, _ = make(lesson, ["q"])
    r2.run()
    assert titles_in(buf2.getvalue()) == ["Alpha step"]
    assert store.get(lesson.name).completed  # rereading a finished lesson keeps it finished


def test_end_of_input_quits_and_keys_can_come_from_a_callable(lesson):
    keys = iter(["n"])
    r, _buf, store = make(lesson, lambda: next(keys, ""))
    assert r.run() == 0
    assert store.get(lesson.name).step == 2


def test_demo_outputs_are_computed_once_per_step(lesson, monkeypatch):
    calls = []
    real = runner_mod.step_outputs
    monkeypatch.setattr(runner_mod, "step_outputs", lambda *a: calls.append(a[1]) or real(*a))
    make(lesson, ["n", "b", "n", "b", "q"])[0].run()
    assert calls == [0, 1]


def test_g_draws_the_steps_graph_with_the_injected_drawer(lesson, tmp_path):
    drawn = []

    def draw(graph, path, **options):
        drawn.append((graph.label, path, options))
        return f"Graph written to {path}"

    r, buf, _ = make(lesson, ["g", "n", "g", "q"], graph_dir=tmp_path / "g", draw=draw)
    r.run()
    out = buf.getvalue()
    assert drawn == [("b", tmp_path / "g" / "01-three-steps-step01.svg", {})]
    assert "Graph written to" in out and "This step has no graph to draw." in out
    # "Drawing the graph…" only where there is one to draw
    assert out.count("Drawing the graph") == 1
    assert out.index("Drawing the graph") < out.index("Graph written to")


def test_an_unusable_state_directory_costs_the_drawing_and_the_saved_place_but_not_the_lesson(
    lesson, tmp_path, monkeypatch
):
    a_file = tmp_path / "home-is-a-file"
    a_file.write_text("x")
    monkeypatch.setenv("MICROGRADNORM_HOME", str(a_file))
    buf = io.StringIO()
    r = LessonRunner(
        lesson, LessonParams(), Console(file=buf, width=200, no_color=True), ["g", "n", "q"], progress=None
    )
    assert r.run() == 0
    out = buf.getvalue()
    assert "Could not draw the graph: MICROGRADNORM_HOME: expected a directory" in out
    assert "Step 2 of" in out  # the lesson went on after the failed drawing
    assert "Your place was not saved" in out and "Resume with" not in out


def test_the_step_of_lesson_1_that_promises_a_drawing_of_a_times_a_has_one():
    lesson = load_lessons()[0]
    index = next(i for i, step in enumerate(lesson.steps) if "accumulate" in [d.name for d in step.demos])
    prose = " ".join(" ".join(b.text.split()) for b in lesson.steps[index].blocks if hasattr(b, "text"))
    assert "press `g` to draw `L = a·a` and see both" in prose
    graphs = [o.graph for o in runner_mod.step_outputs(lesson, index, lesson.params()) if getattr(o, "graph", None)]
    assert len(graphs) == 1
    square = graphs[0]
    assert square.op == "*" and square.children[0] is square.children[1]  # two edges into the one leaf a
    a = square.children[0]
    assert a.grad == 2 * a.data  # the grads of +=: d(a·a)/da = 2a


def test_g_renders_a_real_svg_with_viz(lesson, tmp_path):
    pytest.importorskip("graphviz")
    from microgradnorm import viz

    if not viz.has_dot():
        pytest.skip("the Graphviz dot program is not installed")
    r, buf, _ = make(lesson, ["g", "q"], graph_dir=tmp_path / "graphs")
    r.run()
    svg = tmp_path / "graphs" / "01-three-steps-step01.svg"
    assert svg.is_file() and "<svg" in svg.read_text()
    assert str(svg) in " ".join(buf.getvalue().split()).replace(" ", "") or "Graph written to" in buf.getvalue()


def test_g_without_graphviz_writes_the_dot_source_and_says_how_to_install(lesson, tmp_path, monkeypatch):
    from microgradnorm import viz

    def no_dot(*args, **kwargs):
        raise viz.GraphvizNotFoundError("the Graphviz 'dot' program was not found; install Graphviz")

    monkeypatch.setattr(viz, "render", no_dot)
    r, buf, _ = make(lesson, ["g", "q"], graph_dir=tmp_path / "graphs")
    r.run()
    dot = tmp_path / "graphs" / "01-three-steps-step01.dot"
    assert dot.is_file() and "digraph" in dot.read_text()
    flat = " ".join(buf.getvalue().split())
    assert "DOT source" in flat and "install Graphviz" in flat


def test_a_drawer_that_fails_is_reported_and_the_lesson_goes_on(lesson):
    def broken(graph, path, **options):
        raise OSError("disk full")

    r, buf, _ = make(lesson, ["g", "n", "q"], draw=broken)
    r.run()
    out = buf.getvalue()
    assert "Could not draw the graph: disk full" in out
    assert titles_in(out) == ["Alpha step", "Beta step"]


def test_a_failing_demo_is_shown_in_place_and_auto_exits_1(tmp_path):
    path = tmp_path / "05-broken.md"
    path.write_text("---\ntitle: B\nsummary: S\n---\n## One\n\n```demo\nt_run_boom\n```\n")
    lesson = parse_lesson(path)
    buf = io.StringIO()
    assert run_auto(lesson, LessonParams(), Console(file=buf, width=60, no_color=True)) == 1
    out = buf.getvalue()
    assert "demo t_run_boom failed" in out and "the demo broke on purpose" in out


def test_auto_prints_every_step_of_a_real_lesson():
    lesson = load_lessons()[0]
    buf = io.StringIO()
    assert run_auto(lesson, lesson.params(), Console(file=buf, width=60, no_color=True)) == 0
    assert titles_in(buf.getvalue())[: len(lesson.steps)] == [s.title.replace("`", "") for s in lesson.steps]
    # into a file or a pipe, lines carry no padding to the console's width
    assert not [line for line in buf.getvalue().splitlines() if line.endswith(" ")]


def test_auto_in_a_terminal_prints_as_rich_does():
    lesson = load_lessons()[0]
    buf = io.StringIO()
    run_auto(lesson, lesson.params(), Console(file=buf, width=60, force_terminal=True, color_system=None))
    assert any(line.endswith(" ") for line in buf.getvalue().splitlines())  # rich's padding, left alone


# ---- progress on disk ------------------------------------------------------------------------------


def test_progress_survives_a_crash_in_the_middle_of_a_write(state_home, monkeypatch):
    store = ProgressStore()
    store.save("01-a", 2, 5)
    before = (state_home / FILE_NAME).read_text()

    def crash(src, dst):
        raise KeyboardInterrupt  # killed between writing the temp file and renaming it

    with monkeypatch.context() as m:
        m.setattr(os, "replace", crash)
        with pytest.raises(KeyboardInterrupt):
            store.save("01-a", 3, 5)
    assert (state_home / FILE_NAME).read_text() == before
    assert not [p for p in state_home.iterdir() if p.name.endswith(".tmp")]
    assert ProgressStore().get("01-a").step == 2


@pytest.mark.parametrize("content", ["{not json", '{"lessons": {"01-a": {"step": "two", "steps": 5}}}', "[1, 2]"])
def test_an_unreadable_progress_file_is_set_aside_and_reported(state_home, content):
    state_home.mkdir(parents=True, exist_ok=True)
    (state_home / FILE_NAME).write_text(content)
    store = ProgressStore()
    assert store.load() == {}
    assert len(store.warnings) == 1 and "set aside" in store.warnings[0]
    aside = [p for p in state_home.iterdir() if p.name.startswith(f"{FILE_NAME}.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == content
    store.save("01-a", 1, 3)
    assert json.loads((state_home / FILE_NAME).read_text())["lessons"]["01-a"]["step"] == 1


def test_progress_rejects_a_step_out_of_range_and_reset_forgets():
    store = ProgressStore()
    with pytest.raises(ValueError, match="step: expected 1 to 3, got 4"):
        store.save("01-a", 4, 3)
    store.save("01-a", 2, 3)
    store.save("02-b", 1, 3)
    store.reset("01-a")
    assert set(store.load()) == {"02-b"}


# ---- the command --------------------------------------------------------------------------------------


def run_cli(capsys, *argv):
    code = cli.main(["lesson", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_lesson_without_arguments_lists_the_lessons_with_progress(capsys):
    ProgressStore().save("03-layernorm-forward", 3, 9)
    code, out, _ = run_cli(capsys)
    assert code == 0
    assert "A Value, the chain rule" in out and "LayerNorm forward as a computation graph" in out
    assert "step 3/9" in out and "microgradnorm lesson 1" in out
    assert "Continue where you left off: microgradnorm lesson 3 (step 3 of" in " ".join(out.split())


def test_lesson_by_number_or_name_prints_every_step_when_not_a_terminal(capsys):
    code, out, _ = run_cli(capsys, "1")
    assert code == 0
    lesson = load_lessons()[0]
    assert all(f"Step {k} of {len(lesson.steps)}" in out for k in range(1, len(lesson.steps) + 1))
    code2, out2, _ = run_cli(capsys, "value-and-chain-rule", "--auto")
    assert code2 == 0 and out2.count("Step 1 of") == 1
    assert ProgressStore().load() == {}  # printing a lesson does not move the learner's place


def test_lesson_options_change_the_numbers(capsys):
    _, a, _ = run_cli(capsys, "2", "--step", "1")
    _, b, _ = run_cli(capsys, "2", "--step", "1", "--seed", "5", "--dim", "3")
    assert "seed 5" in b and "dim 3" in b and a != b


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["99"], ["no lesson 99", "microgradnorm lesson"]),
        (["no-such-lesson"], ["no lesson named 'no-such-lesson'", "list them with: microgradnorm lesson"]),
        (["layernorm"], ["matches several lessons", "03-layernorm-forward", "list them with: microgradnorm lesson"]),
        (["0-"], ["no lesson named '0-'", "list them with: microgradnorm lesson"]),  # not lesson 10
        (["chain"], ["no lesson named 'chain'"]),  # a part of lesson 1's name, not its start
        (["1", "--dim", "40"], ["--dim", "2 to 16", "40"]),
        (["6", "--batch", "1"], ["--batch", "two or more rows", "2 to 16", "got 1"]),
        (["6", "--batch", "100000"], ["--batch", "2 to 16", "got 100000"]),
        (["--step", "3"], ["argument --step: needs a LESSON", "microgradnorm lesson 1 --step 3"]),
        (["--dim", "3"], ["argument --dim: needs a LESSON"]),
        (["--restart"], ["argument --restart: needs a LESSON"]),
        (["1", "--restart", "--step", "3"], ["argument --restart: not allowed with argument --step", "3"]),
        (["1", "--step", "99"], ["--step", "got 99"]),
        (["1", "--dim", "0"], ["--dim", "positive integer", "0"]),
        (["1", "--dim", "5"], ["argument --dim: lesson 01-value-and-chain-rule does not use it", "--seed", "got 5"]),
        (["3", "--batch", "3"], ["argument --batch: lesson 03-layernorm-forward does not use it", "got 3"]),
        (["11", "--eps", "0.1"], ["argument --eps: lesson 11-pre-ln-vs-post-ln does not use it"]),
        (["1", "--eps", "-1"], ["--eps", "-1"]),
        (["1", "--seed", "x"], ["--seed", "'x'"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    with pytest.raises(SystemExit) as info:
        code = cli.main(["lesson", *argv])
        raise SystemExit(code)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, (word, err)
    assert "Traceback" not in err


def test_a_broken_lesson_file_is_reported_and_the_others_still_load(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "01-good.md").write_text("---\ntitle: Good\nsummary: S\n---\n## One\ntext\n")
    (folder / "02-bad.md").write_text("---\ntitle: Bad\nsummary: S\n---\n## One\n```demo\nnope\n```\n")
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(folder))
    code, out, _ = run_cli(capsys)
    assert code == 0
    flat = "".join(out.split())
    assert "Good" in flat and "02-bad.md:7:unknowndemo'nope'" in flat


def test_progress_corruption_is_reported_by_the_command(capsys, state_home):
    state_home.mkdir(parents=True, exist_ok=True)
    (state_home / FILE_NAME).write_text("{oops")
    code, out, _ = run_cli(capsys)
    assert code == 0 and "set aside" in " ".join(out.split())
    assert list(Path(state_home).glob(f"{FILE_NAME}.corrupt-*"))


@pytest.mark.parametrize(
    ("query", "number"),
    [("1", 1), ("01", 1), ("value", 1), ("01-val", 1), ("value-and-chain-rule", 1), ("08-batchnorm.md", 8), ("rms", 9)],
)
def test_a_lesson_is_found_by_number_name_or_the_unique_start_of_a_name(query, number):
    from microgradnorm.commands.lesson import find_lesson

    assert find_lesson(load_lessons(), query).number == number


def test_a_state_home_that_is_a_file_is_named_and_the_lessons_still_run(capsys, state_home):
    state_home.parent.mkdir(parents=True, exist_ok=True)
    state_home.write_text("not a directory")
    code, out, err = run_cli(capsys)
    flat = " ".join(out.split())
    assert code == 0 and err == ""
    assert (
        f"Progress is not saved: MICROGRADNORM_HOME: expected a directory for progress files, got {str(state_home)!r}"
        in flat
    )
    assert "A Value, the chain rule" in flat
    code, out, _ = run_cli(capsys, "1", "--step", "1")
    assert code == 0 and "Step 1 of" in out
    assert state_home.read_text() == "not a directory"


def test_lesson_6_with_a_zero_gradient_shows_absolute_differences(capsys):
    # d = 2 with eps = 0: dx is 0 up to rounding; a relative difference would be inf next to "all agree"
    code, out, _ = run_cli(capsys, "6", "--dim", "2", "--eps", "0", "--step", "2")
    flat = " ".join(out.split())
    assert code == 0
    assert "inf" not in flat.split() and "largest relative difference" not in flat
    assert "three-path vs autograd, largest absolute difference:" in flat
    assert "all agree within 1e-12 absolute" in flat
    code, out, _ = run_cli(capsys, "6", "--step", "2")
    assert "largest relative difference" in " ".join(out.split()) and "within 1e-10 relative" in " ".join(out.split())
