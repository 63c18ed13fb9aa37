"""Demos of lesson 10: LayerNorm vs BatchNorm in practice.

BatchNorm's statistics pool different examples of a batch; LayerNorm's stay
inside one example. Three consequences, each computed live: zero padding in a
batch of sentences pollutes BatchNorm's statistics and leaves LayerNorm alone;
an example's BatchNorm output depends on which batch it is in and how big that
batch is, which is why BatchNorm runs on running statistics at evaluation time;
and normalizing the wrong axis for the data can stall training.

The computations are plain functions (``padded_batch``, ``batch_spread``,
``run_eval_mode``, ``train_wrong_axis``) that return numbers, so the tests can check the claims;
the demos only lay them out.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from microgradnorm import formulas
from microgradnorm import vectorized as V
from microgradnorm.drawing.charts import line_chart
from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.text import CJKText, cjk_text, sentences
from microgradnorm.lessons.demo_tools import (
    agree,
    check_mark,
    dim_note,
    engine_forward,
    fmt,
    maxabs,
    number_table,
    rng_for,
    sci,
)
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.registry import get_norm
from microgradnorm.tolerances import CLOSED_FORM_ATOL, CLOSED_FORM_RTOL, DISPLAY_RTOL
from microgradnorm.verdicts import (
    Check,
    Checks,
    above,
    all_of,
    at_least,
    at_most,
    below,
    claim,
    close_to,
    differs,
    equal,
    exactly,
    first_holding,
)

# Padding rows and a batch of one are constant groups: with eps = 0 they divide by zero.
# The demos then run at this eps instead, and say so.
_EPS_FLOOR = 1e-5


def _eps_note(p: LessonParams) -> tuple[float, str | None]:
    """The eps the demos run at, and the sentence saying why when it is not the learner's (eps = 0)."""
    if p.eps > 0:
        return p.eps, None
    note = _("eps = 0 would divide by zero on a constant group (a padding row, a batch of one); using eps = {eps} here")
    return _EPS_FLOOR, note.format(eps=f"{_EPS_FLOOR:g}")


def _eps(p: LessonParams) -> tuple[float, Text | None]:
    eps, note = _eps_note(p)
    return eps, None if note is None else dim_note(note)


# ---- padding ----------------------------------------------------------------------


