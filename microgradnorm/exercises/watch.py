"""``exercise watch``: re-check an exercise on every save; move on only when asked.

Organised as rustlings' watch mode is: two pollers feed one loop, which turns
what they saw into actions on a small state.

* :class:`Keys` reads the lines typed meanwhile, without blocking;
* :class:`Files` notices which exercise files were saved since the last look;
* :class:`WatchState` is what the loop knows: the current exercise, and whether
  to stop;
* :data:`ACTIONS` maps each command (``n``, ``h``, ``c``, ``l``, ``q``) to one
  method of :class:`Watcher`, which does it and prints through the renderers of
  :mod:`.render`.

Grading and recording a check is passed in (``grade``), so the command module
decides how a check is made and this module only when.
"""

from __future__ import annotations

import os
import select
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from microgradnorm.exercises import render, translation
from microgradnorm.exercises import workspace as ws
from microgradnorm.exercises.catalog import EXERCISES, Exercise
from microgradnorm.i18n import _

if TYPE_CHECKING:
    from microgradnorm.exercises.grader import GradeResult

__all__ = ["ACTIONS", "Files", "Keys", "WatchState", "Watcher"]

SETTLE = 0.05  # seconds to let an editor finish writing a file it is saving


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size)


class Keys:
    """Lines typed while watching, read without blocking the file polling."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.closed = False
        try:
            self.fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None

    def read(self, wait: float, sleep: Callable[[float], None]) -> str | None:
        """The next command typed, waiting at most ``wait`` seconds; None if there is none."""
        if self.closed:
            sleep(wait)
            return None
        if self.fd is not None:
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                return None
            line = self.stream.readline()
        else:
            line = self.stream.readline()
            if not line:
                sleep(wait)
        if not line:
            self.closed = True  # end of input: keep watching files, stop reading commands
            return None
        return line.strip().lower()


class Files:
    """The exercise files of a workspace, and which of them were saved since the last look."""

    def __init__(self, folder: Path) -> None:
        self.paths = {ex.name: ws.learner_file(folder, ex) for ex in EXERCISES}
        self.seen = {name: _signature(path) for name, path in self.paths.items()}

    def saved(self, sleep: Callable[[float], None]) -> list[Exercise]:
        """The exercises whose file changed and still exists, in order."""
        out = []
        for ex in EXERCISES:
            if _signature(self.paths[ex.name]) != self.seen[ex.name]:
                sleep(SETTLE)
                self.seen[ex.name] = _signature(self.paths[ex.name])
                if self.seen[ex.name] is not None:
                    out.append(ex)
        return out


@dataclass
class WatchState:
    current: Exercise
    stop: bool = False


class Watcher:
    """The actions of watch mode, on a :class:`WatchState`."""

    def __init__(
        self,
        folder: Path,
        console: Any,
        state: WatchState,
        grade: Callable[[Exercise], tuple[GradeResult, ws.Progress]],
    ) -> None:
        self.folder, self.console, self.state, self.grade = folder, console, state, grade

    def show_current(self) -> None:
        self.console.print(render.watch_header(self.folder, self.state.current))

    def check(self, ex: Exercise) -> None:
        self.state.current = ex
        self.console.clear()
        self.console.print(render.watch_checking(ex))
        result, progress = self.grade(ex)
        self.console.print(render.grade_report(result))
        if result.passed:
            self.console.print(render.watch_passed(ws.next_after(ex, progress)))
        self.console.print(render.watch_help())

    def on_next(self) -> None:
        progress = ws.load_progress()
        if not progress.passed(self.state.current):
            self.console.print(render.watch_not_passed(self.state.current))
            return
        nxt = ws.next_after(self.state.current, progress)  # the same "next" as check's
        if nxt is None:
            self.console.print(render.watch_all_done())
            self.state.stop = True
            return
        self.state.current = nxt
        self.show_current()

    def on_hint(self) -> None:
        ex = self.state.current
        all_hints, note = translation.hints(ex)
        shown = ws.record_hint(ex, len(all_hints)) if all_hints else 0
        more = _("Press h and Enter again for hint {k}.")
        self.console.print(render.hint_view(ex, all_hints, shown, more=more, note=note))

    def on_check(self) -> None:
        self.check(self.state.current)

    def on_list(self) -> None:
        edited = {ex.name: ws.is_edited(self.folder, ex) for ex in EXERCISES}
        exists = {ex.name: ws.learner_file(self.folder, ex).is_file() for ex in EXERCISES}
        self.console.print(render.exercise_list(ws.load_progress(), self.folder, edited, exists))

    def on_quit(self) -> None:
        self.state.stop = True

    def on_unknown(self, command: str) -> None:
        self.console.print(render.watch_unknown(command))


ACTIONS: dict[str, Callable[[Watcher], None]] = {
    "n": Watcher.on_next,
    "next": Watcher.on_next,
    "h": Watcher.on_hint,
    "hint": Watcher.on_hint,
    "c": Watcher.on_check,
    "check": Watcher.on_check,
    "l": Watcher.on_list,
    "list": Watcher.on_list,
    "q": Watcher.on_quit,
    "quit": Watcher.on_quit,
    "exit": Watcher.on_quit,
}


def run(watcher: Watcher, keys: Keys, files: Files, interval: float, sleep: Callable[[float], None]) -> int:
    """The loop: a typed command, then any saved file, until ``q`` (or every exercise is done)."""
    watcher.show_current()
    if ws.is_edited(watcher.folder, watcher.state.current):
        watcher.check(watcher.state.current)
    while not watcher.state.stop:
        command = keys.read(interval, sleep)
        if command:
            action = ACTIONS.get(command)
            action(watcher) if action is not None else watcher.on_unknown(command)
            if watcher.state.stop:
                break
        for ex in files.saved(sleep):
            watcher.check(ex)
    return 0
