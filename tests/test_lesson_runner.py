"""The interactive runner driven by an injected key stream, progress on disk, and the lesson command.

The tests of navigation, paging, predictions and progress take the ``lang``
fixture and run in English and in Chinese: what they check does not depend on the
words, and the words they look for are the runner's messages in the language of
the run (:func:`said`). The tests at the end of the file check the Chinese words
themselves, typed out."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import string
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from microgradnorm import i18n, output, viz
from microgradnorm import tolerances as tol
from microgradnorm.commands.lesson import find_lesson
from microgradnorm.engine import Value
from microgradnorm.lessons import runner as runner_mod
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.lessons.format import LESSON_FILE, lessons_dir, load_lessons, parse_lesson
from microgradnorm.lessons.pager import MIN_ROWS, OVERLAP, Window
from microgradnorm.lessons.progress import FILE_NAME, ProgressStore
from microgradnorm.lessons.render import key_footer
from microgradnorm.lessons.runner import ACTIONS, LessonRunner, action_of, run_auto
from microgradnorm.lessons.translation import localized
from tests import helpers


@demo("t_run_boom")
def _boom(p: LessonParams) -> DemoOutput:
    """A test demo that fails."""
    raise ArithmeticError("the demo broke on purpose")


@demo("t_run_graph")
def _with_graph(p: LessonParams) -> DemoOutput:
    """A test demo with a tiny graph."""
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


def write_lesson(tmp_path, name: str, text: str):
    """Parse ``text`` as the lesson file ``name`` in a lessons folder under ``tmp_path``."""
    path = tmp_path / "lessons" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return parse_lesson(path)


@pytest.fixture
def lesson(tmp_path):
    return write_lesson(tmp_path, "01-three-steps.md", LESSON_TEXT)


def run_keys(lesson, keys, **kwargs) -> tuple[str, ProgressStore]:
    """What ``lesson`` prints 60 columns wide without colour with ``keys`` pressed, the run ending with exit code 0;
    the progress store (a new one, in the state home)."""
    console, store = Console(file=io.StringIO(), width=60, no_color=True), ProgressStore()
    assert LessonRunner(lesson, LessonParams(), console, keys, progress=store, **kwargs).run() == 0
    return console.file.getvalue(), store


LANGUAGES = (i18n.ENGLISH, i18n.SIMPLIFIED_CHINESE)


@pytest.fixture(params=LANGUAGES)
def lang(request):
    """Run the test in each language."""
    with i18n.use_language(request.param):
        yield request.param


def said(message: str, **fields) -> str:
    """``message`` as the runner says it in the language of the test, its fields filled in."""
    return i18n._(message).format(**fields)


def step_of(step: int, total: int) -> str:
    return said("Step {step} of {total}", step=step, total=total)


def stopped(step: int, total: int, number: int) -> str:
    """The line q leaves, squashed (see :func:`squash`)."""
    message = "Stopped at step {step} of {total}. Resume with: microgradnorm lesson {number}"
    return squash(said(message, step=step, total=total, number=number))


def resuming(step: int, total: int) -> str:
    """The line a resumed lesson starts with, squashed."""
    return squash(said("Resuming at step {step} of {total} (r restarts the lesson).", step=step, total=total))


def squash(text: str) -> str:
    """``text`` without whitespace, so that a message wrapped over lines is still found, in either language."""
    return "".join(str(text).split())


def _step_line() -> re.Pattern[str]:
    """A header line 'Step k of n · title' in the language of the test; group 1 is the title."""
    template = i18n._("Step {step} of {total}")
    parts = [re.escape(lit) + (r"\d+" if name else "") for lit, name, _s, _c in string.Formatter().parse(template)]
    return re.compile("^" + "".join(parts) + " · (.*)$")


def titles_in(text: str) -> list[str]:
    """The steps shown, in order; a step redrawn in place (to scroll or to add a message) counts once."""
    header = _step_line()
    titles = [m.group(1).strip() for line in text.splitlines() if (m := header.match(line))]
    return [t for k, t in enumerate(titles) if k == 0 or titles[k - 1] != t]


def test_keys_map_to_actions():
    assert [action_of(k) for k in ("\r", "\n", "n", "N", "RIGHT")] == ["next"] * 5
    assert [action_of(k) for k in (" ", "PAGEDOWN")] == ["page"] * 2
    assert [action_of(k) for k in ("DOWN", "j", "UP", "k", "PAGEUP")] == ["down", "down", "up", "up", "pageup"]
    assert [action_of(k) for k in ("b", "p", "P", "LEFT")] == ["back"] * 4
    assert [action_of(str(d)) for d in range(1, 10)] == ["answer"] * 9
    assert [action_of(k) for k in ("r", "g", "q", "Q", "\x03", "\x04", "")] == ["restart", "graph", *["quit"] * 5]
    assert action_of("x") is None and action_of("ESC") is None and action_of("0") is None
    assert all(callable(getattr(LessonRunner, f"_on_{a}", None)) for a in {*ACTIONS.values(), "other"})  # handled


def test_next_back_and_quit_move_between_steps_and_save_the_place(lesson, lang):
    out, store = run_keys(lesson, ["n", "\r", "b", "q"])
    assert titles_in(out) == ["Alpha step", "Beta step", "Gamma step", "Beta step"]
    assert stopped(2, 3, 1) in squash(out)
    saved = store.get(lesson.slug)
    assert (saved.step, saved.steps, saved.completed) == (2, 3, False)


def test_a_second_run_resumes_where_the_first_stopped(lesson, lang):
    run_keys(lesson, [" ", " ", "q"])
    out, _ = run_keys(lesson, ["q"])
    assert resuming(3, 3) in squash(out)
    assert titles_in(out) == ["Gamma step"]


def test_restart_back_at_the_start_and_unknown_keys(lesson, lang):
    out, _ = run_keys(lesson, ["n", "n", "r", "b", "z", "q"])
    assert titles_in(out) == ["Alpha step", "Beta step", "Gamma step", "Alpha step"]
    assert said("This is the first step.") in out
    assert squash(said("Keys: {keys}", keys=runner_mod.render.KEY_HELP)) in squash(out)


def test_a_finished_lesson_starts_over_and_left_in_the_middle_of_a_second_pass_resumes_where_it_says(lesson, lang):
    out, store = run_keys(lesson, ["n", "n", "n"])  # the first pass, to the end
    assert said("Lesson complete: {title}.", title="Three steps") in out
    assert store.get(lesson.slug).completed
    out, _ = run_keys(lesson, ["n", "q"])  # the second pass starts over and stops at step 2
    assert titles_in(out) == ["Alpha step", "Beta step"]
    assert stopped(2, 3, 1) in squash(out)
    out, store = run_keys(lesson, ["q"])
    assert resuming(2, 3) in squash(out)
    assert titles_in(out) == ["Beta step"]
    assert store.get(lesson.slug).completed  # still counted as done


def test_end_of_input_quits_and_keys_can_come_from_a_callable(lesson):
    keys = iter(["n"])
    _, store = run_keys(lesson, lambda: next(keys, ""))
    assert store.get(lesson.slug).step == 2


def test_demo_outputs_are_computed_once_per_step(lesson, monkeypatch):
    calls = []
    real = runner_mod.step_outputs
    monkeypatch.setattr(runner_mod, "step_outputs", lambda *a: calls.append(a[1]) or real(*a))
    run_keys(lesson, ["n", "b", "n", "b", "q"])
    assert calls == [0, 1]


def test_g_draws_the_steps_graph_with_the_injected_drawer(lesson, tmp_path):
    drawn = []

    def draw(graph, path, **options):
        drawn.append((graph.label, path, options))
        return f"Graph written to {path}"

    out, _ = run_keys(lesson, ["g", "n", "g", "q"], graph_dir=tmp_path / "g", draw=draw)
    assert drawn == [("b", tmp_path / "g" / "01-three-steps-step01.svg", {})]
    assert "Graph written to" in out and said("This step has no graph to draw.") in out
    # "Drawing the graph…" only where there is one to draw
    assert out.count("Drawing the graph") == 1
    assert out.index("Drawing the graph") < out.index("Graph written to")


def test_an_unusable_state_directory_costs_the_drawing_and_the_saved_place_but_not_the_lesson(
    lesson, tmp_path, monkeypatch
):
    a_file = tmp_path / "home-is-a-file"
    a_file.write_text("x")
    monkeypatch.setenv("MICROGRADNORM_HOME", str(a_file))
    console = Console(file=io.StringIO(), width=200, no_color=True)
    assert LessonRunner(lesson, LessonParams(), console, ["g", "n", "q"], progress=None).run() == 0
    out = console.file.getvalue()
    assert said("Could not draw the graph: {error}", error="MICROGRADNORM_HOME: expected a directory") in out
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


def test_g_renders_a_real_svg_with_viz(lesson, tmp_path, needs_dot):
    out, _ = run_keys(lesson, ["g", "q"], graph_dir=tmp_path / "graphs")
    svg = tmp_path / "graphs" / "01-three-steps-step01.svg"
    assert svg.is_file() and "<svg" in svg.read_text()
    assert str(svg) in squash(out) or "Graph written to" in out


def test_g_without_graphviz_writes_the_dot_source_and_says_how_to_install(lesson, tmp_path, monkeypatch):
    def no_dot(*args, **kwargs):
        raise viz.GraphvizNotFoundError("the Graphviz 'dot' program was not found; install Graphviz")

    monkeypatch.setattr(output, "render", no_dot)
    out, _ = run_keys(lesson, ["g", "q"], graph_dir=tmp_path / "graphs")
    dot = tmp_path / "graphs" / "01-three-steps-step01.dot"
    assert dot.is_file() and "digraph" in dot.read_text()
    assert "DOT source" in flat(out) and "install Graphviz" in flat(out)


def test_a_drawer_that_fails_is_reported_and_the_lesson_goes_on(lesson):
    def broken(graph, path, **options):
        raise OSError("disk full")

    out, _ = run_keys(lesson, ["g", "n", "q"], draw=broken)
    assert said("Could not draw the graph: {error}", error="disk full") in out
    assert titles_in(out) == ["Alpha step", "Beta step"]


def test_a_failing_demo_is_shown_in_place_and_auto_exits_1(tmp_path):
    text = "---\ntitle: B\nsummary: S\n---\n## One\n\n```demo\nt_run_boom\n```\n"
    lesson = write_lesson(tmp_path, "05-broken.md", text)
    buf = io.StringIO()
    assert run_auto(lesson, LessonParams(), Console(file=buf, width=60, no_color=True)) == 1
    out = buf.getvalue()
    assert "demo t_run_boom failed" in out and "the demo broke on purpose" in out


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_auto_prints_every_step_of_a_real_lesson_padded_only_in_a_terminal(terminal):
    """Into a file or a pipe, lines carry no padding to the console's width; in a terminal rich's padding is left."""
    lesson = load_lessons()[0]
    console = Console(file=io.StringIO(), width=60, force_terminal=terminal or None, color_system=None)
    assert run_auto(lesson, lesson.params(), console) == 0
    out = console.file.getvalue()
    assert titles_in(out)[: len(lesson.steps)] == [s.title.replace("`", "") for s in lesson.steps]
    assert any(line.endswith(" ") for line in out.splitlines()) == terminal


# ---- paging a step taller than the terminal ---------------------------------------------------------

ROWS = 60  # list items in the tall step: one line each, "row 01" to "row 60"
TALL_TEXT = (
    "---\ntitle: Tall\nsummary: A step taller than the screen.\n---\n\n## Tall step\n\n"
    + "\n".join(f"- row {k:02d}" for k in range(1, ROWS + 1))
    + "\n\n## Short step\n\nThe end.\n"
)
CLEAR = "\x1b[2J\x1b[H"


@pytest.fixture
def tall(tmp_path):
    return write_lesson(tmp_path, "02-tall.md", TALL_TEXT)


def run_in_terminal(lesson, keys, height=24, width=80):
    """Run ``lesson`` on a fake terminal of ``height`` lines; return the frames drawn, each a list of lines."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, height=height, force_terminal=True, color_system=None)
    LessonRunner(lesson, LessonParams(), console, keys, progress=ProgressStore()).run()
    frames = []
    for frame in buf.getvalue().split(CLEAR)[1:]:
        lines = frame.split("\n")
        # the closing frame has no keys line: the completion stands in its place
        keys_line = max((k for k, line in enumerate(lines) if re.match(r"\d+/\d+ · ", line)), default=len(lines) - 1)
        frames.append(lines[: keys_line + 1])  # what follows the keys line (the quit message) is not the frame
    return frames, buf.getvalue()


