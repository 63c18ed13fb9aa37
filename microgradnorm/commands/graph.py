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
    problem_shape,
    problem_variance,
)

# The scalar graph is built one Python object per node, about 13 per entry of x for LayerNorm:
# 16,384 entries take a second or two to build and draw collapsed, while --dim 1000000 took
# 45 s and 4.1 GB to draw seven boxes.
SIZE_LIMIT = 16384


HELP = "draw the computation graph of a norm, stage by stage (SVG, PNG, PDF, DOT, or a page to step through)"
DESCRIPTION = (
    "Build the norm from scalar nodes on a random input and draw its graph with Graphviz: every "
    "stage (mean, center, var, sqrt, divide, affine) a titled box, every node with its value and, "
    "with --grad, its gradient for loss = sum(y * dy) with a random dy. --paths colours the routes "
    "along which dL/dx_i is accumulated. The format comes from the extension of -o; a .dot file needs "
    "no Graphviz. --html (or an -o ending in .html) writes one self-contained page that steps through "
    "the forward pass and, with --grad, backward one contribution at a time. Graphs too large to read in "
    f"full are drawn collapsed (one box per stage) unless --full is given; x has at most {SIZE_LIMIT} entries."
)


def _index(text: str) -> int:
    return nonneg_int(text, "a flat index of x (an integer >= 0)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_norm_argument(parser)
    add_problem_arguments(parser, dim=3)
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="where to write the drawing; .svg, .png, .pdf, .dot or .html (the format follows the extension)",
    )
    parser.add_argument(
        "--html",
        action="store_true",
        help="write the step-through page (one HTML file, opens from disk; the same as an -o ending in .html)",
    )
    parser.add_argument(
        "--grad", action="store_true", help="backpropagate loss = sum(y * dy) (random dy) and show every grad"
    )
    parser.add_argument(
        "--paths",
        action="store_true",
        help="colour the gradient paths into one input x_i (direct, via the mean, via the variance) with a legend",
    )
    parser.add_argument(
        "--index",
        type=_index,
        default=None,
        metavar="K",
        help="with --paths: which x_i the paths start at, as a flat index into x (default 0)",
    )
    _add_view_arguments(parser)
    add_variance_argument(parser)


def _add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """What the drawing shows: full or collapsed, edge labels, a highlighted node, the direction."""
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--collapse", action="store_true", help="one box per stage instead of one per scalar")
    view.add_argument("--full", action="store_true", help="draw every scalar even above the full-view limit")
    parser.add_argument(
        "--edge-labels", action="store_true", help="label every edge with its local derivative d node / d child"
    )
    parser.add_argument(
        "--highlight",
        metavar="NODE",
        help=(
            "keep NODE and what it is computed from dark; fade the rest. Names follow the shape: e.g. rstd "
            "or xhat[1] for one LayerNorm vector, rstd[0] or xhat[1,0] for BatchNorm or with --batch"
        ),
    )
    parser.add_argument(
        "--descendants",
        action="store_true",
        help="with --highlight: keep what is computed from NODE dark instead",
    )
    parser.add_argument(
        "--rankdir",
        choices=("LR", "TB"),
        default="LR",
        help="LR: inputs on the left (default); TB: inputs on top, each node's numbers stacked (fits a page)",
    )


# to_dot's keyword -> the flag that sets it, for errors about a node or input the graph does not have
_FLAGS = {"highlight": "--highlight", "highlight_mode": "--descendants", "path_input": "--index"}


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm import viz

    out = _output_path(args.output)  # fail before any work: unknown extension, missing or read-only directory
    page = _check_combinations(args, out)
    spec, shape, variance, graph = _build(args, page=page)
    size = viz.graph_size(graph)
    collapse = _collapse(args, size, console, page=page)
    if not collapse and viz.output_format(out) != "dot" and (not page or args.full):
        _warn_if_slow(size, console)
    options = _options(args, spec, shape, variance, collapse)
    if page:  # the page opens collapsed or not by itself, and says why on the page
        options["collapse"] = True if args.collapse else False if args.full else None
    try:
        drawn = viz.draw(graph, out, **options)
    except viz.OptionError as exc:  # a --highlight name the graph does not have: nothing was written
        raise UsageError(f"argument {_FLAGS.get(exc.option, exc.option)}: {exc.message}") from None
    except OSError as exc:
        where = exc.filename or str(out)
        raise UsageError(f"argument -o/--output: cannot write {where!r}: {exc.strerror or exc}") from None
    if drawn.error is not None:
        return _failed(drawn, out)
    view = ("step-through page, " if page else "") + ("collapsed" if collapse else "full")
    console.print(f"wrote {out} ({view} view, {size} nodes in the full graph)", highlight=False, soft_wrap=True)
    return 0


def _failed(drawn, out: Path) -> int:
    """Say why the picture could not be made and where its DOT source went instead."""
    from microgradnorm import viz

    if isinstance(drawn.error, viz.GraphvizNotFoundError):
        print(
            f"microgradnorm graph: Graphviz's dot program was not found, so only the DOT source was written, "
            f"to {drawn.path}; to draw {out.name}, {viz.INSTALL_HINT}.",
            file=sys.stderr,
        )
    else:
        print(f"microgradnorm graph: error: {drawn.error} (the DOT source is in {drawn.path})", file=sys.stderr)
    return 1


