"""Demos of lessons 15 to 18: the training lab's runs, their curves, and the claims checked on them.

Each demo calls one experiment of :mod:`microgradnorm.lab.experiments` (cached
per process, so the steps of a lesson share one run per seed) and draws it with
:mod:`microgradnorm.lab.show`; the ``g`` key writes the same curves as SVG.
Predictions are answered from the run's own numbers.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from microgradnorm import tolerances as tol
from microgradnorm.drawing.charts import line_chart
from microgradnorm.drawing.figure import line_chart_svg
from microgradnorm.i18n import _, pgettext

# cjk_text keeps a formula whole (i18n.text.keep_formulas)
from microgradnorm.i18n.text import cjk_text, keep_formulas, separated
from microgradnorm.lab import experiments as E
from microgradnorm.lab import pairs, show
from microgradnorm.lab.train import Run
from microgradnorm.lab.words import run_name
from microgradnorm.lessons.demo_tools import dim_note
from microgradnorm.lessons.demos import DemoOutput, LessonParams, Prediction, demo
from microgradnorm.numfmt import bracketed
from microgradnorm.verdicts import above, all_of, at_least, at_most, below, exactly, first_holding, mark

HEIGHT = 8  # chart rows: a chart, its legend and the claims fit one screen at 60 columns
INSTALL = E.INSTALL


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for k, name in enumerate(columns):
        table.add_column(name, justify="left" if k == 0 else "right")
    return table


def _row(table: Table, *cells: str) -> None:
    """A row of plain text (no rich markup: "[torch]" is text here) that wraps the Chinese way."""
    table.add_row(*(cjk_text(cell) for cell in cells))


def _held_out_gap(result: E.Outcome, names) -> Text:
    """How far each run's held-out loss sits from its training loss (a "trains" verdict reads the latter)."""
    # rounded first, and + 0.0 turns a -0.0 into 0.0: a gap that rounds to zero prints as +0.00, never -0.00
    # and the minus is U+2212, as the prose writes it
    gaps = [result.labelled(n, f"{round(result.runs[n].test_loss - E.final_loss(result.runs[n]), 2) + 0.0:+.2f}"
                            .replace("-", "−")) for n in names]  # fmt: skip
    # Translators: {runs} is a list such as "post-LN (no warmup) +0.03, pre-LN (no warmup) +0.33"
    return dim_note(_("held-out loss minus training loss: {runs}").format(runs=separated(gaps)))


def _claims(result: E.Outcome, *keys: str) -> Group:
    """The run's claims with these keys (see :meth:`~microgradnorm.lab.experiments.Outcome.claim`)."""
    lines = show.claim_lines(result.picked(*keys))
    for line in lines.renderables:  # CJKText lines: a formula in a claim is kept whole
        if isinstance(line, Text):
            keep_formulas(line)
    return lines


# ---- lesson 15: your backward in a real model ----------------------------------------------------------


@demo("lab_setup")
def lab_setup(p: LessonParams) -> DemoOutput:
    """The lab's task and network: sizes and counts, read off the objects themselves."""
    from microgradnorm.lab.net import Net

    task, spec = E.task_for(p.seed), E.MLP
    net = Net(spec, p.seed)
    table = _table("", "")
    _row(table, _("examples (training / held out)"), f"{len(task.y_train)} / {len(task.y_test)}")
    # Translators: two numbers, features and classes, as in the label "features per example, classes"
    pair = _("{features}, {classes}").format(features=task.x_train.shape[1], classes=int(task.y_train.max()) + 1)
    _row(table, _("features per example, classes"), pair)
    _row(table, _("blocks Linear → LayerNorm → ReLU"), _("{depth} of width {width}").format(depth=spec.depth,
                                                                                         width=spec.width))  # fmt: skip
    _row(table, pgettext("lab table row", "parameters"), f"{sum(a.size for a in net.parameters()):,}")
    adam = _("{steps}, {batch} (lr {lr:g})").format(steps=E.ADAM.steps, batch=E.ADAM.batch, lr=E.ADAM.lr)
    _row(table, _("steps of Adam, examples per step"), adam)
    _row(table, _("loss of a guess (ln 3)"), f"{E.GUESSING:.3f}")
    return DemoOutput(table)


