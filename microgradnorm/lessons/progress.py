"""Where the learner is in each lesson, saved so that ``microgradnorm lesson N`` resumes there.

One JSON file, ``lessons.json`` in :func:`microgradnorm.store.state_dir`::

    {"version": 2,
     "lessons": {"layernorm-backward": {"step": 4, "steps": 11, "completed": false,
                                        "updated": "2025-01-01T12:00:00"}}}

Lessons are keyed by their slug, the file name without its number
(``04-layernorm-backward.md`` -> ``layernorm-backward``), so renumbering the
lessons keeps every learner's place. ``step`` counts from 1, as the learner sees
it, and is where ``microgradnorm lesson N`` starts next time: finishing a lesson
sets ``completed`` and puts ``step`` back to 1, and a second pass records its own
place without forgetting that the lesson was finished.

Version 1 files keyed lessons by file name (``03-layernorm-backward``) and left
``step`` on the last step of a finished lesson. They are migrated when read: the
number is dropped from each key (when two old names give one slug, the entry
updated last wins, and the lesson stays finished if either was), and a finished
lesson's last step becomes step 1. Given the lessons' current lengths
(``ProgressStore(steps=...)``), a saved step beyond the end of a lesson that has
since been shortened or split is clamped to its last step. The migrated entries
are written at the next save.

Every change re-reads the file, changes one entry and writes it back with
:func:`microgradnorm.store.save_json` (temp file + ``os.replace``): a process
killed at any moment leaves the old file or the new one. A file that does not
parse, or parses into something that is not progress, is set aside (renamed
``lessons.json.corrupt-<time>``) and reported in :attr:`ProgressStore.warnings`;
the learner starts fresh and loses nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from microgradnorm.i18n import _
from microgradnorm.store import CorruptStateError, load_json, save_json, set_aside, state_dir

__all__ = ["FILE_NAME", "LessonProgress", "ProgressStore", "slug_of"]

FILE_NAME = "lessons.json"
VERSION = 2
_NUMBER = re.compile(r"^\d{2}-(?=.)")  # the "03-" of a version 1 key


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
            raise ValueError(_("expected an object, got {kind}").format(kind=type(data).__name__))
        step, steps, completed = data.get("step"), data.get("steps"), data.get("completed", False)
        for name, v in (("step", step), ("steps", steps)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(_("{name}: expected an integer >= 1, got {value!r}").format(name=name, value=v))
        if not isinstance(completed, bool):
            raise ValueError(_("completed: expected true or false, got {value!r}").format(value=completed))
        return cls(step, steps, completed, str(data.get("updated", "")))

    def clamped(self, steps: int) -> LessonProgress:
        """This entry for a lesson that now has ``steps`` steps: a step past the end becomes the last one."""
        return replace(self, step=min(self.step, steps), steps=steps)


def slug_of(key: str) -> str:
    """The slug of a version 1 key: ``03-layernorm-backward`` -> ``layernorm-backward``."""
    return _NUMBER.sub("", key, count=1)


def _migrated(version: int, lessons: dict[str, Any]) -> dict[str, LessonProgress]:
    """The entries of a file of ``version``, keyed by slug (see the module docstring)."""
    entries: dict[str, LessonProgress] = {}
    for key, raw in lessons.items():
        entry = LessonProgress.from_json(raw)
        if version == 2:
            entries[key] = entry
            continue
        if entry.completed and entry.step >= entry.steps:  # version 1 kept a finished lesson on its last step
            entry = replace(entry, step=1)
        slug = slug_of(key)
        other = entries.get(slug)
        if other is not None:  # two old names of one lesson: the later place, finished if either was
            later = max(other, entry, key=lambda e: e.updated)
            entry = replace(later, completed=other.completed or entry.completed)
        entries[slug] = entry
    return entries


class ProgressStore:
    """Read and update ``lessons.json``; problems with the file land in :attr:`warnings`.

    ``steps`` maps a lesson's slug to its current number of steps; saved steps past
    the end of a lesson are clamped to it when read.
    """

    def __init__(self, path: str | Path | None = None, *, steps: Mapping[str, int] | None = None) -> None:
        self.path = Path(path) if path is not None else state_dir() / FILE_NAME
        self.steps = dict(steps or {})
        self.warnings: list[str] = []

    def load(self) -> dict[str, LessonProgress]:
        """Every saved entry; an unreadable file is set aside (see the module docstring)."""
        try:
            data = load_json(self.path, None)
        except CorruptStateError as exc:
            self.warnings.append(_("Lesson progress was unreadable and starts fresh: {reason}").format(reason=exc))
            return {}
        if data is None:
            return {}
        try:
            entries = _migrated(_version(data), data.get("lessons", {}))
        except ValueError as exc:
            moved = set_aside(self.path)
            self.warnings.append(
                _(
                    "Lesson progress in {path} was not understood ({reason}) and starts fresh; "
                    "the old file was set aside as {name}"
                ).format(path=self.path, reason=exc, name=moved.name)
            )
            return {}
        return {slug: e.clamped(self.steps[slug]) if slug in self.steps else e for slug, e in entries.items()}

    def get(self, slug: str) -> LessonProgress | None:
        return self.load().get(slug)

    def save(self, slug: str, step: int, steps: int, completed: bool | None = None) -> LessonProgress:
        """Record that the learner is at ``step`` (1-based) of ``steps`` in the lesson ``slug``.

        ``completed`` None keeps what was saved before (a finished lesson stays
        finished when it is reread).
        """
        if not 1 <= step <= steps:
            raise ValueError(f"step: expected 1 to {steps}, got {step}")
        entries = self.load()
        before = entries.get(slug)
        done = completed if completed is not None else (before.completed if before else False)
        entry = LessonProgress(step, steps, done, time.strftime("%Y-%m-%dT%H:%M:%S"))
        entries[slug] = entry
        self._write(entries)
        return entry

    def reset(self, slug: str) -> None:
        """Forget the lesson ``slug`` (the next start is at step 1)."""
        entries = self.load()
        if entries.pop(slug, None) is not None:
            self._write(entries)

    def _write(self, entries: dict[str, LessonProgress]) -> None:
        save_json(self.path, {"version": VERSION, "lessons": {k: v.to_json() for k, v in sorted(entries.items())}})


def _version(data: Any) -> int:
    """The format version of a parsed file (1 when it does not say); ValueError for what is not progress."""
    if not isinstance(data, dict) or not isinstance(data.get("lessons", {}), dict):
        raise ValueError(_("expected an object with a 'lessons' object"))
    version = data.get("version", 1)
    if isinstance(version, bool) or version not in (1, VERSION):
        raise ValueError(_("version: expected 1 or {latest}, got {value!r}").format(latest=VERSION, value=version))
    return version
