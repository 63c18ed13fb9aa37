"""Rich renderables for reports. Pure functions: data in, renderable out, no printing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from microgradnorm.check import CheckReport

__all__ = ["check_table", "err", "fmt", "nbytes_text", "shown_error"]


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


def err(v: float) -> str:
    """An error or a difference: two significant digits, in scientific notation."""
    return f"{v:.1e}"


def shown_error(abs_err: float, rel_err: float, scale: float, rtol: float, atol: float) -> tuple[float, bool]:
    """The error to show beside the verdict ``abs_err <= atol + rtol * scale``: (error, is_absolute).

    The relative error, unless ``rtol * scale < atol``: then the reference is about 0
    (exactly 0, or rounding away from it), the absolute tolerance decides the verdict,
    and a relative error, divided by about 0, would say nothing; the absolute error is
    shown instead.
    """
    if rtol * scale < atol:
        return abs_err, True
    return rel_err, False


def _err_cell(error: tuple[float, bool]) -> str:
    value, absolute = error
    return f"{err(value)} abs" if absolute else err(value)


def _cf_error(node, t: dict[str, float]) -> tuple[float, bool]:
    return shown_error(
        node.closed_form_abs, node.closed_form_rel, node.closed_form_scale, t["closed_form_rtol"], t["closed_form_atol"]
    )


def _fd_error(node, t: dict[str, float]) -> tuple[float, bool]:
    return shown_error(node.fd_abs, node.fd_rel, node.fd_scale, t["fd_rtol"], t["fd_atol"])


def _largest(errors: list[tuple[float, bool]]) -> str:
    """The largest relative error, and the largest absolute one where the reference is about 0, if any."""
    rel = [v for v, absolute in errors if not absolute]
    abs_ = [v for v, absolute in errors if absolute]
    if not rel:
        return f"{err(max(abs_))} absolute (the gradient is about 0)"
    text = f"{err(max(rel))} relative"
    return text + (f" ({err(max(abs_))} absolute where the gradient is about 0)" if abs_ else "")


class ByWidth:
    """Render ``wide`` when the console is at least ``min_width`` columns, else ``narrow``.

    With ``measure`` (a part of ``wide``, e.g. its table), ``wide`` also needs as many
    columns as ``measure`` takes at its natural width, so that nothing in it is cut short.
    """

    def __init__(
        self, wide: RenderableType, narrow: RenderableType, min_width: int, measure: RenderableType | None = None
    ) -> None:
        self.wide, self.narrow, self.min_width, self.measure = wide, narrow, min_width, measure

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[RenderableType]:
        needed = self.min_width
        if self.measure is not None:
            needed = max(needed, Measurement.get(console, options.update_width(10_000), self.measure).maximum)
        yield self.wide if options.max_width >= needed else self.narrow


CHECK_TABLE_WIDTH = 68  # below this many columns the wide check table would cut its numbers short


def check_table(report: CheckReport, full: bool = False) -> ByWidth:
    """The per-node table of a :class:`~microgradnorm.check.CheckReport`, with a verdict line.

    Each row is one named node, shown at the entry where autograd and the closed
    form differ most; ``full`` lists every entry instead. Below
    :data:`CHECK_TABLE_WIDTH` columns, or the width the wide table's numbers take
    if more, the three gradients are kept and the stage and error columns give way
    to one summary line.
    """
    wide, table = _wide_check_table(report, full)
    return ByWidth(wide, _narrow_check_table(report, full), CHECK_TABLE_WIDTH, measure=table)


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
    t = report.tolerances
    worst_cf = _largest([_cf_error(n, t) for n in report.nodes])
    worst_fd = _largest([_fd_error(n, t) for n in report.nodes])
    if report.passed:
        verdict = Text.assemble(
            ("All agree. ", "bold green"),
            f"{len(report.nodes)} nodes; largest error against the closed form {worst_cf}, "
            f"against the finite difference {worst_fd}.",
        )
    else:
        verdict = Text.assemble(("Disagreement ", "bold red"), f"at {', '.join(n.name for n in report.failures)}.")
    if full:
        return Group(head, table, verdict)
    note = Text("Each row: the entry where autograd and the closed form differ most.", style="dim")
    return Group(head, table, note, verdict)


def _wide_check_table(report: CheckReport, full: bool) -> tuple[Group, Table]:
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
    t = report.tolerances
    any_absolute = False
    for node in report.nodes:
        entries = range(len(node.autograd)) if full else [node.worst]
        cf_error, fd_error = _cf_error(node, t), _fd_error(node, t)
        any_absolute |= cf_error[1] or fd_error[1]
        for i, k in enumerate(entries):
            ok = Text("✓", style="green") if node.passed else Text("✗", style="bold red")
            first = i == 0
            table.add_row(
                node.labels[k],
                node.stage if first else "",
                fmt(node.autograd[k]),
                fmt(node.closed_form[k]),
                fmt(node.finite_diff[k]),
                _err_cell(cf_error) if first else "",
                _err_cell(fd_error) if first else "",
                ok if first else "",
            )
    sampled = [n for n in report.nodes if n.fd_count < len(n.autograd)]
    notes = Text(
        "err: normwise relative error of autograd against the closed form (cf) and the finite difference (fd)."
        + (
            " abs: the absolute error instead, where the reference is about 0 and a relative error would divide by it."
            if any_absolute
            else ""
        )
        + (f" Finite differences at up to {max(n.fd_count for n in sampled)} entries per node." if sampled else ""),
        style="dim",
    )
    if report.passed:
        verdict = Text.assemble(
            ("All agree. ", "bold green"),
            f"{len(report.nodes)} nodes: autograd = closed form within {t['closed_form_rtol']:.0e} relative "
            f"+ {t['closed_form_atol']:.0e} absolute, = finite difference within {t['fd_rtol']:.0e} relative "
            f"+ {t['fd_atol']:.0e} absolute (step {t['fd_step']:.0e}, float64).",
        )
    else:
        names = ", ".join(n.name for n in report.failures)
        verdict = Text.assemble(("Disagreement ", "bold red"), f"at {names}.")
    return Group(table, notes, verdict), table
