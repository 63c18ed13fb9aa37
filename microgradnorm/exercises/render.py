"""Rich renderables for the exercise commands. Pure functions: data in, renderable out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from microgradnorm.exercises.catalog import EXERCISES, Exercise

if TYPE_CHECKING:
    from microgradnorm.exercises.grader import GradeResult, Worst
    from microgradnorm.exercises.workspace import InitReport, Progress

__all__ = [
    "exercise_list",
    "grade_report",
    "hint_view",
    "init_report",
    "solution_view",
    "watch_all_done",
    "watch_checking",
    "watch_header",
    "watch_help",
    "watch_not_passed",
    "watch_passed",
    "watch_unknown",
]

_MARK = {True: Text("✓", style="green"), False: Text("✗", style="bold red"), None: Text("·", style="dim")}


def _status(progress: Progress, ex: Exercise, edited: bool, exists: bool) -> Text:
    rec = progress.exercises.get(ex.name, {})
    if rec.get("passed"):
        return Text("✓ done", style="green")
    if not exists:
        return Text("missing", style="yellow")
    last = rec.get("last")
    if last and last != "not_written":
        return Text("✗ not yet", style="red")
    if edited:
        return Text("started", style="yellow")
    return Text("· to do", style="dim")


_LEGEND = "hints: how many hints you have seen (`microgradnorm exercise hint N` shows the next one)"
WIDE = 100  # columns from which "about" gets a column of its own; below, a line under each exercise


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
        table = Table(box=box.SIMPLE_HEAD if header else None, show_header=header, show_edge=False, pad_edge=False)
        table.header_style = "bold"
        table.add_column("#", justify="right", width=2)
        table.add_column("exercise", no_wrap=True, width=max(len(ex.name) for ex in EXERCISES))
        table.add_column("status", no_wrap=True, width=9)
        table.add_column("hints", justify="right", width=5)
        if wide:
            table.add_column("about", style="dim", ratio=1)
        return table

    def __rich_console__(self, console: Any, options: Any) -> Any:
        if options.max_width >= WIDE:
            table = self._table(wide=True)
            for ex in EXERCISES:
                table.add_row(*self._cells(ex), f"{ex.title}: {ex.topic}")
            yield table
            return
        yield self._table(wide=False)  # the header; then each exercise, with what it is about under it
        for ex in EXERCISES:
            row = self._table(wide=False, header=False)
            row.add_row(*self._cells(ex))
            yield row
            yield Padding(Text(f"{ex.title}: {ex.topic}", style="dim"), (0, 0, 0, 3))


def exercise_list(
    progress: Progress, workspace: Path | None, edited: dict[str, bool], exists: dict[str, bool]
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
        Text(_LEGEND, style="dim"),
        Text(f"{done}/{len(EXERCISES)} done", style="bold"),
    ]
    if workspace is None:
        parts.append(Text("No workspace yet: `microgradnorm exercise init [DIR]` makes one.", style="yellow"))
    else:
        parts.append(Text.assemble(("workspace: ", "dim"), str(workspace)))
    if nxt is not None and workspace is not None:
        parts.append(
            Text.assemble(
                "next: ",
                (nxt.name, "bold"),
                f"  edit {workspace / nxt.filename}, then `microgradnorm exercise check`",
            )
        )
    elif nxt is None:
        parts.append(Text("All exercises done. Well earned.", style="bold green"))
    return Group(*parts)


def _runnable(path: Path) -> str:
    """``path`` as typed from the current directory: relative when it is below it, else as it is."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def init_report(report: InitReport, next_exercise: Exercise | None = EXERCISES[0]) -> RenderableType:
    """What ``init`` copied, what it left alone, and where to go on (the first unpassed exercise)."""
    lines = [Text.assemble(("Exercise workspace: ", "bold"), str(report.workspace))]
    if report.copied:
        lines.append(Text(f"copied {len(report.copied)} scaffold(s): {', '.join(report.copied)}"))
    if report.unchanged:
        lines.append(Text(f"{len(report.unchanged)} file(s) already there, untouched since init", style="dim"))
    if report.kept:
        lines.append(
            Text(
                f"kept your edited file(s), not overwritten: {', '.join(report.kept)}"
                " (`microgradnorm exercise reset NAME` starts one over)",
                style="yellow",
            )
        )
    if next_exercise is None:
        lines.append(Text("You have passed every exercise already. Well earned.", style="green"))
        return Group(*lines)
    start = "Start with" if next_exercise is EXERCISES[0] else "Next up:"
    lines.append(
        Text(
            f"{start} {next_exercise.filename}: write your code where it says so, run it on its own with "
            f"`python {_runnable(report.workspace / next_exercise.filename)}`, then grade it with "
            "`microgradnorm exercise check` (or keep `microgradnorm exercise watch` open in a second terminal).",
        )
    )
    return Group(*lines)


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _checks_table(result: GradeResult) -> RenderableType:
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("detail", style="dim")
    for row in result.rows:
        table.add_row(_MARK[row.ok], row.label, row.detail)
    return Padding(table, (0, 0, 0, 2))


