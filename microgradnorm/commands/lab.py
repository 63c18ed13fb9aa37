"""``microgradnorm lab EXPERIMENT``: small networks that really train, and the claims each run checks."""

from __future__ import annotations

import argparse
from pathlib import Path

from microgradnorm.commands import UsageError, seed_int
from microgradnorm.lab import CATALOG, NEEDS_TORCH

HELP = "train small networks with each norm and check what the lessons claim"
DESCRIPTION = (
    "Each experiment trains a few small networks on a task the package generates (fixed seeds, "
    "a few seconds on a CPU), draws the loss curves and checks its claims on the run: a line with "
    "a check mark when the run bears the claim out, a cross when it does not (exit status 1). "
    "Only 'yours' uses PyTorch (pip install 'microgradnorm[torch]'); the others run in NumPy."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT", parser_class=type(parser))
    sub.required = True  # without one: a one-line usage error that lists them
    for name, line in CATALOG.items():
        needs = f" ({NEEDS_TORCH[name]})" if name in NEEDS_TORCH else " (NumPy only)"
        cmd = sub.add_parser(name, help=line + needs, description=line + needs + ".")
        cmd.add_argument("--seed", type=seed_int, default=0, metavar="S", help="seed of the task and the networks")
        cmd.add_argument("--svg", metavar="FILE", help="also write the loss curves as an SVG figure to FILE")
        if name == "yours":
            cmd.add_argument(
                "--file",
                metavar="PATH",
                help="your exercise file (05_layernorm_backward.py); default: the exercise's reference answer",
            )
            cmd.add_argument(
                "--engine",
                choices=("auto", "torch", "numpy"),
                default="auto",
                help="torch: PyTorch's own LayerNorm alongside; numpy: the NumPy network; auto: torch if installed",
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
            raise UsageError(f"argument --svg: could not write {args.svg!r}: {exc.strerror or exc}") from None
        console.print(f"wrote {args.svg}", markup=False, highlight=False)
    return 0 if all(c.ok for c in result.claims) else 1


def _check_svg_target(svg: str | None) -> None:
    """A one-line usage error for an --svg path that cannot be a new file, before anything is trained."""
    if svg is None:
        return
    target = Path(svg)
    if target.is_dir():
        raise UsageError(f"argument --svg: expected a file name, got {svg!r}, which is a folder")
    if not target.parent.is_dir():
        raise UsageError(f"argument --svg: expected a file in an existing folder, got {svg!r}")


def _use_torch(engine: str, available: bool) -> bool:
    if engine == "torch" and not available:
        raise UsageError("argument --engine: torch needs PyTorch, which is not installed: "
                         "pip install 'microgradnorm[torch]'")  # fmt: skip
    return available if engine == "auto" else engine == "torch"