def rows_shown(frame: list[str]) -> list[int]:
    return [int(line.split("row ")[1]) for line in frame if "row " in line]


def more_lines(frame: list[str]) -> int:
    """The lines left below the screen, as the keys line says them (0 when it says something else)."""
    footer = next(line for line in frame if "/2 · " in line)
    rest = footer.split(" · ", 1)[1].rstrip()
    number = re.search(r"\d+", rest)
    if number is None:
        return 0
    n = int(number.group())
    keys = i18n.ngettext(
        "{n} more line: space to scroll · ↑ up · q quit", "{n} more lines: space to scroll · ↑ up · q quit", n
    )
    return n if rest == keys.format(n=n) else 0


def test_a_window_pages_down_and_up_inside_the_body():
    w = Window(total=50, rows=20)
    assert (w.top, w.bottom, w.remaining, w.at_top, w.at_end) == (0, 20, 30, True, False)
    w = w.paged()
    assert w.top == 20 - OVERLAP and w.remaining == 50 - (20 - OVERLAP) - 20
    w = w.paged().paged()
    assert (w.top, w.bottom, w.at_end) == (30, 50, True)  # never past the last line
    assert w.moved(1) == w
    assert w.moved(-1).top == 29 and w.paged(-5).top == 0
    assert Window(total=5, rows=20).at_end and Window(total=0, rows=3).at_end
    assert w.resized(total=40, rows=20).top == 20  # a shorter body keeps the window inside it
    assert w.visible([str(k) for k in range(50)]) == [str(k) for k in range(30, 50)]
    with pytest.raises(ValueError, match="rows: expected at least 1"):
        Window(total=5, rows=0)


