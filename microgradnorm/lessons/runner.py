"""Page through a lesson: one step at a time with keys, or every step at once (``--auto``).

The runner is thin on purpose. It calls the demos of the step on screen (once:
outputs are kept, so going back is instant and ``g`` draws the graph you are
looking at), hands them to the pure renderers in :mod:`~microgradnorm.lessons.render`,
and maps keys to moves::

    Enter, n, space, →   next step (after the last: the lesson is complete)
    b, p, ←              previous step
    r                    back to step 1
    g                    draw the step's graph to a file and print its path
    q, Ctrl-C, Ctrl-D    quit (progress is already saved)

The console and the key source are passed in: the command gives it the real
terminal (:class:`TerminalKeys`, one key at a time in raw mode), tests give it
an iterator of keys. Progress is saved after every move, atomically
(:mod:`~microgradnorm.lessons.progress`), so killing the process loses at most
the move in flight.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console, RenderableType
from rich.text import Text

from microgradnorm.lessons import render
from microgradnorm.lessons.demos import DemoOutput, LessonParams, run_demo
from microgradnorm.lessons.format import Lesson
from microgradnorm.lessons.progress import ProgressStore

__all__ = [
    "ACTIONS",
    "LessonRunner",
    "TerminalKeys",
    "draw_graph",
    "key_source",
    "run_auto",
    "step_outputs",
]

# key -> action. Keys are single characters, or names for escape sequences.
ACTIONS: dict[str, str] = {
    "\r": "next",
    "\n": "next",
    " ": "next",
    "n": "next",
    "RIGHT": "next",
    "PAGEDOWN": "next",
    "b": "back",
    "p": "back",
    "LEFT": "back",
    "PAGEUP": "back",
    "r": "restart",
    "g": "graph",
    "q": "quit",
    "\x03": "quit",  # Ctrl-C in raw mode
    "\x04": "quit",  # Ctrl-D
    "": "quit",  # end of input
}

KeyReader = Callable[[], str]
GraphDrawer = Callable[..., str]  # (graph, path, **viz options) -> message


def action_of(key: str) -> str | None:
    """The action for ``key`` (letters in either case), or None for a key that does nothing."""
    return ACTIONS.get(key, ACTIONS.get(key.lower()) if len(key) == 1 else None)


def step_outputs(lesson: Lesson, index: int, params: LessonParams) -> list[DemoOutput | render.DemoFailure]:
    """Run the demos of step ``index``; a demo that raises becomes a :class:`~render.DemoFailure`.

    With MICROGRADNORM_DEBUG set, the exception propagates instead (for lesson authors).
    """
    outputs: list[DemoOutput | render.DemoFailure] = []
    for call in lesson.steps[index].demos:
        try:
            outputs.append(run_demo(call.name, params, call.args))
        except Exception as exc:
            if os.environ.get("MICROGRADNORM_DEBUG"):
                raise
            outputs.append(render.DemoFailure(call, exc))
    return outputs


def run_auto(lesson: Lesson, params: LessonParams, console: Console, start: int = 0) -> int:
    """Print every step from ``start`` on, without pausing. Exit code 1 if a demo failed."""
    failed = 0
    for index in range(start, len(lesson.steps)):
        outputs = step_outputs(lesson, index, params)
        failed += sum(isinstance(o, render.DemoFailure) for o in outputs)
        _print_unpadded(console, render.render_step(lesson, index, outputs, params))
        console.print()
    if failed:
        console.print(Text(f"{failed} demo(s) failed in {lesson.name}.", style="bold red"))
    return 1 if failed else 0


def _print_unpadded(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable``; into a file or a pipe, without the spaces rich pads every line with."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("\n".join(line.rstrip() for line in captured.get().split("\n")))


class LessonRunner:
    """The interactive runner for one lesson (see the module docstring for the keys)."""

    def __init__(
        self,
        lesson: Lesson,
        params: LessonParams,
        console: Console,
        read_key: KeyReader | Iterable[str],
        *,
        progress: ProgressStore | None = None,
        graph_dir: Path | None = None,
        draw: GraphDrawer | None = None,
        following: Lesson | None = None,
    ) -> None:
        self.lesson = lesson
        self.params = params
        self.console = console
        self.read_key = read_key if callable(read_key) else _from_iterable(read_key)
        self.progress = progress
        self.graph_dir = graph_dir
        self.draw = draw or draw_graph
        self.following = following
        self.index = 0
        self._cache: dict[int, list[DemoOutput | render.DemoFailure]] = {}

    @property
    def total(self) -> int:
        return len(self.lesson.steps)

    def resume_index(self) -> int:
        """Where to start: the saved step of an unfinished lesson, else step 1."""
        if self.progress is None:
            return 0
        saved = self.progress.get(self.lesson.name)
        if saved is None or saved.completed:
            return 0
        return min(saved.step, self.total) - 1

    def outputs(self, index: int) -> list[DemoOutput | render.DemoFailure]:
        if index not in self._cache:
            self._cache[index] = step_outputs(self.lesson, index, self.params)
        return self._cache[index]

    def run(self, start: int | None = None) -> int:
        """Show steps and follow keys until the lesson is finished or the learner quits."""
        self.index = self.resume_index() if start is None else start
        if not 0 <= self.index < self.total:
            raise ValueError(f"start: expected a step from 1 to {self.total}, got {self.index + 1}")
        note = None
        if start is None and self.index > 0:
            note = f"Resuming at step {self.index + 1} of {self.total} (r restarts the lesson)."
        self.show(note)
        while True:
            key = self.read_key()
            action = action_of(key)
            if action == "next":
                if self.index == self.total - 1:
                    self._save(completed=True)
                    self.console.print()
                    self.console.print(render.finished(self.lesson, self.following))
                    return 0
                self.index += 1
                self.show()
            elif action == "back":
                if self.index == 0:
                    self.console.print(Text("This is the first step.", style="dim"))
                    continue
                self.index -= 1
                self.show()
            elif action == "restart":
                self.index = 0
                self.show()
            elif action == "graph":
                if self._drawable():  # drawing takes a moment: say so first, unless there is nothing to draw
                    self.console.print(Text("Drawing the graph…", style="dim"))
                self.console.print(self.graph_message())
            elif action == "quit":
                then = (
                    f"Resume with: microgradnorm lesson {self.lesson.number}"
                    if self.progress is not None
                    else f"Your place was not saved; come back with: microgradnorm lesson {self.lesson.number} "
                    f"--step {self.index + 1}"
                )
                self.console.print(Text(f"Stopped at step {self.index + 1} of {self.total}. {then}", style="dim"))
                return 0
            else:
                self.console.print(Text(f"Keys: {render.KEY_HELP}", style="dim"))

    def show(self, note: str | None = None) -> None:
        """Clear the screen (on a terminal), print the current step and save the position."""
        outputs = self.outputs(self.index)
        if self.console.is_terminal:
            self.console.clear()
        if note:
            self.console.print(Text(note, style="yellow"))
        self.console.print(render.render_step(self.lesson, self.index, outputs, self.params))
        self.console.print()
        self.console.print(render.key_footer(self.index, self.total))
        self._save()

    def graph_message(self) -> Text:
        """Draw the current step's graph (the last demo of the step that has one) and say where."""
        drawable = self._drawable()
        if not drawable:
            return Text("This step has no graph to draw.", style="dim")
        try:  # the default folder is in the state directory, which can itself be unusable
            folder = self.graph_dir if self.graph_dir is not None else _default_graph_dir()
            path = folder / f"{self.lesson.name}-step{self.index + 1:02d}.svg"
            return Text(self.draw(drawable[-1].graph, path, **drawable[-1].graph_options))
        except Exception as exc:  # drawing is a side show: report it, never end the lesson
            if os.environ.get("MICROGRADNORM_DEBUG"):
                raise
            return Text(f"Could not draw the graph: {_one_line(exc)}", style="red")

    def _drawable(self) -> list[DemoOutput]:
        """The current step's demo outputs that have a graph to draw."""
        return [o for o in self.outputs(self.index) if isinstance(o, DemoOutput) and o.graph is not None]

    def _save(self, completed: bool | None = None) -> None:
        if self.progress is not None:
            self.progress.save(self.lesson.name, self.index + 1, self.total, completed)


