"""Rich renderables for the exercise commands. Pure functions: data in, renderable out.

Every word is in the learner's language (``_()`` here, :mod:`.messages` for the
grader's); Chinese text wraps between characters (:func:`~microgradnorm.i18n.text.cjk_text`)
and a sentence with styled parts stays one translated sentence
(:func:`~microgradnorm.lessons.render.assemble`).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from microgradnorm.exercises.catalog import EXERCISES, Exercise
from microgradnorm.i18n import _, lazy_gettext, pgettext
from microgradnorm.i18n.text import assemble, cjk_text, separated
from microgradnorm.numfmt import bracketed, plain
from microgradnorm.verdicts import mark_text

if TYPE_CHECKING:
    from microgradnorm.exercises.grader import GradeResult, Worst
    from microgradnorm.exercises.workspace import InitReport, Progress

__all__ = [
    "exercise_list",
    "grade_report",
    "hint_view",
    "init_report",
    "plain_text",
    "solution_diff",
    "solution_view",
    "watch_all_done",
    "watch_checking",
    "watch_header",
    "watch_help",
    "watch_not_passed",
    "watch_passed",
    "watch_unknown",
]

_MARK = {True: mark_text(True), False: mark_text(False), None: Text("·", style="dim")}


def _statuses() -> dict[str, Text]:
    """The status column's words, in the learner's language."""
    return {
        "done": Text(pgettext("exercise status", "✓ done"), style="green"),
        "missing": Text(pgettext("exercise status", "missing"), style="yellow"),
        "failed": Text(pgettext("exercise status", "✗ not yet"), style="red"),
        "started": Text(pgettext("exercise status", "started"), style="yellow"),
        "todo": Text(pgettext("exercise status", "· to do"), style="dim"),
    }


def _status(progress: Progress, ex: Exercise, edited: bool, exists: bool) -> Text:
    rec = progress.exercises.get(ex.name, {})
    statuses = _statuses()
    if rec.get("passed"):
        return statuses["done"]
    if not exists:
        return statuses["missing"]
    last = rec.get("last")
    if last and last != "not_written":
        return statuses["failed"]
    if edited:
        return statuses["started"]
    return statuses["todo"]


_LEGEND = lazy_gettext("hints: how many hints you have seen (`microgradnorm exercise hint N` shows the next one)")
WIDE = 100  # columns from which "about" gets a column of its own; below, a line under each exercise


def about(ex: Exercise) -> str:
    """What an exercise is about: its title and topic, in the learner's language."""
    # Translators: an exercise's title, then what it is about ("LayerNorm from primitives: build it from ...")
    return _("{title}: {topic}").format(title=_(ex.title), topic=_(ex.topic))


class _ExerciseTable:
    """The exercises with their status: one row each, and what each is about beside it or under it."""

    def __init__(self, progress: Progress, edited: dict[str, bool], exists: dict[str, bool], nxt: Exercise | None):
        self.progress, self.edited, self.exists, self.nxt = progress, edited, exists, nxt

    def _cells(self, ex: Exercise) -> list[RenderableType]:
        seen = self.progress.hints_shown(ex)
        return [
            str(ex.number),
            Text(ex.name, style="bold" if ex is self.nxt else ""),
            _status(self.progress, ex, self.edited.get(ex.name, False), self.exists.get(ex.name, True)),
            str(seen) if seen else "",
        ]

    def _table(self, wide: bool, header: bool = True) -> Table:
        # the same box with or without the header, so that the columns of the header and of the rows line up
        table = Table(box=box.SIMPLE_HEAD, show_header=header, show_edge=False, pad_edge=False)
        table.header_style = "bold"
        status = max(cell_len(t.plain) for t in _statuses().values())
        hints = pgettext("exercise table header", "hints")
        table.add_column("#", justify="right", width=2)
        table.add_column(
            pgettext("exercise table header", "exercise"), no_wrap=True, width=max(len(ex.name) for ex in EXERCISES)
        )
        table.add_column(pgettext("exercise table header", "status"), no_wrap=True, width=max(status, 9))
        table.add_column(hints, justify="right", width=max(cell_len(hints), 5))
        if wide:
            table.add_column(pgettext("exercise table header", "about"), style="dim", ratio=1)
        return table

    def __rich_console__(self, console: Any, options: Any) -> Any:
        if options.max_width >= WIDE:
            table = self._table(wide=True)
            for ex in EXERCISES:
                table.add_row(*self._cells(ex), cjk_text(about(ex)))
            yield table
            return
        yield self._table(wide=False)  # the header; then each exercise, with what it is about under it
        for ex in EXERCISES:
            row = self._table(wide=False, header=False)
            row.add_row(*self._cells(ex))
            yield row
            yield Padding(cjk_text(about(ex), style="dim"), (0, 0, 0, 3))


