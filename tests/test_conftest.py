"""The test setup itself: every test gets a private state folder, and the slow set is marked by what it uses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SLOW_FIXTURES, SLOW_LESSONS, SLOW_MODULES, SLOW_TESTS, SWEEPS, SWEEPS_KEPT

ROOT = Path(__file__).resolve().parent.parent


def test_every_test_has_its_own_state_folder(state_home, tmp_path):
    assert os.environ["MICROGRADNORM_HOME"] == str(state_home) == str(tmp_path / "state")
    assert "MICROGRADNORM_DEBUG" not in os.environ and "MICROGRADNORM_LESSONS" not in os.environ


_HOMES: list[str] = []


@pytest.mark.parametrize("run", [1, 2])
def test_a_test_without_tmp_path_has_a_fresh_state_folder_of_its_own(state_home, tmp_path_factory, run):
    home = os.environ["MICROGRADNORM_HOME"]
    assert home == str(state_home) and not state_home.exists() and state_home.parent.is_dir()
    assert home not in _HOMES and state_home.is_relative_to(tmp_path_factory.getbasetemp())
    _HOMES.append(home)
    state_home.mkdir()  # the next test's folder is another one, though this one now exists


def _python(*args: str) -> str:
    """What a fresh Python process at the repository's root prints (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _collected_ids(*args: str) -> list[str]:
    out = _python("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args)
    return [line for line in out.splitlines() if "::" in line]


# one collection in a fresh process, printing whether each test is marked slow (two `-m` runs cost twice as much)
SHOW_MARKS = """import sys, pytest
class Show:
    def pytest_collection_finish(self, session):
        for item in session.items:
            print("marked", item.nodeid.split("::")[0], item.get_closest_marker("slow") is not None)
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[Show()]))
"""


def test_the_slow_set_is_marked_by_fixture_and_by_module():
    files = ["tests/test_lessons_wheel.py", "tests/test_lesson_terminal.py", "tests/test_store.py"]
    marks = [line.split()[1:] for line in _python("-c", SHOW_MARKS, *files).splitlines() if line.startswith("marked ")]
    slow, quick = {f for f, is_slow in marks if is_slow == "True"}, {f for f, is_slow in marks if is_slow == "False"}
    assert slow == {"tests/test_lessons_wheel.py", "tests/test_lesson_terminal.py"}  # a module; a fixture (tmux)
    assert quick == {"tests/test_store.py"}


def _source(module: str) -> str:
    return (ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")


def test_every_slow_rule_names_a_module_fixture_or_test_that_exists():
    """A renamed or moved fixture or test would silently drop out of the slow set and slow the quick one."""
    assert all(_source(module) for module in SLOW_MODULES)
    for module, name in SLOW_FIXTURES:
        assert re.search(rf"^def {name}\(|name=\"{name}\"", _source(module), re.M), (module, name)
    for module, name in [*SLOW_TESTS, *SWEEPS]:
        assert re.search(rf"^def {name}\(", _source(module), re.M), (module, name)
    for slug in SLOW_LESSONS:
        assert list((ROOT / "lessons").glob(f"[0-9][0-9]-{slug}.md")), slug


def test_every_sweep_keeps_a_case_in_the_quick_set_and_moves_the_rest_to_the_slow_one():
    """A renamed lesson or demo would leave a sweep with no case in the quick set: nothing of it would run there."""
    for module, name in SWEEPS:
        if (module, name) in SWEEPS_KEPT:  # collected in this session (the whole suite or the quick set)
            assert SWEEPS_KEPT[module, name], f"{module}::{name}: no case matches {SWEEPS[module, name]!r}"
    missing = sorted({module for module, name in SWEEPS if (module, name) not in SWEEPS_KEPT})
    if missing:  # this file run on its own: collect the sweeps' modules
        files = [module.replace(".", "/") + ".py" for module in missing]
        quick, slow = _collected_ids("-m", "not slow", *files), _collected_ids("-m", "slow", *files)
        for module, name in SWEEPS:
            if module in missing:
                test = f"{module.replace('.', '/')}.py::{name}["
                assert any(i.startswith(test) for i in quick), f"{test}: no case in the quick set"
                assert any(i.startswith(test) for i in slow), f"{test}: no case in the slow set"
