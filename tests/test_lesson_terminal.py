"""A real terminal: tmux runs ``microgradnorm lesson 1``, the test presses keys and reads the screen.

Each test uses its own tmux server (``-L`` socket name) and kills only that server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from rich.cells import cell_len

from microgradnorm.i18n import _
from microgradnorm.lessons import render
from microgradnorm.lessons.demos import DemoOutput
from microgradnorm.lessons.format import load_lessons
from microgradnorm.lessons.runner import step_outputs
from tests.helpers import chinese_prose_problems, rendered, said_in, sample_lessons

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WIDTH, HEIGHT = 60, 50
TIMEOUT = 30.0  # seconds to wait for the screen to show something (a slow, shared machine)


class Tmux:
    def __init__(self, env: dict[str, str]) -> None:
        self.socket = f"mgn-test-{uuid.uuid4().hex[:10]}"
        self.session = "lesson"
        self.env = env
        self.size = (WIDTH, HEIGHT)

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, env=self.env
        ).stdout

    def start(self, *argv: str, program: tuple[str, ...] = ("-m", "microgradnorm")) -> None:
        command = " ".join([sys.executable, *program, *argv])
        width, height = self.size
        self.tmux("new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height), command)
        self.tmux("set-option", "-t", self.session, "remain-on-exit", "on")

    def screen(self, history: bool = False) -> str:
        """The visible screen, or with ``history`` everything that scrolled off it too."""
        return self.tmux("capture-pane", "-p", "-t", self.session, *(["-S", "-"] if history else []))

    def keys(self, *keys: str) -> None:
        if keys:
            self.tmux("send-keys", "-t", self.session, *keys)

    def wait_until(self, done, what: str) -> str:
        """The screen, once ``done(screen)`` holds; an AssertionError saying ``what`` did not happen after TIMEOUT."""
        deadline = time.monotonic() + TIMEOUT
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if done(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{what} within {TIMEOUT} s; the screen was:\n{screen}")

    def wait_for(self, text: str) -> str:
        return self.wait_until(lambda screen: text in screen, f"{text!r} did not appear on the screen")

    def dead(self) -> bool:
        return self.tmux("display-message", "-p", "-t", self.session, "#{pane_dead}").strip() == "1"

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, env=self.env)
        # a server being killed may still hold its socket: the next start gets a server of its own
        self.socket = f"mgn-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def term(tmp_path):
    env = dict(os.environ)
    env.update(
        MICROGRADNORM_HOME=str(tmp_path / "state"),
        NO_COLOR="1",
        TERM="xterm-256color",
        TMUX_TMPDIR=str(tmp_path),
    )
    env.pop("TMUX", None)
    env.pop("MICROGRADNORM_LESSONS", None)
    t = Tmux(env)
    yield t
    t.close()


def _answers(number: int, step: int) -> list[str]:
    """The key that answers step ``step`` of lesson ``number``'s question, if it asks one (else none).

    Pressing it again on an answered step only shows the keys, so sending it before every move
    forward keeps these tests true whichever steps the lesson's authors make ask first.
    """
    lesson = next(x for x in load_lessons() if x.number == number)
    outputs = step_outputs(lesson, step - 1, lesson.params())
    return ["1"] if any(isinstance(o, DemoOutput) and o.prediction is not None for o in outputs) else []


def test_lesson_1_in_a_real_terminal_next_back_graph_quit_and_resume(term, tmp_path):
    term.start("lesson", "1", "--graph-dir", str(tmp_path / "graphs"))
    screen = term.wait_for("Step 1 of")
    assert load_lessons()[0].steps[0].title in screen

    term.keys(*_answers(1, 1))
    screen = term.wait_for("Enter next")
    assert "q quit" in screen
    term.keys("n")
    screen = term.wait_for("Step 2 of")
    assert "Step 1 of" not in screen  # the screen was cleared: one step at a time
    term.keys(*_answers(1, 2), "Enter")
    term.wait_for("Step 3 of")
    term.keys("b")
    term.wait_for("Step 2 of")
    term.keys("g")
    screen = term.wait_for("01-value-and-chain-rule-step02.")
    assert (tmp_path / "graphs").is_dir()
    term.keys("q")
    screen = term.wait_for("Stopped at step 2")
    term.wait_until(lambda _screen: term.dead(), "the lesson did not exit after q")

    saved = json.loads((tmp_path / "state" / "lessons.json").read_text())
    assert saved["lessons"]["value-and-chain-rule"]["step"] == 2

    term.close()
    term.start("lesson", "1")
    screen = term.wait_for("Step 2 of")
    assert "Resuming at step 2" in screen
    term.keys(*_answers(1, 2), " ")
    term.wait_for("Step 3 of")
    term.keys("q")
    term.wait_for("Stopped at step 3")


def test_the_lesson_list_in_a_real_terminal_shows_progress(term, tmp_path):
    steps = len(next(lesson for lesson in load_lessons() if lesson.number == 4).steps)
    state = tmp_path / "state"
    state.mkdir()
    saved = {"04-layernorm-backward": {"step": 4, "steps": steps, "completed": False}}
    (state / "lessons.json").write_text(json.dumps({"version": 1, "lessons": saved}))
    term.start("lesson")
    term.wait_for("Start one with")
    screen = term.screen(history=True)
    assert f"step 4/{steps}" in screen
    assert "LayerNorm backward" in screen


def test_keys_typed_ahead_while_a_step_is_drawn_are_not_lost(term, tmp_path):
    term.start("lesson", "1")
    term.wait_for("Step 1 of")
    # all at once: most arrive while a step is being drawn
    term.keys(*_answers(1, 1), "n", *_answers(1, 2), "n", "b", "n", *_answers(1, 3), "n", "q")
    screen = term.wait_for("Stopped at step")
    assert "Stopped at step 4 of" in screen
    saved = json.loads((tmp_path / "state" / "lessons.json").read_text())
    assert saved["lessons"]["value-and-chain-rule"]["step"] == 4


# ---- a small terminal: paging, and questions asked before the numbers -------------------------------

SMALL = (80, 24)  # a common terminal size, smaller than most steps


def _tall_step() -> tuple[int, int]:
    """(lesson number, step) of the first real step taller than an 80×24 screen."""

    for lesson in load_lessons():
        params = lesson.params()
        for index in range(len(lesson.steps) - 1):
            step = render.render_step(lesson, index, step_outputs(lesson, index, params), params)
            if len(rendered(step, SMALL[0]).splitlines()) > SMALL[1] + 5:
                return lesson.number, index + 1
    pytest.fail("no lesson step is taller than an 80×24 screen: nothing to page")


def _top(screen: str) -> str:
    return "\n".join(screen.splitlines()[:2])


def test_a_step_taller_than_80x24_is_paged_with_its_title_kept_on_screen(term):
    number, step = _tall_step()
    term.size = SMALL
    term.start("lesson", str(number), "--step", str(step))
    screen = term.wait_for(f"Step {step} of")
    assert f"Step {step} of" in _top(screen) and f"{number:02d} · " in _top(screen)
    scroll = (said_in(f"{{n}} more {s}: space to scroll · ↑ up · q quit", screen) for s in ("line", "lines"))
    assert any(scroll)
    presses = 0
    while "Enter next" not in screen:
        before = screen
        term.keys("Space" if presses % 2 else "Enter")  # both scroll while the step goes on below
        presses += 1
        screen = _wait_change(term, before)
        assert f"Step {step} of" in _top(screen), "the title left the screen"
        assert f"Step {step + 1} of" not in screen, "moved on before the end of the step was shown"
        assert presses < 20
    assert presses >= 1
    term.keys("k")
    screen = _wait_change(term, screen)
    assert "more line" in screen  # scrolled back up a line: the footer counts it again
    term.keys("Enter")  # seen to its end already: moves on from anywhere in the step
    term.wait_for(f"Step {step + 1} of")
    term.keys("b")
    screen = term.wait_for(f"Step {step} of")
    term.keys("q")
    term.wait_for(f"Stopped at step {step} of")


def _wait_change(term, before: str) -> str:
    term.wait_until(lambda screen: screen != before, "the screen did not change")
    time.sleep(0.1)  # let the frame finish drawing
    return term.screen()


PREDICT_SCRIPT = """
import sys
from microgradnorm.lessons.demos import DemoOutput, Prediction, demo