def test_a_tall_step_is_paged_with_its_title_on_screen_and_the_lines_left_counted(tall, lang):
    frames, _ = run_in_terminal(tall, ["j", " ", "k", "PAGEUP", "DOWN", "UP", "q"])
    for frame in frames:
        assert len(frame) <= 24 - 1, "a frame as tall as the terminal scrolls the title away"
        assert any("02 · Tall" in line for line in frame[:2]) and f"{step_of(1, 2)} · Tall step" in frame[1]
    first = rows_shown(frames[0])
    assert first[0] == 1 and first == list(range(1, first[-1] + 1))
    assert more_lines(frames[0]) == ROWS - first[-1]  # the step ends with the last row
    assert rows_shown(frames[1])[-1] == first[-1] + 1  # j: a line down
    down = rows_shown(frames[2])  # space: a page down, keeping OVERLAP lines of the page before
    assert down[0] == rows_shown(frames[1])[-1] - OVERLAP + 1
    assert rows_shown(frames[3])[0] == down[0] - 1  # k: a line up
    assert rows_shown(frames[4]) == first  # PgUp: back to the top
    assert rows_shown(frames[5])[-1] == first[-1] + 1 and rows_shown(frames[6]) == first  # ↓ and ↑


def test_enter_scrolls_a_tall_step_to_its_end_before_it_moves_on(tall, lang):
    frames, out = run_in_terminal(tall, ["\r"] * 8 + ["q"])
    steps = [step_of(2, 2) in "\n".join(f) for f in frames]
    first_step2 = steps.index(True)
    assert first_step2 >= 3  # 60 rows in about 19 a page: several Enters scroll first
    before = frames[first_step2 - 1]
    assert rows_shown(before)[-1] == ROWS and more_lines(before) == 0
    assert said("Enter next · b back · r restart · g graph · q quit") in before[-1]
    assert all(more_lines(f) > 0 for f in frames[: first_step2 - 1])
    assert said("Lesson complete: {title}.", title="Tall") in out


def test_once_seen_to_its_end_a_step_moves_on_from_anywhere_and_the_other_keys_still_work(tall, tmp_path, lang):
    keys = ["DOWN"] * (ROWS + 10) + ["PAGEUP", "\r", "b", "g", "r", "z", "q"]  # ↓ at the end stays there
    frames, out = run_in_terminal(tall, keys)
    seen_end = next(k for k, f in enumerate(frames) if rows_shown(f) and rows_shown(f)[-1] == ROWS)
    assert step_of(1, 2) in frames[seen_end][1]
    after_pgup = frames[seen_end + 1]
    assert rows_shown(after_pgup)[0] < ROWS - 20
    assert step_of(2, 2) in "\n".join(frames[seen_end + 2])  # Enter: seen already, so the next step
    assert step_of(1, 2) in "\n".join(frames[seen_end + 3])  # b: back, shown from its top
    assert rows_shown(frames[seen_end + 3])[0] == 1
    assert said("This step has no graph to draw.") in "\n".join(frames[seen_end + 4])
    assert squash(said("Keys: {keys}", keys=runner_mod.render.KEY_HELP)) in squash("\n".join(frames[-1]))
    assert stopped(1, 2, 2) in squash(out)


@pytest.mark.parametrize(("height", "lines"), [(24, 24 - 1), (4, 2 + MIN_ROWS + 2)], ids=["24-rows", "tiny"])
def test_the_frame_leaves_the_last_line_free_and_a_tiny_terminal_still_shows_some_of_the_step(
    tall, lang, height, lines
):
    """The header (2 lines), the step and a blank line and the keys fill the screen but its last line, the cursor's;
    a terminal too small for that still shows MIN_ROWS lines of the step."""
    frames, _ = run_in_terminal(tall, ["q"], height=height)
    assert len(frames[0]) == lines


