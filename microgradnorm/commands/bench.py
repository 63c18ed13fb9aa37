"""``microgradnorm bench``: the vectorized path against PyTorch and the memory bandwidth.

``microgradnorm bench --engine`` instead times the scalar engine against
micrograd 0.1.0 on one LayerNorm (build + backward) and measures bytes per node.
"""

from __future__ import annotations

import argparse

from microgradnorm import numfmt
from microgradnorm.commands import UsageError, positive_int
from microgradnorm.i18n import _, lazy_gettext

HELP = lazy_gettext("time the vectorized path (NumPy, fused, PyTorch) or, with --engine, the scalar engine")
DESCRIPTION = lazy_gettext(
    "Time LayerNorm, BatchNorm and RMSNorm forward and forward+backward with every contender side by "
    "side in one run (the scalar engine on a small problem, NumPy naive, NumPy tuned, the fused numba "
    "kernels, PyTorch CPU with its default threads and with one thread), medians over repeats, as time, "
    "ratio to PyTorch and effective bandwidth against a copy of an array of the same size measured in "
    "the same run. With --engine: the scalar engine against micrograd 0.1.0 on LayerNorm + loss."
)

MICROGRAD_HINT = "pip install micrograd==0.1.0"

_CACHE_NOTE = {
    "warm": "each timed call follows an untimed run of itself",
    "cold": "each timed call follows an untimed run of itself and an eviction of the CPU caches",
}


def _dims(text: str) -> tuple[int, ...]:
    parts = [p for p in text.replace("x", ",").split(",") if p.strip()]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(_("expected sizes like 768,2048, got {text!r}").format(text=text)) from None
    if not dims or any(d < 2 for d in dims):
        raise argparse.ArgumentTypeError(
            _("expected sizes of at least 2 like 768,2048, got {text!r}").format(text=text)
        )
    return dims


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help=_("fewer problems and repeats (about 20 s of CPU time, measured on 2 cores; longer on a busy machine)"),
    )
    parser.add_argument("--json", action="store_true", help=_("print the results as JSON instead of tables"))
    parser.add_argument(
        "--repeats", type=positive_int, default=None, metavar="K", help=_("timed repeats per problem (median of K)")
    )
    parser.add_argument(
        "--norm",
        default=None,
        metavar="NORM",
        help=_("only this norm (layernorm, batchnorm, rmsnorm); default all"),
    )
    parser.add_argument(
        "--cache",
        choices=("warm", "cold"),  # bench.CACHE_MODES, spelled out so that building the parser imports no numpy
        default="warm",
        help=_("before each timed call: run it once untimed (warm, default) or evict the CPU caches (cold)"),
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help=_("benchmark the scalar engine against micrograd 0.1.0 (LayerNorm + loss, build and backward)"),
    )
    parser.add_argument(
        "--dims",
        type=_dims,
        default=None,
        metavar="D,D",
        help=_("with --engine: the LayerNorm sizes (default 768,2048; --quick: 768)"),
    )
    parser.add_argument("--no-micrograd", action="store_true", help=_("with --engine: time only microgradnorm"))


def run(args: argparse.Namespace, console) -> int:
    if not args.engine:
        for flag, given in (("--dims", args.dims is not None), ("--no-micrograd", args.no_micrograd)):
            if given:
                raise UsageError(_("argument {flag}: only used with --engine").format(flag=flag))
    else:
        for flag, given in (("--norm", args.norm is not None), ("--cache", args.cache != "warm")):
            if given:
                raise UsageError(
                    _("argument {flag}: not used with --engine (the engine benchmark runs one LayerNorm)").format(
                        flag=flag
                    )
                )
    if args.engine:
        return _run_engine(args, console)
    return _run_vectorized(args, console)


def _progress(console, total: int, json_mode: bool):
    """A rich progress bar (nothing in --json mode, so stdout stays machine-readable)."""
    from contextlib import nullcontext

    if json_mode:
        return nullcontext(None), None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console, transient=True,
    )  # fmt: skip
    task = bar.add_task("warming up", total=total)

    def step(description: str) -> None:
        bar.update(task, advance=1, description=description)

    return bar, step


