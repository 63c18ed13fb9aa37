"""The CLI's commands, one module each.

Every module here defines ``HELP`` (one line for the command list),
``add_arguments(parser)`` and ``run(args, console) -> int`` (the exit code).
Modules import only the standard library (and :mod:`microgradnorm.i18n`) at the
top, so ``microgradnorm --help`` stays fast; the real work is imported inside
``run``. The argument types below turn bad values into argparse errors that name
the argument, what was expected and what was given.

Learner-facing text is translated (docs/translating.md): ``HELP`` and
``DESCRIPTION`` are ``lazy_gettext(...)`` constants, the CLI translates them when
it builds the parser, after the language is chosen; inside ``add_arguments`` every
``help=`` is ``_("...")``; every error message is ``_("...").format(...)``.
"""

from __future__ import annotations

import argparse
import math
from typing import NoReturn

from microgradnorm.i18n import _, pgettext
from microgradnorm.i18n.argparse_text import HelpFormatter


class UsageError(Exception):
    """A bad argument found after parsing: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (with a pointer to this parser's --help), exit code 2, and
    help wraps Chinese between characters: the CLI's parser and the parsers of its commands' actions."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # Translators: {prog} is the command, e.g. "microgradnorm lesson"; {message} is argparse's
        self.exit(2, _("{prog}: error: {message} (see {prog} --help)").format(prog=self.prog, message=message) + "\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("expected a positive integer, got {text!r}").format(text=text)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(_("expected a positive integer, got {value}").format(value=value))
    return value


def nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("expected a number >= 0, got {text!r}").format(text=text)) from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(_("expected a finite number >= 0, got {text}").format(text=text))
    return value


def nonneg_int(text: str, what: str | None = None) -> int:
    """An integer >= 0; ``what`` names it in the error ("expected {what}, got ..."), translated by the caller."""
    what = _("an integer >= 0") if what is None else what
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(_("expected {what}, got {text!r}").format(what=what, text=text)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(_("expected {what}, got {value}").format(what=what, value=value))
    return value


def seed_int(text: str) -> int:
    return nonneg_int(text, _("an integer seed >= 0"))


def shape_arg(text: str) -> tuple[int, ...]:
    """'2x3x4' or '2,3,4' -> (2, 3, 4)."""
    parts = text.replace("x", ",").replace("X", ",").split(",")
    try:
        shape = tuple(int(p) for p in parts)  # an empty part ("4x", "2,,3") is not a size
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("expected a shape like 2x3 or 2,3,4,4, got {text!r}").format(text=text)
        ) from None
    if not shape or any(s < 1 for s in shape):
        raise argparse.ArgumentTypeError(
            _("expected a shape of positive sizes like 2x3, got {text!r}").format(text=text)
        )
    return shape


def add_language_argument(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """--lang, on the top-level parser, on every command and on their own subcommands
    (``microgradnorm --lang zh-CN lesson 3``, ``microgradnorm exercise list --lang zh-CN``). The value is
    read before parsing, by :func:`microgradnorm.i18n.cli_language`, so that --help is translated too;
    here argparse checks it and lists it in --help."""
    from microgradnorm.i18n import language_arg

    parser.add_argument(
        "--lang",
        type=language_arg,
        metavar="LANG",
        default=None if top_level else argparse.SUPPRESS,
        help=_("language of the text: en or zh-CN (default: $MICROGRADNORM_LANG, then the locale)"),
    )
    for action in parser._actions:  # a command's own subcommands (exercise list, ...) take it too
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                add_language_argument(subparser)


def add_norm_argument(parser: argparse.ArgumentParser) -> None:
    """The positional norm name, with the registry's names listed in --help."""
    from microgradnorm.registry import NORMS

    names = ", ".join(NORMS)
    parser.add_argument("norm", metavar="NORM", help=_("which norm: {names}").format(names=names))
    parser.add_argument(
        "--groups",
        type=positive_int,
        default=None,
        metavar="G",
        help=_("GroupNorm: split the C channels into G groups (default 2 when C is even, else 1)"),
    )


