"""Rich renderables for reports. Pure functions: data in, renderable out, no printing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from microgradnorm.check import CheckReport

__all__ = ["check_table", "fmt", "nbytes_text"]


def fmt(v: float, digits: int = 6) -> str:
    """A compact number: ``digits`` significant digits, NaN shown as a dash."""
    if v != v:
        return "—"
    return f"{v:.{digits}g}"


def nbytes_text(n: float) -> str:
    """A byte count for people: 512 B, 3.0 KB, 12.0 MB (powers of 1024)."""
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _err(v: float) -> str:
    return f"{v:.1e}"


class ByWidth:
    """Render ``wide`` when the console is at least ``min_width`` columns, else ``narrow``."""

    def __init__(self, wide: RenderableType, narrow: RenderableType, min_width: int) -> None:
        self.wide, self.narrow, self.min_width = wide, narrow, min_width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[RenderableType]:
        yield self.wide if options.max_width >= self.min_width else self.narrow


CHECK_TABLE_WIDTH = 68  # below this many columns the wide check table would cut its numbers short


def check_table(report: CheckReport, full: bool = False) -> ByWidth:
    """The per-node table of a :class:`~microgradnorm.check.CheckReport`, with a verdict line.

    Each row is one named node, shown at the entry where autograd and the closed
    form differ most; ``full`` lists every entry instead. Below
    :data:`CHECK_TABLE_WIDTH` columns the three gradients are kept and the
    stage and error columns give way to one summary line.
    """
    return ByWidth(_wide_check_table(report, full), _narrow_check_table(report, full), CHECK_TABLE_WIDTH)


def _narrow_check_table(report: CheckReport, full: bool) -> Group:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    table.add_column("node", no_wrap=True)
    for name in ("autograd", "closed form", "finite diff"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for node in report.nodes:
        entries = range(len(node.autograd)) if full else [node.worst]
        for i, k in enumerate(entries):
            mark = (Text("✓", style="green") if node.passed else Text("✗", style="bold red")) if i == 0 else ""
            table.add_row(
                node.labels[k], fmt(node.autograd[k]), fmt(node.closed_form[k]), fmt(node.finite_diff[k]), mark
            )
    shape = "×".join(map(str, report.shape))
    head = Text(f"{report.title} of x [{shape}], eps = {report.eps:g}, loss = {report.loss:.6g}", style="bold")
    worst_cf = max(n.closed_form_rel for n in report.nodes)
    worst_fd = max(n.fd_rel for n in report.nodes)
    if report.passed:
        verdict = Text.assemble(
            ("All agree. ", "bold green"),
            f"{len(report.nodes)} nodes; largest relative error {_err(worst_cf)} against the closed form, "
            f"{_err(worst_fd)} against the finite difference.",
        )
    else:
        verdict = Text.assemble(("Disagreement ", "bold red"), f"at {', '.join(n.name for n in report.failures)}.")
    if full:
        return Group(head, table, verdict)
    note = Text("Each row: the entry where autograd and the closed form differ most.", style="dim")
    return Group(head, table, note, verdict)


def _wide_check_table(report: CheckReport, full: bool) -> Group:
    shape = "×".join(map(str, report.shape))
    title = (
        f"{report.title} of x [{shape}], eps = {report.eps:g}, variance {report.variance.replace('_', '-')}"
        f" · loss = sum(y · dy) = {report.loss:.6g}"
    )
    table = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0),
    )
    table.add_column("node", no_wrap=True)
    table.add_column("stage", style="dim", no_wrap=True, overflow="ellipsis")
    for name in ("autograd", "closed form", "finite diff"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("err cf", justify="right", no_wrap=True)
    table.add_column("err fd", justify="right", no_wrap=True)
    table.add_column("", justify="center", no_wrap=True)
    for node in report.nodes:
        entries = range(len(node.autograd)) if full else [node.worst]
        for i, k in enumerate(entries):
            ok = Text("✓", style="green") if node.passed else Text("✗", style="bold red")
            first = i == 0
            table.add_row(
                node.labels[k],
                node.stage if first else "",
                fmt(node.autograd[k]),
                fmt(node.closed_form[k]),
                fmt(node.finite_diff[k]),
                _err(node.closed_form_rel) if first else "",
                _err(node.fd_rel) if first else "",
                ok if first else "",
            )
    t = report.tolerances
    sampled = [n for n in report.nodes if n.fd_count < len(n.autograd)]
    notes = Text(
        "err: normwise relative error of autograd against the closed form (cf) and the finite difference (fd)."
        + (f" Finite differences at up to {max(n.fd_count for n in sampled)} entries per node." if sampled else ""),
        style="dim",
    )
    if report.passed:
        verdict = Text.assemble(
            ("All agree. ", "bold green"),
            f"{len(report.nodes)} nodes: autograd = closed form within {t['closed_form_rtol']:.0e} relative, "
            f"= finite difference within {t['fd_rtol']:.0e} (step {t['fd_step']:.0e}, float64).",
        )
    else:
        names = ", ".join(n.name for n in report.failures)
        verdict = Text.assemble(("Disagreement ", "bold red"), f"at {names}.")
    return Group(table, notes, verdict)