def _run_vectorized(args, console) -> int:
    from microgradnorm import bench

    cases = bench.QUICK_CASES if args.quick else bench.DEFAULT_CASES
    if args.norm is not None:
        from microgradnorm.registry import get_norm

        name = get_norm(args.norm).name
        cases = tuple(c for c in cases if c.norm == name)
        if not cases:
            raise UsageError(_("argument --norm: no benchmark cases for {norm}").format(norm=name))
    repeats = args.repeats or (5 if args.quick else 15)
    bar, step = _progress(console, len(cases) * repeats, args.json)
    with bar:
        report = bench.run_benchmark(
            cases, repeats=repeats, warmup=1 if args.quick else 2, progress=step, cache=args.cache
        )
    bridge = _run_bridge(args, console, cases, repeats)
    return _print(console, report, bench_tables, args.json, {"targets": bench.target_dicts(report)}, bridge)


def _run_bridge(args, console, cases, repeats: int):
    """The bridge section (microgradnorm.torch beside torch.nn on ``cases``), when PyTorch is installed; else None."""
    from microgradnorm import bench

    if bench.torch_or_none() is None:
        return None
    from microgradnorm.torch import bench as bridge

    cases = bridge.bridge_cases(cases)
    bar, step = _progress(console, len(cases) * repeats, args.json)
    with bar:
        return bridge.run_bridge_benchmark(cases, repeats=repeats, warmup=1 if args.quick else 2, progress=step)


def _run_engine(args, console) -> int:
    from microgradnorm import bench

    dims = args.dims or ((768,) if args.quick else bench.ENGINE_DIMS)
    repeats = args.repeats or (3 if args.quick else 7)
    with_mg = not args.no_micrograd
    bar, step = _progress(console, len(dims) * repeats, args.json)
    with bar:
        report = bench.run_engine_benchmark(dims, repeats=repeats, with_micrograd=with_mg, progress=step)
    if with_mg and report.micrograd_version is None:
        report.notes.append(f"micrograd is not installed; for the comparison: {MICROGRAD_HINT}")
    return _print(console, report, engine_tables, args.json)


def _print(console, report, tables, json_mode: bool, more: dict | None = None, bridge=None) -> int:
    """The report as JSON (--json, nothing else on stdout: its data, ``more``, the bridge's) or as rich tables;
    then the bridge's, if it ran."""
    if json_mode:
        import json

        data = report.to_dict() | (more or {}) | ({} if bridge is None else {"bridge": bridge.to_dict()})
        console.print_json(json.dumps(_plain(data), allow_nan=False))
    else:
        for renderable in tables(report):
            console.print(renderable)
        if bridge is not None:
            from microgradnorm.torch.bench import bridge_tables

            for renderable in bridge_tables(bridge):
                console.print(renderable)
    return 0


def _plain(value):
    """JSON-safe data: NaN and infinities become null, tuples become lists."""
    import math

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---- renderers: pure functions from a report to rich renderables ------------------------------


def bench_tables(report) -> list:
    """The vectorized benchmark: a heading, one rich Table per problem, the notes, the targets.

    One table per problem rather than one long table, so that the problem's name
    can head it and the columns fit an 80-column terminal. Ratios are to PyTorch's
    time, or, where PyTorch did not run, to NumPy naive's (the closed forms one
    after another: the baseline every other contender improves on).
    """
    from rich.text import Text

    reference = _ratio_reference(report)
    heading = (
        f"Forward (fwd) and forward+backward (f+b), median of {report.repeats}, {report.cache} caches; "
        f"ratio = time / {_REFERENCE_TITLES[reference]}"
    )
    out: list = [Text(heading, style="bold")]
    out += [_case_table(result, reference) for result in report.cases]
    out.append(Text(_notes(report), style="dim"))
    out.append(targets_table(report))
    return out


_REFERENCE_TITLES = {
    "torch": "PyTorch's",
    "naive": "NumPy naive's (PyTorch did not run: not installed)",
    None: "nothing (neither PyTorch nor NumPy naive ran)",
}


def _ratio_reference(report) -> str | None:
    """What the ratio columns divide by: "torch" when every case timed it, else "naive" if all did."""
    for name in ("torch", "naive"):
        if report.cases and all(name in result.timings for result in report.cases):
            return name
    return None


