"""A real terminal: tmux runs a shell, we type `microgradnorm exercise ...` and read the screen.

This is the learner's path end to end, through the installed entry point, a
real pseudo-terminal and rich's terminal rendering: init a workspace, check the
untouched scaffold (it fails), write the reference solution into the file,
check again (it passes), list. The tmux server runs on a private socket and is
stopped at the end; the state directory is a temporary one.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.grading import solution

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Terminal:
    """A shell in a private tmux server, ``width`` x ``height`` cells; ``env`` is set for the shell."""

    def __init__(
        self, home: Path, cwd: Path, width: int = 120, height: int = 50, env: dict[str, str] | None = None
    ) -> None:
        self.socket = f"microgradnorm-test-{uuid.uuid4().hex[:12]}"
        extra = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        shell = f"env MICROGRADNORM_HOME={shlex.quote(str(home))} {extra} PS1='$ ' bash --norc --noprofile"
        size = ("-x", str(width), "-y", str(height))
        self.tmux("new-session", "-d", "-s", "t", *size, "-c", str(cwd), shell)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-u", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", line)
        self.tmux("send-keys", "-t", "t", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t", "-S", "-300")

    def wait_for(self, text: str, count: int = 1, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared on the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def test_init_edit_check_in_a_real_terminal(tmp_path):
    home, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    term = Terminal(home, work)
    cmd = f"{shlex.quote(sys.executable)} -m microgradnorm exercise"
    try:
        term.type(f"{cmd} init exercises")
        screen = term.wait_for("copied 11 scaffold(s)")
        assert "Exercise workspace:" in screen
        scaffold = work / "exercises" / "05_layernorm_backward.py"
        assert scaffold.is_file()

        term.type(f"cd /; {cmd} check 5; echo exit=$?")  # from anywhere: the workspace is remembered
        screen = term.wait_for("exit=1")
        assert "Not written yet" in screen and "NotImplementedError" in screen

        # the learner edits the file: here, the reference solution goes into the scaffold
        scaffold.write_text(solution(5), encoding="utf-8")
        term.type(f"{cmd} check 5; echo exit=$?")
        screen = term.wait_for("exit=0")
        assert "Every check passed." in screen
        for row in ("forward", "dx", "dgamma", "dbeta", "second input", "inputs untouched"):
            assert f"✓  {row}" in screen, row

        term.type(f"clear; {cmd} list")
        screen = term.wait_for("1/11 done")
        assert "✓ done" in screen
    finally:
        term.close()
    assert os.path.isdir(home)
