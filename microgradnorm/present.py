"""Rich renderables for reports. Pure functions: data in, renderable out, no printing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import (
    assemble,  # a translated sentence whose fields keep their own styles
    cjk_text,
    sentences,
    separated,
)
from microgradnorm.numfmt import err, fmt
from microgradnorm.verdicts import mark_text


class CheckReport(Protocol):
    """What the table reads of a :class:`microgradnorm.check.CheckReport`. This module stands below
    ``check`` (a report shows itself in a notebook through :func:`check_html`), so it names the fields only."""

    title: str
    shape: tuple[int, ...]
    eps: float
    variance: str
    loss: float
    loss_rounding: float
    nodes: list[Any]  # microgradnorm.check.NodeCheck
    tolerances: dict[str, float]
    passed: bool
    failures: list[Any]


__all__ = ["check_html", "check_table", "shown_error"]


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
        node.closed_form_abs, node.closed_form_rel, node.closed_form_scale, t["closed_form_rtol"], node.closed_form_atol
    )


def _fd_error(node, t: dict[str, float]) -> tuple[float, bool]:
    return shown_error(node.fd_abs, node.fd_rel, node.fd_scale, t["fd_rtol"], node.fd_atol)


def _entry_errors(node, k: int, shown: tuple[tuple[float, bool], tuple[float, bool]]) -> tuple[str, str]:
    """The two error cells of entry k, absolute or relative as the node's are (``shown``)."""
    cells = []
    for other, scale, (_value, absolute) in (
        (node.closed_form[k], node.closed_form_scale, shown[0]),
        (node.finite_diff[k], node.fd_scale, shown[1]),
    ):
        diff = abs(node.autograd[k] - other)
        if diff != diff:  # no finite difference at this entry
            cells.append("—")
        elif absolute or scale == 0.0:
            cells.append(_err_cell((diff, True)))
        else:
            cells.append(_err_cell((diff / scale, False)))
    return cells[0], cells[1]


def _largest(errors: list[tuple[float, bool]]) -> str:
    """The largest relative error, and the largest absolute one where the reference is about 0, if any."""
    rel = [v for v, absolute in errors if not absolute]
    abs_ = [v for v, absolute in errors if absolute]
    if not rel:
        return _("{error} absolute (the gradient is about 0)").format(error=err(max(abs_)))
    if abs_:
        return _("{error} relative ({absolute} absolute where the gradient is about 0)").format(
            error=err(max(rel)), absolute=err(max(abs_))
        )
    return _("{error} relative").format(error=err(max(rel)))


def _headers() -> dict[str, str]:
    """The check table's column headers, in the current language."""
    # Translators: column headers of microgradnorm check's table; keep them short (the table must fit 60 columns)
    return {
        "node": pgettext("check table header", "node"),
        "stage": pgettext("check table header", "stage"),
        "autograd": pgettext("check table header", "autograd"),
        "closed form": pgettext("check table header", "closed form"),
        "finite diff": pgettext("check table header", "finite diff"),
        "err cf": pgettext("check table header", "err cf"),
        "err fd": pgettext("check table header", "err fd"),
    }


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


def check_table(report: CheckReport, full: bool = False) -> RenderableType:
    """The per-node table of a :class:`~microgradnorm.check.CheckReport`, with a verdict line.

    Each row is one named node, shown at the entry where autograd and the closed
    form differ most; ``full`` lists every entry instead, each with its own errors
    and mark. Where the console is narrower than the table's numbers need, the
    stage column goes first; below :data:`CHECK_TABLE_WIDTH` columns, the three
    gradients are kept and the error columns give way to one summary line. No line
    ends in spaces, so piped output stays clean.
    """
    wide, table = _wide_check_table(report, full, stage=True)
    middle, middle_table = _wide_check_table(report, full, stage=False)
    fallback = ByWidth(middle, _narrow_check_table(report, full), CHECK_TABLE_WIDTH, measure=middle_table)
    return NoTrailingSpaces(ByWidth(wide, fallback, CHECK_TABLE_WIDTH, measure=table))


