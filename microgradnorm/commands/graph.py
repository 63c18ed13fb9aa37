"""``microgradnorm graph NORM -o FILE``: draw a norm's computation graph (SVG, PNG, PDF or DOT)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from microgradnorm.commands import (
    UsageError,
    add_norm_argument,
    add_problem_arguments,
    add_variance_argument,
    nonneg_int,
    problem_spec,
    problem_variance,
    shape_flags,
)
from microgradnorm.i18n import _, lazy_gettext

# The scalar graph is built one Python object per node, about 13 per entry of x for LayerNorm:
# 16,384 entries take a second or two to build and draw collapsed, while --dim 1000000 took
# 45 s and 4.1 GB to draw seven boxes.
SIZE_LIMIT = 16384


HELP = lazy_gettext(
    "draw the computation graph of a norm, stage by stage (SVG, PNG, PDF, DOT, or a page to step through)"
)
DESCRIPTION = lazy_gettext(
    "Build the norm from scalar nodes on a random input and draw its graph with Graphviz: every "
    "stage (mean, center, var, sqrt, divide, affine) a titled box, every node with its value and, "
    "with --grad, its gradient for loss = sum(y * dy) with a random dy. --paths colours the routes "
    "along which dL/dx_i is accumulated. The format comes from the extension of -o; a .dot file needs "
    "no Graphviz. --html (or an -o ending in .html) writes one self-contained page that steps through "
    "the forward pass and, with --grad, backward one contribution at a time. Graphs too large to read in "
    "full are drawn collapsed (one box per stage) unless --full is given; x has at most {limit} entries.",
    limit=SIZE_LIMIT,
)


def _index(text: str) -> int:
    return nonneg_int(text, _("a flat index of x (an integer >= 0)"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_norm_argument(parser)
    add_problem_arguments(parser, dim=3)
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help=_("where to write the drawing; .svg, .png, .pdf, .dot or .html (the format follows the extension)"),
    )
    parser.add_argument(
        "--html",
        action="store_true",
        help=_("write the step-through page (one HTML file, opens from disk; the same as an -o ending in .html)"),
    )
    parser.add_argument(
        "--grad", action="store_true", help=_("backpropagate loss = sum(y * dy) (random dy) and show every grad")
    )
    parser.add_argument(
        "--paths",
        action="store_true",
        help=_("colour the gradient paths into one input x_i (direct, via the mean, via the variance) with a legend"),
    )
    parser.add_argument(
        "--index",
        type=_index,
        default=None,
        metavar="K",
        help=_("with --paths: which x_i the paths start at, as a flat index into x (default 0)"),
    )
    _add_view_arguments(parser)
    add_variance_argument(parser)


def _add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """What the drawing shows: full or collapsed, edge labels, a highlighted node, the direction."""
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--collapse", action="store_true", help=_("one box per stage instead of one per scalar"))
    view.add_argument("--full", action="store_true", help=_("draw every scalar even above the full-view limit"))
    parser.add_argument(
        "--edge-labels", action="store_true", help=_("label every edge with its local derivative d node / d child")
    )
    parser.add_argument(
        "--highlight",
        metavar="NODE",
        help=_(
            "keep NODE and what it is computed from dark; fade the rest. Names follow the shape: e.g. rstd "
            "or xhat[1] for one LayerNorm vector, rstd[0] or xhat[1,0] for BatchNorm or with --batch"
        ),
    )
    parser.add_argument(
        "--descendants",
        action="store_true",
        help=_("with --highlight: keep what is computed from NODE dark instead"),
    )
    parser.add_argument(
        "--rankdir",
        choices=("LR", "TB"),
        default="LR",
        help=_("LR: inputs on the left (default); TB: inputs on top, each node's numbers stacked (fits a page)"),
    )


# to_dot's keyword -> the flag that sets it, for errors about a node or input the graph does not have
_FLAGS = {"highlight": "--highlight", "highlight_mode": "--descendants", "path_input": "--index"}


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm import output, viz

    out = _output_path(args.output)  # fail before any work: unknown extension, missing or read-only directory
    page = _check_combinations(args, out)
    spec, shape, variance, graph = _build(args, page=page)
    size = viz.graph_size(graph)
    collapse = _collapse(args, size, console, page=page)
    if not collapse and output.output_format(out) != "dot" and (not page or args.full):
        _warn_if_slow(size, console)
    options = _options(args, spec, shape, variance, collapse)
    if page:  # the page opens collapsed or not by itself, and says why on the page
        options["collapse"] = True if args.collapse else False if args.full else None
    try:
        drawn = output.draw(graph, out, **options)
    except viz.OptionError as exc:  # a --highlight name the graph does not have: nothing was written
        raise UsageError(_argument_error(_FLAGS.get(exc.option, exc.option), exc.message)) from None
    except OSError as exc:
        where = exc.filename or str(out)
        raise UsageError(
            _("argument -o/--output: cannot write {path!r}: {reason}").format(path=where, reason=exc.strerror or exc)
        ) from None
    if drawn.error is not None:
        return _failed(drawn, out)
    # one soft-wrapped line: a path folded at the width would no longer copy and paste whole
    console.print(_wrote(out, size, page=page, collapse=collapse), highlight=False, soft_wrap=True)
    return 0


def _argument_error(flag: str, message: str) -> str:
    # Translators: an error about one argument, e.g. "argument --highlight: expected a node name ..."
    return _("argument {flag}: {message}").format(flag=flag, message=message)


def _wrote(out: Path, size: int, *, page: bool, collapse: bool) -> str:
    """The line that says what was written."""
    if page:
        message = (
            _("wrote {path} (step-through page, collapsed view, {size} nodes in the full graph)")
            if collapse
            else _("wrote {path} (step-through page, full view, {size} nodes in the full graph)")
        )
    else:
        message = (
            _("wrote {path} (collapsed view, {size} nodes in the full graph)")
            if collapse
            else _("wrote {path} (full view, {size} nodes in the full graph)")
        )
    return message.format(path=out, size=size)


def _failed(drawn, out: Path) -> int:
    """Say why the picture could not be made and where its DOT source went instead."""
    from microgradnorm import viz

    if isinstance(drawn.error, viz.GraphvizNotFoundError):
        message = _(
            "microgradnorm graph: Graphviz's dot program was not found, so only the DOT source was written, "
            "to {path}; to draw {name}, {hint}."
        ).format(path=drawn.path, name=out.name, hint=viz.INSTALL_HINT)
    else:
        message = _("microgradnorm graph: error: {error} (the DOT source is in {path})").format(
            error=drawn.error, path=drawn.path
        )
    print(message, file=sys.stderr)
    return 1


def _check_combinations(args: argparse.Namespace, out: Path) -> bool:
    """Flags that only make sense with another flag; whether the output is the step-through page."""
    page = out.suffix.lower() == ".html"
    if args.html and not page:
        raise UsageError(
            _("argument --html: expected -o to name a file ending in .html, got {path!r}").format(path=str(out))
        )
    if args.descendants and args.highlight is None:
        raise UsageError(_("argument --descendants: needs --highlight NODE, got no --highlight"))
    if args.index is not None and not args.paths:
        raise UsageError(_("argument --index: needs --paths (it picks the x_i the paths start at), got no --paths"))
    return page


def _build(args: argparse.Namespace, *, page: bool):
    """The norm built on a random problem; backpropagated when the drawing shows gradients."""
    from microgradnorm.check import random_problem

    spec, shape = problem_spec(args)
    _check_size(shape, args, page=page)
    variance = problem_variance(spec, args)
    x, gamma, beta, dy = random_problem(spec, shape, args.seed)
    graph = spec.build_graph(x, gamma, beta, args.eps, variance)
    size = len(graph["x"])
    if args.paths and args.index is not None and args.index >= size:
        raise UsageError(
            _("argument --index: x has {size} entries (0 to {last}), got {index}").format(
                size=size, last=size - 1, index=args.index
            )
        )
    if args.grad or args.paths:  # the path legend shows each path's share of dL/dx_i
        graph.loss(dy.tolist()).backward()
    return spec, shape, variance, graph


def _check_size(shape: tuple[int, ...], args: argparse.Namespace, *, page: bool) -> None:
    """A UsageError, before anything is built, when x has more entries than the drawing is made for."""
    from microgradnorm.page.data import CHECK_LIMIT

    size = math.prod(shape)
    limit = CHECK_LIMIT if page else SIZE_LIMIT
    if size <= limit:
        return
    if page:
        message = _(
            "argument {flags}: the page carries every node's numbers and the three-way check, so expected x "
            "to have at most {limit} entries, got {size}"
        )
    else:
        message = _(
            "argument {flags}: the scalar graph is built one node at a time, so expected x to have at most "
            "{limit} entries, got {size}"
        )
    message = message.format(flags=shape_flags(args), limit=limit, size=size)
    if len(shape) > 1:
        # Translators: an error message followed by the shape that was given, e.g. "... got 600 (20x30)"
        message = _("{message} ({shape})").format(message=message, shape="x".join(map(str, shape)))
    raise UsageError(message)


def _warn_if_slow(size: int, console) -> None:
    """Say so before Graphviz lays out a full graph that takes it long; refuse one it would take ages on."""
    from microgradnorm import viz

    if size > viz.LAYOUT_LIMIT:
        raise UsageError(
            _(
                "argument --full: expected a full graph of at most {limit} nodes, which Graphviz lays out in a "
                "few minutes, got {size}; leave out --full for the collapsed view, or write a .dot file"
            ).format(limit=viz.LAYOUT_LIMIT, size=size)
        )
    if size > viz.LARGE_GRAPH:
        from microgradnorm.i18n.text import cjk_text

        console.print(
            cjk_text(
                _(
                    "Drawing all {size} nodes: Graphviz can take a minute or more for a graph this size "
                    "(Ctrl+C stops it; without --full the collapsed view takes a second)."
                ).format(size=size)
            ),
            highlight=False,
        )


def _collapse(args: argparse.Namespace, size: int, console, *, page: bool) -> bool:
    """Whether to draw (or open the page with) the collapsed view: asked for, or the full graph is over
    the limit (said so)."""
    from microgradnorm import viz

    if args.collapse or args.full or size <= viz.FULL_VIEW_LIMIT:
        return args.collapse
    if page:
        message = _(
            "The full graph has {size} nodes, more than {limit}, too many to read: the page opens with one box "
            "per stage (--full draws every node anyway)."
        )
    else:
        message = _(
            "The full graph has {size} nodes, more than {limit}, too many to read: drawing the collapsed stage "
            "view (--full draws every node anyway)."
        )
    from microgradnorm.i18n.text import cjk_text

    # wrapped between words at the terminal's width: the terminal's own wrap cuts "too many to rea|d"
    console.print(cjk_text(message.format(size=size, limit=viz.FULL_VIEW_LIMIT)), highlight=False)
    return True


def _options(args: argparse.Namespace, spec, shape: tuple[int, ...], variance: str, collapse: bool) -> dict:
    """The keywords of viz.to_dot for these arguments."""
    return {
        "title": _title(args, spec, shape, variance),
        "grad": args.grad,
        "paths": args.paths,
        "path_input": args.index if args.index is not None else 0,
        "collapse": collapse,
        "edge_labels": args.edge_labels,
        "highlight": args.highlight,
        "highlight_mode": "descendants" if args.descendants else "ancestors",
        "rankdir": args.rankdir,
    }


def _title(args: argparse.Namespace, spec, shape: tuple[int, ...], variance: str) -> str:
    """The drawing's title: what was drawn, in the current language. A PNG or PDF keeps it in English, as
    :func:`microgradnorm.output.render` keeps the rest of such a drawing: Graphviz draws their letters with
    the fonts it finds, and a machine without a Chinese font (CI's) would draw boxes."""
    from microgradnorm import output

    fmt = "html" if args.html else output.FORMATS.get(Path(args.output).suffix.lower(), "")
    with output.drawing_language(fmt):
        title = _("{norm} of x [{shape}], eps = {eps}, seed {seed}").format(
            norm=spec.title, shape="×".join(map(str, shape)), eps=f"{args.eps:g}", seed=args.seed
        )
        if variance != "two_pass":
            title = _("{title}, naive variance").format(title=title)
        if args.grad:
            title = _("{title} · grad = dL/d(node) for L = Σ y·dy with a random dy").format(title=title)
    return title


def _output_path(text: str) -> Path:
    """The -o path, checked before any work is done; a UsageError naming -o/--output if it cannot be written."""
    from microgradnorm import output, viz

    if not text.strip():
        raise UsageError(
            _("argument -o/--output: expected a file name ending in {endings}, got an empty path").format(
                endings=output.output_extensions()
            )
        )
    out = Path(text)
    existing = next((p for p in out.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UsageError(
            _("argument -o/--output: cannot write {path!r}: {parent!r} is not a directory").format(
                path=text, parent=str(existing)
            )
        )
    try:
        output.check_output_path(out)
    except viz.OptionError as exc:
        raise UsageError(_argument_error("-o/--output", exc.message)) from None
    return out