def padded_batch(
    seed: int, dim: int, lengths: tuple[int, ...], pad_to: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A batch of sentences [N, L, D] zero-padded to length L, and the mask of real tokens [N, L].

    Token features are drawn around a nonzero mean (real activations are rarely
    centered), so that zeros are visibly out of place among them.
    """
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"lengths: expected positive integers (tokens per sentence), got {lengths!r}")
    longest = max(lengths)
    pad_to = longest if pad_to is None else pad_to
    if pad_to < longest:
        raise ValueError(f"pad_to: expected at least the longest sentence ({longest}), got {pad_to}")
    rng = rng_for(seed, 10)
    offset = rng.normal(1.0, 1.0, size=dim)  # D: each feature has its own typical level
    x = np.zeros((len(lengths), pad_to, dim))
    mask = np.zeros((len(lengths), pad_to), dtype=bool)
    for i, n in enumerate(lengths):
        x[i, :n] = offset + rng.normal(0.0, 1.0, size=(n, dim))
        mask[i, :n] = True
    return x, mask


@demo("padding_pollution")
def padding_pollution(p: LessonParams, lengths: tuple[int, ...] = (5, 2, 3)) -> DemoOutput:
    """BatchNorm statistics with and without zero padding; LayerNorm of the real tokens, both ways."""
    eps, note = _eps(p)
    x, mask = padded_batch(p.seed, p.dim, tuple(lengths))
    n, length, d = x.shape
    real = x[mask]  # T,D: the real tokens only
    flat = x.reshape(-1, d)  # N*L,D: what BatchNorm sees when the padding is not masked
    bn_real = get_graph("batchnorm", real, eps)
    bn_pad = get_graph("batchnorm", flat, eps)
    ln_real = engine_forward("layernorm", real, None, None, eps)
    ln_pad = engine_forward("layernorm", flat, None, None, eps)[mask.reshape(-1)]
    y_real = np.array([v.data for v in bn_real["y"]]).reshape(real.shape)
    y_pad = np.array([v.data for v in bn_pad["y"]]).reshape(flat.shape)[mask.reshape(-1)]
    pads = int((~mask).sum())
    bn_moved = differs(y_pad, y_real, DISPLAY_RTOL, 0.0, "BatchNorm's real-token output, padded vs not")
    ln_moved = differs(ln_pad, ln_real, DISPLAY_RTOL, 0.0, "LayerNorm's real-token output, padded vs not")
    out = Group(
        *([note] if note else []),
        cjk_text(
            # Translators: {lengths} is a list of sentence lengths, e.g. [5, 2, 3]
            _("{n} sentences of {lengths} tokens, padded to {length}: {pads} of {rows} rows are zeros").format(
                n=n, lengths=list(lengths), length=length, pads=pads, rows=n * length
            )
        ),
        _statistics_table(bn_real, bn_pad, d),
        claim(
            bn_moved,
            _("BatchNorm: the padding moves the real tokens' output by up to {value}").format(
                value=maxabs(y_pad - y_real)
            ),
        ),
        claim(
            equal(ln_pad, ln_real, "LayerNorm's real-token output, padded vs not"),
            _("LayerNorm: the real tokens' output does not move ({value})").format(value=maxabs(ln_pad - ln_real)),
        ),
    )
    return DemoOutput(out, prediction=_padding_prediction(bn_moved, ln_moved))


def _padding_prediction(bn_moved: Check, ln_moved: Check) -> Prediction:
    """Which norm's output of the real tokens the padding moves: the answer the two outputs give."""
    bn_still, ln_still = ~bn_moved, ~ln_moved
    evidence = (bn_moved & ln_still, bn_still & ln_moved, bn_moved & ln_moved, bn_still & ln_still)
    return Prediction(
        _("Zero rows are added to the batch as padding. Whose output for the real tokens moves?"),
        (
            _("BatchNorm's only"),
            _("LayerNorm's only"),
            pgettext("which norm moves", "both"),
            pgettext("which norm moves", "neither"),
        ),
        first_holding(evidence, 3),
        _(
            "BatchNorm's statistics for a feature pool every row of the batch, zeros included; LayerNorm's pool "
            "one token's own features, which the padding never touches."
        ),
        evidence,
    )


def _statistics_table(bn_real, bn_pad, d: int) -> Table | Group:
    """BatchNorm's mean and variance per feature, of the real tokens and of the padded batch (engine graphs)."""
    rows = [
        [
            _("feature {j}").format(j=j),
            *(fmt(graph[stat][j].data, 3) for stat in ("mean", "var") for graph in (bn_real, bn_pad)),
        ]
        for j in range(d)
    ]
    headers = [
        "",
        pgettext("demo table header", "mean real"),
        pgettext("demo table header", "mean padded"),
        pgettext("demo table header", "var real"),
        pgettext("demo table header", "var padded"),
    ]
    return number_table(headers, rows, title=_("BatchNorm statistics per feature (engine)"))


def get_graph(norm: str, x: np.ndarray, eps: float):
    """The scalar graph of ``norm`` on x (no affine)."""
    return get_norm(norm).build_graph(x.tolist(), None, None, eps)


@demo("padding_growth")
def padding_growth(
    p: LessonParams, lengths: tuple[int, ...] = (5, 2, 3), pad_to: tuple[int, ...] = (5, 10, 20, 40)
) -> Group:
    """The more padding, the further BatchNorm's mean and variance drift from the real tokens'."""
    eps, note = _eps(p)
    rows, shares, still = [], [], []
    for length in pad_to:
        x, mask = padded_batch(p.seed, p.dim, tuple(lengths), int(length))
        flat = x.reshape(-1, p.dim)
        m_pad = formulas.moments(flat, (0,), eps)
        m_real = formulas.moments(x[mask], (0,), eps)
        ln_pad, _cache = V.layer_norm_forward(flat, None, None, eps, backend="numpy")
        ln_real, _cache = V.layer_norm_forward(x[mask], None, None, eps, backend="numpy")
        change = np.abs(ln_pad[mask.reshape(-1)] - ln_real)
        # zeros add nothing to the sum, only to the count: the padded mean is the real one times their share
        what = f"padded to {length}: "
        shares.append(agree(m_pad.mean, m_real.mean * mask.mean(), what=what + "BN mean"))
        still.append(at_most(float(np.max(change)), 0.0, what + "LN change"))
        rows.append(
            [
                str(length),
                f"{(~mask).mean():.0%}",
                fmt(float(m_pad.mean[0, 0]), 3),
                fmt(float(m_pad.var[0, 0]), 3),
                sci(float(np.max(change)), 1),
            ]
        )
    checks = Group(
        claim(all_of(*shares), _("BN's padded mean = the real tokens' mean × the share of real rows")),
        claim(all_of(*still), _("LayerNorm: no change at any padded length")),
    )
    real = (float(m_real.mean[0, 0]), float(m_real.var[0, 0]))  # the same at every padded length
    return Group(*([note] if note else []), _growth_table(rows, lengths, real), checks)


def _growth_table(rows: list[list[str]], lengths: tuple[int, ...], real: tuple[float, float]) -> Group:
    """The rows of :func:`padding_growth` under their title and headers, with what the columns mean."""
    headers = [
        pgettext("demo table header", "pad to"),
        pgettext("demo table header", "padding"),
        pgettext("demo table header", "BN mean"),
        pgettext("demo table header", "BN var"),
        pgettext("demo table header", "LN Δ"),
    ]
    return Group(
        number_table(
            headers,
            rows,
            title=_("feature 0, sentences of {lengths} tokens; real tokens only: mean {mean}, var {var}").format(
                lengths=list(lengths), mean=fmt(real[0], 3), var=fmt(real[1], 3)
            ),
            caption=_(
                "BN mean and var: over the padded batch. LN Δ: max change of the real "
                "tokens' LayerNorm output caused by the padding."
            ),
        ),
    )


# ---- batch size -------------------------------------------------------------------

# The companions of the fixed example, and the example itself, are drawn from this population.
POP_MEAN, POP_STD = 0.5, 2.0


def batch_spread(seed: int, dim: int, sizes: tuple[int, ...], trials: int, eps: float) -> list[dict[str, float]]:
    """How one fixed example's BatchNorm output depends on the rest of its batch, per batch size B.

    For each B, ``trials`` batches of B - 1 random companions are drawn from the
    population N(POP_MEAN, POP_STD²) and the fixed example is normalized in each.
    Per size: the largest spread (max - min over trials) of any of its outputs,
    for BatchNorm and LayerNorm; the largest |y|; and the root-mean-square
    distance of its BatchNorm outputs from the population's (x - POP_MEAN) / sqrt(POP_STD² + eps):
    the value a batch's statistics estimate, at the same eps, so that the distance is the estimate's
    alone even where eps dominates the variance.
    """
    rng = rng_for(seed, 11)
    x0 = rng.normal(POP_MEAN, POP_STD, size=dim)
    z_pop = (x0 - POP_MEAN) / np.sqrt(POP_STD**2 + eps)  # D: what the batch statistics estimate
    out = []
    for b in sizes:
        bn_outs, ln_outs, batches = [], [], []
        for _trial in range(trials):
            batch = np.vstack([x0, rng.normal(POP_MEAN, POP_STD, size=(b - 1, dim))])  # B,D
            bn_outs.append(V.batch_norm_forward(batch, None, None, eps, backend="numpy")[0][0])
            ln_outs.append(V.layer_norm_forward(batch, None, None, eps, backend="numpy")[0][0])
            batches.append(batch)
        bn_arr, ln_arr = np.array(bn_outs), np.array(ln_outs)  # trials,D
        out.append(
            {
                "size": b,
                "bn_spread": float(np.max(np.ptp(bn_arr, axis=0))),
                "ln_spread": float(np.max(np.ptp(ln_arr, axis=0))),
                "bn_max_abs": float(np.max(np.abs(bn_arr))),
                "bn_from_pop": float(np.sqrt(np.mean((bn_arr - z_pop) ** 2))),
                "outputs": bn_arr,
                "batches": np.array(batches),
            }
        )
    return out


def two_row_outputs(stats: list[dict[str, float]], eps: float) -> tuple[np.ndarray, np.ndarray] | None:
    """At batch 2: the example's outputs, and the ±1/sqrt(1 + eps/var) each column's two values must give."""
    two = next((s for s in stats if s["size"] == 2), None)
    if two is None:
        return None
    b = two["batches"]  # trials,2,D
    var = ((b[:, 0] - b[:, 1]) / 2) ** 2  # trials,D: the variance of two values, divided by 2
    expected = np.sign(b[:, 0] - b[:, 1]) / np.sqrt(1.0 + eps / var)
    return two["outputs"], expected


# Batch 2 gives +1 and -1 "up to eps" while eps is small beside a pair's variance: the typical
# output is then within this much of ±1. Once eps is comparable to the variance, each output's size
# 1/sqrt(1 + eps/var) depends on how far apart the pair is.
_PULL_SMALL = 0.1


def _batch2_prediction(pair: tuple[np.ndarray, np.ndarray], eps: float, note: str | None = None) -> Prediction:
    """What a batch of two does to each output: the answer the outputs themselves give.

    ``note`` (the eps-0 note) leads the question, so the eps the answer's numbers use is said before them.
    """
    got, expected = pair
    largest = float(np.max(np.abs(got)))
    pull = float(np.median(np.abs(1.0 - np.abs(got))))  # how far eps pulls a typical output in from ±1
    zero = at_most(largest, 0.0, "batch 2: the largest |output|")
    formula = agree(got, expected, what="batch 2: outputs vs ±1/sqrt(1 + eps/var)")
    nonzero = above(largest, 0.0, "batch 2: the largest |output|")
    near_one = at_most(pull, _PULL_SMALL, "batch 2: median of 1 − |output|")
    pulled = above(pull, _PULL_SMALL, "batch 2: median of 1 − |output|")
    evidence = (formula & nonzero & pulled, formula & nonzero & near_one, zero)
    answer = 2 if zero else 1 if near_one else 0
    values = {"median": sci(pull), "largest": sci(float(np.max(np.abs(1.0 - np.abs(got)))))}
    if answer == 1:
        why = _(
            "Two values a and b become `±1/sqrt(1 + eps/var)`, with `var = ((a − b)/2)²`: ±1 unless the two "
            "nearly coincide (eps pulls them in: by {median} typically, {largest} at most)."
        ).format(**values)
    else:
        why = _(
            "Two values a and b become `±1/sqrt(1 + eps/var)`, with `var = ((a − b)/2)²`. At this eps, which is "
            "not small beside the variance of a pair, the size depends on how far apart a and b are: eps pulls a "
            "typical output in from ±1 by {median}."
        ).format(**values)
    question = _("In a batch of two, what can each BatchNorm output be?")
    if note:
        question = _("{note}. {question}").format(note=note, question=question)
    return Prediction(
        question,
        (_("±c, with c below 1 set by how far apart the two are"), _("+1 or −1 (up to eps)"), "0"),
        answer,
        why,
        evidence,
    )


@demo("batch_size_dependence")
def batch_size_dependence(p: LessonParams, sizes: tuple[int, ...] = (1, 2, 4, 16, 64), trials: int = 20) -> DemoOutput:
    """One example, many random batches: its BatchNorm output moves, its LayerNorm output does not."""
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes) or 2 not in sizes:
        raise ValueError(f"sizes: expected positive batch sizes including 2, got {sizes!r}")
    eps, note = _eps_note(p)
    stats = batch_spread(p.seed, p.dim, tuple(sizes), trials, eps)
    pair = two_row_outputs(stats, eps)
    ones = next((s for s in stats if s["size"] == 1), None)
    # LayerNorm normalizes the example by itself: its output (at most sqrt(D - 1) in size) can differ
    # between batches only by rounding
    ln_spread = max(s["ln_spread"] for s in stats)
    checks = [
        claim(
            agree(pair[0], pair[1], what="batch 2: outputs vs ±1/sqrt(1 + eps/var)"),
            _("batch 2: every output is ±1/sqrt(1 + eps/var)"),
        ),
        claim(_within_batch_reach(stats), _("batch N: no output is larger than √(N − 1) in size")),
        claim(
            at_most(ln_spread, CLOSED_FORM_RTOL * math.sqrt(p.dim), "LayerNorm: largest spread over the batches"),
            _("LayerNorm: the same output in every batch, to rounding"),
        ),
        _toward_population(stats),
    ]
    if ones is not None:
        checks.insert(
            0,
            claim(at_most(ones["bn_max_abs"], 0.0, "batch 1: largest |y|"), _("batch 1: every BatchNorm output is 0")),
        )
    table = _spread_table(stats, trials)
    return DemoOutput(Group(table, *checks), prediction=_batch2_prediction(pair, eps, note))


