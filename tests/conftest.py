"""Shared test setup: Hypothesis profiles (a quick default, a thorough 'ci' profile), a private state folder
and English for every test, the Graphviz fixtures. Helpers that tests call live in ``tests/helpers.py``."""

from __future__ import annotations

import errno
import gc
import itertools
import os
import re
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# the quick set (`pytest -m "not slow"`) draws fewer examples; a test's own @settings(max_examples=...) still wins
settings.register_profile("quick", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config):
    """`-m "not slow"` without a chosen profile (HYPOTHESIS_PROFILE, --hypothesis-profile) loads the quick one."""
    chosen = os.environ.get("HYPOTHESIS_PROFILE") or config.getoption("hypothesis_profile", None)
    if not chosen and " ".join(config.getoption("markexpr", "").split()) == "not slow":
        settings.load_profile("quick")


@pytest.fixture
def needs_dot():
    """Skip without Graphviz's dot program, or fail if MICROGRADNORM_REQUIRE_DOT=1 (as in CI)."""
    if shutil.which("dot") is None:
        if os.environ.get("MICROGRADNORM_REQUIRE_DOT") == "1":
            pytest.fail("MICROGRADNORM_REQUIRE_DOT=1 but Graphviz's dot program is not on PATH")
        pytest.skip("Graphviz's dot program is not installed")


@pytest.fixture
def empty_path(tmp_path, monkeypatch):
    """A PATH on which there is no dot program (nor anything else)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return str(empty)


@pytest.fixture(autouse=True)
def _english_by_default(monkeypatch):
    """Tests expect English messages unless they choose a language, whatever the machine's locale."""
    monkeypatch.setenv("MICROGRADNORM_LANG", "en")


_STATE_FOLDERS = itertools.count()


@pytest.fixture(scope="session")
def _state_root(tmp_path_factory):
    return tmp_path_factory.mktemp("states")


@pytest.fixture(autouse=True)
def state_home(request, _state_root, monkeypatch):
    """Every test gets its own state folder (progress, workspace pointer), never the learner's real one;
    no debug tracebacks and no lesson folder override from the machine. Request it to get its path.

    The folder does not exist until the package makes it: ``tmp_path / "state"`` for a test that uses
    ``tmp_path``, else a fresh name in one folder of the session (most tests never write there, and making and
    removing a ``tmp_path`` folder for each of thousands of tests took seconds)."""
    if "tmp_path" in request.fixturenames:
        home = request.getfixturevalue("tmp_path") / "state"
    else:
        home = _state_root / str(next(_STATE_FOLDERS))
    monkeypatch.setenv("MICROGRADNORM_HOME", str(home))
    monkeypatch.delenv("MICROGRADNORM_DEBUG", raising=False)
    monkeypatch.delenv("MICROGRADNORM_LESSONS", raising=False)
    return home


@pytest.fixture
def shared_demos(monkeypatch):
    """The lesson runner's demos run once per session (``helpers.run_demo_once``) while the test runs: for the
    sweeps that only read what every lesson's demos show."""
    from microgradnorm.lessons import runner
    from tests.helpers import run_demo_once

    monkeypatch.setattr(runner, "run_demo", run_demo_once)


@pytest.fixture
def read_only_state(state_home, monkeypatch):
    """The state folder exists, holds what was saved, and refuses new files, as a folder made immutable
    (``chattr +i``, EPERM) or not the learner's (EACCES) does. Not by chmod, which root ignores: every file
    the package writes there is created by ``tempfile.mkstemp`` (atomic writes and the writability probe),
    so that is where the folder says no."""
    state_home.mkdir(parents=True, exist_ok=True)
    real = tempfile.mkstemp

    def refuse(*args, **kwargs):
        folder = kwargs.get("dir", args[2] if len(args) > 2 else None)
        if folder is not None and os.path.realpath(folder) == os.path.realpath(state_home):
            raise PermissionError(errno.EPERM, "Operation not permitted", os.path.join(str(folder), "x"))
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    return state_home


