"""The exercise workflow: workspace, progress, and every ``microgradnorm exercise`` action.

Commands are run through the real parser with a recording console and an input
stream passed in; the state directory is a temporary one for every test.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from microgradnorm import cli
from microgradnorm.commands import exercise as command
from microgradnorm.exercises import messages, render
from microgradnorm.exercises import workspace as ws
from microgradnorm.exercises.catalog import EXERCISES, get_exercise
from microgradnorm.store import state_dir
from tests.grading import changed, solution
from tests.helpers import rendered, run_cli
from tests.helpers import run_exercise as run


@pytest.fixture
def folder(tmp_path) -> Path:
    target = tmp_path / "mine"
    code, _ = run("init", str(target))
    assert code == 0
    return target


def solve(folder: Path, number: int, *changes: tuple[str, str]) -> Path:
    """Exercise ``number``'s file in ``folder`` made its reference solution, with each (old, new) change made."""
    path = folder / get_exercise(number).filename
    path.write_text(changed(number, *changes), encoding="utf-8")
    return path


def record_passed(*numbers: int) -> None:
    """Progress says exercises ``numbers`` (every one, without any) were passed."""

    def passed(progress):
        for ex in EXERCISES:
            if ex.number in numbers or not numbers:
                progress.record(ex)["passed"] = True

    ws.update_progress(passed)


# ---- init and the workspace ----------------------------------------------------------------


def test_init_copies_every_scaffold_and_remembers_the_workspace(folder):
    for ex in EXERCISES:
        assert (folder / ex.filename).read_bytes() == ex.scaffold_text.encode("utf-8")
    assert ws.load_progress().workspace == str(folder.resolve())


def test_init_never_overwrites_an_edited_file(folder):
    mine = folder / EXERCISES[4].filename
    mine.write_text("# my own attempt, half done\n", encoding="utf-8")
    (folder / EXERCISES[0].filename).unlink()
    report = ws.init_workspace(folder)
    assert (report.kept, report.copied) == ([EXERCISES[4].filename], [EXERCISES[0].filename])
    assert mine.read_text(encoding="utf-8") == "# my own attempt, half done\n"
    assert (folder / EXERCISES[0].filename).read_bytes() == EXERCISES[0].scaffold_text.encode("utf-8")


def test_init_again_points_to_the_next_unpassed_exercise(folder):
    named = [ex.filename for ex in EXERCISES if ex.filename in run("init", str(folder))[1]]
    assert named == [EXERCISES[0].filename]  # every file is there: only the one to start with is named
    solve(folder, 1)
    run("check", "1")
    out = " ".join(run("init", str(folder))[1].split())
    named = [ex.filename for ex in EXERCISES if ex.filename in out]
    assert named == [EXERCISES[0].filename, EXERCISES[1].filename]  # 01 kept as the learner wrote it
    assert out.rindex(EXERCISES[1].filename) > out.rindex(EXERCISES[0].filename)  # and 02 is where to go on


def test_init_default_directory_is_under_the_current_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _ = run("init")
    assert code == 0
    assert (tmp_path / ws.DEFAULT_WORKSPACE / EXERCISES[0].filename).is_file()


def test_init_into_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    with pytest.raises(ValueError, match="DIR: expected a directory"):
        run("init", str(target))


def test_commands_need_a_workspace_and_say_how_to_make_one():
    with pytest.raises(ValueError, match="exercise init"):
        run("check")


def test_dir_option_overrides_the_remembered_workspace(folder, tmp_path):
    other = tmp_path / "other"
    ws.init_workspace(other)  # now remembered
    solve(folder, 1)
    code, out = run("check", "1", "--dir", str(folder))
    assert code == 0, out
    with pytest.raises(ValueError, match="--dir: expected an exercise workspace directory"):
        run("check", "--dir", str(tmp_path / "missing"))


# ---- list and check --------------------------------------------------------------------------