def _toward_population(stats: list[dict[str, float]]) -> CJKText:
    """The largest batch's BatchNorm output lands nearer the population value than batch 2's, as a checked claim.

    Only the two ends are compared: with a handful of random batches per size (and a large eps squashing
    every output) neighbouring sizes can swap places by chance, while the ends stay apart several times over.
    """
    two = next(s for s in stats if s["size"] == 2)
    largest = max(stats, key=lambda s: s["size"])
    check = below(
        largest["bn_from_pop"],
        two["bn_from_pop"],
        f"batch {largest['size']} vs batch 2: distance from the population value",
    )
    line = _("batch {n} lands closer to the population value than batch 2 ({at_n} against {at_2})").format(
        n=largest["size"], at_n=fmt(largest["bn_from_pop"], 3), at_2=fmt(two["bn_from_pop"], 3)
    )
    return claim(check, line)


def _within_batch_reach(stats: list[dict[str, float]]) -> Checks:
    """No BatchNorm output of a batch of N is larger than sqrt(N - 1) in size."""
    # in a batch of N, |x - mean| <= sqrt(N - 1) * std (divided by N): no output can reach further
    return all_of(
        *(
            at_most(
                s["bn_max_abs"], math.sqrt(s["size"] - 1) * (1 + CLOSED_FORM_RTOL), f"batch {s['size']}: largest |y|"
            )
            for s in stats
        )
    )


