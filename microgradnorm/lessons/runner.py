"""Page through a lesson: one step at a time with keys, or every step at once (``--auto``).

The runner is thin on purpose. It calls the demos of the step on screen (once:
outputs are kept, so going back is instant and ``g`` draws the graph you are
looking at), hands them to the pure renderers in :mod:`~microgradnorm.lessons.render`,
and maps keys to moves::

    Enter, n, →          next step (after the last: the lesson is complete)
    space, PgDn          a page down; at the end of the step, next step
    ↓ j / ↑ k, PgUp      a line down / a line up, a page up
    1 to 9               answer the question on screen
    b, p, ←              previous step
    r                    back to step 1
    g                    draw the step's graph to a file and say where
    q, Ctrl-C, Ctrl-D    quit (progress is already saved)

A step taller than the terminal is paged the way ``less`` pages a file
(:mod:`~microgradnorm.lessons.pager`): the step is rendered once, at the
console's width, its header stays at the top, and the keys line says how many
lines are left; Enter moves on only once the step has been on screen to its
end, and until then scrolls. A demo with a :class:`~microgradnorm.lessons.demos.Prediction`
asks before it tells: its question and numbered choices end the step until a
key 1 to 9 answers it (Enter shows the answer without a guess); then the
verdict, the reason and the numbers appear, and the rest of the step. Answers
are kept while the lesson runs, so going back shows a step answered.

The console and the key source are passed in: the command gives it the real
terminal (:class:`~microgradnorm.lessons.keys.TerminalKeys`, one key at a time in raw mode; a
resize is a key too), the ``g`` key writes files through :mod:`~microgradnorm.lessons.graph_file`; tests give it
an iterator of keys. Progress is saved after every move, atomically
(:mod:`~microgradnorm.lessons.progress`), so killing the process loses at most
the move in flight.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from microgradnorm.i18n import _, ngettext
from microgradnorm.i18n.text import cjk_text
from microgradnorm.lessons import render
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, run_demo
from microgradnorm.lessons.format import Lesson
from microgradnorm.lessons.graph_file import default_graph_dir, draw_graph, one_line
from microgradnorm.lessons.keys import KeyReader, from_iterable
from microgradnorm.lessons.pager import MIN_ROWS, Window, to_lines
from microgradnorm.lessons.progress import ProgressStore

__all__ = [
    "ACTIONS",
    "LessonRunner",
    "print_unpadded",
    "run_auto",
    "step_outputs",
]

# action -> its keys. Keys are single characters, or names for escape sequences.
_KEYS: dict[str, tuple[str, ...]] = {
    "next": ("\r", "\n", "n", "RIGHT"),
    "page": (" ", "PAGEDOWN"),
    "down": ("DOWN", "j"),
    "up": ("UP", "k"),
    "pageup": ("PAGEUP",),
    "back": ("b", "p", "LEFT"),
    "restart": ("r",),
    "graph": ("g",),
    "quit": ("q", "\x03", "\x04", ""),  # Ctrl-C in raw mode, Ctrl-D, end of input
    "resize": ("RESIZE",),  # the terminal changed size (TerminalKeys): draw the frame again at the new size
    "answer": tuple("123456789"),
}
# key -> action; each action is handled by the runner's ``_on_<action>`` method.
ACTIONS: dict[str, str] = {key: action for action, keys in _KEYS.items() for key in keys}

# Lines of a frame besides the note, the header, the step and messages: the blank line above the
# keys, the keys line, and the line the cursor rests on (so the frame never scrolls the screen).
FRAME_LINES = 3

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


def run_auto(
    lesson: Lesson,
    params: LessonParams,
    console: Console,
    start: int = 0,
    *,
    note: str | None = None,
    step_notes: Mapping[int, str] | None = None,
) -> int:
    """Print every step from ``start`` on, without pausing. Exit code 1 if a demo failed.

    ``note`` is printed first, and ``step_notes[index]`` above step ``index`` (what is shown in English).
    """
    failed = 0
    if note:
        print_unpadded(console, render.note(note))
    for index in range(start, len(lesson.steps)):
        outputs = step_outputs(lesson, index, params)
        failed += sum(isinstance(o, render.DemoFailure) for o in outputs)
        if step_notes and index in step_notes:
            print_unpadded(console, render.note(step_notes[index]))
        print_unpadded(console, render.render_step(lesson, index, outputs, params))
        console.print()
    if failed:
        message = ngettext("{n} demo failed in {lesson}.", "{n} demos failed in {lesson}.", failed)
        console.print(Text(message.format(n=failed, lesson=lesson.name), style="bold red"))
    return 1 if failed else 0


def print_unpadded(console: Console, renderable: RenderableType) -> None:
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
        note: str | None = None,
        step_notes: Mapping[int, str] | None = None,
    ) -> None:
        """``note`` is shown above the first frame; ``step_notes[index]`` above every frame of step ``index``."""
        self.lesson = lesson
        self.params = params
        self.console = console
        self.read_key = read_key if callable(read_key) else from_iterable(read_key)
        self.progress = progress
        self.graph_dir = graph_dir
        self.draw = draw or draw_graph
        self.following = following
        self.index = 0
        self._cache: dict[int, list[DemoOutput | render.DemoFailure]] = {}
        # step -> {position of a demo in the step: the learner's guess, None when shown without one}
        self.answers: dict[int, dict[int, int | None]] = {}
        self.window = Window(0, 1)
        self.seen = 0  # lines of the current step that have been on screen (from the top)
        self.note: str | None = note  # shown above the next frame only
        self.step_notes = dict(step_notes or {})  # shown above every frame of their step
        self.message: RenderableType | None = None  # shown under the next frame only
        self._body: tuple[Any, list[str]] = (None, [])

    @property
    def total(self) -> int:
        return len(self.lesson.steps)

    def resume_index(self) -> int:
        """Where to start: the saved place (step 1 after a lesson was finished), else step 1."""
        if self.progress is None:
            return 0
        saved = self.progress.get(self.lesson.slug)
        return 0 if saved is None else min(saved.step, self.total) - 1

    def outputs(self, index: int) -> list[DemoOutput | render.DemoFailure]:
        if index not in self._cache:
            self._cache[index] = step_outputs(self.lesson, index, self.params)
        return self._cache[index]

    def run(self, start: int | None = None) -> int:
        """Show steps and follow keys until the lesson is finished or the learner quits."""
        index = self.resume_index() if start is None else start
        if not 0 <= index < self.total:
            raise ValueError(f"start: expected a step from 1 to {self.total}, got {index + 1}")
        if start is None and index > 0:
            resuming = _("Resuming at step {step} of {total} (r restarts the lesson).").format(
                step=index + 1, total=self.total
            )
            self.note = "\n".join(filter(None, (self.note, resuming)))
        self.go_to(index)
        while True:
            key = self.read_key()
            code = getattr(self, f"_on_{action_of(key) or 'other'}")(key)
            if code is not None:
                return code

    def go_to(self, index: int) -> None:
        """Show step ``index`` from its top and save the place."""
        self.index = index
        self.window = Window(0, 1)
        self.seen = 0
        self._save()
        self.show()

    # ---- drawing a frame -------------------------------------------------------------------------

    def body(self) -> list[str]:
        """The current step below its header, rendered once per width and answers, as lines."""
        answers = self.answers.get(self.index, {})
        key = (self.index, self.console.width, tuple(sorted(answers.items(), key=lambda kv: kv[0])))
        if self._body[0] != key:
            outputs = self.outputs(self.index)
            lines = to_lines(self.console, render.step_body(self.lesson, self.index, outputs, self.params, answers))
            self._body = (key, lines)
        return self._body[1]

    def show(self, *, last: bool = False) -> None:
        """Clear the screen (on a terminal) and draw the frame: note, header, the window onto the step, keys.

        ``last``: the lesson's closing frame: the end of the step under its title, the message (the lesson
        is complete) in place of the keys, so nothing scrolls the title off a small terminal."""
        notes = "\n".join(filter(None, (self.note, self.step_notes.get(self.index))))
        note = to_lines(self.console, render.note(notes)) if notes else []
        header = to_lines(self.console, render.step_header(self.lesson, self.index))
        message = to_lines(self.console, self.message) if self.message else []
        body = self.body()
        rows = self.console.height - len(note) - len(header) - len(message) - FRAME_LINES
        self.window = self.window.resized(len(body), max(MIN_ROWS, rows))
        if last:
            self.window = Window(len(body), self.window.rows, len(body))  # the end of the step stays in view
        self.seen = max(self.seen, self.window.bottom)
        footer = [] if last else to_lines(self.console, self.footer())
        lines = [*note, *header, *self.window.visible(body), "", *message, *footer]
        self.note = self.message = None
        if self.console.is_terminal:
            self.console.clear()
        self.console.file.write("\n".join(lines) + "\n")
        self.console.file.flush()

    def footer(self) -> Text:
        """The keys line: how much is left to scroll, the question's keys, or the usual keys."""
        pending = self.pending()
        choices = 0
        if pending is not None and self.window.at_end:
            choices = len(self._prediction(pending).choices)
        return render.key_footer(self.index, self.total, self.window.remaining, choices)

    def pending(self) -> int | None:
        """The position of the demo whose question waits for an answer on this step, if any."""
        return render.first_question(self.outputs(self.index), self.answers.get(self.index, {}))

    def _prediction(self, position: int) -> Prediction:
        out = self.outputs(self.index)[position]
        assert isinstance(out, DemoOutput) and out.prediction is not None
        return out.prediction

    def _say(self, message: str) -> None:
        self.message = cjk_text(message, style="dim")
        self.show()

    def _scroll(self, window: Window) -> None:
        self.window = window
        self.show()

    # ---- what each key does (one handler per action; None: keep reading keys) --------------------

    def _on_next(self, key: str) -> int | None:
        """Enter, n, →: answer-less reveal of a waiting question, else scroll until seen, else the next step."""
        pending = self.pending()
        if pending is not None and self.window.at_end:
            self._answer(pending, None)
        elif self.seen < self.window.total:
            self._scroll(self.window.paged())
        elif self.index == self.total - 1:
            self._save(1, completed=True)  # finished: the next ``lesson N`` starts it over at step 1
            finished = render.finished(self.lesson, self.following)
            self.message = Group(self.message, finished) if self.message is not None else finished
            self.show(last=True)
            return 0
        else:
            self.go_to(self.index + 1)
        return None

    def _on_page(self, key: str) -> int | None:
        """Space, PgDn: a page down, and at the end of the step what Enter does, except reveal a waiting
        question's answer: a learner paging with Space must not skip the guess (only Enter shows it)."""
        if not self.window.at_end:
            self._scroll(self.window.paged())
            return None
        pending = self.pending()
        if pending is not None:
            choices = len(self._prediction(pending).choices)
            self._say(
                _("Space only scrolls: answer with 1 to {n}, or press Enter to see the answer.").format(n=choices)
            )
            return None
        return self._on_next(key)

    def _on_down(self, key: str) -> None:
        if not self.window.at_end:
            self._scroll(self.window.moved(1))

    def _on_up(self, key: str) -> None:
        if not self.window.at_top:
            self._scroll(self.window.moved(-1))

    def _on_pageup(self, key: str) -> None:
        if not self.window.at_top:
            self._scroll(self.window.paged(-1))

    def _on_back(self, key: str) -> None:
        if self.index == 0:
            self._say(_("This is the first step."))
        else:
            self.go_to(self.index - 1)

    def _on_restart(self, key: str) -> None:
        self.go_to(0)

    def _on_answer(self, key: str) -> None:
        """1 to 9: the answer to the question on screen."""
        pending = self.pending()
        if pending is None:
            self._on_other(key)
        elif not self.window.at_end:
            self._say(_("The question is further down: space scrolls to it."))
        elif int(key) > len(self._prediction(pending).choices):
            self._say(_("Choose 1 to {n}.").format(n=len(self._prediction(pending).choices)))
        else:
            self._answer(pending, int(key) - 1)

    def _answer(self, position: int, guess: int | None) -> None:
        """Record ``guess`` and show the verdict and the numbers, the question at the top of the window."""
        question = to_lines(self.console, render.prediction_question(self._prediction(position)))
        start = len(self.body()) - len(question)  # the question is the last thing shown before the answer
        self.answers.setdefault(self.index, {})[position] = guess
        self.window = Window(len(self.body()), self.window.rows, max(self.window.top, start))
        self.show()

    def _on_graph(self, key: str) -> None:
        if self.pending() is not None:
            self._say(_("Answer the question first; then g draws the graph."))
            return
        if self._drawable():  # drawing takes a moment: say so first, unless there is nothing to draw
            self._say(_("Drawing the graph…"))
        self.message = self.graph_message()
        self.show()

    def _on_quit(self, key: str) -> int:
        if self.progress is not None:
            message = _("Stopped at step {step} of {total}. Resume with: microgradnorm lesson {number}")
        else:
            message = _(
                "Stopped at step {step} of {total}. Your place was not saved; come back with: "
                "microgradnorm lesson {number} --step {step}"
            )
        text = message.format(step=self.index + 1, total=self.total, number=self.lesson.number)
        self.console.print(cjk_text(text, style="dim"))
        return 0

    def _on_resize(self, key: str) -> None:
        self.show()  # the body is rendered again at the new width, the window fitted to the new height

    def _on_other(self, key: str) -> None:
        self._say(_("Keys: {keys}").format(keys=render.KEY_HELP))

    def graph_message(self) -> Text:
        """Draw the current step's graph (the last demo of the step that has one) and say where."""
        drawable = self._drawable()
        if not drawable:
            return cjk_text(_("This step has no graph to draw."), style="dim")
        try:  # the default folder is in the state directory, which can itself be unusable
            folder = self.graph_dir if self.graph_dir is not None else default_graph_dir()
            path = folder / f"{self.lesson.name}-step{self.index + 1:02d}.svg"
            return cjk_text(self.draw(drawable[-1].graph, path, **drawable[-1].graph_options))
        except Exception as exc:  # drawing is a side show: report it, never end the lesson
            if os.environ.get("MICROGRADNORM_DEBUG"):
                raise
            return cjk_text(_("Could not draw the graph: {error}").format(error=one_line(exc)), style="red")

    def _drawable(self) -> list[DemoOutput]:
        """The current step's demo outputs that have a graph to draw."""
        return [o for o in self.outputs(self.index) if isinstance(o, DemoOutput) and o.graph is not None]

    def _save(self, step: int | None = None, completed: bool | None = None) -> None:
        """Save the place (``step``, 1-based; default the current one). A save that fails (the folder became
        read-only meanwhile) stops saving and says why once, under the next frame; the lesson goes on."""
        if self.progress is None:
            return
        try:
            self.progress.save(self.lesson.slug, step or self.index + 1, self.total, completed=completed)
        except OSError as exc:
            self.progress = None
            reason = exc.strerror or str(exc) or type(exc).__name__
            where = f"{exc.filename}: {reason}" if exc.filename else reason
            self.message = cjk_text(_("Progress is not saved: {reason}").format(reason=where), style="yellow")