def exercise_list(
    progress: Progress,
    workspace: Path | None,
    edited: dict[str, bool],
    exists: dict[str, bool],
    problem: str | None = None,
) -> RenderableType:
    """Every exercise in order with its status, the hints seen, and what to do next.

    At 100 columns or more "about" is a column; narrower, it is a wrapped line
    under each exercise, so that it stays readable at 80 and 60 columns.
    """
    done = sum(progress.passed(ex) for ex in EXERCISES)
    nxt = next((ex for ex in EXERCISES if not progress.passed(ex)), None)
    exists = {ex.name: exists.get(ex.name, workspace is None) for ex in EXERCISES}
    parts: list[RenderableType] = [
        _ExerciseTable(progress, edited, exists, nxt),
        cjk_text(str(_LEGEND), style="dim"),
        Text(_("{done}/{total} done").format(done=done, total=len(EXERCISES)), style="bold"),
    ]
    if workspace is None and problem:  # the remembered workspace is gone: said as check says it
        parts.append(cjk_text(problem[:1].upper() + problem[1:], style="yellow"))
    elif workspace is None:
        parts.append(cjk_text(_("No workspace yet: `microgradnorm exercise init [DIR]` makes one."), style="yellow"))
    else:
        parts.append(assemble(_("workspace: {path}"), "dim", path=Text(str(workspace))))
    if nxt is not None and workspace is not None:
        parts.append(
            assemble(
                _("next: {name}  edit {path}, then `microgradnorm exercise check`"),
                name=Text(nxt.name, style="bold"),
                path=str(workspace / nxt.filename),
            )
        )
    elif nxt is None:
        parts.append(cjk_text(_("All exercises done. Well earned."), style="bold green"))
    return Group(*parts)


