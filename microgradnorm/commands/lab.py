"""``microgradnorm lab EXPERIMENT``: small networks that really train, and the claims each run checks."""

from __future__ import annotations

import argparse
from pathlib import Path

from microgradnorm.commands import UsageError, seed_int
from microgradnorm.i18n import _, lazy_gettext
from microgradnorm.lab import CATALOG, NEEDS_TORCH

HELP = lazy_gettext("train small networks with each norm and check what the lessons claim")
DESCRIPTION = lazy_gettext(
    "Each experiment trains a few small networks on a task the package generates (fixed seeds, "
    "a few seconds on a CPU), draws the loss curves and checks its claims on the run: a line with "
    "a check mark when the run bears the claim out, a cross when it does not (exit status 1). "
    "Only 'yours' uses PyTorch (pip install 'microgradnorm[torch]'); the others run in NumPy."
)


def _summary(name: str) -> str:
    """One experiment's line for --help: what it shows, and whether it needs PyTorch."""
    if name in NEEDS_TORCH:
        # Translators: {what} is what the experiment shows; {needs} what in it needs PyTorch
        return _("{what} ({needs})").format(what=_(CATALOG[name]), needs=_(NEEDS_TORCH[name]))
    return _("{what} (NumPy only)").format(what=_(CATALOG[name]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT", parser_class=type(parser))
    sub.required = True  # without one: a one-line usage error that lists them
    for name in CATALOG:
        summary = _summary(name)
        # Translators: the description of one experiment's --help: its summary line as a sentence
        cmd = sub.add_parser(name, help=summary, description=_("{summary}.").format(summary=summary))
        cmd.add_argument("--seed", type=seed_int, default=0, metavar="S", help=_("seed of the task and the networks"))
        cmd.add_argument("--svg", metavar="FILE", help=_("also write the loss curves as an SVG figure to FILE"))
        if name == "yours":
            cmd.add_argument(
                "--file",
                metavar="PATH",
                help=_("your exercise file (05_layernorm_backward.py); default: the exercise's reference answer"),
            )
            cmd.add_argument(
                "--engine",
                choices=("auto", "torch", "numpy"),
                default="auto",
                help=_("torch: PyTorch's own LayerNorm alongside; numpy: the NumPy network; auto: torch if installed"),
            )


def run(args: argparse.Namespace, console) -> int:
    from microgradnorm.lab import experiments as E
    from microgradnorm.lab import show

    _check_svg_target(args.svg)  # before the training, not after it
    if args.experiment == "yours":
        result = E.yours(args.seed, args.file, _use_torch(args.engine, E.have_torch()))
    else:
        result = E.EXPERIMENTS[args.experiment](args.seed)
    console.print(show.outcome(result))
    if args.svg:
        try:
            Path(args.svg).write_text(show.figure(result).svg(), encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                # Translators: {reason} is the system's, e.g. "Permission denied"
                _("argument --svg: could not write {path!r}: {reason}").format(
                    path=args.svg, reason=exc.strerror or exc
                )
            ) from None
        console.print(_("wrote {path}").format(path=args.svg), markup=False, highlight=False)
    return 0 if all(c.ok for c in result.claims) else 1


def _check_svg_target(svg: str | None) -> None:
    """A one-line usage error for an --svg path that cannot be a new file, before anything is trained."""
    if svg is None:
        return
    target = Path(svg)
    if target.is_dir():
        raise UsageError(_("argument --svg: expected a file name, got {path!r}, which is a folder").format(path=svg))
    if target.suffix.lower() != ".svg":  # as graph's -o: an SVG written into x.png would not open as a PNG
        raise UsageError(_("argument --svg: expected a file name ending in .svg, got {path!r}").format(path=svg))
    if not target.parent.is_dir():
        raise UsageError(_("argument --svg: expected a file in an existing folder, got {path!r}").format(path=svg))


def _use_torch(engine: str, available: bool) -> bool:
    if engine == "torch" and not available:
        # Translators: {install} is the command pip install 'microgradnorm[torch]'
        raise UsageError(_("argument --engine: torch needs PyTorch, which is not installed: {install}").format(
            install="pip install 'microgradnorm[torch]'"))  # fmt: skip
    return available if engine == "auto" else engine == "torch"