def _worst_table(w: Worst) -> RenderableType:
    idx = "[" + ", ".join(map(str, w.index)) + "]" if w.index else ""
    worst = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    worst.add_column("worst entry")
    worst.add_column("expected", justify="right")
    worst.add_column("got", justify="right")
    worst.add_column("difference", justify="right")
    worst.add_row(f"{w.output}{idx}", _fmt(w.expected), _fmt(w.got), _fmt(w.got - w.expected))
    return Padding(Group(worst, Text(f"on the {w.case}", style="dim")), (0, 0, 0, 2))


def _what_next(result: GradeResult, next_exercise: Exercise | None) -> list[RenderableType]:
    """The last line: the reference and the next exercise after a pass, else where to write or a hint."""
    number = result.exercise.number
    if result.passed and result.recorded:
        nxt = f"  Next: {next_exercise.name} (`microgradnorm exercise check` grades it)." if next_exercise else ""
        text = f"Passed. `microgradnorm exercise solution {number}` shows the reference solution.{nxt}"
        return [Text(text, style="green")]
    if result.status == "not_written":
        return [Text(f"Open {result.path} and write your code there.", style="dim")]
    if not result.passed:
        return [Text(f"Stuck? `microgradnorm exercise hint {number}` gives one hint at a time.", style="dim")]
    return []


def grade_report(result: GradeResult, *, next_exercise: Exercise | None = None) -> RenderableType:
    """The outcome of one check: the per-check table, the diagnosis and the worst entry."""
    ex = result.exercise
    head = Text.assemble((f"{ex.name}", "bold"), f"  {ex.title}", (f"   inputs of --seed {result.seed}", "dim"))
    parts: list[RenderableType] = [head, _checks_table(result)] if result.rows else [head]
    style = "bold green" if result.passed else ("yellow" if result.status == "not_written" else "bold red")
    parts.append(Text(result.summary, style=style))
    if result.where:
        parts.append(Text.assemble(("  at ", "dim"), (result.where, "")))
    if result.findings:
        parts.append(Text("What went wrong:", style="bold"))
        for f in result.findings:
            parts.append(Padding(Text.assemble(("• ", "red"), (f.title, "bold"), ": ", f.detail), (0, 0, 0, 2)))
    if result.worst is not None:
        parts.append(_worst_table(result.worst))
    if result.printed:
        parts.append(Text("Your code printed (shown for you, not graded):", style="dim"))
        parts.append(Padding(Text(result.printed, style="dim"), (0, 0, 0, 2)))
    parts += [Text(note, style="yellow") for note in result.notes]
    return Group(*parts, *_what_next(result, next_exercise))


def hint_view(
    ex: Exercise, hints: tuple[str, ...], shown: int, more: str = "Run the same command again"
) -> RenderableType:
    """The hints seen so far, the newest one highlighted, and how many are left (``more``: how to get the next)."""
    if not hints:
        return Text(f"{ex.name} has no hints.", style="dim")
    parts: list[RenderableType] = [Text(f"Hints for {ex.name} ({shown} of {len(hints)})", style="bold")]
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    for i, hint in enumerate(hints[:shown], 1):
        newest = i == shown
        body = Text(hint, style="" if newest else "dim")  # plain text: a**p and x_i are maths, not Markdown
        grid.add_row(Text(f"{i}.", style="bold cyan" if newest else "dim"), body)
    parts.append(grid)
    if shown < len(hints):
        parts.append(Text(f"{more} for hint {shown + 1}.", style="dim"))
    else:
        parts.append(
            Text(
                f"That was the last hint. After you pass, `microgradnorm exercise solution {ex.number}` "
                "shows the reference (or now, with --force).",
                style="dim",
            )
        )
    return Group(*parts)


def solution_view(ex: Exercise, code: str) -> RenderableType:
    """The reference solution, highlighted."""
    return Group(
        Text(f"Reference solution for {ex.name}", style="bold"),
        Syntax(code, "python", line_numbers=True, word_wrap=True),
    )


# ---- watch mode ---------------------------------------------------------------------------

WATCH_HELP = "save a file to check it · type a letter and Enter: n next · h hint · c check now · l list · q quit"


def watch_help() -> RenderableType:
    return Text(WATCH_HELP, style="dim")


def watch_header(folder: Path, ex: Exercise) -> RenderableType:
    return Group(
        Text.assemble(("Watching", "bold"), f" {folder}. Current exercise: ", (ex.name, "bold"), f" ({ex.title})."),
        watch_help(),
    )


def watch_checking(ex: Exercise) -> RenderableType:
    return Text(f"checking {ex.filename} ...", style="dim")


def watch_passed(nxt: Exercise | None) -> RenderableType:
    """After a pass: what ``n`` moves on to (the same exercise the ``n`` command picks)."""
    after = f"Type n and Enter to move on to {nxt.name}" if nxt else "That was the last one: q and Enter quits"
    return Text(f"{after}, or keep improving this one.", style="green")


def watch_not_passed(ex: Exercise) -> RenderableType:
    return Text.assemble((f"{ex.name} is not passed yet", "yellow"), ": pass it first, then n moves on.")


def watch_all_done() -> RenderableType:
    return Text("Every exercise is done.", style="bold green")


def watch_unknown(command: str) -> RenderableType:
    return Text(f"unknown command {command!r}; {WATCH_HELP}", style="dim")
