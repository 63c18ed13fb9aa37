"""The learner's workspace (their copies of the scaffolds) and their progress.

The workspace is a directory the learner chooses with ``init [DIR]``; its path is
remembered in the progress file, so ``check``, ``watch`` and ``hint`` work from
any directory (``--dir`` overrides it). Progress lives in
``<state dir>/exercises.json`` (:func:`microgradnorm.store.state_dir`) and is
written atomically. Every change is a fresh read-modify-write, so a ``watch`` in
one terminal and a ``check`` in another do not undo each other's records.

Nothing the learner wrote is overwritten without being asked: ``init`` copies
only the files that are missing, and ``reset`` keeps a copy of the file it
replaces in ``<state dir>/exercise-backups/``.

The files come in the learner's language (:mod:`.translation`). A file that is
still exactly a scaffold, in any language, is untouched: ``init`` in another
language gives it in that language (an English workspace becomes a Chinese one
file by file, where the learner has not started), and never touches a file the
learner edited. Progress is kept by exercise, so it is the same in every language.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from microgradnorm.exercises import translation
from microgradnorm.exercises.catalog import EXERCISES, Exercise
from microgradnorm.i18n import _
from microgradnorm.store import (
    CorruptStateError,
    StateDirError,
    atomic_write_bytes,
    atomic_write_text,
    load_json,
    probe_writable,
    save_json,
    set_aside,
    state_dir,
)

__all__ = [
    "DEFAULT_WORKSPACE",
    "InitReport",
    "Progress",
    "init_workspace",
    "learner_file",
    "load_progress",
    "next_unsolved",
    "progress_guard",
    "reset_file",
    "resolve_workspace",
    "update_progress",
]

DEFAULT_WORKSPACE = "microgradnorm-exercises"
PROGRESS_FILE = "exercises.json"
VERSION = 1


@dataclass
class Progress:
    """What the learner has done: the workspace path and, per exercise, its record.

    A record is ``{"passed": bool, "hints": int, "attempts": int, "last": status}``.
    ``warning`` says that an unreadable progress file was set aside on loading.
    """

    workspace: str | None = None
    exercises: dict[str, dict[str, Any]] = field(default_factory=dict)
    warning: str | None = None

    def record(self, exercise: Exercise) -> dict[str, Any]:
        return self.exercises.setdefault(exercise.name, {"passed": False, "hints": 0, "attempts": 0, "last": None})

    def passed(self, exercise: Exercise) -> bool:
        return bool(self.exercises.get(exercise.name, {}).get("passed"))

    def hints_shown(self, exercise: Exercise) -> int:
        return int(self.exercises.get(exercise.name, {}).get("hints", 0))

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "workspace": self.workspace, "exercises": self.exercises}


def _path() -> Path:
    return state_dir() / PROGRESS_FILE


def _from_json(data: Any) -> Progress:
    if not isinstance(data, dict):
        raise ValueError(_("expected a JSON object"))
    exercises = data.get("exercises", {})
    if not isinstance(exercises, dict) or not all(isinstance(v, dict) for v in exercises.values()):
        raise ValueError(_("'exercises' is not an object of records"))
    workspace = data.get("workspace")
    return Progress(workspace if isinstance(workspace, str) else None, exercises)


def load_progress() -> Progress:
    """The saved progress; empty (with ``warning`` set) if the file was unreadable and set aside. A state
    folder that cannot be created or written in is a ``warning`` too: exercises are graded, not recorded."""
    try:
        path = _path()
    except StateDirError as exc:
        return Progress(warning=_("Progress is not saved: {reason}").format(reason=exc))
    progress = _load(path)
    try:
        probe_writable(path.parent)
    except StateDirError as exc:  # read-only: what was saved still says where the workspace is
        progress.warning = _("Progress is not saved: {reason}").format(reason=exc)
    return progress


def _load(path: Path) -> Progress:
    try:
        data = load_json(path, {})
    except CorruptStateError as exc:
        return Progress(warning=_("{problem}; starting with empty progress").format(problem=exc))
    try:
        return _from_json(data)
    except ValueError as exc:
        moved = set_aside(path)
        warning = _("{path} had an unexpected layout ({why}); set aside as {name}")
        return Progress(warning=warning.format(path=path, why=exc, name=moved.name))


def update_progress(change: Callable[[Progress], Any]) -> Progress:
    """Load, apply ``change``, save atomically; returns the saved progress."""
    progress = load_progress()
    change(progress)
    with contextlib.suppress(OSError):  # an unusable state folder: load_progress's warning has said so
        save_json(_path(), progress.to_json())
    return progress


@dataclass
class ProgressGuard:
    """Set by :func:`progress_guard`: whether the progress file changed while it was held."""

    tampered: bool = False


def _snapshot(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def progress_guard() -> Iterator[ProgressGuard]:
    """Hold the progress file still while learner code runs: any change made meanwhile is undone.

    The grader's sandbox already keeps learner code away from the state
    directory; this is the second line. Only the grading process records a
    result, after the guard is released, from its own verdict.
    """
    guard = ProgressGuard()
    try:
        path = _path()
    except StateDirError:  # no state folder: no progress file to hold still
        yield guard
        return
    before = _snapshot(path)
    try:
        yield guard
    finally:
        if _snapshot(path) != before:
            guard.tampered = True
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write_bytes(path, before)


# ---- the workspace ---------------------------------------------------------------------------


def resolve_workspace(directory: str | None, progress: Progress) -> Path:
    """``--dir`` if given, else the remembered workspace; a ValueError that says what to do otherwise."""
    if directory is not None:
        path = Path(directory).expanduser().resolve()
        if not path.is_dir():
            if path.exists():
                message = _("--dir: expected an exercise workspace directory, got {given!r} (a file, not a directory)")
            else:
                message = _("--dir: expected an exercise workspace directory, got {given!r} (no such directory)")
            raise ValueError(message.format(given=directory))
        return path
    if progress.workspace is None:
        raise ValueError(
            _("no exercise workspace yet: run `microgradnorm exercise init [DIR]` first, or pass --dir DIR")
        )
    path = Path(progress.workspace)
    if not path.is_dir():
        raise ValueError(
            _(
                "the exercise workspace {path} is gone: run `microgradnorm exercise init [DIR]` again, or pass "
                "--dir DIR"
            ).format(path=path)
        )
    return path


def learner_file(workspace: Path, exercise: Exercise) -> Path:
    return workspace / exercise.filename


def _untouched(path: Path, exercise: Exercise) -> bool:
    """Whether the file at ``path`` is exactly a scaffold of ``exercise`` (in some language)."""
    return path.read_bytes() in {text.encode("utf-8") for text in translation.scaffold_texts(exercise).values()}


def is_edited(workspace: Path, exercise: Exercise) -> bool:
    """True when the learner's file exists and is none of the scaffolds (in any language)."""
    path = learner_file(workspace, exercise)
    return path.is_file() and not _untouched(path, exercise)


