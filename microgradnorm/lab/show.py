"""Pictures of the lab's results: rich renderables for the terminal, SVG figures for files.

Pure functions of an :class:`~microgradnorm.lab.experiments.Outcome`; the
``microgradnorm lab`` command and the lessons' demos both use them. Curves are
the loss of each step's minibatch, averaged over the last ``SMOOTH`` (10) steps
so that the trend shows through the noise of 32-example batches, as the claims
read them. Every word is in the reader's language: the outcome's title, claims,
notes and curve names are translated here, when drawn (:mod:`.words`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from rich.console import Group
from rich.text import Text

from microgradnorm.drawing.charts import line_chart
from microgradnorm.drawing.figure import Figure, line_chart_svg
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import assemble, cjk_text, separated
from microgradnorm.lab.experiments import SMOOTH, Claim, Outcome, final_loss
from microgradnorm.verdicts import mark, mark_text

__all__ = ["claim_lines", "curves", "figure", "held_out", "outcome", "smooth", "step_axis"]


def smooth(values: Sequence[float], window: int = SMOOTH) -> list[float]:
    """The mean of each value and the ``window - 1`` before it (fewer at the start)."""
    v = np.asarray(values, dtype=np.float64)
    sums = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, len(v) + 1)
    lo = np.maximum(idx - window, 0)
    return list((sums[idx] - sums[lo]) / (idx - lo))


def step_axis() -> str:
    """The x axis of a loss curve in an SVG figure, in the reader's language (the terminal charts' own entry:
    a terminal chart is given no x label, and says "step" in the reader's language itself)."""
    return pgettext("chart x axis", "step")


def _select(result: Outcome, names: Iterable[str] | None) -> dict[str, list[float]]:
    """The chosen curves, smoothed, under the names the reader sees."""
    chosen = list(result.curves) if names is None else list(names)
    return {result.label(name): smooth(result.curves[name]) for name in chosen}


def curves(result: Outcome, names: Iterable[str] | None = None, *, height: int = 10, title: str | None = None):
    """The loss curves of ``result`` (or of the named ones) on one terminal chart."""
    return line_chart(_select(result, names), height=height, title=title)


def figure(result: Outcome, names: Iterable[str] | None = None, *, title: str | None = None) -> Figure:
    """The same curves as an SVG figure (what the lessons' ``g`` key writes)."""
    label = _("loss (mean of the last {n} minibatches)").format(n=SMOOTH)
    return line_chart_svg(_select(result, names), title=title or str(result.title), xlabel=step_axis(), ylabel=label)


def held_out(result: Outcome, names: Iterable[str] | None = None) -> Text:
    """One line under a chart: each run's loss at the end on its last minibatches, and on held-out examples."""
    chosen = [n for n in (list(result.curves) if names is None else list(names)) if n in result.runs]
    runs = [result.labelled(n, f"{final_loss(result.runs[n]):.2f}/{result.runs[n].test_loss:.2f}") for n in chosen]
    # Translators: {n} is 10; {runs} is a list of runs, each "name training-loss / held-out-loss"
    line = _("loss at the end, last {n} minibatches / held-out examples: {runs}").format(n=SMOOTH, runs=separated(runs))
    return cjk_text(line, style="dim")


def claim_lines(claims: Iterable[Claim]) -> Group:
    """One line per claim: ✓ when this run bears it out, ✗ when it does not (in words too, without colour)."""
    lines = []
    for claim in claims:
        if mark(claim.check if claim.check is not None else claim.ok):
            lines.append(cjk_text(Text.assemble(mark_text(True), " ", claim.text)))
        else:
            # Translators: a claim of the lesson that this run's numbers do not bear out
            lines.append(assemble(_("✗ not shown by this run: {claim}"), "bold red", claim=Text(claim.text)))
    return Group(*lines)


def outcome(result: Outcome, *, height: int = 10) -> Group:
    """Everything the command prints for one experiment: title, curves, claims, notes."""
    parts = [cjk_text(str(result.title), style="bold"), curves(result, height=height), held_out(result),
             claim_lines(result.claims)]  # fmt: skip
    parts += [cjk_text(str(note), style="dim") for note in result.notes]
    return Group(*parts)