def test_a_step_that_fits_is_shown_whole_and_enter_moves_on(tall, lang):
    frames, _ = run_in_terminal(tall, ["\r"], height=24 + ROWS)
    assert rows_shown(frames[0]) == list(range(1, ROWS + 1))
    assert more_lines(frames[0]) == 0
    assert step_of(2, 2) in "\n".join(frames[1])


def test_every_keys_line_fits_the_narrowest_terminal(lang):
    for footer in (key_footer(13, 14), key_footer(13, 14, remaining=123), key_footer(13, 14, choices=9)):
        assert cell_len(footer.plain) <= 60, footer.plain  # cells: a Chinese character takes two


# ---- ask before telling ------------------------------------------------------------------------------


@demo("t_run_predict")
def _predict(p: LessonParams) -> DemoOutput:
    """A test demo that asks which choice is right before it shows its numbers."""
    return DemoOutput(
        "the numbers: 42",
        prediction=Prediction("Which letter wins?", ("alpha", "bravo", "charlie"), 1, "bravo scored 42."),
    )


ASK_TEXT = """---
title: Ask
summary: A step that asks first.
---

## Guess

Read this first.

```demo
t_run_predict
```

Prose that reads the numbers.

## Then

The next step.
"""


@pytest.fixture
def ask(tmp_path):
    return write_lesson(tmp_path, "03-ask.md", ASK_TEXT)


def flat(text: str) -> str:
    return " ".join(text.split())


def answered(guess: str | None, answer: str = "bravo", why: str = "bravo scored 42.") -> str:
    """The verdict line for ``guess`` (None: shown without one) in the language of the test, squashed."""
    if guess is None:
        return squash(said("Answer: {answer}. {why}", answer=answer, why=why))
    if guess == answer:
        return squash(said("✓ Right: {answer}. {why}", answer=answer, why=why))
    return squash(
        said("✗ Not this time: you said {guess}; the answer is {answer}. {why}", guess=guess, answer=answer, why=why)
    )


QUESTION = "Which letter wins?"


@pytest.mark.parametrize(("key", "guess"), [("2", "bravo"), ("3", "charlie")], ids=["right", "wrong"])
def test_a_question_is_asked_before_the_numbers_and_the_answer_given_is_judged(ask, lang, key, guess):
    """A right answer is confirmed; a wrong one says what was said and what is right, without a ✓."""
    frames, _ = run_in_terminal(ask, [key, "q"])
    asked, shown = (flat("\n".join(f)) for f in frames)
    assert "Read this first." in asked and squash(said("Predict: {question}", question=QUESTION)) in squash(asked)
    assert "1 alpha" in asked and "2 bravo" in asked and "3 charlie" in asked
    for hidden in ("the numbers: 42", "Prose that reads the numbers", "bravo scored 42"):
        assert hidden not in asked, hidden
    assert said("answer with 1 to {n} · Enter: just show it · q quit", n=3) in asked
    assert answered(guess) in squash(shown) and ("✓" in shown) == (guess == "bravo")
    assert "the numbers: 42" in shown and "Prose that reads the numbers." in shown
    assert said("Enter next · b back · r restart · g graph · q quit") in shown


def test_other_keys_keep_their_meaning_at_a_question(ask, tmp_path, lang):
    frames, out = run_in_terminal(ask, ["7", "g", "x", "q"])
    shown = [squash("\n".join(f)) for f in frames]
    assert squash(said("Choose 1 to {n}.", n=3)) in shown[1]
    assert squash(said("Answer the question first; then g draws the graph.")) in shown[2]
    assert squash(said("Keys: {keys}", keys=runner_mod.render.KEY_HELP)) in shown[3]
    assert all(squash("the numbers: 42") not in f for f in shown)
    assert stopped(1, 2, 3) in squash(out)


def test_enter_at_a_question_shows_the_answer_without_a_guess_then_moves_on(ask, lang):
    frames, _ = run_in_terminal(ask, ["\r", "\r", "q"])
    shown = [squash("\n".join(f)) for f in frames]
    assert answered(None) in shown[1] and squash("the numbers: 42") in shown[1]
    assert "✓" not in shown[1] and "✗" not in shown[1]
    assert squash(step_of(2, 2)) in shown[2]


@pytest.mark.parametrize("key", [" ", "PAGEDOWN"])
def test_space_at_a_waiting_question_only_scrolls_and_never_shows_the_answer(ask, lang, key):
    """Issue 27, item 5: Enter shows the answer without a guess; Space and PgDn do not."""
    frames, out = run_in_terminal(ask, [key, key, "q"])
    assert squash("the numbers: 42") not in squash(out) and "bravo scored" not in out
    scrolls = said("Space only scrolls: answer with 1 to {n}, or press Enter to see the answer.", n=3)
    assert squash(scrolls) in squash("\n".join(frames[1]))


def test_the_closing_frame_keeps_the_last_steps_title_and_fits_the_screen(tmp_path, lang):
    """Issue 27, item 24: the completion replaces the keys line of the last frame, below the step's title."""
    rows = "\n".join(f"- row {k:02d}" for k in range(1, 41))
    tall_end = write_lesson(tmp_path, "05-tall-end.md", ASK_TEXT.replace("The next step.", rows))
    frames, _out = run_in_terminal(tall_end, ["1", "\r", *[" "] * 30], height=24)
    last = frames[-1]
    assert squash(step_of(2, 2)) in squash("\n".join(last[:3]))
    assert squash(said("Lesson complete: {title}.", title="Ask")) in squash("\n".join(last))
    assert "row 40" in "\n".join(last)  # the end of the step is what stays in view
    assert len(last) <= 24 - 1  # the cursor's line included, nothing scrolls


def test_a_resize_redraws_the_frame_at_the_new_width(lesson):
    console = Console(file=io.StringIO(), width=80, height=24, force_terminal=True, color_system=None)
    keys = iter(["RESIZE", "q"])

    def read_key():
        key = next(keys)
        if key == "RESIZE":
            console.width = 50  # what rich reads from the terminal after SIGWINCH
        return key

    LessonRunner(lesson, LessonParams(), console, read_key).run()
    frames = console.file.getvalue().split(CLEAR)[1:]
    assert len(frames) == 2
    widest = [max(len(line) for line in frame.split("\n")) for frame in frames]
    assert widest[0] > 50 >= widest[1]