@dataclass
class InitReport:
    workspace: Path
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the learner had edited these: left alone
    switched: list[str] = field(default_factory=list)  # untouched scaffolds of another language, now in this one
    notes: list[str] = field(default_factory=list)  # files given in English where a translation was asked for


def init_workspace(target: Path) -> InitReport:
    """Copy every scaffold that is missing from ``target``, in the current language; never touch a file
    the learner edited (a file still exactly a scaffold of another language is given in this one)."""
    target = Path(target).expanduser()
    if target.exists() and not target.is_dir():
        raise ValueError(
            _("DIR: expected a directory for the exercises, got {given!r}, which is a file").format(given=str(target))
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            _("DIR: cannot create the exercise directory {given!r}: {why}").format(given=str(target), why=exc.strerror)
        ) from None
    report = InitReport(target.resolve())
    for ex in EXERCISES:
        _init_one(target / ex.filename, ex, report)
    update_progress(lambda p: setattr(p, "workspace", str(report.workspace)))
    return report


def _init_one(dest: Path, ex: Exercise, report: InitReport) -> None:
    given = translation.scaffold(ex)
    wanted = given.text.encode("utf-8")
    if not dest.exists():
        atomic_write_bytes(dest, wanted)
        report.copied.append(ex.filename)
    elif dest.read_bytes() == wanted:
        report.unchanged.append(ex.filename)
        return
    elif _untouched(dest, ex):
        atomic_write_bytes(dest, wanted)
        report.switched.append(ex.filename)
    else:
        report.kept.append(ex.filename)
        return
    if given.note:
        report.notes.append(given.note)