def _runnable(path: Path) -> str:
    """``path`` as typed from the current directory: relative when it is below it, else as it is."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def init_report(report: InitReport, next_exercise: Exercise | None = EXERCISES[0]) -> RenderableType:
    """What ``init`` copied, what it left alone, and where to go on (the first unpassed exercise)."""
    lines: list[RenderableType] = [assemble(_("Exercise workspace: {path}"), "bold", path=Text(str(report.workspace)))]
    if report.copied:
        copied = _("copied {n} scaffold(s): {names}").format(n=len(report.copied), names=separated(report.copied))
        lines.append(cjk_text(copied))
    if report.switched:
        # Translators: "the English version" is the language of this message: say "the Chinese version" in Chinese
        switched = _("{n} file(s) you had not started are now the English version: {names}")
        lines.append(cjk_text(switched.format(n=len(report.switched), names=separated(report.switched))))
    if report.unchanged:
        unchanged = _("{n} file(s) already there, untouched since init").format(n=len(report.unchanged))
        lines.append(cjk_text(unchanged, style="dim"))
    if report.kept:
        kept = _(
            "kept your edited file(s), not overwritten: {names} (they stay as they are, in their language; "
            "`microgradnorm exercise reset NAME` starts one over in this language, backing yours up first)"
        )
        lines.append(cjk_text(kept.format(names=separated(report.kept)), style="yellow"))
    lines += [cjk_text(note, style="yellow") for note in dict.fromkeys(report.notes)]
    if next_exercise is None:
        lines.append(cjk_text(_("You have passed every exercise already. Well earned."), style="green"))
        return Group(*lines)
    if next_exercise is EXERCISES[0]:
        start = _(
            "Start with {file}: write your code where it says so, run it on its own with `python {path}`, then "
            "grade it with `microgradnorm exercise check` (or keep `microgradnorm exercise watch` open in a second "
            "terminal)."
        )
    else:
        start = _(
            "Next up: {file}: write your code where it says so, run it on its own with `python {path}`, then grade "
            "it with `microgradnorm exercise check` (or keep `microgradnorm exercise watch` open in a second "
            "terminal)."
        )
    path = _runnable(report.workspace / next_exercise.filename)
    lines.append(cjk_text(start.format(file=next_exercise.filename, path=path)))
    return Group(*lines)


def _checks_table(result: GradeResult) -> RenderableType:
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("detail", style="dim")
    for row in result.rows:
        table.add_row(_MARK[row.ok], row.label, cjk_text(row.detail))
    return Padding(table, (0, 0, 0, 2))


def _worst_table(w: Worst) -> RenderableType:
    idx = bracketed(w.index) if w.index else ""
    worst = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    worst.add_column(pgettext("worst entry table", "worst entry"))
    worst.add_column(pgettext("worst entry table", "expected"), justify="right")
    worst.add_column(pgettext("worst entry table", "got"), justify="right")
    worst.add_column(pgettext("worst entry table", "difference"), justify="right")
    worst.add_row(f"{w.output}{idx}", plain(w.expected), plain(w.got), plain(w.got - w.expected))
    # Translators: under the worst entry: where it was found, "on the first input: x [3, 5], eps = 0.001"
    where = cjk_text(_("on the {case}").format(case=w.case), style="dim")
    return Padding(Group(worst, where), (0, 0, 0, 2))


def _what_next(result: GradeResult, next_exercise: Exercise | None) -> list[RenderableType]:
    """The last line: the reference and the next exercise after a pass, else where to write or a hint."""
    number = result.exercise.number
    if result.passed and result.recorded:
        if next_exercise is not None:
            text = _(
                "Passed. `microgradnorm exercise solution {number}` shows the reference solution. Next: {name} "
                "(`microgradnorm exercise check {next}` grades it)."
            ).format(number=number, name=next_exercise.name, next=next_exercise.number)
        else:
            text = _("Passed. `microgradnorm exercise solution {number}` shows the reference solution.")
            text = text.format(number=number)
        return [cjk_text(text, style="green")]
    if result.status == "not_written":
        return [cjk_text(_("Open {path} and write your code there.").format(path=result.path), style="dim")]
    if not result.passed:
        stuck = _("Stuck? `microgradnorm exercise hint {number}` gives one hint at a time.").format(number=number)
        lesson = _("`microgradnorm lesson {lesson}` teaches what this exercise needs.").format(
            lesson=result.exercise.lesson
        )
        return [cjk_text(stuck, style="dim"), cjk_text(lesson, style="dim")]  # a line each: no command split
    return []


def _head(result: GradeResult) -> RenderableType:
    """The exercise and its title, then the seed on a line of its own (never split from its number)."""
    ex = result.exercise
    seed = Text(_("inputs of --seed {seed}").format(seed=result.seed), style="dim", no_wrap=True, overflow="fold")
    return Group(cjk_text(Text.assemble((ex.name, "bold"), f"  {_(ex.title)}")), seed)


def _sentence_case(detail: str) -> str:
    """The explanation as it continues a title after a colon: its first word in lower case when it is an
    ordinary word ("The variance" -> "the variance"; "NumPy", "P", "RMSNorm" and code stay as they are)."""
    word = detail.split(" ", 1)[0]
    if len(word) > 1 and word.isalpha() and word[0].isupper() and word[1:].islower():
        return detail[:1].lower() + detail[1:]
    return detail


def _finding(title: str, detail: str) -> RenderableType:
    """One diagnosis as a bullet whose wrapped lines hang under its text, not under the bullet."""
    if detail:
        # Translators: one diagnosis: its short title, then the explanation
        line = assemble(_("{title}: {detail}"), title=Text(title, style="bold"), detail=_sentence_case(detail))
    else:  # its explanation held back until the mistake is found again
        line = Text(title, style="bold")
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    grid.add_row(Text("•", style="red"), cjk_text(line))
    return Padding(grid, (0, 0, 0, 2))


def grade_report(result: GradeResult, *, next_exercise: Exercise | None = None) -> RenderableType:
    """The outcome of one check: the per-check table, the diagnosis and the worst entry."""
    parts: list[RenderableType] = [_head(result), _checks_table(result)] if result.rows else [_head(result)]
    style = "bold green" if result.passed else ("yellow" if result.status == "not_written" else "bold red")
    parts.append(cjk_text(result.summary, style=style))
    if result.where:
        parts.append(assemble(_("  at {where}"), "dim", where=Text(result.where)))
    if result.findings:
        parts.append(cjk_text(_("What went wrong:"), style="bold"))
        parts += [_finding(f.title, f.detail) for f in result.findings]
    if result.worst is not None:
        parts.append(_worst_table(result.worst))
    if result.printed:
        parts.append(cjk_text(_("Your code printed (shown for you, not graded):"), style="dim"))
        parts.append(Padding(Text(result.printed, style="dim"), (0, 0, 0, 2)))
    parts += [cjk_text(note, style="yellow") for note in result.notes]
    return Group(*parts, *_what_next(result, next_exercise))


FEEDBACK_WIDTH = 100  # columns of a report written to a file (a class's feedback, Gradescope's output)


def plain_text(parts: Iterable[RenderableType], width: int = FEEDBACK_WIDTH) -> str:
    """``parts`` as plain text for a file: no colour, ``width`` columns, no trailing spaces."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    for part in parts:
        console.print(part, highlight=False)
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