def test_list_shows_progress(folder):
    code, out = run("list")
    assert code == 0
    assert "0/11 done" in out and "next: 01_local_derivatives" in out
    solve(folder, 1)
    run("check")
    code, out = run("list")
    assert "1/11 done" in out and "✓ done" in out
    assert "next: 02_mean_variance_backward" in out


def test_check_grades_the_next_unsolved_and_records_it(folder):
    code, out = run("check")
    assert code == 1
    assert "01_local_derivatives" in out and "Not written yet" in out
    solve(folder, 1)
    code, out = run("check")
    assert code == 0
    assert "Every check passed" in out and "Next: 02_mean_variance_backward" in out
    progress = ws.load_progress()
    assert progress.passed(EXERCISES[0])
    assert progress.exercises["01_local_derivatives"]["attempts"] == 2
    code, out = run("check")  # moves on only because the learner asked for another check
    assert "02_mean_variance_backward" in out


def test_check_by_name_and_a_pass_is_kept(folder):
    path = solve(folder, 7)
    assert run("check", "batchnorm_simplified")[0] == 0
    path.write_text(get_exercise(7).scaffold_text)
    assert run("check", "7")[0] == 1
    assert ws.load_progress().passed(get_exercise(7))


def test_check_with_a_seed_repeats_its_inputs(folder):
    _, first = run("check", "1", "--seed", "42")
    _, second = run("check", "1", "--seed", "42")
    assert "seed 42" in first and first == second


