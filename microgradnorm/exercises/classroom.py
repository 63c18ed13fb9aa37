"""A teacher grades a whole class: every student's exercise files, each in its own sandbox, several at once.

``microgradnorm exercise grade SUBMISSIONS`` (``commands/exercise_classroom.py``)
calls these in order:

1. :func:`collect`: SUBMISSIONS holds one folder, or one ``.zip``, per
   student; in it, files named like the scaffolds (``04_affine_backward.py``).
   Nothing else is read. A zip is hostile input too: only its members with a
   scaffold's name are taken, each a regular file of at most
   :data:`~.grader.SOURCE_LIMIT` bytes, copied into a folder this process made
   (never extracted by the member's own path, so ``../`` and links go nowhere);
2. :func:`grade_class`: every file through :func:`.grader.grade`, the very
   function ``exercise check`` calls (so each verdict is the one ``check``
   gives on that file), on fresh inputs, several at once (each check is a
   child process of its own: the threads here only wait for them), so one
   student's endless loop costs that student's time limit and nothing more;
3. :func:`write_gradebook`: ``grades.csv`` and ``grades.json`` (one row per
   file: student, exercise, passed, the named mistakes as stable keys,
   seconds) and ``feedback/STUDENT.txt``, each check's report as the student
   would see it, in the language of the command;
4. :func:`class_summary`: pass rate per exercise and the mistakes most students
   made, for the next lecture.

Nothing here decides a verdict or knows a right answer.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from microgradnorm.exercises.catalog import EXERCISES, Exercise, get_exercise
from microgradnorm.exercises.grader import SOURCE_LIMIT, GradeResult, grade, one_line
from microgradnorm.i18n import _

__all__ = ["Collected", "Grade", "Work", "class_summary", "collect", "grade_class", "write_gradebook"]

BY_FILENAME = {ex.filename: ex for ex in EXERCISES}
ZIP_MEMBERS_LIMIT = 10_000  # entries of one student's zip looked at: a class's zips hold a few dozen


@dataclass(frozen=True)
class Work:
    """One file to grade: whose, which exercise, where."""

    student: str
    exercise: Exercise
    path: Path


@dataclass
class Collected:
    """What :func:`collect` found: the files to grade, and a note for everything it left out."""

    work: list[Work] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    students: list[str] = field(default_factory=list)


@dataclass
class Grade:
    """One graded file: a row of the gradebook."""

    student: str
    exercise: Exercise
    result: GradeResult
    seconds: float

    @property
    def passed(self) -> bool:
        return self.result.passed

    @property
    def mistakes(self) -> tuple[str, ...]:
        """The named mistakes (the findings' stable keys), each once, in the order they were found."""
        return tuple(dict.fromkeys(f.key for f in self.result.findings))


# ---- 1. the files ----------------------------------------------------------------------------------


def _student_name(entry: Path) -> str:
    return entry.name[: -len(".zip")] if entry.name.lower().endswith(".zip") else entry.name


def collect(submissions: Path, unpack_to: Path) -> Collected:
    """The files to grade in ``submissions`` (a folder per student, or a zip: unpacked into ``unpack_to``)."""
    out = Collected()
    entries = sorted(submissions.iterdir(), key=lambda p: p.name)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        student = _student_name(entry)
        if entry.is_dir() and not entry.is_symlink():
            files = _from_folder(entry, student)
        elif entry.is_file() and entry.name.lower().endswith(".zip"):
            files = _from_zip(entry, student, unpack_to, out)
        else:
            out.notes.append(_("{entry}: not a folder or a .zip, left out").format(entry=one_line(entry.name)))
            continue
        if not files:
            out.notes.append(
                _("{student}: no file named like an exercise (such as {example})").format(
                    student=one_line(student), example=EXERCISES[0].filename
                )
            )
            continue
        out.students.append(student)
        out.work += files
    return out


def _from_folder(folder: Path, student: str) -> list[Work]:
    return [
        Work(student, BY_FILENAME[name], folder / name)
        for name in sorted(os.listdir(folder))
        if name in BY_FILENAME and (folder / name).is_file()  # a link is followed by the grader only inside
    ]


def _from_zip(path: Path, student: str, unpack_to: Path, out: Collected) -> list[Work]:
    """The scaffold-named regular files of a zip, copied (at most SOURCE_LIMIT bytes each) into a new folder."""
    folder = unpack_to / f"{len(os.listdir(unpack_to)):04d}"
    folder.mkdir()
    found: list[Work] = []
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist()[:ZIP_MEMBERS_LIMIT]:
                name = member.filename.replace("\\", "/").rsplit("/", 1)[-1]
                kind = stat.S_IFMT(member.external_attr >> 16)
                if name not in BY_FILENAME or member.is_dir() or kind not in (0, stat.S_IFREG):
                    continue
                target = folder / name
                if target.exists():  # the same name twice in one zip: the first one counts
                    out.notes.append(_("{student}: {name} is in the zip twice; the first is graded").format(
                        student=one_line(student), name=name))  # fmt: skip
                    continue
                with archive.open(member) as src:
                    data = src.read(SOURCE_LIMIT + 1)  # a bomb stops here: the grader refuses a longer file
                with open(target, "xb") as dst:
                    dst.write(data)
                found.append(Work(student, BY_FILENAME[name], target))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, RuntimeError, NotImplementedError, EOFError) as exc:
        # RuntimeError: encrypted; NotImplementedError: an unknown compression
        out.notes.append(
            _("{file}: not a zip this grader can read ({why})").format(
                file=one_line(path.name), why=one_line(str(exc), 120)
            )
        )
        return []
    return sorted(found, key=lambda w: w.exercise.number)