def _spread_table(stats: list[dict[str, float]], trials: int) -> Group:
    """Per batch size: how much the example's outputs move between batches, and how far from the population."""
    rows = [[str(s["size"]), fmt(s["bn_spread"], 3), fmt(s["bn_from_pop"], 3), fmt(s["ln_spread"], 3)] for s in stats]
    headers = [
        pgettext("demo table header", "batch"),
        pgettext("demo table header", "BN spread"),
        pgettext("demo table header", "BN vs population"),
        pgettext("demo table header", "LN spread"),
    ]
    return Group(
        number_table(
            headers,
            rows,
            title=_("one fixed example in {trials} random batches of each size").format(trials=trials),
            caption=_(
                "spread: the largest range (max − min over the batches) of any of its outputs. vs population: "
                "root-mean-square distance from the data's own `(x − μ)/sqrt(σ² + eps)`."
            ),
        ),
    )


# ---- BatchNorm at evaluation time ----------------------------------------------------


@dataclass(frozen=True)
class EvalRun:
    """A BatchNorm layer trained on batches from a known population, and a small batch run both ways."""

    layer: V.BatchNorm
    mean: np.ndarray  # D: the population's mean per feature
    std: np.ndarray  # D: and its standard deviation
    batches: list[np.ndarray]  # the training batches, in order
    small: np.ndarray  # the small batch
    y_train: np.ndarray  # small batch, train mode: its own statistics
    y_eval: np.ndarray  # small batch, eval mode: the running statistics
    y_alone: np.ndarray  # its first example alone, eval mode