def _default_graph_dir() -> Path:
    from microgradnorm.store import state_dir

    return state_dir() / "graphs"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def draw_graph(graph: Any, path: Path, **options: Any) -> str:
    """Draw ``graph`` to ``path`` with :func:`microgradnorm.viz.draw`, and its step-through page beside it
    (``.html``); return what to tell the learner.

    ``options`` go to ``viz.to_dot``. Without the Graphviz ``dot`` program the
    DOT source is written instead (next to ``path``, ending in .dot) together
    with viz's one-line advice. A :class:`microgradnorm.figure.Figure` is
    already SVG and is written as it is.
    """
    try:
        from microgradnorm import viz
    except ImportError:
        return "Drawing graphs needs microgradnorm.viz, which this installation does not have."
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(getattr(graph, "svg", None)):  # a microgradnorm.figure.Figure: already SVG, no Graphviz needed
        from microgradnorm.store import atomic_write_text

        atomic_write_text(path.with_suffix(".svg"), graph.svg())
        return f"Figure written to {path.with_suffix('.svg')}"
    drawn = viz.draw(graph, path, **options)
    if drawn.error is not None:
        return f"Wrote the graph's DOT source to {drawn.path} but could not render it: {_one_line(drawn.error)}"
    try:
        page = viz.render(graph, path.with_suffix(".html"), **options)
    except (viz.DrawingError, ValueError) as exc:  # the picture is there; the page is a bonus
        return f"Graph written to {drawn.path} (no step-through page: {_one_line(exc)})"
    return f"Graph written to {drawn.path}; to step through it, open {page} in a browser"


