"""The test setup itself: every test gets a private state folder, and the slow set is marked by what it uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_test_has_its_own_state_folder(state_home, tmp_path):
    assert os.environ["MICROGRADNORM_HOME"] == str(state_home) == str(tmp_path / "state")
    assert "MICROGRADNORM_DEBUG" not in os.environ and "MICROGRADNORM_LESSONS" not in os.environ


def _collected(*args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}


def test_the_slow_set_is_marked_by_fixture_and_by_module():
    files = ["tests/test_lessons_wheel.py", "tests/test_lesson_terminal.py", "tests/test_store.py"]
    slow, quick = _collected("-m", "slow", *files), _collected("-m", "not slow", *files)
    assert slow == {"tests/test_lessons_wheel.py", "tests/test_lesson_terminal.py"}  # a module; a fixture (tmux)
    assert quick == {"tests/test_store.py"}