def problem_spec(args: argparse.Namespace):
    """(the registry's entry for the norm, with GroupNorm's --groups, and the input shape)."""
    from microgradnorm.registry import get_norm

    spec = get_norm(args.norm)
    shape = problem_shape(spec, args)
    groups = getattr(args, "groups", None)
    if groups is not None and not spec.grouped:
        raise UsageError(
            _("argument --groups: {norm} does not split its channels into groups, got --groups {given}").format(
                norm=spec.name, given=groups
            )
        )
    if not spec.grouped:
        return spec, shape
    channels = shape[1]
    if groups is None:
        groups = 2 if channels % 2 == 0 else 1
    if channels % groups:
        raise UsageError(
            _("argument --groups: expected a divisor of the {channels} channels, got {given}").format(
                channels=channels, given=groups
            )
        )
    return spec.with_groups(groups), shape


def add_problem_arguments(parser: argparse.ArgumentParser, dim: int = 4, batch: int | None = None) -> None:
    """--dim, --batch, --shape, --eps and --seed: the problem a command works on."""
    # --dim and --batch default to None, so that problem_shape can tell them given from not given
    # (--shape replaces both); the defaults themselves are kept as default_dim and default_batch.
    parser.set_defaults(default_dim=dim, default_batch=batch)
    parser.add_argument(
        "--dim",
        type=positive_int,
        default=None,
        metavar="D",
        help=_("features per row (LayerNorm, RMSNorm) or columns (BatchNorm); default {dim}").format(dim=dim),
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        metavar="N",
        help=_("rows (LayerNorm, RMSNorm: default one vector) or batch size (BatchNorm: default 4)"),
    )
    parser.add_argument(
        "--shape",
        type=shape_arg,
        default=None,
        metavar="SHAPE",
        help=_("the whole input shape instead of --dim and --batch, e.g. 2x3x4x4 for BatchNorm [N, C, H, W]"),
    )
    parser.add_argument(
        "--eps",
        type=nonneg_float,
        default=1e-5,
        metavar="E",
        help=_("the epsilon added to the variance (0 allowed); default 1e-5"),
    )
    parser.add_argument(
        "--seed", type=seed_int, default=0, metavar="S", help=_("random seed for x, gamma, beta and dy; default 0")
    )


def add_variance_argument(parser: argparse.ArgumentParser) -> None:
    """--variance: how the scalar graph builds the variance."""
    parser.add_argument(
        "--variance",
        choices=("two_pass", "naive"),
        default=None,
        help=_("build the variance centered (default, two_pass) or as E[x^2] - E[x]^2 (LayerNorm, BatchNorm)"),
    )


def problem_variance(spec, args: argparse.Namespace) -> str:
    """The --variance form for the norm (default two_pass); RMSNorm, which has no variance, takes none."""
    if args.variance is None:
        return "two_pass"
    if "var" not in spec.node_names:
        raise UsageError(
            _(
                "argument --variance: {norm} has no variance to build (it divides by the root mean square), "
                "got --variance {given}"
            ).format(norm=spec.name, given=args.variance)
        )
    return args.variance


def shape_flags(args: argparse.Namespace) -> str:
    """The arguments that set the shape, as the user gave them ("--shape", "--dim/--batch")."""
    if args.shape is not None:
        return "--shape"
    given = [flag for flag, value in (("--dim", args.dim), ("--batch", args.batch)) if value is not None]
    return "/".join(given) or "--dim"


def problem_shape(spec, args: argparse.Namespace) -> tuple[int, ...]:
    """The input shape from --shape or --dim/--batch, checked against the norm."""
    if args.shape is not None:
        for flag, value in (("--dim", args.dim), ("--batch", args.batch)):
            if value is not None:
                raise UsageError(
                    _(
                        "argument {flag}: not allowed with argument --shape (the shape gives every size), "
                        "got {flag} {value} and --shape {shape}"
                    ).format(flag=flag, value=value, shape="x".join(map(str, args.shape)))
                )
        if len(args.shape) not in spec.ranks:
            # Translators: joins alternatives, as in "2-D or 4-D"
            ranks = pgettext("alternatives", " or ").join(f"{r}-D" for r in spec.ranks)
            raise UsageError(
                _("argument --shape: {norm} expects a {ranks} shape, got {shape}").format(
                    norm=spec.name, ranks=ranks, shape="x".join(map(str, args.shape))
                )
            )
        return args.shape
    dim = args.dim if args.dim is not None else args.default_dim
    batch = args.batch if args.batch is not None else args.default_batch
    return spec.default_shape(dim, batch)