def test_going_back_to_an_answered_step_shows_it_answered(ask, lang):
    frames, _ = run_in_terminal(ask, ["1", "\r", "b", "q"])
    back = squash("\n".join(frames[-1]))
    assert squash(step_of(1, 2)) in back
    assert answered("alpha") in back and squash("the numbers: 42") in back


def test_a_digit_on_a_step_without_a_question_shows_the_keys(lesson, lang):
    assert squash(said("Keys: {keys}", keys=runner_mod.render.KEY_HELP)) in squash(run_keys(lesson, ["3", "q"])[0])


def test_a_question_below_the_screen_is_answered_once_scrolled_to(tmp_path, lang):
    rows = "\n".join(f"- row {k:02d}" for k in range(1, 41))
    long_ask = write_lesson(tmp_path, "04-long-ask.md", ASK_TEXT.replace("Read this first.", rows))
    frames, _ = run_in_terminal(long_ask, ["2", *["DOWN"] * 40, "2", "q"])
    shown = [squash("\n".join(f)) for f in frames]
    assert squash(said("The question is further down: space scrolls to it.")) in shown[1]
    keys = squash(said("answer with 1 to {n} · Enter: just show it · q quit", n=3))
    asked = next(k for k, f in enumerate(shown) if keys in f)
    assert answered("bravo") in shown[asked + 1]
    # the question stays at the top of the window
    assert squash(said("Predict: {question}", question=QUESTION)) in shown[asked + 1]


def test_auto_prints_the_question_and_the_answer_without_waiting(ask, lang):
    buf = io.StringIO()
    assert run_auto(ask, LessonParams(), Console(file=buf, width=60, no_color=True)) == 0
    out = squash(buf.getvalue())
    assert squash(said("Predict: {question}", question=QUESTION) + " 1 alpha 2 bravo 3 charlie") in out
    assert answered(None) in out and squash("the numbers: 42") in out
    assert squash("Prose that reads the numbers.") in out


# ---- progress on disk ------------------------------------------------------------------------------


UNKNOWN_VERSIONS = [json.dumps({"version": version, "lessons": {}}) for version in (3, "2", True, None)]


@pytest.mark.parametrize(
    "content", ["{not json", '{"lessons": {"01-a": {"step": "two", "steps": 5}}}', "[1, 2]", *UNKNOWN_VERSIONS]
)
def test_an_unreadable_progress_file_is_set_aside_and_reported(state_home, content):
    state_home.mkdir(parents=True, exist_ok=True)
    (state_home / FILE_NAME).write_text(content)
    store = ProgressStore()
    assert store.load() == {}
    assert len(store.warnings) == 1 and "set aside" in store.warnings[0]
    assert ("version: expected 1 or 2" in store.warnings[0]) == (content in UNKNOWN_VERSIONS)
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


def _write_progress(state_home, lessons: dict, **version) -> None:
    """A progress file holding ``lessons`` (and ``version=...`` if given; without it, a version 1 file)."""
    state_home.mkdir(parents=True, exist_ok=True)
    (state_home / FILE_NAME).write_text(json.dumps({**version, "lessons": lessons}))


def test_version_1_progress_under_old_lesson_names_is_kept_under_the_slug(state_home):
    # lessons were renumbered: 02-layernorm-forward became 03-layernorm-forward, 10-why-normalize 02-why-normalize
    lessons = {
        "02-layernorm-forward": {"step": 4, "steps": 9, "completed": False, "updated": "2025-01-01T10:00:00"},
        "10-why-normalize": {"step": 5, "steps": 5, "completed": True, "updated": "2025-01-01T09:00:00"},
        "03-layernorm-backward": {"step": 7, "steps": 11, "completed": True, "updated": "2025-01-01T08:00:00"},
    }
    _write_progress(state_home, lessons, version=1)
    entries = ProgressStore().load()
    assert set(entries) == {"layernorm-forward", "why-normalize", "layernorm-backward"}
    assert (entries["layernorm-forward"].step, entries["layernorm-forward"].completed) == (4, False)
    # version 1 left a finished lesson on its last step; now a finished lesson starts over at step 1
    assert (entries["why-normalize"].step, entries["why-normalize"].completed) == (1, True)
    # finished once, then left at step 7 of a second pass: that place is kept
    assert (entries["layernorm-backward"].step, entries["layernorm-backward"].completed) == (7, True)


def test_a_saved_step_past_the_end_of_a_shortened_lesson_is_clamped(state_home):
    _write_progress(state_home, {"03-layernorm-backward": {"step": 10, "steps": 12, "completed": False}}, version=1)
    entry = ProgressStore(steps={"layernorm-backward": 6}).get("layernorm-backward")
    assert (entry.step, entry.steps) == (6, 6)
    entry = ProgressStore(steps={"layernorm-backward": 12}).get("layernorm-backward")
    assert (entry.step, entry.steps) == (10, 12)  # still long enough: unchanged


def test_two_old_names_of_one_lesson_keep_the_later_place_and_stay_finished(state_home):
    lessons = {
        "02-layernorm-forward": {"step": 9, "steps": 9, "completed": True, "updated": "2025-01-01T08:00:00"},
        "03-layernorm-forward": {"step": 3, "steps": 9, "completed": False, "updated": "2025-02-01T08:00:00"},
    }
    _write_progress(state_home, lessons)  # no version: a version 1 file
    entry = ProgressStore().get("layernorm-forward")
    assert (entry.step, entry.completed) == (3, True)