def reset_file(workspace: Path, exercise: Exercise) -> Path | None:
    """Put the scaffold back, in the current language; returns where the replaced file was saved (None if
    there was nothing to keep: no file, or one that was still a scaffold, in any language).

    The progress record stays: a pass is the learner's for good (as in
    :func:`record_result`), so resetting to practise again locks nothing.
    """
    dest = learner_file(workspace, exercise)
    backup = None
    if dest.is_file() and not _untouched(dest, exercise):
        folder = state_dir() / "exercise-backups"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = f"{exercise.name}.{time.strftime('%Y%m%d-%H%M%S')}"
        backup, n = folder / f"{stamp}.py", 1
        while backup.exists():
            n += 1
            backup = folder / f"{stamp}-{n}.py"
        shutil.copy2(dest, backup)
    atomic_write_text(dest, translation.scaffold(exercise).text)
    update_progress(lambda p: p.record(exercise).update(last=None))  # the file no longer is what was last checked
    return backup


def next_unsolved(progress: Progress) -> Exercise | None:
    """The first exercise, in order, that has not been passed."""
    return next((ex for ex in EXERCISES if not progress.passed(ex)), None)


def next_after(current: Exercise, progress: Progress) -> Exercise | None:
    """What "next" means after ``current``, in check and in watch alike: the next unpassed exercise after it,
    else the first unpassed one."""
    later = [ex for ex in EXERCISES if ex.number > current.number and not progress.passed(ex)]
    return later[0] if later else next_unsolved(progress)


def seen_findings(progress: Progress, exercise: Exercise) -> set[str]:
    """The mistakes (finding keys) the grader has found in this exercise before."""
    seen = progress.exercises.get(exercise.name, {}).get("seen", [])
    return {k for k in seen if isinstance(k, str)} if isinstance(seen, list) else set()


def record_result(exercise: Exercise, status: str, found: Iterable[str] = ()) -> Progress:
    """Count an attempt, and remember the mistakes found; a pass is kept for good (a later failure does not
    undo it)."""

    def change(p: Progress) -> None:
        rec = p.record(exercise)
        rec["seen"] = sorted(seen_findings(p, exercise).union(found))
        rec["attempts"] = int(rec.get("attempts", 0)) + 1
        rec["last"] = status
        if status == "passed":
            rec["passed"] = True
            rec.setdefault("passed_at", time.strftime("%Y-%m-%dT%H:%M:%S"))

    return update_progress(change)


def record_seen(exercise: Exercise, found: Iterable[str]) -> Progress:
    """Remember the mistakes found by a check that is not recorded as an attempt (one on --seed inputs)."""

    def change(p: Progress) -> None:
        p.record(exercise)["seen"] = sorted(seen_findings(p, exercise).union(found))

    return update_progress(change)


def record_hint(exercise: Exercise, available: int) -> int:
    """Reveal one more hint (up to ``available``); returns how many are shown now."""
    shown = 0

    def change(p: Progress) -> None:
        nonlocal shown
        rec = p.record(exercise)
        shown = min(int(rec.get("hints", 0)) + 1, available)
        rec["hints"] = shown

    update_progress(change)
    return shown