@demo("t_tmux_predict")
def t_tmux_predict(p):
    return DemoOutput(
        "the numbers: 42",
        prediction=Prediction("Which letter wins?", ("alpha", "bravo", "charlie"), 1, "bravo scored 42."),
    )

from microgradnorm import cli
sys.exit(cli.main(sys.argv[1:]))
"""

PREDICT_LESSON = """---
title: Ask first
summary: A question before the numbers.
---

## Guess

Read this first.

```demo
t_tmux_predict
```

## Then

The next step.
"""


def _start_asking(term, tmp_path) -> str:
    """The one-question lesson started at 80x24, with the demo that asks it: the screen once it asks."""
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "01-ask-first.md").write_text(PREDICT_LESSON)
    script = tmp_path / "predict.py"
    script.write_text(PREDICT_SCRIPT)
    term.env["MICROGRADNORM_LESSONS"] = str(folder)
    term.size = SMALL
    term.start("lesson", "1", program=(str(script),))
    return term.wait_for("answer with 1 to 3")


def test_a_question_waits_for_a_key_then_shows_the_verdict_and_the_numbers(term, tmp_path):
    screen = _start_asking(term, tmp_path)
    assert _("Predict: {question}").format(question="Which letter wins?") in screen and "2  bravo" in screen
    assert "the numbers: 42" not in screen
    term.keys("3")
    screen = term.wait_for("Not this time")
    wrong = _("✗ Not this time: you said {guess}; the answer is {answer}. {why}")
    assert wrong.format(guess="charlie", answer="bravo", why="bravo scored 42.") in " ".join(screen.split())
    assert "the numbers: 42" in screen
    term.keys("Enter")
    term.wait_for("Step 2 of 2")
    term.keys("b")
    screen = term.wait_for("Step 1 of 2")
    assert "Not this time" in screen and "answer with" not in screen  # shown answered
    term.keys("q")
    term.wait_for("Stopped at step 1 of 2")


def test_space_at_a_waiting_question_does_not_show_the_answer(term, tmp_path):
    """Issue 27, item 5: a learner paging with Space must not skip the guess; only Enter shows the answer."""
    screen = _start_asking(term, tmp_path)
    term.keys("Space")
    screen = term.wait_for("Space only scrolls")
    term.keys("Space")
    time.sleep(0.5)
    screen = term.screen()
    assert "the numbers: 42" not in screen and "Answer:" not in screen and "Step 1 of 2" in screen
    term.keys("Enter")
    screen = term.wait_for("the numbers: 42")
    assert "Answer: bravo" in " ".join(screen.split())
    term.keys("q")


def test_the_lesson_redraws_when_the_terminal_is_resized_without_a_key(term):
    """Issue 27, item 21: the frame follows the new size at once (the rule above the step spans the width)."""
    term.size = (60, 24)
    term.start("lesson", "1")
    screen = term.wait_for("Step 1 of")
    assert max(cell_len(line) for line in screen.splitlines()) <= 60
    term.tmux("resize-window", "-t", term.session, "-x", "100", "-y", "30")

    def redrawn(screen: str) -> bool:
        rules = [line for line in screen.splitlines() if line.startswith("─") and "01 · " in line]
        return bool(rules) and cell_len(rules[0].rstrip()) > 90

    screen = term.wait_until(redrawn, "the frame was not redrawn at 100 columns")
    assert screen.count("Step 1 of") == 1  # drawn again, not added below the old frame
    term.keys("q")
    term.wait_for("Stopped at step 1")


def test_the_end_of_a_lesson_in_80x24_keeps_the_last_steps_title_on_screen(term):
    """Issue 27, item 24: the completion lines replace the keys line instead of scrolling the title away."""
    number = 12
    total = len(next(x for x in load_lessons() if x.number == number).steps)
    term.size = SMALL
    term.start("lesson", str(number), "--step", str(total))
    screen = term.wait_for(f"Step {total} of {total}")
    title = next(line for line in screen.splitlines() if f"Step {total} of {total}" in line).strip()
    term.keys(*_answers(number, total))
    presses = 0
    while "Lesson complete" not in screen:
        before = screen
        term.keys("Space")
        presses += 1
        screen = _wait_change(term, before)
        assert presses < 30
    time.sleep(0.3)
    screen = term.screen()
    assert title in screen, f"the last step's title left the screen:\n{screen}"
    assert f"microgradnorm lesson {number + 1}" in screen  # the next lesson's command
    assert "Enter next" not in screen  # no keys line for a lesson that has ended


# ---- in Chinese: LANG=zh_CN.UTF-8 at 60 columns ------------------------------------------------------------


def test_a_lesson_in_chinese_in_a_real_terminal_at_60_columns(term, tmp_path):
    folder = tmp_path / "lessons"
    sample_lessons(folder)
    term.env.pop("MICROGRADNORM_LANG", None)  # the locale alone chooses the language
    term.env.update(LANG="zh_CN.UTF-8", LC_ALL="", LANGUAGE="", MICROGRADNORM_LESSONS=str(folder))
    term.start("lesson", "1")
    screen = term.wait_for("第 1 步，共 2 步 · 一个小小的计算图")
    rule = next(line for line in screen.splitlines() if " 01 · 链式法则" in line)
    assert cell_len(rule) == WIDTH and rule.startswith("─") and rule.endswith("─")
    assert chinese_prose_problems(screen, WIDTH) == []
    assert "1/2 · Enter 下一步 · b 上一步 · r 从头 · g 画图 · q 退出" in screen

    term.keys("1", "n")  # "1" answers a question if the step asks one, and only shows the keys if not
    screen = term.wait_for("第 2 步，共 2 步 · 链式法则")
    assert chinese_prose_problems(screen, WIDTH) == []
    term.keys("q")
    screen = term.wait_for("停在第 2 步（共 2 步）")
    assert "停在第 2 步（共 2 步）。继续学习：microgradnorm lesson 1" in screen
    saved = json.loads((tmp_path / "state" / "lessons.json").read_text())
    assert saved["lessons"]["chain-rule-sample"]["step"] == 2