class NoTrailingSpaces:
    """Render ``renderable`` with the spaces that rich pads lines with removed from the end of each line."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[Segment]:
        for line in console.render_lines(self.renderable, options, pad=False, new_lines=False):
            while line and not line[-1].control and not line[-1].text.rstrip(" "):
                line.pop()
            if line and not line[-1].control:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(" "), last.style)
            yield from line
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)


class Phrases:
    """Phrases joined by ``sep``, wrapped only between phrases (never inside a formula)."""

    def __init__(self, phrases: list[str], sep: str = ", ", style: str = "") -> None:
        self.phrases, self.sep, self.style = phrases, sep, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[RenderableType]:
        lines = [self.phrases[0]]
        for phrase in self.phrases[1:]:
            joined = lines[-1] + self.sep + phrase
            if cell_len(joined) <= options.max_width:
                lines[-1] = joined
            else:
                lines[-1] += self.sep.rstrip()
                lines.append(phrase)
        for line in lines:
            yield Text(line, style=self.style, overflow="fold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        whole = cell_len(self.sep.join(self.phrases))
        return Measurement(max(cell_len(p) for p in self.phrases), whole)


NOTEBOOK_WIDTH = 110  # columns of the check table in a notebook: the wide layout, with the stage column


def check_html(report: CheckReport) -> str:
    """The table of :func:`check_table` as HTML, for Jupyter (``CheckReport._repr_html_``): the same rows, marks
    and verdict as the terminal shows, coloured by rich's own HTML export."""
    import io

    console = Console(record=True, width=NOTEBOOK_WIDTH, file=io.StringIO(), color_system="truecolor")
    console.print(check_table(report))
    return console.export_html(
        inline_styles=True,
        code_format='<pre style="font-family: ui-monospace, monospace; line-height: 1.3">{code}</pre>',
    )


def _title(report: CheckReport) -> Phrases:
    """What was checked: the norm, x's shape, eps, the variance form (if the norm has one), the loss."""
    shape = "×".join(map(str, report.shape))
    phrases = [_("{norm} of x [{shape}]").format(norm=report.title, shape=shape), f"eps = {report.eps:g}"]
    if any(node.name == "var" for node in report.nodes):
        # Translators: the variance forms of the check's title: centred first ("two-pass") or E[x²] − E[x]² ("naive")
        forms = {"two_pass": pgettext("variance form", "two-pass"), "naive": pgettext("variance form", "naive")}
        form = forms.get(report.variance, report.variance.replace("_", "-"))
        phrases.append(_("variance {form}").format(form=form))
    phrases.append(f"loss = sum(y · dy) = {report.loss:.6g}")
    # Translators: between the phrases of the check report's title ("LayerNorm of x [4], eps = 1e-05, ...")
    return Phrases(phrases, sep=pgettext("title phrases", ", "), style="bold")


def _entries(node, full: bool) -> list[tuple[int, bool]]:
    """The entries a table shows for ``node``, each with its mark: every one (``full``) or the worst."""
    if not full:
        return [(node.worst, node.passed)]
    ok = node.entry_ok if node.entry_ok is not None else [node.passed] * len(node.autograd)
    return [(k, bool(ok[k])) for k in range(len(node.autograd))]