def _curve_prediction(result: E.Outcome) -> Prediction:
    gap = max(v for k, v in result.numbers.items() if " vs " in k)
    what = "largest difference between the curves"
    evidence = (at_most(gap, E.CURVE_ATOL, what), above(gap, E.CURVE_ATOL, what) & below(gap, 1e-2, what),
                at_least(gap, 1e-2, what))  # fmt: skip
    answer = 0 if evidence[0] else 1 if evidence[1] else 2
    if answer == 0:
        why = _(
            "The largest difference at any step is {gap:.1e}: each curve computes the same numbers in a "
            "different order, so only rounding separates them."
        )
    else:
        why = _(
            "The largest difference at any step is {gap:.1e}: more than rounding separates them: some layer "
            "computes something different."
        )
    if "torch.nn.LayerNorm" in result.curves:
        question = _("After {steps} steps, how far apart are the loss curves?")
    else:  # said in the question (asked before the chart), since the step's prose describes three runs
        # Translators: {install} is the command pip install 'microgradnorm[torch]', kept whole by the backticks;
        # one colon at most: the question follows "Predict: "
        question = _(
            "PyTorch is not installed here, so instead of the three runs described above there are two NumPy "
            "runs, the package's LayerNorm and exercise 5's answer (`{install}` adds PyTorch's). After {steps} "
            "steps, how far apart are their loss curves?"
        )
    return Prediction(
        question.format(steps=E.ADAM.steps, install=INSTALL),
        (_("the same to rounding (below 1e-9)"), _("close (differences below 0.01)"), _("visibly apart")),
        answer,
        why.format(gap=gap),
        evidence,
    )


@demo("lab_yours_curves")
def lab_yours_curves(p: LessonParams) -> DemoOutput:
    """torch.nn.LayerNorm, microgradnorm.torch.LayerNorm and the exercise's answer: three curves as one."""
    result = E.yours(p.seed)
    keys = ("curve", "bridge") if E.have_torch() else ("curve",)
    parts = [show.curves(result, height=HEIGHT), show.held_out(result), _claims(result, *keys)]
    return DemoOutput(Group(*parts), graph=show.figure(result), prediction=_curve_prediction(result))


ROUNDING = 1e-12  # a relative error this small is float64 rounding, not a finite difference's own error


def _referee_prediction(worst: float) -> Prediction:
    """How closely the finite difference agrees with the right backward: its own error, not rounding."""
    what = "right backward: worst relative error against finite differences"
    evidence = (below(worst, ROUNDING, what), at_least(worst, ROUNDING, what) & at_most(worst, tol.FD_RTOL, what),
                above(worst, tol.FD_RTOL, what))  # fmt: skip
    answer = next(k for k, e in enumerate(evidence) if e)
    if answer == 1:
        # Translators: {h} is the finite difference's step, such as 1e-06
        why = _(
            "The worst relative error is {worst:.1e}. A central difference with step h = {h:.0e} adds an error "
            "of its own, of order h² plus rounding ÷ h: far above the curves' rounding, far below a slip's error."
        )
    elif answer == 0:
        why = _("The worst relative error is {worst:.1e}: here the finite difference agrees to rounding.")
    else:
        why = _("The worst relative error is {worst:.1e}: more than the pass mark allows.")
    return Prediction(
        _("Step 2's curves agreed to rounding. How closely does a finite difference agree with the right backward?"),
        (
            _("to rounding, as the curves did (below {r:.0e})").format(r=ROUNDING),
            _("to between {r:.0e} and {rtol:.0e}").format(r=ROUNDING, rtol=tol.FD_RTOL),
            _("worse than {rtol:.0e}").format(rtol=tol.FD_RTOL),
        ),
        answer,
        why.format(worst=worst, h=tol.FD_STEP),
        evidence,
    )


@demo("lab_gradient_check")
def lab_gradient_check(p: LessonParams, which: tuple[str, ...] = ("right",), ask: bool = False) -> DemoOutput:
    """A LayerNorm pair's gradients against central finite differences (float64), as the grader checks them;
    ``ask``: first ask how closely the right backward agrees."""
    # Translators: table headers; "backward" heads the names of the backward passes, "passes" the verdicts
    table = _table(pgettext("lab table header", "backward"), "dx", "dgamma", "dbeta",
                   pgettext("lab table header", "passes"))  # fmt: skip
    checks = {}
    for name in which:
        pair = pairs.reference_pair() if name == "right" else pairs.mistake_pair(name)
        c = checks[name] = pairs.gradient_check(pair, p.seed)
        verdict = _("✓ yes") if mark(c.verdict) else _("✗ no")
        _row(table, run_name(name), f"{c.dx:.1e}", f"{c.dgamma:.1e}", f"{c.dbeta:.1e}", verdict)
    shape = next(iter(checks.values())).shape
    # Translators: {shape} is x's shape in the check, such as "[2, 5, 6]"
    caption = _("relative error against finite differences on x {shape}; a pass is at most {rtol:.0e}").format(
        shape=bracketed(shape), rtol=tol.FD_RTOL
    )
    if "no-1/d" in checks:  # its dx is d times the right one: a relative error of d - 1
        # Translators: {d_minus_1} is the number d - 1, such as 5
        caption += _(" (no-1/d: `d − 1 = {d_minus_1}`)").format(d_minus_1=shape[-1] - 1)
    prediction = _referee_prediction(checks["right"].worst) if ask and "right" in checks else None
    return DemoOutput(Group(table, dim_note(caption)), prediction=prediction)


