"""``microgradnorm check NORM``: the per-node three-way gradient check as a table."""

from __future__ import annotations

import argparse
import math

from microgradnorm.commands import (
    UsageError,
    add_norm_argument,
    add_problem_arguments,
    add_variance_argument,
    positive_int,
    problem_spec,
    problem_variance,
    shape_flags,
)
from microgradnorm.i18n import _, lazy_gettext
from microgradnorm.tolerances import FD_MAX_ENTRIES

# The scalar graph is for small problems, and the command for a quick look: every finite difference
# recomputes the whole graph four times, so the check's time grows with the size of x (512 entries:
# about 1 to 5 s, by norm and shape). The library's check_norm takes up to MAX_ENTRIES.
SIZE_LIMIT = 512

HELP = lazy_gettext("check every node's gradient three ways: autograd, closed form, finite difference")
DESCRIPTION = lazy_gettext(
    "Build the norm from scalar nodes on a random input, backpropagate loss = sum(y * dy) with a "
    "random dy, and compare at every named node the gradient autograd accumulated, the closed-form "
    "formula, and a central finite difference (float64). Exits 0 when all agree, 1 otherwise. "
    "The scalar graph is for small problems: x has at most {limit} entries.",
    limit=SIZE_LIMIT,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_norm_argument(parser)
    add_problem_arguments(parser)
    add_variance_argument(parser)
    parser.add_argument(
        "--fd-entries",
        type=positive_int,
        default=FD_MAX_ENTRIES,
        metavar="K",
        help=_("finite differences at no more than K entries per node (default {n})").format(n=FD_MAX_ENTRIES),
    )
    parser.add_argument("--full", action="store_true", help=_("list every entry of every node, not only the worst"))


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm.check import check_norm, random_problem
    from microgradnorm.present import check_table

    spec, shape = problem_spec(args)
    variance = problem_variance(spec, args)
    _check_size(shape, args)
    x, gamma, beta, dy = random_problem(spec, shape, args.seed)
    report = check_norm(
        spec, x, gamma, beta, args.eps, dy, variance=variance, fd_max_entries=args.fd_entries, seed=args.seed
    )
    if report.pooled == 1:
        # x - mean is exactly 0, so y = beta and every gradient is exactly 0: an "All agree" that checks nothing
        raise UsageError(
            _(
                "argument {flags}: each mean would be taken over a single value, so x - mean is 0 and every "
                "gradient is exactly 0, with nothing to check; expected at least 2 values per mean"
            ).format(flags=shape_flags(args))
        )
    console.print(check_table(report, full=args.full))
    return 0 if report.passed else 1


def _check_size(shape: tuple[int, ...], args: argparse.Namespace) -> None:
    """A UsageError naming the arguments that set the shape when x has more than SIZE_LIMIT entries."""
    size = math.prod(shape)
    if size <= SIZE_LIMIT:
        return
    flags = shape_flags(args)
    if len(shape) > 1:
        message = _(
            "argument {flags}: the scalar graph is for small problems, so expected x to have at most "
            "{limit} entries, got {size} ({shape})"
        )
    else:
        message = _(
            "argument {flags}: the scalar graph is for small problems, so expected x to have at most "
            "{limit} entries, got {size}"
        )
    raise UsageError(message.format(flags=flags, limit=SIZE_LIMIT, size=size, shape="x".join(map(str, shape))))