# ---- the slow set ---------------------------------------------------------------------------------------
# `pytest -m "not slow"` is the quick set a contributor runs while working; CI runs everything. A test is
# slow by what it uses, so new tests of these kinds are marked without anyone remembering to: a fixture
# (by the module that defines it), a whole module whose every test does the slow thing, or, where one test
# of a module is of a slow kind, that test by name; or a lesson. tests/test_conftest.py checks every name exists.
SLOW_FIXTURES = {
    ("tests.browser", "chromium"): "drives a real browser (Playwright)",  # defined there, imported by each module
    ("tests.test_lesson_terminal", "term"): "runs the CLI in a tmux terminal",
    ("tests.test_exercises_hostile", "results"): "grades the corpus of attacks in the sandbox",
    ("tests.test_exercises_grader", "graded"): "grades the corpus of planted mistakes in the sandbox",
    ("tests.test_exercises_authoring", "graded"): "grades every scaffold, solution and answer in the sandbox",
}
SLOW_MODULES = {
    "tests.test_lessons_wheel": "builds the wheel and installs it into a fresh virtual environment",
    "tests.test_exercises_terminal": "types into a shell in a tmux terminal",
    "tests.test_exercises_sandbox": "starts sandboxed processes (bubblewrap) for each case",
    "tests.test_lab": "trains networks",
    "tests.test_zh_lab": "trains networks",
    "tests.test_torch_lab": "trains networks with PyTorch",
    "tests.test_page_notebook": "runs notebooks in a Jupyter kernel",
}
EVERY_FILE = "runs every exercise file as a Python process"
SLOW_TESTS = {
    ("tests.test_i18n_catalogs", "test_a_clean_clone_builds_a_wheel_that_ships_the_compiled_catalogs"): "a wheel",
    ("tests.test_engine", "test_a_chain_of_a_million_nodes_backpropagates_without_recursion"): "a million nodes",
    ("tests.test_lessons", "test_every_option_a_lesson_takes_changes_what_it_shows"): "every lesson once per option",
    ("tests.test_torch_bridge", "test_opcheck_passes_for_the_custom_ops"): "traces the ops through AOTAutograd",
    ("tests.test_zh_exercises", "test_watch_in_chinese_in_a_real_terminal_at_60_columns"): "a tmux terminal",
    ("tests.test_exercises_authoring", "test_files_run_on_their_own"): EVERY_FILE,
    ("tests.test_exercises_authoring", "test_every_returned_quantity_is_in_the_file_s_own_self_check"): EVERY_FILE,
    ("tests.test_exercises_diagnosis", "test_no_diagnosis_blames_code_that_is_right"): "the corpus, on three seeds",
    ("tests.test_exercises_untrusted", "test_a_forged_result_frame_prints_a_bounded_failure"): "a 7 MB forged frame",
    ("tests.test_norms", "test_a_layer_norm_of_d_100000_backpropagates"): "a graph of 100,000 entries",
}
# a lesson whose demos are of a slow kind: every test parametrized by the lesson (its id ends in the lesson's name;
# a test of the lesson's file, parametrized by "NN-name.md", reads text only and stays quick)
SLOW_LESSONS = {"pre-ln-and-post-ln-in-training": "its demos train networks"}
# a sweep: one behaviour checked over every lesson (or every demo); the cases whose id matches the pattern stay in
# the quick set and stand for the rest, which are slow. Lesson 4 (LayerNorm's backward pass) is the course's core.
CORE = "04-layernorm-backward"
SWEEPS = {
    ("tests.test_lessons", "test_every_step_renders_at_60_and_100_columns_without_colour"): CORE,
    ("tests.test_lessons", "test_every_step_fits_one_screen_at_60_and_100_columns"): CORE,
    ("tests.test_lessons", "test_every_translated_step_fits_one_screen_at_60_and_100_columns"): f"zh-CN/{CORE}",
    ("tests.test_lessons", "test_every_lesson_asks_before_it_tells"): CORE,
    ("tests.test_lessons_verdicts", "test_lessons_1_to_9_ask_at_least_one_prediction_per_three_steps"): "4",
    ("tests.test_option_grid", "test_small_grid_no_mark_contradicts_its_numbers"): "lesson04",
    ("tests.test_option_grid", "test_small_grid_every_mark_and_answer_is_measured"): "lesson04",
    ("tests.test_zh_lessons", "test_every_step_and_what_its_demos_print_is_chinese_and_fits"): "04-.*",
    ("tests.test_zh_lessons", "test_a_demo_prints_chinese_with_the_same_numbers_as_its_english"): r"04-.*-defaults\d*",
    ("tests.test_lessons_residual", "test_the_closer_prediction_agrees_with_torch"): "0",  # one seed of three
    ("tests.test_zh_lessons", "test_every_question_and_choice_reads_in_chinese"): f"{CORE}.md",
    # one behaviour over several parameter sets: the quick set keeps the one at d = 2, eps = 0 (where LayerNorm's
    # Jacobian is 0), and test_lessons_demos' Hypothesis test draws random parameters there too
    ("tests.test_lessons_demos", "test_every_core_demo_passes_its_own_checks_for_other_parameters"): "d2-s0-e0",
    ("tests.test_lessons_advanced", "test_every_demo_renders_at_60_columns_without_colour"): "dim2-eps0",
}
# (module, test) of each sweep -> whether a case matching its pattern was collected (tests/test_conftest.py reads it)
SWEEPS_KEPT: dict[tuple[str, str], bool] = {}


def slow_reason(item: pytest.Item) -> str | None:
    """Why ``item`` is in the slow set (the first rule that applies), or None."""
    module = getattr(item.module, "__name__", "")
    why = SLOW_MODULES.get(module) or SLOW_TESTS.get((module, getattr(item, "originalname", item.name)))
    params = item.name[len(getattr(item, "originalname", item.name)) :]
    why = why or next((f"lesson {slug}: {said}" for slug, said in SLOW_LESSONS.items() if f"{slug}]" in params), None)
    sweep = SWEEPS.get((module, getattr(item, "originalname", item.name)))
    if sweep is not None and not why and not re.fullmatch(sweep, getattr(getattr(item, "callspec", None), "id", "")):
        why = f"one case of a sweep; the quick set keeps the cases {sweep}"
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in item.fixturenames:
        for fixturedef in defs.get(name, ()):
            why = why or SLOW_FIXTURES.get((getattr(fixturedef.func, "__module__", ""), name))
    return why


def pytest_collection_modifyitems(config, items):
    for item in items:
        key = (getattr(item.module, "__name__", ""), getattr(item, "originalname", item.name))
        if key in SWEEPS:
            kept = bool(re.fullmatch(SWEEPS[key], getattr(getattr(item, "callspec", None), "id", "")))
            SWEEPS_KEPT[key] = SWEEPS_KEPT.get(key, False) or kept
        why = slow_reason(item)
        if why is not None:
            item.add_marker(pytest.mark.slow(reason=why))


def pytest_collection_finish(session):
    """Move everything alive after collection (NumPy, PyTorch, the package, every test module) out of the garbage
    collector's sight: a full collection, which the benchmarks run between repeats, then walks only what the
    tests make. It took most of a tiny benchmark's time (0.3 to 0.9 s each on a heap holding PyTorch)."""
    gc.collect()
    gc.freeze()