def _case_table(result, reference: str | None):
    from rich.table import Table

    from microgradnorm.bench import CONTENDER_TITLES

    table = Table(
        title=f"{result.case.label}   [dim]copy: {numfmt.ms(result.copy_ms)} ms, {result.copy_gbps:.1f} GB/s[/]",
        title_justify="left",
    )
    table.add_column("contender", min_width=17)
    for col in ("fwd ms", "ratio", "GB/s", "f+b ms", "ratio", "GB/s", "faults"):
        table.add_column(col, justify="right", min_width=7 if col.endswith("ms") else None)
    for name in result.timings:
        cells = []
        for phase in ("forward", "fwdbwd"):
            ratio = None if reference is None else result.ratio(name, phase, to=reference)
            cells += [numfmt.ms(result.ms(name, phase)), numfmt.ratio(ratio), f"{result.gbps(name, phase):.1f}"]
        faults = numfmt.count(result.timings[name].faults("fwdbwd"))
        table.add_row(CONTENDER_TITLES[name], *cells, faults, style="bold" if name == "fused" else None)
    return table


def _notes(report) -> str:
    env = report.environment
    torch_note = f"torch {env['torch']} ({env['torch_threads']} threads)" if env.get("torch") else "torch not installed"
    return (
        "GB/s: bytes that must move (fwd: x, y; fwd+bwd: x, y, dy, x, dx) / time. "
        "faults: page faults per f+b call (mean), each a page of fresh memory the system zeroes on first "
        "touch; thousands of them cost milliseconds. "
        f"Caches: {_CACHE_NOTE[report.cache]}. "
        f"numpy {env['numpy']}, {torch_note}, {env['cpus']} CPUs; auto backend: {env['backend']}"
    )


_MANY_FAULTS = 100  # 100 fresh 4 KiB pages, about 0.1 ms: enough to move a ratio


def targets_table(report):
    from rich.table import Table
    from rich.text import Text

    from microgradnorm.bench import evaluate_targets

    targets = [t for t in evaluate_targets(report) if t.measured is not None]  # only what this run measured
    if not targets:
        env = report.environment
        missing = [
            hint
            for name, hint in (("numba", 'the fused kernels: pip install "microgradnorm[fast]"'), ("torch", "PyTorch"))
            if not env.get(name)
        ]
        why = (
            f"they time the fused kernels, against PyTorch or a copy; not installed here: {', '.join(missing)}"
            if missing
            else "these problems measure none (run without --norm for all)"
        )
        return Text(f"No performance target in this run: {why}.", style="dim")
    faulted = [t for t in targets if (t.reference_faults or 0) >= _MANY_FAULTS]
    table = Table(
        title="Performance targets (this run)",
        caption=(
            "* PyTorch took page faults in these calls (see the faults column): its time includes getting "
            "fresh memory from the system, which flatters the ratio"
            if faulted
            else None
        ),
    )
    table.add_column("target")
    table.add_column("measured", justify="right")
    table.add_column("limit", justify="right")
    table.add_column("met")
    for t in targets:
        op = "<=" if t.kind == "at_most" else ">="
        measured = f"{t.measured:.2f}{t.unit}" + ("*" if t in faulted else "")
        met = {True: "[green]yes[/]", False: "[red]no[/]", None: "[dim]-[/]"}[t.met]  # None: a NaN measurement
        table.add_row(t.name, measured, f"{op} {t.limit:g}{t.unit}", met)
    return table


def engine_tables(report) -> list:
    """The engine benchmark as a rich Table, followed by its notes."""
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=f"LayerNorm of d numbers + loss, build and backward (median of {report.repeats})",
        caption="bytes per node: tracemalloc bytes held by the graph after backward / nodes in it",
    )
    for col in ("d", "engine", "ms", "nodes", "bytes per node", "speedup"):
        table.add_column(col, justify="left" if col == "engine" else "right")
    for d in sorted({r.d for r in report.results}):
        for name in ("microgradnorm", "micrograd"):
            r = report.get(name, d)
            if r is None:
                continue
            speed = report.speedup(d) if name == "microgradnorm" else None
            table.add_row(
                str(d),
                name if name == "microgradnorm" else f"micrograd {report.micrograd_version}",
                f"{r.ms:.1f}",
                numfmt.count(r.nodes),
                f"{r.bytes_per_node:.0f}",
                "-" if speed is None else f"{speed:.1f}x",
            )
        table.add_section()
    return [table, *[Text(note, style="dim") for note in report.notes]]