def _narrow_check_table(report: CheckReport, full: bool) -> Group:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    headers = _headers()
    table.add_column(headers["node"], no_wrap=True)
    for name in ("autograd", "closed form", "finite diff"):
        table.add_column(headers[name], justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for node in report.nodes:
        for k, ok in _entries(node, full):
            table.add_row(
                node.labels[k], fmt(node.autograd[k]), fmt(node.closed_form[k]), fmt(node.finite_diff[k]), mark_text(ok)
            )
    t = report.tolerances
    worst_cf = _largest([_cf_error(n, t) for n in report.nodes])
    worst_fd = _largest([_fd_error(n, t) for n in report.nodes])
    if report.passed:
        verdict = assemble(
            _("{all_agree} {n} nodes; largest error against the closed form {cf}, against the finite difference {fd}."),
            all_agree=_all_agree(),
            n=str(len(report.nodes)),
            cf=worst_cf,
            fd=worst_fd,
        )
    else:
        verdict = _disagreement(report)
    if full:
        return Group(_title(report), table, verdict)
    note = cjk_text(_("Each row: the entry where autograd and the closed form differ most."), style="dim")
    return Group(_title(report), table, note, verdict)


def _all_agree() -> Text:
    # Translators: the start of the check report's verdict line, in bold green, followed by the details
    return Text(_("All agree."), style="bold green")


def _disagreement(report: CheckReport) -> Text:
    # Translators: {disagreement} is "Disagreement" in bold red; {nodes} lists the node names
    return assemble(
        _("{disagreement} at {nodes}."),
        disagreement=Text(_("Disagreement"), style="bold red"),
        nodes=separated([n.name for n in report.failures]),
    )


def _wide_check_table(report: CheckReport, full: bool, stage: bool) -> tuple[Group, Table]:
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0))
    headers = _headers()
    table.add_column(headers["node"], no_wrap=True)
    if stage:
        table.add_column(headers["stage"], style="dim", no_wrap=True, overflow="ellipsis")
    for name in ("autograd", "closed form", "finite diff", "err cf", "err fd"):
        table.add_column(headers[name], justify="right", no_wrap=True)
    table.add_column("", justify="center", no_wrap=True)
    t = report.tolerances
    any_absolute = False
    for node in report.nodes:
        shown = (_cf_error(node, t), _fd_error(node, t))
        any_absolute |= shown[0][1] or shown[1][1]
        for i, (k, ok) in enumerate(_entries(node, full)):
            errors = _entry_errors(node, k, shown) if full else (_err_cell(shown[0]), _err_cell(shown[1]))
            numbers = (fmt(node.autograd[k]), fmt(node.closed_form[k]), fmt(node.finite_diff[k]))
            where = (node.labels[k], node.stage if i == 0 else "") if stage else (node.labels[k],)
            table.add_row(*where, *numbers, *errors, mark_text(ok))
    verdict = _wide_verdict(report) if report.passed else _disagreement(report)
    return Group(_title(report), table, _wide_notes(report, any_absolute, full), verdict), table


def _wide_notes(report: CheckReport, any_absolute: bool, full: bool) -> Text:
    sampled = [n for n in report.nodes if n.fd_count < len(n.autograd)]
    if full:
        notes = [
            _(
                "err: normwise relative error of autograd against the closed form (cf) and the finite difference "
                "(fd), entry by entry (— where no finite difference was taken)."
            )
        ]
    else:
        notes = [
            _("err: normwise relative error of autograd against the closed form (cf) and the finite difference (fd).")
        ]
    if any_absolute:
        notes.append(
            _(
                "abs: the absolute error instead, where the reference is about 0 and a relative error would "
                "divide by it."
            )
        )
    if sampled:
        notes.append(_("Finite differences at up to {n} entries per node.").format(n=max(n.fd_count for n in sampled)))
    return cjk_text(sentences(notes), style="dim")


def _wide_verdict(report: CheckReport) -> Text:
    t = report.tolerances
    return assemble(
        _(
            "{all_agree} {n} nodes: autograd = closed form within {cf_rtol} relative + {cf_atol} absolute (more "
            "where a gradient is what is left of terms that cancelled), = finite difference within {fd_rtol} "
            "relative + {fd_atol} absolute + 3 × the loss's rounding ({rounding}) / step (step {step} of the "
            "value's size, float64)."
        ),
        all_agree=_all_agree(),
        n=str(len(report.nodes)),
        cf_rtol=f"{t['closed_form_rtol']:.0e}",
        cf_atol=f"{t['closed_form_atol']:.0e}",
        fd_rtol=f"{t['fd_rtol']:.0e}",
        fd_atol=f"{t['fd_atol']:.0e}",
        rounding=f"{report.loss_rounding:.1e}",
        step=f"{t['fd_step']:.0e}",
    )
