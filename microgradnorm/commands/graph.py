"""``microgradnorm graph NORM -o FILE``: draw a norm's computation graph (SVG, PNG, PDF or DOT)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from microgradnorm.commands import (
    UsageError,
    add_norm_argument,
    add_problem_arguments,
    add_variance_argument,
    nonneg_int,
    problem_shape,
)

HELP = "draw the computation graph of a norm, stage by stage (SVG, PNG, PDF or DOT)"
DESCRIPTION = (
    "Build the norm from scalar nodes on a random input and draw its graph with Graphviz: every "
    "stage (mean, center, var, sqrt, divide, affine) a titled box, every node with its value and, "
    "with --grad, its gradient for loss = sum(y * dy) with a random dy. --paths colours the routes "
    "along which dL/dx_i is accumulated. The format comes from the extension of -o; a .dot file needs "
    "no Graphviz. Graphs larger than the full-view limit are drawn collapsed (one box per stage)."
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
        help="where to write the drawing; .svg, .png, .pdf or .dot (the format follows the extension)",
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
        default=0,
        metavar="K",
        help="with --paths: which x_i the paths start at, as a flat index into x (default 0)",
    )
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--collapse", action="store_true", help="one box per stage instead of one per scalar")
    view.add_argument("--full", action="store_true", help="draw every scalar even above the full-view limit")
    parser.add_argument(
        "--edge-labels", action="store_true", help="label every edge with its local derivative d node / d child"
    )
    parser.add_argument(
        "--highlight",
        metavar="NODE",
        help="keep NODE (e.g. rstd, xhat[1], mean[0]) and what it is computed from dark; fade the rest",
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
    add_variance_argument(parser)


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm import viz
    from microgradnorm.check import random_problem
    from microgradnorm.registry import get_norm

    out = Path(args.output)
    viz.check_output_path(out)  # fail before any work: unknown extension, missing or read-only directory
    if args.descendants and args.highlight is None:
        raise UsageError("argument --descendants: needs --highlight NODE, got no --highlight")
    spec = get_norm(args.norm)
    shape = problem_shape(spec, args)
    x, gamma, beta, dy = random_problem(spec, shape, args.seed)
    graph = spec.build_graph(x, gamma, beta, args.eps, args.variance)
    if args.paths and args.index >= len(graph["x"]):
        raise UsageError(
            f"argument --index: x has {len(graph['x'])} entries (0 to {len(graph['x']) - 1}), got {args.index}"
        )
    if args.grad or args.paths:  # the path legend shows each path's share of dL/dx_i
        graph.loss(dy.tolist()).backward()

    size = viz.graph_size(graph)
    collapse = args.collapse
    if not collapse and not args.full and size > viz.FULL_VIEW_LIMIT:
        collapse = True
        console.print(
            f"The full graph has {size} nodes, more than {viz.FULL_VIEW_LIMIT}: drawing the collapsed "
            "stage view (--full draws every node anyway).",
            highlight=False,
            soft_wrap=True,
        )
    title = f"{spec.title} of x [{'×'.join(map(str, shape))}], eps = {args.eps:g}, seed {args.seed}"
    if args.variance != "two_pass":
        title += ", naive variance"
    if args.grad:
        title += " · grad = dL/d(node) for L = Σ y·dy with a random dy"
    options = {
        "title": title,
        "grad": args.grad,
        "paths": args.paths,
        "path_input": args.index,
        "collapse": collapse,
        "edge_labels": args.edge_labels,
        "highlight": args.highlight,
        "highlight_mode": "descendants" if args.descendants else "ancestors",
        "rankdir": args.rankdir,
    }
    try:
        dot_source = viz.to_dot(graph, **options)
    except ValueError as exc:  # a --highlight name the graph does not have: fail before writing anything
        if str(exc).startswith("highlight:"):
            raise UsageError(f"argument --{exc}") from None
        raise
    fmt = viz.output_format(out)
    try:
        data = dot_source.encode("utf-8") if fmt == "dot" else viz.pipe(dot_source, fmt)
    except viz.GraphvizNotFoundError:
        fallback = viz.dot_fallback_path(out)
        viz.write_atomic(fallback, dot_source.encode("utf-8"))
        print(
            f"microgradnorm graph: Graphviz's dot program was not found, so only the DOT source was written, "
            f"to {fallback}; to draw {out.name}, {viz.INSTALL_HINT}.",
            file=sys.stderr,
        )
        return 1
    except viz.RenderError as exc:
        print(f"microgradnorm graph: error: {exc}", file=sys.stderr)
        return 1
    viz.write_atomic(out, data)
    view = "collapsed" if collapse else "full"
    console.print(f"wrote {out} ({view} view, {size} nodes in the full graph)", highlight=False, soft_wrap=True)
    return 0