# ---- 2. grading --------------------------------------------------------------------------------------


def grade_class(
    work: Iterable[Work],
    *,
    jobs: int,
    timeout: float,
    memory_mb: int,
    on_done: Callable[[Grade], None] = lambda grade: None,
) -> list[Grade]:
    """Grade every file, ``jobs`` at once, on fresh inputs; ``on_done`` hears of each as it ends (a progress bar)."""

    def one(item: Work) -> Grade:
        start = time.monotonic()
        result = grade(item.exercise, item.path, timeout=timeout, memory_mb=memory_mb)
        done = Grade(item.student, item.exercise, result, time.monotonic() - start)
        on_done(done)
        return done

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, list(work)))


# ---- 3. the gradebook --------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run a cell starting so as a formula


def _cell(text: str) -> str:
    return "'" + text if text.startswith(_FORMULA_START) else text


def _feedback_name(student: str) -> str:
    """A file name for the student's feedback: their folder's name, without what could leave the folder."""
    name = re.sub(r"[/\\\x00-\x1f]", "_", student).lstrip(".") or "_"
    return name[:120] + ".txt"


def feedback(student: str, grades: list[Grade]) -> str:
    """The student's feedback as plain text: each check's report as ``exercise check`` shows it."""
    from microgradnorm.exercises.render import grade_report, plain_text

    parts: list[RenderableType] = [Text(_("Feedback for {student}").format(student=one_line(student)))]  # no markup
    for item in sorted(grades, key=lambda g: g.exercise.number):
        parts += [Rule(f"{item.exercise.number:02d} {item.exercise.filename}"), grade_report(item.result)]
    return plain_text(parts)


def write_gradebook(grades: list[Grade], out: Path) -> list[Path]:
    """``grades.csv``, ``grades.json`` and ``feedback/STUDENT.txt`` in ``out``; the files written."""
    ordered = sorted(grades, key=lambda g: (g.student, g.exercise.number))
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "student": g.student,
            "exercise": g.exercise.name,
            "passed": "true" if g.passed else "false",
            "mistakes": ";".join(g.mistakes),
            "seconds": f"{g.seconds:.2f}",
        }
        for g in ordered
    ]
    written = [out / "grades.csv", out / "grades.json"]
    with open(written[0], "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "exercise", "passed", "mistakes", "seconds"])
        writer.writeheader()
        writer.writerows({**row, "student": _cell(row["student"])} for row in rows)
    records = [
        {**row, "passed": g.passed, "mistakes": list(g.mistakes), "seconds": round(g.seconds, 3),
         "status": g.result.status, "summary": g.result.summary}
        for row, g in zip(rows, ordered)
    ]  # fmt: skip
    written[1].write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    folder = out / "feedback"
    folder.mkdir(exist_ok=True)
    by_student: dict[str, list[Grade]] = {}
    for g in ordered:
        by_student.setdefault(g.student, []).append(g)
    for student, theirs in by_student.items():
        path = folder / _feedback_name(student)
        path.write_text(feedback(student, theirs), encoding="utf-8")
        written.append(path)
    return written


# ---- 4. the class summary ----------------------------------------------------------------------------

COMMON_MISTAKES = 8  # named mistakes listed in the summary


def common_mistakes(grades: list[Grade]) -> list[tuple[str, int, int, Exercise]]:
    """(the mistake as a learner reads it, students who made it, students who handed in that exercise, the
    exercise), the most made first. Two findings with the same words (a mistake named by its value and by its
    geometry) count once per student: the summary is read by a person."""
    handed_in = Counter(g.exercise.number for g in grades)
    made: dict[tuple[int, str], set[str]] = {}
    for g in grades:
        for f in g.result.findings:
            made.setdefault((g.exercise.number, f.title), set()).add(g.student)
    ranked = sorted(made.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(title, len(students), handed_in[number], get_exercise(number)) for (number, title), students in ranked]


def class_summary(grades: list[Grade], students: int, seconds: float) -> RenderableType:
    """Pass rate per exercise, then the mistakes most students made (what to go over in the next lecture)."""
    table = Table(title=_("The class: {students} students, {files} files").format(students=students, files=len(grades)))
    table.add_column(_("exercise"))
    table.add_column(_("handed in"), justify="right")
    table.add_column(_("passed"), justify="right")
    table.add_column(_("pass rate"), justify="right")
    for ex in EXERCISES:
        theirs = [g for g in grades if g.exercise.number == ex.number]
        if theirs:
            passed = sum(g.passed for g in theirs)
            table.add_row(ex.filename, str(len(theirs)), str(passed), f"{passed / len(theirs):.0%}")
    parts: list[RenderableType] = [table]
    mistakes = common_mistakes(grades)[:COMMON_MISTAKES]
    if mistakes:
        parts.append(Text(_("The most common named mistakes:"), style="bold"))
        for title, made, handed_in, ex in mistakes:
            line = _("{made} of {handed_in} ({exercise}): {mistake}").format(
                made=made, handed_in=handed_in, exercise=ex.filename, mistake=title
            )
            parts.append(Text("  " + line))
    parts.append(Text(_("Graded in {seconds:.1f} s.").format(seconds=seconds), style="dim"))
    return Group(*parts)