def test_migrated_progress_is_written_as_version_2_at_the_next_save_atomically(state_home, monkeypatch):
    old = {"version": 1, "lessons": {"02-layernorm-forward": {"step": 4, "steps": 9, "completed": False}}}
    _write_progress(state_home, old["lessons"], version=1)
    store = ProgressStore()
    store.load()
    assert json.loads((state_home / FILE_NAME).read_text()) == old  # reading never writes
    with monkeypatch.context() as m:  # killed between writing the temp file and renaming it: the old file stays whole
        m.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            store.save("why-normalize", 2, 5)
    assert json.loads((state_home / FILE_NAME).read_text()) == old
    assert not [p for p in state_home.iterdir() if p.name.endswith(".tmp")]
    assert ProgressStore().get("layernorm-forward").step == 4
    store.save("why-normalize", 2, 5)
    saved = json.loads((state_home / FILE_NAME).read_text())
    assert saved["version"] == 2
    assert set(saved["lessons"]) == {"layernorm-forward", "why-normalize"}
    assert saved["lessons"]["layernorm-forward"]["step"] == 4


def test_a_lesson_resumes_from_progress_saved_under_its_old_name(lesson, state_home):
    _write_progress(state_home, {"07-three-steps": {"step": 2, "steps": 3}}, version=1)
    assert "Resuming at step 2 of 3" in run_keys(lesson, ["q"])[0]


# ---- the command --------------------------------------------------------------------------------------


def run_cli(capsys, *argv):
    return helpers.run_cli(capsys, "lesson", *argv)


CONTINUE = "Continue where you left off: {command} (step {step} of {total})."


def test_lesson_without_arguments_lists_the_lessons_with_progress(capsys):
    lessons = load_lessons()
    steps = next(len(lesson.steps) for lesson in lessons if lesson.slug == "layernorm-forward")
    ProgressStore().save("layernorm-forward", 3, steps)
    code, out, _ = run_cli(capsys)
    assert code == 0
    assert all(" ".join(lesson.title.split()) in " ".join(out.split()) for lesson in lessons)
    files = [p for p in lessons_dir().iterdir() if LESSON_FILE.match(p.name)]  # every lesson file, listed once
    listed = re.findall(r"^\s*(\d+)\s{2,}\S", out, flags=re.M)
    assert sorted(map(int, listed)) == sorted(int(p.name[:2]) for p in files) == sorted(x.number for x in lessons)
    assert f"step 3/{steps}" in out and "microgradnorm lesson 1" in out
    assert said(CONTINUE, command="microgradnorm lesson 3", step=3, total=steps) in " ".join(out.split())


def test_the_list_shows_a_finished_lesson_and_its_second_pass(capsys):
    store = ProgressStore()
    store.save("value-and-chain-rule", 1, 6, completed=True)
    store.save("layernorm-forward", 1, 9, completed=True)
    store.save("layernorm-forward", 2, 9)
    _, out, _ = run_cli(capsys)
    flat = " ".join(out.split())
    assert flat.count("✓ done") == 2 and "✓ done · step 2/" in flat
    total = next(len(lesson.steps) for lesson in load_lessons() if lesson.slug == "layernorm-forward")
    assert said(CONTINUE, command="microgradnorm lesson 3", step=2, total=total) in flat


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
    ("lang", "flag", "title", "words"),
    [
        ("en", "--references", "References", ["Ioffe and Szegedy (2015)", "7% to 64% less time", "Used in: batchnorm"]),
        ("en", "--glossary", "Glossary", ["Tangent plane", "Pre-LN", "invstd"]),
        ("zh-CN", "--references", "参考文献", ["Ioffe and Szegedy (2015)", "7% 到 64%", "用于：batchnorm、ln-vs-bn"]),
        ("zh-CN", "--glossary", "术语表", ["切平面（tangent plane）", "invstd", "雅可比矩阵"]),
    ],
)
def test_lesson_references_and_glossary_print_their_page(capsys, lang, flag, title, words):
    code, out, err = run_cli(capsys, flag, "--lang", lang)
    assert code == 0 and err == ""
    assert out.lstrip().startswith(title) and "<!--" not in out
    for word in words:
        assert squash(word) in squash(out), word
    assert not [line for line in out.splitlines() if line.endswith(" ")]  # into a pipe: no padding


def test_lesson_references_and_glossary_together_print_both(capsys):
    _, out, _ = run_cli(capsys, "--references", "--glossary")
    assert out.index("References") < out.index("Glossary")


# (argv, the words of the one line it prints): the English reasons, then the Chinese typed out
BAD_INPUT = [
    (["99"], ["no lesson 99", "microgradnorm lesson"]),
    (["no-such-lesson"], ["no lesson named 'no-such-lesson'", "list them with: microgradnorm lesson"]),
    (["layernorm"], ["matches several lessons", "03-layernorm-forward", "list them with: microgradnorm lesson"]),
    (["0-"], ["no lesson named '0-'", "list them with: microgradnorm lesson"]),  # not lesson 10
    (["²"], ["no lesson named '²'"]),  # a digit to str.isdigit, not to int()
    (["chain"], ["no lesson named 'chain'"]),  # a part of lesson 1's name, not its start
    (["3", "--dim", "40"], ["--dim", "2 to 16", "40"]),
    (["8", "--batch", "1"], ["--batch", "two or more rows", "2 to 16", "got 1"]),
    (["8", "--batch", "100000"], ["--batch", "2 to 16", "got 100000"]),
    (["9", "--batch", "1"], ["argument --batch: lesson 09-rmsnorm does not use it", "got 1"]),
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
    (["3", "--references"], ["argument --references: takes no LESSON", "got LESSON 3"]),
    (["--glossary", "--step", "2"], ["argument --glossary: not allowed with --step", "got --step 2"]),
    (["--references", "--auto"], ["argument --references: not allowed with --auto"]),
]
BAD_INPUT_ZH = [
    (["99"], ["microgradnorm lesson：错误：参数 LESSON：没有第 99 课（课程编号从 1 到"]),
    (["no-such-lesson"], ["没有名为 'no-such-lesson' 的课程", "列出所有课程：microgradnorm lesson"]),
    (["3", "--dim", "40"], ["参数 --dim：课程要显示每个节点，所以应为 2 到 16 之间的整数，实际为 40"]),
    (["9", "--batch", "3"], ["参数 --batch：课程 09-rmsnorm 用不到它", "实际给了 3"]),
    (["--step", "3"], ["参数 --step：需要指定 LESSON（例如：microgradnorm lesson 1 --step 3）"]),
    (["1", "--restart", "--step", "3"], ["参数 --restart：不能与参数 --step 同时使用"]),
    (["1", "--step", "99"], ["参数 --step：第 1 课共有"]),
    (["3", "--references"], ["参数 --references：不接受 LESSON", "实际给了 LESSON 3"]),
    (
        ["1", "--dim", "0"],
        ["microgradnorm lesson：错误：参数 --dim：应为正整数，实际为 0（参见 microgradnorm lesson --help）"],
    ),
    (["1", "--seed", "x"], ["参数 --seed：应为不小于 0 的整数种子，实际为 'x'"]),
    (["1", "--eps", "-1"], ["参数 --eps：应为不小于 0 的有限数，实际为 -1"]),
    (["--bogus"], ["microgradnorm：错误：无法识别的参数：--bogus"]),
    (["1", "--dim"], ["参数 --dim：需要一个值"]),
]