NAME = "NAME: expected an exercise number"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["hint", "nonsense"], ["microgradnorm exercise list"]),  # an unknown name
        (["check", "nonsense"], ["microgradnorm exercise list"]),
        (["check", "1", "--memory", "30"], ["argument --memory: expected MiB from 256 to 1048576, got 30"]),
        (["check", "1", "--memory", "99999999999999"], ["argument --memory: expected MiB from 256 to 1048576"]),
        (["check", "1", "--timeout", "1e12"], ["argument --timeout: expected at most 3600 seconds, got 1e12"]),
        (["check", "1", "--timeout", "0"], ["argument --timeout: expected a positive number of seconds"]),
        (["check", ""], [NAME, "got ''"]),
        (["check", "²"], [NAME, "got '²'"]),  # '²' is a digit to str.isdigit, but int() refuses it
        # a usage error of an action points to that action's help
        (["watch", "5", "6"], ["microgradnorm exercise watch: error:", "(see microgradnorm exercise watch --help)"]),
        (["list", "extra"], ["microgradnorm exercise list: error:", "(see microgradnorm exercise list --help)"]),
        (["hint"], ["microgradnorm exercise hint: error:", "(see microgradnorm exercise hint --help)"]),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(folder, capsys, argv, words):
    code, _, err = run_cli(capsys, "exercise", *argv)
    assert code == 2 and err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def test_a_file_given_as_the_workspace_or_a_folder_as_the_exercise_is_named_as_such(folder, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--dir: .*\(a file, not a directory\)"):
        run("check", "2", "--dir", str(a_file))
    path = ws.learner_file(folder, get_exercise(2))
    path.unlink()
    path.mkdir()
    code, out = run("check", "2")
    assert code == 1 and "is a directory, not your exercise file" in " ".join(out.split())


def test_the_newest_hint_shows_its_maths_as_written(folder):
    for _ in range(3):
        _, out = run("hint", "1")
    flat = " ".join(out.split())
    assert "d(a**p)/da = p * a**(p - 1)" in flat  # Markdown would have eaten the ** as bold markers


def test_a_solution_piped_into_a_file_is_the_runnable_file(folder):
    code, out = run("solution", "1", "--force")  # run() prints into a StringIO: not a terminal
    assert code == 0 and out == solution(1)
    compile(out, "solution.py", "exec")


@pytest.mark.parametrize(
    "argv, words", [(["check"], "Every exercise is done"), (["watch", "--interval", "0.05"], "Nothing to watch")]
)
def test_with_every_exercise_done_check_and_watch_say_so(folder, argv, words):
    record_passed()
    code, out = run(*argv)
    assert code == 0 and words in out


# ---- hints, solutions, reset ------------------------------------------------------------------


def test_hints_come_one_at_a_time_and_are_remembered(folder):
    _, out = run("hint", "5")
    assert "(1 of 4)" in out and ws.load_progress().hints_shown(get_exercise(5)) == 1
    _, out = run("hint", "5")
    assert "(2 of 4)" in out
    for _ in range(5):
        _, out = run("hint", "5")
    assert "(4 of 4)" in out and "That was the last hint" in out
    assert ws.load_progress().hints_shown(get_exercise(5)) == 4


def test_solution_only_after_passing_or_with_force(folder):
    code, out = run("solution", "1")
    assert code == 1 and "not passed yet" in out and "--force" in out  # with it: test_a_solution_piped_into_...
    solve(folder, 1)
    run("check", "1")
    code, out = run("solution", "1", terminal=True)
    assert code == 0 and "Reference solution" in out


def test_reset_asks_first_and_keeps_a_backup(folder):
    path = solve(folder, 1)
    run("check", "1")
    mine = path.read_text(encoding="utf-8")
    code, out = run("reset", "1", stdin="n\n")
    assert code == 1 and "Not reset" in out
    assert "[y/N]" in out  # the answers it takes are shown, not eaten as markup
    assert path.read_text(encoding="utf-8") == mine
    code, out = run("reset", "1", stdin="")  # no answer at all is no
    assert code == 1 and path.read_text(encoding="utf-8") == mine
    code, out = run("reset", "1", stdin="y\n")
    assert code == 0
    assert path.read_bytes() == get_exercise(1).scaffold_text.encode("utf-8")
    backups = list((state_dir() / "exercise-backups").glob("01_local_derivatives.*.py"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == mine
    assert str(backups[0]) in out.replace("\n", "")
    assert ws.load_progress().passed(get_exercise(1))  # a pass is kept: reset is for practising again
    code, out = run("solution", "1")
    assert code == 0 and "not passed yet" not in out


def test_reset_yes_skips_the_question(folder):
    path = solve(folder, 2)
    code, _ = run("reset", "2", "--yes")
    assert code == 0
    assert path.read_bytes() == get_exercise(2).scaffold_text.encode("utf-8")


# ---- progress safety -------------------------------------------------------------------------


def test_progress_survives_a_restart_as_json(folder):
    solve(folder, 1)
    run("check")
    run("hint", "2")
    data = json.loads((state_dir() / ws.PROGRESS_FILE).read_text(encoding="utf-8"))
    assert data["exercises"]["01_local_derivatives"]["passed"] is True
    assert data["exercises"]["02_mean_variance_backward"]["hints"] == 1


@pytest.mark.parametrize("garbage", ['{"exercises": {"01_lo', "[1, 2, 3]", '{"exercises": [1]}'])
def test_a_corrupt_progress_file_is_reported_and_set_aside(folder, garbage):
    path = state_dir() / ws.PROGRESS_FILE
    path.write_text(garbage, encoding="utf-8")
    code, out = run("list")
    assert code == 0
    assert "warning:" in out and "set aside" in out
    aside = list(state_dir().glob(f"{ws.PROGRESS_FILE}.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text(encoding="utf-8") == garbage


def test_a_write_killed_midway_leaves_the_old_progress(folder, monkeypatch):
    solve(folder, 1)
    run("check")
    path = state_dir() / ws.PROGRESS_FILE
    before = path.read_text(encoding="utf-8")

    def dies(*args, **kwargs):
        raise KeyboardInterrupt  # the process is stopped between writing and renaming

    monkeypatch.setattr(os, "replace", dies)
    with pytest.raises(KeyboardInterrupt):
        ws.record_hint(get_exercise(3), 4)
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == before
    assert not [p for p in state_dir().iterdir() if p.name.endswith(".tmp")]


# ---- watch -----------------------------------------------------------------------------------


class _Watch:
    """``exercise watch`` in a thread, fed commands through a real pipe."""

    def __init__(self, folder: Path, *names: str) -> None:
        self.buf = io.StringIO()
        self.console = Console(file=self.buf, width=120, color_system=None)
        read_fd, self.write_fd = os.pipe()
        self.stdin = os.fdopen(read_fd, "r")
        argv = ["exercise", "watch", *names, "--interval", "0.05", "--dir", str(folder)]
        args = cli.build_parser().parse_args(argv)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, args=(args,), daemon=True)
        self.thread.start()

    def _run(self, args) -> None:
        self.code = command.main(args, self.console, self.stdin)

    def send(self, line: str) -> None:
        os.write(self.write_fd, (line + "\n").encode())

    def wait_for(self, text: str, count: int = 1, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.buf.getvalue()
            if " ".join(out.split()).count(text) >= count:  # rich may wrap a long line anywhere
                return out
            time.sleep(0.02)
        raise AssertionError(f"{text!r} did not appear; output so far:\n{self.buf.getvalue()}")

    def stop(self) -> int | None:
        self.send("q")
        self.thread.join(timeout=30)
        os.close(self.write_fd)
        self.stdin.close()
        return self.code


def test_watch_rechecks_on_save_and_moves_on_only_when_asked(folder):
    w = _Watch(folder)
    try:
        w.wait_for("Current exercise: 01_local_derivatives")
        w.send("n")  # not passed yet: no moving on
        w.wait_for("is not passed yet")
        solve(folder, 1)
        out = w.wait_for("Type n and Enter to move on to 02_mean_variance_backward")
        assert "Every check passed" in out
        time.sleep(0.3)  # several more polls: still on exercise 01
        assert "Current exercise: 02" not in " ".join(w.buf.getvalue().split())
        w.send("h")
        w.wait_for("Hints for 01_local_derivatives (1 of 4)")
        w.wait_for("Press h and Enter again for hint 2.")  # not "run the same command": this is watch
        w.send("n")
        w.wait_for("Current exercise: 02_mean_variance_backward")
        # saving the scaffold of 02 unchanged still counts as a save: it is checked, and fails
        path = folder / get_exercise(2).filename
        path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
        w.wait_for("Not written yet")
    finally:
        code = w.stop()
    assert code == 0
    assert ws.load_progress().passed(get_exercise(1))


def test_after_a_pass_watch_names_the_exercise_that_n_opens(folder):
    """Passed: 01, 02 and 05. Watch takes a name as check does (4, where the next unpassed is 03); passing 04 then:
    n opens 06 (the next unpassed after 04), and the message says so."""
    record_passed(1, 2, 5)
    w = _Watch(folder, "4")
    try:
        w.wait_for("Current exercise: 04_affine_backward")
        solve(folder, 4)
        w.wait_for("Type n and Enter to move on to 06_batchnorm_staged")
        w.send("n")
        w.wait_for("Current exercise: 06_batchnorm_staged")
    finally:
        assert w.stop() == 0


@pytest.mark.parametrize("width", [60, 80, 120])
def test_list_keeps_what_each_exercise_is_about_readable(folder, width):
    _, out = run("list", width=width)
    flat = " ".join(out.split())
    for ex in EXERCISES:
        assert f"{ex.title}: {ex.topic}" in flat, (width, ex.name)
    assert " ".join(str(render._LEGEND).replace("`", "").split()) in flat
    assert max(len(line) for line in out.splitlines()) <= width


def test_a_hint_is_wrapped_once_at_the_terminal_width(folder):
    """Its own line breaks are gone: no line inside a paragraph is left with a word or two."""
    from microgradnorm.exercises.catalog import hints
    from microgradnorm.exercises.render import hint_view

    ex = get_exercise(2)
    shown = rendered(hint_view(ex, hints(ex), len(hints(ex))), width=80)
    for hint in hints(ex):
        for paragraph in hint.split("\n"):
            words = paragraph.split()
            lines = [re.sub(r"^\d+\.\s+", "", ln.strip()) for ln in shown.splitlines()]  # "2. text"
            start = next(i for i, ln in enumerate(lines) if ln.startswith(" ".join(words[:3])))
            body = []
            for ln in lines[start:]:
                body.append(ln)
                if " ".join(body).split() == words:
                    break
            assert " ".join(body).split() == words
            assert all(len(ln) > 40 for ln in body[:-1]), body


# ---- the fix revealed in stages (issue 28 item 2) ----------------------------------------------------------


def test_a_first_failure_names_the_slip_and_holds_back_the_formula_until_it_comes_back(folder):
    solve(folder, 1, ("return p * a ** (p - 1.0) * dout", "return p * a**p * dout"))
    formula = "p * a**(p-1)"
    code, first = run("check", "1")
    flat = " ".join(first.split())
    assert code == 1
    assert messages.title("pow_not_lowered", {}) in flat  # the slip is named at once
    assert formula not in flat and "held back on purpose" in flat and "exercise hint 1" in flat
    code, again = run("check", "1")
    assert code == 1 and formula in " ".join(again.split())  # the same mistake again: now the fix
    assert "pow_not_lowered" in ws.load_progress().exercises["01_local_derivatives"]["seen"]


# ---- small ones: reset of an untouched file, the diff after a pass, one "next", a moved workspace --------------


def test_reset_of_an_untouched_file_asks_nothing_and_says_no_backup_was_needed(folder):
    code, out = run("reset", "3", stdin="")  # no answer given: none is needed, nothing of the learner's is lost
    assert code == 0 and "[y/N]" not in out
    assert "no backup was needed" in " ".join(out.split())
    assert not (state_dir() / "exercise-backups").exists()


def test_solution_diff_after_a_pass_shows_only_what_differs(folder):
    solve(folder, 4, ("dbeta = dy.sum(axis=lead)  # D", "dbeta = np.sum(dy, axis=lead)"))
    assert run("check", "4")[0] == 0
    code, out = run("solution", "4", "--diff")
    assert code == 0
    assert "-    dbeta = np.sum(dy, axis=lead)" in out and "+    dbeta = dy.sum(axis=lead)  # D" in out
    assert "def affine_backward" not in out  # only the lines around the change, not the whole file
    solve(folder, 4)
    assert "line for line" in run("solution", "4", "--diff", terminal=True)[1]


def test_check_and_watch_mean_the_same_next(folder):
    """Issue 27 item 20: passing 5 with 1 and 2 unpassed, check's "Next" is 06, as watch's n."""
    solve(folder, 5)
    code, out = run("check", "5")
    flat = " ".join(out.split())
    named = [ex.number for ex in EXERCISES if ex.name in flat]
    assert code == 0 and named == [5, 6] and "exercise check 6" in flat  # graded 5; next, 6 (not 1 or 2)
    assert "  Next" not in out


def test_a_moved_workspace_is_reported_by_list_as_check_reports_it(folder, tmp_path):
    folder.rename(tmp_path / "moved")
    with pytest.raises(ValueError) as gone:
        run("check", "1")
    _, out = run("list")
    flat = " ".join(out.split())
    assert "No workspace yet" not in flat and str(folder) in flat and "is gone" in flat
    assert "is gone" in str(gone.value)


def test_a_report_at_80_columns_keeps_the_seed_whole_and_hangs_its_bullets(folder):
    right = "var = (xshift * xshift).mean(axis=-1, keepdims=True)  # B,T,1"
    solve(folder, 5, (right, "var = xshift.var(axis=-1, ddof=1, keepdims=True)"))
    run("check", "5")  # the first time the explanation is held back; the second shows it
    _, out = run("check", "5", "--seed", "1234567", width=80)
    lines = out.splitlines()
    assert any(line.strip() == "inputs of --seed 1234567" for line in lines)
    bullets = [i for i, line in enumerate(lines) if line.startswith("  • ")]
    assert bullets
    following = lines[bullets[0] + 1]
    assert following.startswith("    ") and not following.startswith("     ")  # under the text, not the bullet
    flat = " ".join(out.split())
    assert messages.title("unbiased_variance", {}) + ": " in flat and "n - 1 = 4" in flat  # named, with its detail