def _check_combinations(args: argparse.Namespace, out: Path) -> bool:
    """Flags that only make sense with another flag; whether the output is the step-through page."""
    page = out.suffix.lower() == ".html"
    if args.html and not page:
        raise UsageError(f"argument --html: expected -o to name a file ending in .html, got {str(out)!r}")
    if args.descendants and args.highlight is None:
        raise UsageError("argument --descendants: needs --highlight NODE, got no --highlight")
    if args.index is not None and not args.paths:
        raise UsageError("argument --index: needs --paths (it picks the x_i the paths start at), got no --paths")
    return page


def _build(args: argparse.Namespace, *, page: bool):
    """The norm built on a random problem; backpropagated when the drawing shows gradients."""
    from microgradnorm.check import random_problem
    from microgradnorm.registry import get_norm

    spec = get_norm(args.norm)
    shape = problem_shape(spec, args)
    _check_size(shape, args, page=page)
    variance = problem_variance(spec, args)
    x, gamma, beta, dy = random_problem(spec, shape, args.seed)
    graph = spec.build_graph(x, gamma, beta, args.eps, variance)
    size = len(graph["x"])
    if args.paths and args.index is not None and args.index >= size:
        raise UsageError(f"argument --index: x has {size} entries (0 to {size - 1}), got {args.index}")
    if args.grad or args.paths:  # the path legend shows each path's share of dL/dx_i
        graph.loss(dy.tolist()).backward()
    return spec, shape, variance, graph


def _check_size(shape: tuple[int, ...], args: argparse.Namespace, *, page: bool) -> None:
    """A UsageError, before anything is built, when x has more entries than the drawing is made for."""
    from microgradnorm.page.data import CHECK_LIMIT

    size = math.prod(shape)
    limit, why = (
        (CHECK_LIMIT, "the page carries every node's numbers and the three-way check")
        if page
        else (SIZE_LIMIT, "the scalar graph is built one node at a time")
    )
    if size <= limit:
        return
    given = [flag for flag, value in (("--dim", args.dim), ("--batch", args.batch)) if value is not None]
    flags = "--shape" if args.shape is not None else "/".join(given) or "--dim"
    raise UsageError(
        f"argument {flags}: {why}, so expected x to have at most {limit} entries, got {size}"
        + (f" ({'x'.join(map(str, shape))})" if len(shape) > 1 else "")
    )


def _warn_if_slow(size: int, console) -> None:
    """Say so before Graphviz lays out a full graph that takes it long; refuse one it would take ages on."""
    from microgradnorm import viz

    if size > viz.LAYOUT_LIMIT:
        raise UsageError(
            f"argument --full: expected a full graph of at most {viz.LAYOUT_LIMIT} nodes, which Graphviz lays "
            f"out in a few minutes, got {size}; leave out --full for the collapsed view, or write a .dot file"
        )
    if size > viz.LARGE_GRAPH:
        console.print(
            f"Drawing all {size} nodes: Graphviz can take a minute or more for a graph this size "
            "(Ctrl+C stops it; without --full the collapsed view takes a second).",
            highlight=False,
            soft_wrap=True,
        )


def _collapse(args: argparse.Namespace, size: int, console, *, page: bool) -> bool:
    """Whether to draw (or open the page with) the collapsed view: asked for, or the full graph is over
    the limit (said so)."""
    from microgradnorm import viz

    if args.collapse or args.full or size <= viz.FULL_VIEW_LIMIT:
        return args.collapse
    what = "the page opens with one box per stage" if page else "drawing the collapsed stage view"
    console.print(
        f"The full graph has {size} nodes, more than {viz.FULL_VIEW_LIMIT}, too many to read: {what} "
        "(--full draws every node anyway).",
        highlight=False,
        soft_wrap=True,
    )
    return True


def _options(args: argparse.Namespace, spec, shape: tuple[int, ...], variance: str, collapse: bool) -> dict:
    """The keywords of viz.to_dot for these arguments."""
    title = f"{spec.title} of x [{'×'.join(map(str, shape))}], eps = {args.eps:g}, seed {args.seed}"
    if variance != "two_pass":
        title += ", naive variance"
    if args.grad:
        title += " · grad = dL/d(node) for L = Σ y·dy with a random dy"
    return {
        "title": title,
        "grad": args.grad,
        "paths": args.paths,
        "path_input": args.index if args.index is not None else 0,
        "collapse": collapse,
        "edge_labels": args.edge_labels,
        "highlight": args.highlight,
        "highlight_mode": "descendants" if args.descendants else "ancestors",
        "rankdir": args.rankdir,
    }


def _output_path(text: str) -> Path:
    """The -o path, checked before any work is done; a UsageError naming -o/--output if it cannot be written."""
    from microgradnorm import viz

    if not text.strip():
        raise UsageError(
            f"argument -o/--output: expected a file name ending in {viz.output_extensions()}, got an empty path"
        )
    out = Path(text)
    existing = next((p for p in out.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UsageError(f"argument -o/--output: cannot write {text!r}: {str(existing)!r} is not a directory")
    try:
        viz.check_output_path(out)
    except viz.OptionError as exc:
        raise UsageError(f"argument -o/--output: {exc.message}") from None
    return out