def _from_iterable(keys: Iterable[str]) -> KeyReader:
    it: Iterator[str] = iter(keys)
    return lambda: next(it, "")


class TerminalKeys:
    """Read one key at a time from a terminal file descriptor, in raw mode only while reading.

    Raw mode is switched on for each read and off again before anything is
    printed, so output keeps its normal line endings and a crash never leaves
    the terminal raw. The switch does not flush pending input, so keys typed
    while a step was being drawn are not lost. Arrow and page keys arrive as escape sequences and are
    returned as ``"LEFT"``, ``"RIGHT"``, ``"PAGEUP"``, ``"PAGEDOWN"``.
    """

    _SEQUENCES: ClassVar[dict[bytes, str]] = {
        b"[C": "RIGHT",
        b"[D": "LEFT",
        b"[5~": "PAGEUP",
        b"[6~": "PAGEDOWN",
        b"OC": "RIGHT",
        b"OD": "LEFT",
    }

    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd

    def __call__(self) -> str:
        import termios
        import tty

        saved = termios.tcgetattr(self.fd)
        try:
            tty.setraw(self.fd, termios.TCSANOW)  # not TCSAFLUSH: keep keys typed ahead
            first = os.read(self.fd, 1)
            if first != b"\x1b":
                return first.decode("latin-1")
            rest = b""
            while len(rest) < 3 and select.select([self.fd], [], [], 0.05)[0]:
                rest += os.read(self.fd, 1)
                if rest[-1:].isalpha() or rest[-1:] == b"~":
                    break
            return self._SEQUENCES.get(rest, "ESC")
        finally:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)


def key_source(stream: Any = None) -> KeyReader:
    """Keys from ``stream`` (default stdin): raw single keys from a terminal, else characters."""
    stream = sys.stdin if stream is None else stream
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is not None and os.isatty(fd):
        return TerminalKeys(fd)
    return lambda: stream.read(1)
