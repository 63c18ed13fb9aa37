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

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WIDTH, HEIGHT = 60, 50
TIMEOUT = 30.0  # seconds to wait for the screen to show something (a slow, shared machine)


class Tmux:
    def __init__(self, env: dict[str, str]) -> None:
        self.socket = f"mgn-test-{uuid.uuid4().hex[:10]}"
        self.session = "lesson"
        self.env = env

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, env=self.env
        ).stdout

    def start(self, *argv: str) -> None:
        command = " ".join([sys.executable, "-m", "microgradnorm", *argv])
        self.tmux("new-session", "-d", "-s", self.session, "-x", str(WIDTH), "-y", str(HEIGHT), command)
        self.tmux("set-option", "-t", self.session, "remain-on-exit", "on")

    def screen(self, history: bool = False) -> str:
        """The visible screen, or with ``history`` everything that scrolled off it too."""
        return self.tmux("capture-pane", "-p", "-t", self.session, *(["-S", "-"] if history else []))

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + TIMEOUT
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} did not appear on the screen within {TIMEOUT} s; the screen was:\n{screen}")

    def dead(self) -> bool:
        return self.tmux("display-message", "-p", "-t", self.session, "#{pane_dead}").strip() == "1"

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, env=self.env)


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


def test_lesson_1_in_a_real_terminal_next_back_graph_quit_and_resume(term, tmp_path):
    term.start("lesson", "1", "--graph-dir", str(tmp_path / "graphs"))
    screen = term.wait_for("Step 1 of")
    assert "Every number remembers where it came from" in screen
    assert "Enter next" in screen and "q quit" in screen

    term.keys("n")
    screen = term.wait_for("Step 2 of")
    assert "Step 1 of" not in screen  # the screen was cleared: one step at a time
    term.keys("Enter")
    term.wait_for("Step 3 of")
    term.keys("b")
    term.wait_for("Step 2 of")
    term.keys("g")
    screen = term.wait_for("01-value-and-chain-rule-step02.")
    assert (tmp_path / "graphs").is_dir()
    term.keys("q")
    screen = term.wait_for("Stopped at step 2")
    deadline = time.monotonic() + TIMEOUT
    while not term.dead() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert term.dead(), "the lesson did not exit after q"

    saved = json.loads((tmp_path / "state" / "lessons.json").read_text())
    assert saved["lessons"]["value-and-chain-rule"]["step"] == 2

    term.close()
    term.start("lesson", "1")
    screen = term.wait_for("Step 2 of")
    assert "Resuming at step 2" in screen
    term.keys(" ")
    term.wait_for("Step 3 of")
    term.keys("q")
    term.wait_for("Stopped at step 3")


def test_the_lesson_list_in_a_real_terminal_shows_progress(term, tmp_path):
    from microgradnorm.lessons.format import load_lessons

    steps = len(next(lesson for lesson in load_lessons() if lesson.number == 4).steps)
    state = tmp_path / "state"
    state.mkdir()
    (state / "lessons.json").write_text(
        json.dumps(
            {"version": 1, "lessons": {"04-layernorm-backward": {"step": 4, "steps": steps, "completed": False}}}
        )
    )
    term.start("lesson")
    term.wait_for("Start one with")
    screen = term.screen(history=True)
    assert f"step 4/{steps}" in screen
    assert "LayerNorm backward" in screen


def test_keys_typed_ahead_while_a_step_is_drawn_are_not_lost(term, tmp_path):
    term.start("lesson", "1")
    term.wait_for("Step 1 of")
    term.keys("n", "n", "b", "n", "n", "q")  # all at once: most arrive while a step is being drawn
    screen = term.wait_for("Stopped at step")
    assert "Stopped at step 4 of" in screen
    saved = json.loads((tmp_path / "state" / "lessons.json").read_text())
    assert saved["lessons"]["value-and-chain-rule"]["step"] == 4