@pytest.mark.parametrize(
    ("language", "argv", "words"), [("en", *c) for c in BAD_INPUT] + [("zh-CN", *c) for c in BAD_INPUT_ZH]
)
def test_bad_input_is_one_line_and_exit_2(capsys, language, argv, words):
    code, _, err = run_cli(capsys, "--lang", language, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, (word, err)
    assert "Traceback" not in err
    assert language == "en" or ("error" not in err and "argument" not in err)  # no English left in the Chinese


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
    assert find_lesson(load_lessons(), query).number == number


def test_a_state_home_that_is_a_file_is_named_and_the_lessons_still_run(capsys, state_home):
    state_home.parent.mkdir(parents=True, exist_ok=True)
    state_home.write_text("not a directory")
    code, out, err = run_cli(capsys)
    flat = " ".join(out.split())
    assert code == 0 and err == ""
    said_home = f"MICROGRADNORM_HOME: expected a directory for progress files, got {str(state_home)!r}"
    assert f"Progress is not saved: {said_home}" in flat
    assert "A Value, the chain rule" in flat
    code, out, _ = run_cli(capsys, "1", "--step", "1")
    assert code == 0 and "Step 1 of" in out
    assert state_home.read_text() == "not a directory"


def test_a_read_only_state_folder_is_named_once_and_the_lesson_runs_to_the_end(capsys, read_only_state):
    """Issue 27, item 2: as when the folder cannot be created: run, say once that progress is not saved."""
    saved = read_only_state / "lessons.json"
    saved.write_text('{"version": 2, "lessons": {}}', encoding="utf-8")
    code, out, err = run_cli(capsys, "1", "--auto")
    flat = " ".join(out.split())
    assert code == 0 and err == ""
    assert flat.count("Progress is not saved: cannot write in the state directory") == 1
    assert str(read_only_state) in flat and "Operation not permitted" in flat
    steps = len(next(x for x in load_lessons() if x.number == 1).steps)
    assert f"Step {steps} of {steps}" in flat
    assert saved.read_text(encoding="utf-8") == '{"version": 2, "lessons": {}}'


def test_a_save_that_fails_mid_lesson_stops_saving_and_says_why_once(read_only_state):
    lesson = next(x for x in load_lessons() if x.number == 1)
    console = Console(file=io.StringIO(), width=80, height=60, no_color=True)
    keys = [k for step in range(1, len(lesson.steps) + 1) for k in ("1", "\r", "\r")] + ["q"]
    runner = LessonRunner(lesson, lesson.params(), console, keys, progress=ProgressStore())
    assert runner.run() == 0
    out = " ".join(console.file.getvalue().split())
    assert out.count("Progress is not saved:") == 1 and "Operation not permitted" in out
    assert runner.progress is None and "Lesson complete" in out


def test_lesson_6_with_a_zero_gradient_shows_absolute_differences(capsys):
    # d = 2 with eps = 0: dx is 0 up to rounding; a relative difference would be inf next to "all agree"
    code, out, _ = run_cli(capsys, "6", "--dim", "2", "--eps", "0", "--step", "2")
    flat = " ".join(out.split())
    assert code == 0
    absolute = said("{form} vs autograd, largest absolute difference:", form="three-path")
    relative = said("{form} vs autograd, largest relative difference:", form="three-path")
    assert "inf" not in flat.split() and relative not in flat
    assert absolute in flat and f"within {tol.CLOSED_FORM_ATOL:.0e} absolute (tolerances.CLOSED_FORM_ATOL)" in flat
    code, out, _ = run_cli(capsys, "6", "--step", "2")
    flat = " ".join(out.split())
    assert relative in flat and f"within {tol.CLOSED_FORM_RTOL:.0e} relative (tolerances.CLOSED_FORM_RTOL)" in flat


# ---- across languages, and the Chinese words themselves ---------------------------------------------------

ZH = i18n.SIMPLIFIED_CHINESE


@pytest.fixture
def sample(tmp_path, monkeypatch):
    """A copy of the sample lesson and its Chinese translation, as the lessons folder: (english, translation)."""
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(tmp_path / "sample-lessons"))
    return helpers.sample_lessons(tmp_path / "sample-lessons")


def test_the_runner_speaks_chinese(lesson):
    with i18n.use_language(ZH):
        out, _ = run_keys(lesson, ["z", "b", "n", "q"])
    assert "第 1 步，共 3 步 · Alpha step" in out and "第 2 步，共 3 步 · Beta step" in out
    assert "1/3 · Enter 下一步 · b 上一步 · r 从头 · g 画图 · q 退出" in out
    assert squash("按键：Enter、n 或空格：下一步（这一步下面还有内容时先滚动）") in squash(out)
    assert "这已经是第一步。" in out
    assert squash("停在第 2 步（共 3 步）。继续学习：microgradnorm lesson 1") in squash(out)
    assert "Step " not in out and "Keys" not in out and "Stopped" not in out


