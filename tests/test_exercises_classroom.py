"""``exercise grade``: a generated class of 30 (right answers, named mistakes, hostile files), graded at once.

Every verdict must be the one ``exercise check`` gives on the same file; the
gradebook, the feedback and the summary must say what the graded files did; the
hostile ones must fail closed, leaving no process and no unpacked file behind.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from microgradnorm.commands import UsageError
from microgradnorm.commands.exercise_classroom import TRUST_FLAG
from microgradnorm.exercises import classroom
from microgradnorm.exercises.catalog import get_exercise
from microgradnorm.i18n import cli_language
from tests.grading import ANSWERS, changed, live_child_processes
from tests.helpers import run_exercise
from tests.sandboxing import need_bubblewrap, without_bubblewrap
from tests.test_exercises_grader import DIAGNOSES
from tests.test_exercises_hostile import ATTACKS, _source

pytestmark = pytest.mark.slow

TIMEOUT = 5.0
MEAN_PATH = ("mean_part = dxhat.mean(axis=-1, keepdims=True)  # B,T,1: the path through the mean", "mean_part = 0.0")
SAME_MISTAKE = 4  # students who all leave out the path through the mean: the summary must count them


def _class() -> dict[str, tuple[int, str, str]]:
    """student -> (exercise number, source, what it is: right, a DIAGNOSES id, or hostile)."""
    students: dict[str, tuple[int, str, str]] = {}
    for number in (1, 2, 4, 6, 8, 9, 10, 11):  # independent right answers
        students[f"right-{number:02d}"] = (number, (ANSWERS / get_exercise(number).filename).read_text(), "right")
    for p in DIAGNOSES[:14]:
        number, *rest, _words = p.values
        changes = [tuple(rest)] if all(isinstance(r, str) for r in rest) else rest
        students[f"mistake-{p.id}"] = (number, changed(number, *changes), p.id)
    for i in range(SAME_MISTAKE):
        students[f"mean-path-{i}"] = (5, changed(5, MEAN_PATH), "mean-path")
    hostile = {a.id: a for a in ATTACKS}
    for attack_id in ("cpu-burn", "fork-bomb", "forged-result-frame", "numpy-raw-memory"):
        attack = hostile[attack_id]
        students[f"hostile-{attack_id}"] = (attack.number, _source(attack), "hostile")
    return students


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    need_bubblewrap()
    root = tmp_path_factory.mktemp("class")
    submissions = root / "submissions"
    submissions.mkdir()
    students = _class()
    for student, (number, source, _kind) in students.items():
        folder = submissions / student
        folder.mkdir()
        (folder / get_exercise(number).filename).write_text(source, encoding="utf-8")
    # a student who links their file to one they could not read themselves
    secret = root / "root-only.txt"
    secret.write_text("a line of a root-only file\n")
    (submissions / "hostile-link").mkdir()
    (submissions / "hostile-link" / get_exercise(4).filename).symlink_to(secret)
    # a student who hands in a zip: a right answer, a path that climbs out, and a member too large to be source
    with zipfile.ZipFile(submissions / "zipped.zip", "w") as z:
        z.writestr("work/" + get_exercise(7).filename, get_exercise(7).solution.read_text())
        z.writestr("../../escaped/" + get_exercise(3).filename, "print('climbed out')\n")
        z.writestr("big/" + get_exercise(2).filename, "# " + "x" * (2**20 + 10))
    (submissions / "notes.txt").write_text("not a submission\n")
    assert len(students) + 2 == 32  # 30 from the list, the link and the zip (three files in it)
    out = root / "report"
    temp_before = set(os.listdir(tempfile.gettempdir()))
    argv = ["exercise", "grade", str(submissions), "--out", str(out), "--timeout", str(TIMEOUT), "--jobs", "2"]
    start = time.monotonic()
    code, said = _run(argv)
    seconds = time.monotonic() - start
    print(f"\nexercise grade: {len(students) + 2} students, {seconds:.1f} s wall on {os.cpu_count()} CPUs")
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - temp_before if n.startswith("microgradnorm-class-")}
    return {"code": code, "said": said, "out": out, "students": students, "submissions": submissions,
            "seconds": seconds, "left": left}  # fmt: skip


def _run(argv: list[str]) -> tuple[int, str]:
    """The command as ``microgradnorm`` runs it (its --lang chosen first), printing into a string."""
    with cli_language(argv):
        return run_exercise(*argv[1:])


def _gradebook(out: Path) -> list[dict[str, str]]:
    with open(out / "grades.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_the_gradebook_has_a_row_per_file_with_the_columns_asked_for(graded):
    assert graded["code"] == 0, graded["said"]
    rows = _gradebook(graded["out"])
    assert list(rows[0]) == ["student", "exercise", "passed", "mistakes", "seconds"]
    by_student = {r["student"]: r for r in rows if r["student"] != "zipped"}
    assert len(rows) == len(graded["students"]) + 1 + 3  # the link, the zip's three scaffold-named members
    for student, (number, _text, kind) in graded["students"].items():
        row = by_student[student]
        assert row["exercise"] == get_exercise(number).name
        assert row["passed"] == ("true" if kind == "right" else "false"), (student, row)
        assert float(row["seconds"]) > 0
    assert by_student["hostile-link"]["passed"] == "false"
    zipped = {r["exercise"]: r["passed"] for r in rows if r["student"] == "zipped"}
    # the right answer passes; the climbing path is graded where it was put; the big one refused
    assert zipped == {get_exercise(7).name: "true", get_exercise(3).name: "false", get_exercise(2).name: "false"}
    records = json.loads((graded["out"] / "grades.json").read_text())
    assert [(r["student"], r["exercise"]) for r in records] == [(r["student"], r["exercise"]) for r in rows]


def test_the_named_mistakes_are_stable_keys_and_the_summary_counts_students(graded):
    rows = {r["student"]: r for r in _gradebook(graded["out"])}
    keys = {rows[f"mean-path-{i}"]["mistakes"] for i in range(SAME_MISTAKE)}
    assert keys == {"mean_path_missing"}, keys  # the same key for the same mistake, whoever made it
    named = [r for s, r in rows.items() if s.startswith("mistake-")]
    assert all(re.fullmatch(r"[a-z0-9_]+(;[a-z0-9_]+)*", r["mistakes"]) for r in named), named
    flat = " ".join(graded["said"].split())
    fives = sum(number == 5 for number, *_rest in graded["students"].values())  # who handed in exercise 5
    mean_path = "the path through the mean is missing"
    feedback = graded["out"] / "feedback"
    made = sum(f"• {mean_path}:" in (feedback / f"{s}.txt").read_text() for s in rows)  # each student once
    assert made >= SAME_MISTAKE
    assert f"{made} of {fives} (05_layernorm_backward.py): {mean_path}" in flat, flat[-2000:]
    assert flat.count(f"(05_layernorm_backward.py): {mean_path}") == 1  # one line, however many keys say it
    assert "05_layernorm_backward.py" in flat and "notes.txt: not a folder or a .zip" in flat


def test_every_verdict_is_the_one_exercise_check_gives_on_the_same_file(graded, tmp_path):
    """``check`` on each file, in a workspace of its own: same pass or fail, same named mistakes."""
    feedback = graded["out"] / "feedback"
    for student, (number, _text, kind) in graded["students"].items():
        if kind == "hostile":  # their verdicts are in the corpus's own tests; here, the graded answers
            continue
        folder = tmp_path / student
        folder.mkdir()
        ex = get_exercise(number)
        shutil.copy(graded["submissions"] / student / ex.filename, folder / ex.filename)
        code, said = _run(["exercise", "check", str(number), "--dir", str(folder), "--timeout", str(TIMEOUT)])
        assert (code == 0) == (kind == "right"), (student, said)
        shown = (feedback / f"{student}.txt").read_text(encoding="utf-8")
        assert _titles(said) == _titles(shown), student


def _titles(text: str) -> set[str]:
    return {line.strip()[2:].split(":")[0] for line in text.splitlines() if line.strip().startswith("• ")}


def test_hostile_files_fail_closed_and_leave_nothing_behind(graded):
    rows = {r["student"]: r for r in _gradebook(graded["out"])}
    assert all(rows[s]["passed"] == "false" for s in rows if s.startswith("hostile-"))
    assert live_child_processes() == []
    assert graded["left"] == set()  # the zips' folder is removed
    assert not (graded["submissions"].parent / "escaped").exists()
    link = (graded["out"] / "feedback" / "hostile-link.txt").read_text()
    assert "outside its folder" in " ".join(link.split()) and "root-only" not in link.replace("root-only.txt", "")


def test_feedback_is_written_in_the_language_asked_for(tmp_path):
    need_bubblewrap()
    submissions = tmp_path / "s"
    (submissions / "ana").mkdir(parents=True)
    (submissions / "ana" / get_exercise(5).filename).write_text(changed(5, MEAN_PATH), encoding="utf-8")
    code, said = _run(["exercise", "grade", str(submissions), "--out", str(tmp_path / "r"), "--lang", "zh-CN"])
    text = (tmp_path / "r" / "feedback" / "ana.txt").read_text(encoding="utf-8")
    assert code == 0 and re.search(r"[\u4e00-\u9fff]", text) and re.search(r"[\u4e00-\u9fff]", said), text


def test_without_bubblewrap_it_refuses_unless_the_teacher_says_they_trust_the_code(tmp_path, monkeypatch):
    without_bubblewrap(monkeypatch)
    submissions = tmp_path / "s"
    (submissions / "ana").mkdir(parents=True)
    (submissions / "ana" / get_exercise(4).filename).write_text(get_exercise(4).solution.read_text())
    code, said = _run(["exercise", "grade", str(submissions), "--out", str(tmp_path / "r")])
    assert code == 2 and TRUST_FLAG in said and not (tmp_path / "r").exists(), said
    code, said = _run(["exercise", "grade", str(submissions), "--out", str(tmp_path / "r"), TRUST_FLAG])
    assert code == 0 and _gradebook(tmp_path / "r")[0]["passed"] == "true", said


def test_a_zip_gives_only_its_scaffold_named_regular_files(tmp_path):
    """Unit: a link member, a directory member and an unrelated file are left out; nothing is written outside."""
    path = tmp_path / "bo.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a/" + get_exercise(1).filename, "x = 1\n")
        link = zipfile.ZipInfo(get_exercise(2).filename)
        link.external_attr = (0o120777) << 16  # a symbolic link to /etc/shadow
        z.writestr(link, "/etc/shadow")
        z.writestr("readme.md", "hello")
        z.writestr("dir/", "")
    unpack = tmp_path / "unpack"
    unpack.mkdir()
    found = classroom.collect(tmp_path, unpack)
    assert [(w.student, w.exercise.number) for w in found.work] == [("bo", 1)]
    assert all(not p.is_symlink() for p in unpack.rglob("*"))


def test_a_report_folder_with_anything_in_it_is_refused_and_kept(tmp_path):
    """A previous gradebook (or any file of the teacher's) in --out is never overwritten."""
    (tmp_path / "s" / "ana").mkdir(parents=True)
    report = tmp_path / "r"
    report.mkdir()
    (report / "grades.csv").write_text("my own notes\n")
    with pytest.raises(UsageError, match="--out: expected a new or empty folder"):
        _run(["exercise", "grade", str(tmp_path / "s"), "--out", str(report)])
    assert (report / "grades.csv").read_text() == "my own notes\n"


def test_a_student_name_with_brackets_is_written_as_it_is_not_read_as_markup():
    assert "Feedback for ann [red]x [/]" in classroom.feedback("ann [red]x [/]", [])