def _saved_for_backward(layer, x) -> list[tuple[str, tuple[int, ...]]]:
    """What autograd keeps of one forward call of ``layer`` on ``x``: each tensor named by what it equals,
    with its shape."""
    import torch

    mean = x.mean(-1, keepdim=True)
    rstd = (x.var(-1, unbiased=False, keepdim=True) + layer.eps).rsqrt()
    known = {"x": x, "gamma": layer.weight, "beta": layer.bias}
    names: list[tuple[str, tuple[int, ...]]] = []

    def pack(t):
        same = [k for k, v in known.items() if v is not None and t.shape == v.shape and t.data_ptr() == v.data_ptr()]
        if not same:  # a per-row statistic: named by its value (shapes differ: [2, 3] or [2, 3, 1])
            rows = t.reshape(mean.shape) if t.numel() == mean.numel() else None
            same = [k for k, v in (("mean", mean), ("rstd", rstd)) if rows is not None and torch.allclose(rows, v)]
        names.append((same[0] if same else f"? {list(t.shape)}", tuple(t.shape)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    return names


def _kept_prediction(kept: dict[str, list[tuple[str, tuple[int, ...]]]], shape: tuple[int, ...]) -> Prediction:
    """Does microgradnorm.torch.LayerNorm keep xhat between the passes? Answered from what autograd saved."""
    ours = kept["microgradnorm.torch.LayerNorm"]
    full = sum(s == shape for _name, s in ours)
    what = "microgradnorm.torch.LayerNorm: tensors the size of x saved for backward"
    evidence = (at_least(full, 2, what), at_most(full, 1, what))
    return Prediction(
        _("Its backward needs xhat. Does microgradnorm.torch.LayerNorm keep xhat between the two passes?"),
        (_("yes, beside x"), _("no: it keeps x and rebuilds xhat")),
        next(k for k, e in enumerate(evidence) if e),
        # Translators: {kept} is a list such as "x, gamma, mean, rstd"
        _("Autograd kept {kept} for its backward.").format(kept=separated([n for n, _s in ours])),
        evidence,
    )


@demo("lab_torch_status")
def lab_torch_status(p: LessonParams, ask: bool = False) -> DemoOutput:
    """Whether PyTorch is installed here, what the bridge's layers run on; ``ask``: what LayerNorm keeps for
    backward, measured with autograd's saved-tensor hooks beside torch.nn.LayerNorm's."""
    from microgradnorm import vectorized as V

    table = _table("", "")
    prediction = None
    if E.have_torch():
        import torch

        import microgradnorm.torch as mt

        _row(table, "PyTorch", torch.__version__)
        # the layers the module exports, read from it: a layer added there shows here
        layers = [n for n in mt.__all__ if isinstance(c := getattr(mt, n), type) and issubclass(c, torch.nn.Module)]
        _row(table, _("microgradnorm.torch layers"), separated(layers))
        if ask:
            torch.manual_seed(p.seed)
            x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
            layers = {"torch.nn.LayerNorm": torch.nn.LayerNorm(5, dtype=torch.float64),
                      "microgradnorm.torch.LayerNorm": mt.LayerNorm(5, dtype=torch.float64)}  # fmt: skip
            kept = {name: _saved_for_backward(layer, x) for name, layer in layers.items()}
            # Translators: table header: what each layer keeps between its forward and its backward pass
            saved = _table(_("kept for backward"), "")
            for name, names in kept.items():
                _row(saved, name, separated([n for n, _s in names]))
            prediction = _kept_prediction(kept, tuple(x.shape))
    else:
        _row(table, "PyTorch", _("not installed"))  # the command is in the step's prose
    info = V.backend_info()
    # Translators: {active} is a backend ("fused", "numpy"), {reason} why, e.g. "auto: numba 0.60.0 is installed"
    _row(
        table,
        _("microgradnorm's kernels (vectorized backend)"),
        _("{active} ({reason})").format(active=info.active, reason=info.reason),
    )
    return DemoOutput(Group(table, saved) if prediction else table, prediction=prediction)


# ---- lesson 16: a wrong backward that trains -------------------------------------------------------------

CLOSE_STEP = 0.05  # a first step this close to the right one (relative to its size) counts as "the same step"


@demo("lab_wrong_curves")
def lab_wrong_curves(p: LessonParams) -> DemoOutput:
    """The right backward and two slips, each training the same MLP with Adam."""
    result = E.wrong(p.seed)
    adam = result.extra["adam"]
    ends = {k: E.final_loss(r) for k, r in adam.items()}
    trained = [k for k in ends if ends[k] < adam[k].losses[0] / 2 and k != "right"]
    what = "slips whose loss ends below half its start"
    evidence = tuple(exactly(len(trained), n, what) for n in range(3))
    starts_ends = separated([f"{run_name(k)} {adam[k].losses[0]:.2f} → {ends[k]:.2f}" for k in ends])
    prediction = Prediction(
        _("Both slips fail the gradient check. Trained with Adam, what do their loss curves do?"),
        (
            _("both stall or blow up"),
            _("one trains, one does not"),
            _("both train: the loss ends below half its start"),
        ),
        len(trained),
        # Translators: {runs} is a list such as "right 1.03 → 0.21, no-mean-path 1.03 → 0.20"
        _("Loss at the first step and at the end: {runs}.").format(runs=starts_ends),
        evidence,
    )
    names = [f"{k} (Adam)" for k in adam]
    chart = Group(show.curves(result, names, height=HEIGHT), show.held_out(result, names), _claims(result, "adam"))
    return DemoOutput(chart, graph=show.figure(result, names), prediction=prediction)


@demo("lab_wrong_why")
def lab_wrong_why(p: LessonParams, part: str = "mean") -> DemoOutput:
    """Why each slip goes unnoticed: where the mean path's error goes; the 1/d slip under Adam and under SGD."""
    result = E.wrong(p.seed)
    if part == "mean":
        table = _table(_block(), _("error in dW"), _("error without its shift"))
        for k, (err, kept) in enumerate(result.extra["mean_path_blocks"]):
            _row(table, str(k + 1), f"{err:.0%}", _percent(kept))
        caption = dim_note(_("sizes relative to the block's right gradient, on the first minibatch; a shift: the "
                             "same change in every row of W"))  # fmt: skip
        return DemoOutput(Group(table, caption, _claims(result, "mean-shift", "mean-downhill")),
                          prediction=_not_a_shift_prediction(result))  # fmt: skip
    if part == "adam":
        table = _table(_block(), _("slip's gradient / right"), "d^k")
        for k, (ratio, power) in enumerate(result.extra["factor_blocks"]):
            _row(table, str(k + 1), f"{ratio:,.0f}", f"{E.MLP.width}^{E.MLP.depth - k} = {power:,.0f}")
        off = result.numbers["no-1/d: Adam's first step off by"]
        what = "no-1/d: Adam's first step, off by (relative to the right step)"
        evidence = (below(off, CLOSE_STEP, what), at_least(off, CLOSE_STEP, what) & below(off, 1.0, what),
                    at_least(off, 1.0, what))  # fmt: skip
        prediction = Prediction(
            _(
                "With the 1/d slip every weight gradient is d^k times too large. How far is Adam's first step from "
                "the right one?"
            ),
            (
                _("within {close:.0%} of the right step's size").format(close=CLOSE_STEP),
                _("off by {close:.0%} to {whole:.0%} of its size").format(close=CLOSE_STEP, whole=1.0),
                _("off by more than its size"),
            ),
            next(k for k, e in enumerate(evidence) if e),
            _("Adam's first step differs from the right one by {off:.2%} of the right step's size.").format(off=off),
            evidence,
        )
        return DemoOutput(Group(table, _claims(result, "factor-powers", "factor-adam")), prediction=prediction)
    sgd = result.extra["sgd"]
    if part == "blind":
        return _mean_path_under_sgd(sgd)
    series = {
        _("{name} ({optimizer})").format(name=run_name(k), optimizer="SGD"): show.smooth(sgd[k].losses)
        for k in ("right", "no-1/d")
    }
    chart = line_chart(series, height=HEIGHT)
    figure = line_chart_svg(series, title=_("Plain SGD, lr {lr:g}").format(lr=E.WRONG_SGD.lr), xlabel=show.step_axis())
    question = _("Plain SGD at {lr:g} with the 1/d slip: what does the network do in {steps} steps?").format(
        lr=E.WRONG_SGD.lr, steps=E.WRONG_SGD.steps
    )
    prediction = _sgd_prediction(question, "no-1/d", sgd["no-1/d"])
    return DemoOutput(Group(chart, _claims(result, "sgd-stall", "sgd-growth")), graph=figure, prediction=prediction)


def _percent(share: float) -> str:
    """A share in percent: whole percents, or a power of ten for one that rounding alone leaves (3e-14%)."""
    return f"{share:.0%}" if share > 1e-3 else f"{share * 100:.0e}%"


NOT_A_SHIFT = 0.01  # a block whose weight-gradient error, shift taken out, exceeds 1% of its gradient


def _not_a_shift_prediction(result: E.Outcome) -> Prediction:
    """Which blocks get an error from the missing mean path that LayerNorm does not remove (table column 3)."""
    kept = [k for _err, k in result.extra["mean_path_blocks"]]
    what = "no-mean-path: block {k}'s weight-gradient error left after the shift, relative"
    yes = [above(v, NOT_A_SHIFT, what.format(k=k + 1)) for k, v in enumerate(kept)]
    no = [at_most(v, NOT_A_SHIFT, what.format(k=k + 1)) for k, v in enumerate(kept)]
    named = (all_of(*no), all_of(*no[:-1], yes[-1]), all_of(*yes[:-1], no[-1]), all_of(*yes))
    evidence = (*named, exactly(sum(bool(e) for e in named), 0, "patterns among the first four choices"))
    # Translators: one block of a list, such as "block 1: 20%"
    listed = separated([_("block {k}: {share}").format(k=k + 1, share=_percent(v)) for k, v in enumerate(kept)])
    return Prediction(
        _(
            "Without the mean path, dx is off by one number per row. In which blocks does the weight gradient's "
            "error keep over {share:.0%} of the gradient once its shift is taken out?"
        ).format(share=NOT_A_SHIFT),
        (
            _("in no block"),
            _("only in the last block"),
            _("in every block but the last"),
            _("in every block"),
            _("another pattern"),
        ),
        next(k for k, e in enumerate(evidence) if e),
        # Translators: {blocks} is a list such as "block 1: 20%, block 2: 16%, block 3: 14%, block 4: 3e-14%"
        _("Shift taken out: {blocks}.").format(blocks=listed),
        evidence,
    )


def _sgd_prediction(question: str, name: str, slip: Run) -> Prediction:
    """Does plain SGD train with this slipped backward, stall, or blow up? From the run's steps and its end."""
    ran, end = len(slip.losses), E.final_loss(slip)
    steps, half = E.WRONG_SGD.steps, E.GUESSING / 2
    ran_what = f"steps the {name} run made with SGD (it stops at a non-finite loss)"
    full = at_least(ran, steps, ran_what)
    what = f"{name} with SGD: training loss, last 10 minibatches, vs half of ln 3"
    evidence = (full & below(end, half, what), full & at_least(end, half, what), below(ran, steps, ran_what))
    return Prediction(
        question,
        (
            _("it trains (training loss below half of ln 3)"),
            _("it neither trains nor blows up"),
            _("it blows up (the loss stops being a number)"),
        ),
        first_holding(evidence, 2),
        # Translators: {ran} and {steps} count steps; {loss} is the training loss over the last 10 minibatches
        _(
            "It ran {ran} of {steps} steps and ended at a training loss of {loss:.2f} (half of ln 3: {half:.2f})."
        ).format(ran=ran, steps=steps, loss=end, half=half),
        evidence,
    )


def _mean_path_under_sgd(sgd: dict[str, Run]) -> DemoOutput:
    """Lesson 16's last step: the no-mean-path slip under the plain SGD that exposed the 1/d slip."""
    ends = {k: E.final_loss(r) for k, r in sgd.items()}
    table = _table(pgettext("lab table header", "backward"), _("steps run"), _("training loss: step 1 → end"))
    for k, r in sgd.items():
        _row(table, run_name(k), f"{len(r.losses)} / {E.WRONG_SGD.steps}", f"{r.losses[0]:.2f} → {ends[k]:.2f}")
    question = _("The same plain SGD, now with the no-mean-path slip: what does the network do in {steps} steps?")
    prediction = _sgd_prediction(question.format(steps=E.WRONG_SGD.steps), "no-mean-path", sgd["no-mean-path"])
    caption = dim_note(_("plain SGD at {lr:g}; the end: mean over the last {n} minibatches").format(
        lr=E.WRONG_SGD.lr, n=E.SMOOTH))  # fmt: skip
    return DemoOutput(Group(table, caption), prediction=prediction)


def _block() -> str:
    """The header of a column of block numbers (and the x axis of a chart over blocks)."""
    # Translators: one block of the network (Linear → norm → ReLU), numbered from the input
    return pgettext("lab table header", "block")


# ---- lessons 17 and 18: the plan first, the runs in the background ----------------------------------------

PLANS = ("depth", "norms")


@demo("lab_plan")
def lab_plan(p: LessonParams, experiment: str = "depth") -> DemoOutput:
    """The networks and the training of a lab experiment, read off its settings; starts its runs in the background."""
    if experiment not in PLANS:
        raise ValueError(f"experiment: expected one of {', '.join(PLANS)}, got {experiment!r}")
    task = E.task_for(p.seed)
    table = _table("", "")
    _row(table, _("examples (training / held out)"), f"{len(task.y_train)} / {len(task.y_test)}")
    if experiment == "depth":
        E.start(p.seed, E.depth)
        _row(table, _("residual blocks, width"), separated([str(E.RESIDUAL_DEPTH), "32"]))
        cfg = E.WARMUP
        _row(table, _("steps of Adam, examples per step"), _("{steps}, {batch} (lr {lr:g})").format(
            steps=cfg.steps, batch=cfg.batch, lr=cfg.lr))  # fmt: skip
        _row(table, _("warmup steps (the warmup run)"), str(cfg.warmup))
    else:
        E.start(p.seed, E.norms, E.batch_sizes)
        _row(table, _("blocks Linear → norm → ReLU, width"), separated([str(E.DEEP_MLP_DEPTH), "32"]))
        _row(table, _("steps of SGD, examples per step"), _("{steps}, {batch} (lr {lr:g})").format(
            steps=E.SGD.steps, batch=E.SGD.batch, lr=E.SGD.lr))  # fmt: skip
    _row(table, _("loss of a guess (ln 3)"), f"{E.GUESSING:.3f}")
    return DemoOutput(table)


# ---- lesson 17: pre-LN and post-LN in training ----------------------------------------------------------


@demo("lab_depth_gradients")
def lab_depth_gradients(p: LessonParams) -> DemoOutput:
    """Each block's weight-gradient norm at initialization, post-LN and pre-LN, first block to last."""
    result = E.outcome_of(E.depth, p.seed)
    grads = result.extra["gradients"]
    ratios = {k: v[-1] / v[0] for k, v in grads.items()}
    what = "last / first block gradient, post-LN vs pre-LN"
    evidence = (above(ratios["post-LN"], ratios["pre-LN"], what), at_most(ratios["post-LN"], ratios["pre-LN"], what))
    answer = 0 if evidence[0] else 1
    prediction = Prediction(
        _(
            "Before any training, which placement has the larger gradients near the output, compared with those "
            "near the input?"
        ),
        ("post-LN", "pre-LN"),
        answer,
        # Translators: {ratios} is a list such as "post-LN 1.94, pre-LN 0.58"
        _("Last block / first block: {ratios}.").format(ratios=separated([f"{k} {v:.2f}" for k, v in ratios.items()])),
        evidence,
    )
    blocks = list(range(1, E.RESIDUAL_DEPTH + 1))
    chart = line_chart(grads, height=HEIGHT, x_label=_block(), x_values=blocks)
    figure = line_chart_svg(grads, title=_("Weight-gradient norm per block at initialization"), xlabel=_block(),
                            xs=blocks)  # fmt: skip
    return DemoOutput(Group(chart, _claims(result, "post-grows", "pre-even", "last-block")), graph=figure,
                      prediction=prediction)  # fmt: skip


@demo("lab_depth_training")
def lab_depth_training(p: LessonParams, warmup: bool = False) -> DemoOutput:
    """Post-LN and pre-LN trained with Adam at 0.01: without warmup, or post-LN with and without it."""
    result = E.outcome_of(E.depth, p.seed)
    runs = result.extra["runs"]
    w = E.WARMUP.warmup
    if warmup:
        names = ["post-LN, no warmup", f"post-LN, warmup {w}"]
        return DemoOutput(Group(show.curves(result, names, height=HEIGHT), show.held_out(result, names),
                                _claims(result, "warmup-helps")),
                          graph=show.figure(result, names))  # fmt: skip
    names = ["post-LN, no warmup", "pre-LN, no warmup"]
    ends = {k: E.final_loss(runs[k]) for k in names}
    trains = tuple(ends[k] < E.GUESSING / 2 for k in names)  # (post-LN, pre-LN)
    outcomes = {(True, True): 0, (False, True): 1, (True, False): 2, (False, False): 3}
    yes = [below(ends[k], E.GUESSING / 2, f"{k}: final loss vs half of ln 3") for k in names]
    no = [at_least(ends[k], E.GUESSING / 2, f"{k}: final loss vs half of ln 3") for k in names]
    evidence = (yes[0] & yes[1], no[0] & yes[1], yes[0] & no[1], no[0] & no[1])
    prediction = Prediction(
        _(
            "Adam at {lr:g} from the first step, no warmup. Which of the two {depth}-block networks trains "
            "(training loss over the last {n} minibatches below half of ln 3)?"
        ).format(lr=E.WARMUP.lr, depth=E.RESIDUAL_DEPTH, n=E.SMOOTH),
        (pgettext("lab answer", "both"), _("only pre-LN"), _("only post-LN"), pgettext("lab answer", "neither")),
        outcomes[trains],
        # Translators: {losses} is a list such as "post-LN (no warmup) 1.05, pre-LN (no warmup) 0.23"
        _("Losses after {steps} steps: {losses} (a guess: ln 3 = {guess:.2f}).").format(
            steps=E.WARMUP.steps,
            losses=separated([result.labelled(k, f"{v:.2f}") for k, v in ends.items()]),
            guess=E.GUESSING,
        ),
        evidence,
    )
    return DemoOutput(Group(show.curves(result, names, height=HEIGHT), show.held_out(result, names),
                            _claims(result, "post-stalls", "pre-trains"), _held_out_gap(result, names)),
                      graph=show.figure(result, names), prediction=prediction)  # fmt: skip


@demo("lab_depth_scaling")
def lab_depth_scaling(p: LessonParams) -> DemoOutput:
    """The last block's weight gradient at initialization at three depths, post-LN and pre-LN, and their ratio."""
    result = E.outcome_of(E.depth, p.seed)
    last = result.extra["last_block_by_depth"]
    table = _table("L", "post-LN", "pre-LN", "post ÷ pre")
    for depth in E.DEPTHS:
        post, pre = last["post", depth], last["pre", depth]
        _row(table, str(depth), f"{post:.3f}", f"{pre:.3f}", f"{post / pre:.2f}")
    caption = dim_note(_("the last block's weight-gradient norm at initialization, mean of {draws} draws").format(
        draws=E.GRADIENT_DRAWS))  # fmt: skip
    low, high = E.DEPTHS[0], E.DEPTHS[-1]
    growth = result.numbers["post/pre at the last block, growth from L = 3 to 24"]
    what = "growth of post / pre at the last block"
    evidence = (above(growth, 1.2, what), above(growth, 1 / 1.2, what) & at_most(growth, 1.2, what),
                at_most(growth, 1 / 1.2, what))  # fmt: skip
    prediction = Prediction(
        _("From L = {low} to {high} blocks, what does post-LN's last-block gradient divided by pre-LN's do?").format(
            low=low, high=high
        ),
        (_("it grows"), _("it stays within 20%"), _("it shrinks")),
        next(k for k, e in enumerate(evidence) if e),
        _("It changes × {growth:.2f}; bounds that differ by √L would give × {bound:.2f}.").format(
            growth=growth, bound=math.sqrt(high / low)
        ),
        evidence,
    )
    return DemoOutput(Group(table, caption, _claims(result, "depth-ratio")), prediction=prediction)


@demo("lab_depth_pre_spread")
def lab_depth_pre_spread(p: LessonParams) -> DemoOutput:
    """Pre-LN's block gradients at initialization, measured against "about the same in every layer"."""
    result = E.outcome_of(E.depth, p.seed)
    pre = result.extra["gradients"]["pre-LN"]
    largest = max(range(len(pre)), key=lambda k: pre[k]) + 1
    return DemoOutput(dim_note(_(
        "here pre-LN's block gradients vary by a factor {spread:.1f}, the largest at block {block} of {depth} "
        "(last / first = {ratio:.2f})"
    ).format(spread=result.numbers["pre-LN max/min"], block=largest, depth=len(pre),
             ratio=result.numbers["pre-LN last/first"])))  # fmt: skip


# ---- lesson 18: which norm, and how big a batch ----------------------------------------------------------


@demo("lab_norms_curves")
def lab_norms_curves(p: LessonParams) -> DemoOutput:
    """No norm, BatchNorm, LayerNorm and RMSNorm in the same deep MLP, trained with plain SGD."""
    result = E.outcome_of(E.norms, p.seed)
    ends = {k: E.final_loss(r) for k, r in result.extra["runs"].items()}
    trained = {k for k, v in ends.items() if v < E.GUESSING / 2}
    answers = {frozenset(ends): 0, frozenset(ends) - {"none"}: 1, frozenset({"none"}): 2}
    yes = {k: below(v, E.GUESSING / 2, f"{k}: final loss vs half of ln 3") for k, v in ends.items()}
    no = {k: at_least(v, E.GUESSING / 2, f"{k}: final loss vs half of ln 3") for k, v in ends.items()}
    normed = [k for k in ends if k != "none"]
    named = (all_of(*yes.values()), all_of(no["none"], *(yes[k] for k in normed)),
             all_of(yes["none"], *(no[k] for k in normed)))  # fmt: skip
    evidence = (*named, exactly(sum(bool(e) for e in named), 0, "outcomes among the first three choices"))
    prediction = Prediction(
        _(
            "Plain SGD at {lr:g} on a {depth}-block MLP. Which of the four networks train (training loss over the "
            "last {n} minibatches below half of ln 3)?"
        ).format(lr=E.SGD.lr, depth=E.DEEP_MLP_DEPTH, n=E.SMOOTH),
        (_("all four"), _("the three with a norm"), _("only the one without a norm"), _("another mix")),
        answers.get(frozenset(trained), 3),
        # Translators: {losses} is a list such as "none 1.08, batchnorm 0.16, layernorm 0.23, rmsnorm 0.23"
        _("Losses after {steps} steps: {losses}.").format(
            steps=E.SGD.steps, losses=separated([result.labelled(k, f"{v:.2f}") for k, v in ends.items()])
        ),
        evidence,
    )
    return DemoOutput(Group(show.curves(result, height=HEIGHT), show.held_out(result),
                            _claims(result, "none-stalls", "norms-train"), _held_out_gap(result, list(ends))),
                      graph=show.figure(result), prediction=prediction)  # fmt: skip


@demo("lab_norms_signal")
def lab_norms_signal(p: LessonParams) -> DemoOutput:
    """The deep MLP at initialization, without a norm and with LayerNorm: each block's output and gradient."""
    result = E.outcome_of(E.norms, p.seed)
    (plain, plain_g), (ln, ln_g) = result.extra["signal"]["none"], result.extra["signal"]["layernorm"]
    # Translators: "output: none" and "gradient: none" head the columns of the network without a norm
    table = _table(_block(), _("output: none"), "LayerNorm", _("gradient: none"), "LayerNorm")
    for k in range(len(plain)):
        _row(table, str(k + 1), f"{plain[k]:.3f}", f"{ln[k]:.3f}", f"{plain_g[k]:.4f}", f"{ln_g[k]:.4f}")
    caption = dim_note(_("output: root mean square; gradient: norm of the block's weight gradient"))
    return DemoOutput(Group(table, caption, _claims(result, "signal-shrinks", "ln-keeps")))


@demo("lab_norms_adam")
def lab_norms_adam(p: LessonParams) -> DemoOutput:
    """The network without a norm, trained with Adam instead of SGD."""
    result = E.outcome_of(E.norms, p.seed)
    return DemoOutput(_claims(result, "adam-none"))


@demo("lab_batch_sizes")
def lab_batch_sizes(p: LessonParams) -> DemoOutput:
    """BatchNorm trained at batch sizes 2, 8 and 32: held-out loss with running and with batch statistics."""
    result = E.outcome_of(E.batch_sizes, p.seed)
    rows = result.extra["rows"]
    # Translators: table headers: the batch size, the held-out loss with running and with batch statistics
    table = _table(pgettext("lab table header", "batch"), _("running stats"), _("batch stats"),
                   pgettext("lab table header", "gap"))  # fmt: skip
    for batch, (held, batch_loss, _run) in rows.items():
        _row(table, str(batch), f"{held:.3f}", f"{batch_loss:.3f}", f"{abs(batch_loss - held):.3f}")
    worst = max(rows, key=lambda b: rows[b][0])
    evidence = tuple(
        all_of(*(above(rows[b][0], rows[o][0], f"held-out loss, batch {b} vs {o}") for o in rows if o != b))
        for b in rows
    )
    prediction = Prediction(
        _(
            "Same network, {epochs} passes over the data each. At which batch size does BatchNorm end with the "
            "worst held-out loss?"
        ).format(epochs=E.BATCH_EPOCHS),
        tuple(str(b) for b in rows),
        list(rows).index(worst),
        # Translators: {losses} is a list such as "batch 2 1.03, batch 8 0.57, batch 32 0.61"
        _("Held-out losses (running statistics): {losses}.").format(
            losses=separated([_("batch {size} {loss:.2f}").format(size=b, loss=r[0]) for b, r in rows.items()])
        ),
        evidence,
    )
    steps = separated([_("{steps} at batch {size}").format(steps=len(r[2].losses), size=b) for b, r in rows.items()])
    caption = dim_note(_("held-out loss; gap: between batch and running statistics. Adam at {lr:g}, steps: "
                         "{steps}").format(lr=E.BATCH_LR, steps=steps))  # fmt: skip
    claims = _claims(result, "small-least", "small-guess", "gap")
    return DemoOutput(Group(table, caption, claims), graph=show.figure(result), prediction=prediction)


@demo("lab_two_examples")
def lab_two_examples(p: LessonParams) -> DemoOutput:
    """What a batch of two does to BatchNorm, and LayerNorm at the same batch size."""
    return DemoOutput(_claims(E.outcome_of(E.batch_sizes, p.seed), "two-signs", "ln-small"))
