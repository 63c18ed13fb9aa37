"""``microgradnorm check NORM``: the per-node three-way gradient check as a table."""

from __future__ import annotations

import argparse

from microgradnorm.commands import (
    add_norm_argument,
    add_problem_arguments,
    add_variance_argument,
    positive_int,
    problem_shape,
)

HELP = "check every node's gradient three ways: autograd, closed form, finite difference"
DESCRIPTION = (
    "Build the norm from scalar nodes on a random input, backpropagate loss = sum(y * dy) with a "
    "random dy, and compare at every named node the gradient autograd accumulated, the closed-form "
    "formula, and a central finite difference (float64). Exits 0 when all agree, 1 otherwise."
)

FD_LIMIT = 32  # finite differences per node by default; each costs four rebuilds of the graph


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_norm_argument(parser)
    add_problem_arguments(parser)
    add_variance_argument(parser)
    parser.add_argument(
        "--fd-entries",
        type=positive_int,
        default=FD_LIMIT,
        metavar="K",
        help=f"finite differences at no more than K entries per node (default {FD_LIMIT})",
    )
    parser.add_argument("--full", action="store_true", help="list every entry of every node, not only the worst")


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm.check import check_norm, random_problem
    from microgradnorm.present import check_table
    from microgradnorm.registry import get_norm

    spec = get_norm(args.norm)
    shape = problem_shape(spec, args)
    x, gamma, beta, dy = random_problem(spec, shape, args.seed)
    report = check_norm(
        spec, x, gamma, beta, args.eps, dy, variance=args.variance, fd_max_entries=args.fd_entries, seed=args.seed
    )
    console.print(check_table(report, full=args.full))
    return 0 if report.passed else 1
