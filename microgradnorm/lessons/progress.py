"""Where the learner is in each lesson, saved so that ``microgradnorm lesson N`` resumes there.

One JSON file, ``lessons.json`` in :func:`microgradnorm.store.state_dir`::

    {"version": 1,
     "lessons": {"03-layernorm-backward": {"step": 4, "steps": 11, "completed": false,
                                           "updated": "2025-01-01T12:00:00"}}}

``step`` counts from 1, as the learner sees it. Lessons are keyed by file name,
not number, so renumbering a lesson keeps its progress.

Every change re-reads the file, changes one entry and writes it back with
:func:`microgradnorm.store.save_json` (temp file + ``os.replace``): a process
killed at any moment leaves the old file or the new one. A file that does not
parse, or parses into something that is not progress, is set aside (renamed
``lessons.json.corrupt-<time>``) and reported in :attr:`ProgressStore.warnings`;
the learner starts fresh and loses nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from microgradnorm.store import CorruptStateError, load_json, save_json, state_dir

__all__ = ["FILE_NAME", "LessonProgress", "ProgressStore"]

FILE_NAME = "lessons.json"
VERSION = 1


@dataclass(frozen=True)
class LessonProgress:
    """One lesson's saved position: ``step`` (1-based) of ``steps``, and whether it was finished."""

    step: int
    steps: int
    completed: bool
    updated: str

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "steps": self.steps, "completed": self.completed, "updated": self.updated}

    @classmethod
    def from_json(cls, data: Any) -> LessonProgress:
        if not isinstance(data, dict):
            raise ValueError(f"expected an object, got {type(data).__name__}")
        step, steps, completed = data.get("step"), data.get("steps"), data.get("completed", False)
        for name, v in (("step", step), ("steps", steps)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        if not isinstance(completed, bool):
            raise ValueError(f"completed: expected true or false, got {completed!r}")
        return cls(step, steps, completed, str(data.get("updated", "")))


class ProgressStore:
    """Read and update ``lessons.json``; problems with the file land in :attr:`warnings`."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else state_dir() / FILE_NAME
        self.warnings: list[str] = []

    def load(self) -> dict[str, LessonProgress]:
        """Every saved entry; an unreadable file is set aside (see the module docstring)."""
        try:
            data = load_json(self.path, None)
        except CorruptStateError as exc:
            self.warnings.append(f"Lesson progress was unreadable and starts fresh: {exc}")
            return {}
        if data is None:
            return {}
        try:
            if not isinstance(data, dict) or not isinstance(data.get("lessons", {}), dict):
                raise ValueError("expected an object with a 'lessons' object")
            return {name: LessonProgress.from_json(entry) for name, entry in data.get("lessons", {}).items()}
        except ValueError as exc:
            moved = self._set_aside()
            self.warnings.append(
                f"Lesson progress in {self.path} was not understood ({exc}) and starts fresh; "
                f"the old file was set aside as {moved.name}"
            )
            return {}

    def get(self, name: str) -> LessonProgress | None:
        return self.load().get(name)

    def save(self, name: str, step: int, steps: int, completed: bool | None = None) -> LessonProgress:
        """Record that the learner is at ``step`` (1-based) of ``steps`` in lesson ``name``.

        ``completed`` None keeps what was saved before (a finished lesson stays
        finished when it is reread).
        """
        if not 1 <= step <= steps:
            raise ValueError(f"step: expected 1 to {steps}, got {step}")
        entries = self.load()
        before = entries.get(name)
        done = completed if completed is not None else (before.completed if before else False)
        entry = LessonProgress(step, steps, done, time.strftime("%Y-%m-%dT%H:%M:%S"))
        entries[name] = entry
        self._write(entries)
        return entry

    def reset(self, name: str) -> None:
        """Forget lesson ``name`` (the next start is at step 1)."""
        entries = self.load()
        if entries.pop(name, None) is not None:
            self._write(entries)

    def _write(self, entries: dict[str, LessonProgress]) -> None:
        save_json(self.path, {"version": VERSION, "lessons": {k: v.to_json() for k, v in sorted(entries.items())}})

    def _set_aside(self) -> Path:
        moved = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(self.path, moved)
        return moved