MORE_HINTS = lazy_gettext("Run the same command again for hint {k}.")


def hint_view(
    ex: Exercise, hints: tuple[str, ...], shown: int, more: str | None = None, note: str | None = None
) -> RenderableType:
    """The hints seen so far, the newest one highlighted, and how many are left.

    ``more`` says how to get the next one, with ``{k}`` for its number (default: run the same command);
    ``note`` says why the hints are in English when another language was asked for.
    """
    head = [cjk_text(note, style="yellow")] if note else []
    if not hints:
        return Group(*head, cjk_text(_("{name} has no hints.").format(name=ex.name), style="dim"))
    title = _("Hints for {name} ({shown} of {total})").format(name=ex.name, shown=shown, total=len(hints))
    parts: list[RenderableType] = [*head, cjk_text(title, style="bold")]
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    for i, hint in enumerate(hints[:shown], 1):
        newest = i == shown
        body = cjk_text(hint, style="" if newest else "dim")  # plain text: a**p and x_i are maths, not Markdown
        grid.add_row(Text(f"{i}.", style="bold cyan" if newest else "dim"), body)
    parts.append(grid)
    if shown < len(hints):
        parts.append(cjk_text(str(more or MORE_HINTS).format(k=shown + 1), style="dim"))
    else:
        last = _(
            "That was the last hint. After you pass, `microgradnorm exercise solution {number}` shows the reference "
            "(or now, with --force)."
        )
        parts.append(cjk_text(last.format(number=ex.number), style="dim"))
    return Group(*parts)


def solution_view(ex: Exercise, code: str, note: str | None = None) -> RenderableType:
    """The reference solution, highlighted (``note``: why it is in English, if another language was asked for)."""
    head = [cjk_text(note, style="yellow")] if note else []
    return Group(
        *head,
        cjk_text(_("Reference solution for {name}").format(name=ex.name), style="bold"),
        Syntax(code, "python", line_numbers=True, word_wrap=True),
    )


def solution_diff(ex: Exercise, mine: str, reference: str, path: Path, plain: bool = False) -> Any:
    """How the learner's file differs from the reference solution: a unified diff (``plain``: its text)."""
    import difflib

    lines = difflib.unified_diff(
        mine.splitlines(keepends=True),
        reference.splitlines(keepends=True),
        fromfile=str(path),
        tofile=_("reference solution of {name}").format(name=ex.name),
    )
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if plain:
        return diff
    if not diff:
        return cjk_text(_("Your file is the reference solution, line for line."), style="green")
    head = cjk_text(_("Your file against the reference solution of {name}:").format(name=ex.name), style="bold")
    return Group(head, Syntax(diff, "diff", word_wrap=True))


# ---- watch mode ---------------------------------------------------------------------------

WATCH_HELP = lazy_gettext(
    "save a file to check it · type a letter and Enter: n next · h hint · c check now · l list · q quit"
)


def watch_help() -> RenderableType:
    return cjk_text(str(WATCH_HELP), style="dim")


def watch_header(folder: Path, ex: Exercise) -> RenderableType:
    header = assemble(
        _("Watching {folder}. Current exercise: {name} ({title})."),
        folder=str(folder),
        name=Text(ex.name, style="bold"),
        title=_(ex.title),
    )
    return Group(header, watch_help())


def watch_checking(ex: Exercise) -> RenderableType:
    return cjk_text(_("checking {file} ...").format(file=ex.filename), style="dim")


def watch_passed(nxt: Exercise | None) -> RenderableType:
    """After a pass: what ``n`` moves on to (the same exercise the ``n`` command picks)."""
    if nxt is not None:
        text = _("Type n and Enter to move on to {name}, or keep improving this one.").format(name=nxt.name)
    else:
        text = _("That was the last one: q and Enter quits, or keep improving this one.")
    return cjk_text(text, style="green")


def watch_not_passed(ex: Exercise) -> RenderableType:
    return assemble(
        _("{name} is not passed yet: pass it first, then n moves on."),
        name=Text(ex.name, style="yellow"),
    )


def watch_all_done() -> RenderableType:
    return cjk_text(_("Every exercise is done."), style="bold green")


def watch_unknown(command: str) -> RenderableType:
    return cjk_text(_("unknown command {command!r}; {keys}").format(command=command, keys=WATCH_HELP), style="dim")