def run_eval_mode(seed: int, dim: int, eps: float, steps: int = 200, batch: int = 32, small: int = 4) -> EvalRun:
    """Train a V.BatchNorm's running statistics on ``steps`` batches, then run a small batch in both modes."""
    for name, v in (("steps", steps), ("batch", batch), ("small", small)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 2:
            raise ValueError(f"{name}: expected an integer >= 2, got {v!r}")
    rng = rng_for(seed, 13)
    mean, std = rng.normal(2.0, 2.0, size=dim), rng.uniform(0.5, 3.0, size=dim)
    layer = V.BatchNorm(dim, eps=eps, momentum=0.1, dtype=np.float64, backend="numpy")
    batches = [rng.normal(mean, std, size=(batch, dim)) for _step in range(steps)]
    for x in batches:
        layer(x)
    x_small = rng.normal(mean, std, size=(small, dim))
    frozen = copy.deepcopy(layer)  # train mode updates the running statistics; keep them as they were
    y_train = frozen(x_small)
    layer.eval()
    return EvalRun(layer, mean, std, batches, x_small, y_train, layer(x_small), layer(x_small[:1]))


def running_average(batches: list[np.ndarray], momentum: float) -> tuple[np.ndarray, np.ndarray]:
    """The running mean and running variance (unbiased, ÷(N − 1)) as PyTorch defines them, written out."""
    mean, var = np.zeros(batches[0].shape[1]), np.ones(batches[0].shape[1])
    for x in batches:
        mean = (1 - momentum) * mean + momentum * x.mean(axis=0)
        var = (1 - momentum) * var + momentum * x.var(axis=0, ddof=1)
    return mean, var


def _eval_claims(run: EvalRun) -> Group:
    """The checks of the eval-mode demo: running averages as defined, a gap, batch independence."""
    layer = run.layer
    ema_mean, ema_var = running_average(run.batches, layer.momentum)
    gap = float(np.max(np.abs(run.y_train - run.y_eval)))
    # LayerNorm on the same small batch, and on its first example alone: one computation, no running state
    ln_batch = _normalize("layernorm", run.small, layer.eps)[0]
    ln_alone = _normalize("layernorm", run.small[:1], layer.eps)[0]
    return Group(
        claim(
            close_to(layer.running_var, ema_var, CLOSED_FORM_RTOL, 0.0, "running var vs the average written out")
            & agree(layer.running_mean, ema_mean, what="running mean vs it"),
            _("running averages of each batch's mean and its ÷(N − 1) variance"),
        ),
        claim(
            above(gap, DISPLAY_RTOL, "train vs eval mode: largest difference"),
            _("train and eval mode differ: by up to {value}").format(value=fmt(gap, 3)),
        ),
        claim(
            agree(run.y_alone[0], run.y_eval[0], what="eval: alone vs in batch"),
            _("eval mode: example 0 alone gives its output in the batch"),
        ),
        claim(
            agree(ln_alone, ln_batch, what="LayerNorm: alone vs in its batch"),
            _("LayerNorm, which has no modes: example 0 alone gives its output in the batch (off by {value})").format(
                value=maxabs(ln_alone - ln_batch)
            ),
        ),
    )


@demo("bn_eval_mode")
def bn_eval_mode(p: LessonParams, steps: int = 200, batch: int = 32, small: int = 4) -> Group:
    """BatchNorm's running statistics after training, and a small batch in train mode against eval mode."""
    eps = p.eps  # no constant group here: random batches of at least two rows, eps = 0 included
    run = run_eval_mode(p.seed, p.dim, eps, steps, batch, small)
    layer = run.layer
    stats = [
        [str(j), *(fmt(v, 3) for v in (run.mean[j], layer.running_mean[j], run.std[j] ** 2, layer.running_var[j]))]
        for j in range(p.dim)
    ]
    modes = [[str(j), fmt(run.y_train[0, j], 3), fmt(run.y_eval[0, j], 3)] for j in range(p.dim)]
    stat_headers = [
        pgettext("demo table header", "feature"),
        "μ",
        pgettext("demo table header", "running μ"),
        "σ²",
        pgettext("demo table header", "running σ²"),
    ]
    return Group(
        number_table(
            stat_headers,
            stats,
            title=_("after {steps} training batches of {batch} (momentum {momentum})").format(
                steps=steps, batch=batch, momentum=f"{layer.momentum:g}"
            ),
        ),
        number_table(
            [
                pgettext("demo table header", "feature"),
                pgettext("demo table header", "train mode"),
                pgettext("demo table header", "eval mode"),
            ],
            modes,
            title=_("example 0 of a new batch of {small}, both modes").format(small=small),
        ),
        _eval_claims(run),
    )


# ---- the wrong axis ---------------------------------------------------------------


def _tokens(rng: np.random.Generator, n: int, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """n tokens whose label lies in the pattern of their features, not in their size or level.

    Each token is z * s + b: a pattern z, an overall scale s spread over four
    orders of magnitude (one token comes from a loud context, the next from a quiet
    one) and a common offset b. Its label is whether u . z > 0, with u orthogonal
    to the all-ones vector, so neither s nor b changes it.
    """
    d = u.shape[0]
    z = rng.normal(size=(n, d))
    labels = (z @ u > 0).astype(np.float64)
    s = 10.0 ** rng.uniform(-2.0, 2.0, size=(n, 1))
    b = rng.normal(0.0, 3.0, size=(n, 1))
    return z * s + b, labels


def _normalize(norm: str, x: np.ndarray, eps: float, num_groups: int | None = None) -> np.ndarray:
    """LayerNorm: each token over its own features; BatchNorm: each feature over the tokens of the batch
    (GroupNorm: each image's groups of ``num_groups`` channels). No gamma, no beta; the NumPy backend."""
    forward, _ = V.public_pass(get_norm(norm, num_groups))
    return forward(x, None, None, eps, backend="numpy")[0]


def _logistic_loss(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean binary cross-entropy, log(1 + e^z) - t z, written so that it never overflows."""
    return float(np.mean(np.logaddexp(0.0, logits) - labels * logits))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # = 1 / (1 + e^-z), without overflow


def _evaluation_tokens(seed: int, features: int) -> tuple[np.random.Generator, np.ndarray, tuple]:
    """The label direction u and the 256 evaluation tokens of a seed (the generator goes on to the batches)."""
    rng = rng_for(seed, 12)
    u = rng.normal(size=features)
    u -= u.mean()
    u /= np.linalg.norm(u)
    return rng, u, _tokens(rng, 256, u)


def quiet_share(seed: int, features: int, eps: float) -> float:
    """The share of evaluation tokens whose own variance is below eps: LayerNorm divides those by about
    sqrt(eps) rather than by their own spread, which flattens their pattern as BatchNorm does."""
    x_eval = _evaluation_tokens(seed, features)[2][0]  # 256,D
    return float(np.mean(x_eval.var(axis=1) < eps))


def train_wrong_axis(
    seed: int, features: int = 8, batch: int = 32, steps: int = 200, lr: float = 0.5, eps: float = 1e-5
) -> dict[str, list[float]]:
    """Logistic regression on normalized tokens, trained by gradient descent, once per norm.

    The model is ``sigmoid(norm(x) @ w + c)``; the norm has no parameters. Each step
    draws a fresh batch of tokens, takes one gradient step on w and c, then records
    the loss on a fixed evaluation batch of 256 tokens (normalized the same way).
    Both norms see exactly the same batches. Returns the loss curve of each.
    """
    rng, u, (x_eval, t_eval) = _evaluation_tokens(seed, features)
    batches = [_tokens(rng, batch, u) for _step in range(steps)]
    curves = {}
    for norm in ("layernorm", "batchnorm"):
        w = np.zeros(features)
        c = 0.0
        xe = _normalize(norm, x_eval, eps)
        curve = [_logistic_loss(xe @ w + c, t_eval)]
        for x, t in batches:
            xn = _normalize(norm, x, eps)  # B,D
            err = _sigmoid(xn @ w + c) - t  # B: dL/dlogit for each token
            w -= lr * (xn.T @ err) / batch  # D
            c -= lr * float(err.mean())
            curve.append(_logistic_loss(xe @ w + c, t_eval))
        curves[norm] = curve
    return curves


# The share of tokens flattened by eps above which the answer says that eps, not the axis, decided.
_QUIET_SHARE = 0.1


def _learner_prediction(ln_tail: float, bn_tail: float, bar: float, quiet: float = 0.0, eps: float = 0.0) -> Prediction:
    ln_ok, bn_ok = _learns(ln_tail, bar, "LayerNorm"), _learns(bn_tail, bar, "BatchNorm")
    ln_no, bn_no = at_least(ln_tail, bar, ln_ok.what), at_least(bn_tail, bar, bn_ok.what)
    evidence = (ln_ok & bn_no, ln_no & bn_ok, ln_ok & bn_ok, ln_no & bn_no)
    answer = {(True, False): 0, (False, True): 1, (True, True): 2, (False, False): 3}[(bool(ln_ok), bool(bn_ok))]
    tails = {"ln": fmt(ln_tail, 3), "bn": fmt(bn_tail, 3)}
    if answer == 0:
        why = _(
            "Over the last steps the loss averaged {ln} with LayerNorm and {bn} with BatchNorm, against log 2 for "
            "guessing. The loud tokens set BatchNorm's std, so a quiet token reaches its classifier nearly flat."
        ).format(**tails)
    else:
        why = _(
            "Over the last steps the loss averaged {ln} with LayerNorm and {bn} with BatchNorm, against log 2 for "
            "guessing."
        ).format(**tails)
    if not ln_ok and quiet >= _QUIET_SHARE:
        quiet_note = _(
            "Here {share} of the tokens have a variance below eps = {eps}: LayerNorm divides those by about "
            "`sqrt(eps)` instead of their own std, so their pattern reaches the classifier nearly flat too."
        ).format(share=f"{quiet:.0%}", eps=f"{eps:g}")
        why = sentences([why, quiet_note])  # no space after a Chinese "。"
    return Prediction(
        _("Which model learns to tell the patterns apart (loss below half of guessing)?"),
        (
            _("the one with LayerNorm"),
            _("the one with BatchNorm"),
            pgettext("which model learns", "both"),
            pgettext("which model learns", "neither"),
        ),
        answer,
        why,
        evidence,
    )


def _learns(tail: float, bar: float, name: str) -> Check:
    return below(tail, bar, f"{name}: mean of the last losses vs half of log 2")


@demo("wrong_axis_loss")
def wrong_axis_loss(p: LessonParams, steps: int = 200, features: int = 8) -> DemoOutput:
    """The loss curve of the same model with LayerNorm and with BatchNorm on scale-varying tokens."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps: expected an integer >= 2, got {steps!r}")
    curves = train_wrong_axis(p.seed, features=features, steps=steps, eps=p.eps)
    quiet = quiet_share(p.seed, features, p.eps)
    chance = float(np.log(2.0))
    ln, bn = curves["layernorm"], curves["batchnorm"]
    tail = max(steps // 10, 1)
    ln_tail, bn_tail = float(np.mean(ln[-tail:])), float(np.mean(bn[-tail:]))
    ln_ok, bn_ok = _learns(ln_tail, 0.5 * chance, "LayerNorm"), _learns(bn_tail, 0.5 * chance, "BatchNorm")
    return DemoOutput(
        Group(
            line_chart(
                {"LayerNorm": ln, "BatchNorm": bn},
                height=8,
                title=_("evaluation loss per step, {features} features").format(features=features),
            ),
            number_table(
                [
                    "",
                    pgettext("demo table header", "start"),
                    pgettext("demo table header", "mean of last {n}").format(n=tail),
                    "",
                ],
                [
                    ["LayerNorm", fmt(ln[0], 3), fmt(ln_tail, 3), check_mark(ln_ok)],
                    ["BatchNorm", fmt(bn[0], 3), fmt(bn_tail, 3), check_mark(bn_ok)],
                ],
                caption=_(
                    "log 2 = {chance} is the loss of guessing; the last column: did the curve get below half of it?"
                ).format(chance=fmt(chance, 3)),
            ),
        ),
        prediction=_learner_prediction(ln_tail, bn_tail, 0.5 * chance, quiet, p.eps),
    )


# ---- between the two: GroupNorm ---------------------------------------------------------------

IMAGES = (3, 6, 2, 2)  # N, C, H, W: C = 6 splits into 1, 2, 3 or 6 groups


def _rows(norm: str, x: np.ndarray, row: tuple[int, ...], eps: float) -> np.ndarray:
    """``norm`` on x seen as rows of shape ``row`` (the rest of x's axes stacked), given back in x's shape."""
    return _normalize(norm, x.reshape(-1, *row), eps).reshape(x.shape)


def _moved_by(forward, x: np.ndarray, at: tuple[int, ...]) -> np.ndarray:
    """Which outputs move when x[at] moves by 1 (a boolean array shaped like x)."""
    nudged = x.copy()
    nudged[at] += 1.0
    return np.abs(forward(nudged) - forward(x)) > 1e-9 * (1.0 + np.abs(forward(x)))


@demo("groupnorm_between")
def groupnorm_between(p: LessonParams) -> DemoOutput:
    """GroupNorm (Wu & He, 2018) on images [N, C, H, W], from the registry's entry: G = 1 is LayerNorm
    over (C, H, W), G = C is InstanceNorm, and an image's output never depends on its batch."""
    eps = p.eps  # random images have no constant group: eps = 0 divides by no zero here
    _n, c, h, w = IMAGES
    x = rng_for(p.seed, 10).normal(0.5, 2.0, IMAGES)
    rtol, atol = CLOSED_FORM_RTOL, CLOSED_FORM_ATOL
    same_as = {
        1: ("LayerNorm (C, H, W)", _rows("layernorm", x, (c * h * w,), eps)),
        c: ("InstanceNorm", _rows("layernorm", x, (h * w,), eps)),
    }
    rows = []
    for groups in (1, 2, 3, c):
        y = _normalize("groupnorm", x, eps, groups)
        name, ref = same_as.get(groups, ("", None))
        ok = None if ref is None else close_to(y, ref, rtol, atol, f"GroupNorm G = {groups} vs {name}")
        equals = "—" if ok is None else Text.assemble(check_mark(ok), " ", name)
        rows.append([str(groups), str(c // groups * h * w), equals])
    table = number_table(
        ["G", _("values per statistic"), _("equals")],
        rows,
        title=_("GroupNorm on images [{shape}]").format(shape=", ".join(map(str, IMAGES))),
    )
    gn_alone = close_to(
        _normalize("groupnorm", x[:1], eps, 2), _normalize("groupnorm", x, eps, 2)[:1],
        rtol, atol, "GroupNorm: image 0 alone vs in the batch",
    )  # fmt: skip
    bn_alone = differs(
        _normalize("batchnorm", x[:1], eps), _normalize("batchnorm", x, eps)[:1],
        rtol, atol, "BatchNorm: image 0 alone vs in the batch",
    )  # fmt: skip
    return DemoOutput(
        Group(
            table,
            claim(gn_alone, _("GroupNorm (G = 2): image 0 alone gives the same output as image 0 in its batch")),
            claim(bn_alone, _("BatchNorm: image 0 alone gives another output than image 0 in its batch")),
        ),
        prediction=_group_prediction(x, eps),
    )


def _group_prediction(x: np.ndarray, eps: float) -> Prediction:
    """Which outputs move when one value of image 0, channel 0 moves, under GroupNorm with G = 2: measured."""
    n, c, h, w = x.shape
    moved = _moved_by(lambda v: _normalize("groupnorm", v, eps, 2), x, (0, 0, 0, 0))
    choices_masks = []
    for image, channels in ((slice(0, 1), slice(0, c)), (slice(0, 1), slice(0, c // 2)), (slice(0, n), slice(0, 1))):
        mask = np.zeros(x.shape, dtype=bool)
        mask[image, channels] = True
        choices_masks.append(mask)
    only = np.zeros(x.shape, dtype=bool)
    only[0, 0, 0, 0] = True
    choices_masks.append(only)
    evidence = tuple(exactly(float(np.array_equal(moved, m)), 1.0, "the outputs that moved") for m in choices_masks)
    return Prediction.from_evidence(
        _("GroupNorm with G = 2 groups on images [{n}, {c}, {h}, {w}]: one value of image 0, channel 0 changes. "
          "Which outputs move?").format(n=n, c=c, h=h, w=w),
        (
            _("every value of image 0"),
            _("image 0, channels 0 to {last}").format(last=c // 2 - 1),
            _("channel 0 of every image"),
            _("only the value that changed"),
        ),
        _("{count} outputs moved: the {count} values of image 0 that share its group's mean and variance.").format(
            count=int(moved.sum())
        ),
        evidence,
    )  # fmt: skip