def test_a_question_and_its_verdict_in_chinese(ask):
    with i18n.use_language(ZH):
        frames, _ = run_in_terminal(ask, ["3", "q"])
    asked, shown = ("\n".join(f) for f in frames)
    assert "先猜一猜：Which letter wins?" in asked  # the question is the demo's: its owner translates it
    assert "1/2 · 按 1 到 3 作答 · Enter 直接看答案 · q 退出" in asked
    assert squash("✗ 这次没猜中：你选的是 charlie，答案是 bravo。bravo scored 42.") in squash(shown)


def test_a_note_is_shown_once_and_a_step_note_on_every_frame_of_its_step(lesson):
    out, _ = run_keys(lesson, ["n", "b", "n", "q"], note="LESSON NOTE", step_notes={1: "STEP TWO NOTE"})
    lines = out.splitlines()
    headers = [k for k, line in enumerate(lines) if line.startswith("Step ")]
    assert [lines[k].split(" · ")[0] for k in headers] == ["Step 1 of 3", "Step 2 of 3", "Step 1 of 3", "Step 2 of 3"]
    # a frame: its notes, the lesson's rule, the step's header
    above = [lines[k - 2] for k in headers]
    assert above == ["LESSON NOTE", "STEP TWO NOTE", lines[headers[2] - 2], "STEP TWO NOTE"]
    assert "NOTE" not in lines[headers[2] - 2] and out.count("LESSON NOTE") == 1


@pytest.mark.parametrize(("first", "then"), [("en", ZH), (ZH, "en")])
def test_progress_is_shared_across_languages(sample, first, then):
    english = parse_lesson(sample[0])
    with i18n.use_language(first):
        run_keys(localized(english, first).lesson, ["n", "q"])
    with i18n.use_language(then):
        shown = localized(english, then).lesson
        out, store = run_keys(shown, ["q"])
        assert titles_in(out) == [shown.steps[1].title.replace("`", "")]
        assert resuming(2, 2) in squash(out)
    assert set(store.load()) == {english.slug} and store.get(english.slug).step == 2
    assert {english.steps[1].title, localized(english, ZH).lesson.steps[1].title} == {"The chain rule", "链式法则"}


def test_the_lesson_list_in_chinese(capsys):
    steps = next(len(lesson.steps) for lesson in load_lessons() if lesson.slug == "layernorm-forward")
    ProgressStore().save("layernorm-forward", 3, steps)
    code, out, _ = run_cli(capsys, "--lang", "zh-CN")
    assert code == 0
    header = next(line for line in out.splitlines() if "#" in line)
    assert "课程" in header and "进度" in header
    assert f"第 3/{steps} 步" in out and "6 步" in out
    assert squash(f"从上次停下的地方继续：microgradnorm lesson 3（第 3 步，共 {steps} 步）。") in squash(out)
    assert squash("用 microgradnorm lesson 1 开始学一课（按编号或名称）；加上 --auto 一次打印所有步骤。") in squash(out)


def test_the_lesson_list_shows_translated_titles(capsys, sample):
    lesson = parse_lesson(sample[0])
    english, chinese = lesson.title, localized(lesson, ZH).lesson.title
    _code, out, _ = run_cli(capsys, "--lang", "zh-CN")
    assert chinese in out and english not in out
    _code, out, _ = run_cli(capsys, "--lang", "en")
    assert english in out


def _auto(capsys, *argv) -> str:
    code, out, err = run_cli(capsys, *argv, "--auto", "--lang", "zh-CN")
    assert code == 0 and err == ""
    return out


def test_an_untranslated_lesson_says_so_and_runs_in_english_with_chinese_controls(capsys, sample):
    translation = sample[1]
    translation.unlink()  # every shipped lesson has a translation: take one away from a copy
    lesson = load_lessons()[0]
    out = _auto(capsys, str(lesson.number), "--step", "1")
    assert out.splitlines()[0] == "本课还没有中文译文，先以英文显示。"
    assert f"第 1 步，共 {len(lesson.steps)} 步 · {lesson.steps[0].title}" in out
    assert "（用 --" in out and "修改）" in out  # the options line, in Chinese (it may wrap)


@pytest.mark.parametrize(
    ("change", "note"),
    [
        ("edit the English", "本页的英文原文在翻译之后改过，译文更新之前先显示英文。"),
        ("remove the translation", "本页还没有中文译文，先以英文显示。"),
    ],
)
def test_a_page_whose_translation_is_behind_or_missing_is_shown_in_english_with_a_note(
    capsys, tmp_path, monkeypatch, change, note
):
    folder = tmp_path / "lessons"
    shutil.copytree(lessons_dir(), folder, ignore=shutil.ignore_patterns("assets"))
    monkeypatch.setenv("MICROGRADNORM_LESSONS", str(folder))
    if change == "edit the English":
        helpers.edit(folder / "REFERENCES.md", "grouped by subject.", "grouped by subject, oldest first.")
    else:
        (folder / ZH / "REFERENCES.md").unlink()
    code, out, _ = run_cli(capsys, "--references", "--lang", "zh-CN")
    assert code == 0 and out.splitlines()[0] == note
    assert out.splitlines()[1].strip() == "References"
    _code, out, _ = run_cli(capsys, "--glossary", "--lang", "zh-CN")
    assert out.lstrip().startswith("术语表")  # the other page is untouched


@pytest.mark.parametrize("width", [60, 100])
def test_auto_in_chinese_fills_lines_between_characters_and_keeps_punctuation_off_their_starts(
    capsys, sample, monkeypatch, width
):
    monkeypatch.setenv("COLUMNS", str(width))
    out = _auto(capsys, "1")
    lines = out.splitlines()
    rules = [line for line in lines if " 01 · " in line and line.startswith("─") and line.endswith("─")]
    assert len(rules) == 2 and all(cell_len(line) == width for line in rules)
    assert all(cell_len(line) <= width for line in lines)
    starts = [k for k, line in enumerate(lines) if line in rules]  # each step, from its rule: one screen
    assert all(end - start <= 40 for start, end in zip(starts, [*starts[1:], len(lines)])), starts
    # wrapped between characters: a line that a Chinese character continues is full, up to one character
    assert helpers.chinese_prose_problems(out, width) == []
