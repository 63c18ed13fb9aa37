"""The bridge beside torch.nn: the same layer on the same tensors, timed side by side in one run.

``microgradnorm bench`` prints this section when PyTorch is installed. For the main
run's float32 problems it times one training step of the norm (forward with autograd on, then
backward, the gradients cleared) three ways, interleaved in every repeat so that
a busy machine slows all three alike:

``torch.nn``
    PyTorch's own layer (``torch.nn.LayerNorm``, ``RMSNorm``, ``BatchNorm1d``, ``BatchNorm2d``),
    with its default threads and with one (on a shared machine, threads that
    wait for a core can make the default slower than one thread).
``microgradnorm.torch``
    this package's layer of the same name, through the bridge.
``kernels``
    the same NumPy kernels called directly on the tensors' memory, with no
    torch around them: what the bridge would cost if it cost nothing.

``bridge - kernels`` is the bridge's own per-call cost: tensor <-> NumPy views,
the autograd bookkeeping, the cache rebuilt from (x, mean, rstd) for the
backward pass. A tiny problem ([4, 16], where the kernels take microseconds)
shows it on its own. ``faults`` counts fresh pages each step touched: the
output arrays the allocator hands out (y, dx), the one cost that grows with the
problem.

On a machine with few cores, read the numbers with the thread pools in mind:
torch and numba (its "omp" threading layer) each keep OpenMP threads that spin
for a while after their work, and a step that uses both pays for the other's
spinning. On the 2-core machine this was written on, LayerNorm [32,128,768]'s
kernels took 3 to 8 ms with ``OMP_WAIT_POLICY=PASSIVE`` and 32 to 36 ms
without it; compare runs made with the same setting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from microgradnorm import numfmt
from microgradnorm import vectorized as V
from microgradnorm.bench.timing import mean_faults, median_ms, side_by_side
from microgradnorm.bench.vectorized import BenchCase, on_torch_threads, problem
from microgradnorm.inputs import check_int
from microgradnorm.registry import get_norm

__all__ = [
    "BRIDGE_CONTENDERS",
    "OVERHEAD_CASE",
    "BridgeReport",
    "BridgeResult",
    "bridge_cases",
    "bridge_tables",
    "run_bridge_benchmark",
]

OVERHEAD_CASE = BenchCase("layernorm", (4, 16), "float32")  # kernels of microseconds: the per-call cost alone


def bridge_cases(cases: tuple[BenchCase, ...]) -> tuple[BenchCase, ...]:
    """The main run's float32 problems (what models train in), after the tiny LayerNorm when LayerNorm is among them."""
    tiny = (OVERHEAD_CASE,) if any(c.norm == OVERHEAD_CASE.norm for c in cases) else ()
    return tiny + tuple(c for c in cases if c.dtype == "float32" and c not in tiny)


BRIDGE_CONTENDERS = ("torch.nn", "torch.nn, 1 thread", "microgradnorm.torch", "kernels")


@dataclass
class BridgeResult:
    """One problem: the median milliseconds and mean page faults of a step, per contender."""

    case: BenchCase
    ms: dict[str, float]
    faults: dict[str, float | None]

    @property
    def ratio(self) -> float:
        """The bridge's time over torch.nn's (below 1: the bridge is quicker)."""
        return self.ms["microgradnorm.torch"] / self.ms["torch.nn"]

    @property
    def ratio_one_thread(self) -> float:
        """The bridge's time over torch.nn's on one thread."""
        return self.ms["microgradnorm.torch"] / self.ms["torch.nn, 1 thread"]

    @property
    def overhead_ms(self) -> float:
        """The bridge's time beyond its kernels' (may come out below 0 by timing noise)."""
        return self.ms["microgradnorm.torch"] - self.ms["kernels"]


@dataclass
class BridgeReport:
    results: list[BridgeResult]
    repeats: int
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repeats": self.repeats,
            "environment": self.environment,
            "cases": [
                {
                    "label": r.case.label,
                    "ms": r.ms,
                    "faults": r.faults,
                    "ratio_to_torch_nn": r.ratio,
                    "ratio_to_torch_nn_1_thread": r.ratio_one_thread,
                    "overhead_ms": r.overhead_ms,
                }
                for r in self.results
            ],
        }


def _layers(case: BenchCase, gamma, beta) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(torch.nn's layer, this package's), with the same parameters."""
    import microgradnorm.torch as mt

    spec = get_norm(case.norm)
    name = spec.torch_layer + ({2: "1d", 4: "2d"}[len(case.shape)] if spec.torch_layer == "BatchNorm" else "")
    size = spec.param_size(case.shape)
    dtype = getattr(torch, case.dtype)
    theirs, ours = getattr(torch.nn, name)(size, dtype=dtype), getattr(mt, name)(size, dtype=dtype)
    for layer in (theirs, ours):
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(gamma))
            if beta is not None:
                layer.bias.copy_(torch.from_numpy(beta))
    theirs.eps = ours.eps = 1e-5  # RMSNorm's default is None (the dtype's epsilon); the kernels are given 1e-5
    return theirs, ours


def _step(layer: torch.nn.Module, x: torch.Tensor, dy: torch.Tensor, threads: int | None = None) -> Callable[[], None]:
    """One training step of ``layer``: forward with autograd, backward, the gradients cleared."""
    params = list(layer.parameters())

    def step() -> None:
        layer(x).backward(dy)
        x.grad = None
        for p in params:
            p.grad = None

    return on_torch_threads(step, threads)


def _kernels(case: BenchCase, x, gamma, beta, dy) -> Callable[[], None]:
    """The bridge's kernels called directly: the recompute-mode forward and the backward, on the same arrays."""
    from microgradnorm.vectorized import public_pass

    forward, backward = public_pass(get_norm(case.norm))

    def step() -> None:
        _, cache = forward(x, gamma, beta, 1e-5, recompute=True)
        backward(dy, cache)

    return step


def _contenders(case: BenchCase) -> dict[str, Callable[[], None]]:
    x, gamma, beta, dy = problem(case)
    theirs, ours = _layers(case, gamma, beta)
    xt, dyt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(dy)
    return {
        "torch.nn": _step(theirs, xt, dyt),
        "torch.nn, 1 thread": _step(theirs, xt, dyt, threads=1),
        "microgradnorm.torch": _step(ours, xt, dyt),
        "kernels": _kernels(case, x, gamma, beta, dy),
    }


def run_bridge_benchmark(
    cases: tuple[BenchCase, ...],
    repeats: int = 15,
    warmup: int = 2,
    progress: Callable[[str], None] | None = None,
) -> BridgeReport:
    """Time a training step of each contender on each case, interleaved; medians of ``repeats``.

    Each timed call follows an untimed one of the same contender (the main
    benchmark's warm mode), so it finds the memory its own previous call left.
    """
    check_int("repeats", repeats)
    results = []
    for case in cases:
        timed = side_by_side(_contenders(case), repeats, warmup, progress=progress, what=f"bridge {case.label}")
        ms = {name: median_ms([s for s, _ in samples]) for name, samples in timed.items()}
        faults = {name: mean_faults([f for _, f in samples]) for name, samples in timed.items()}
        results.append(BridgeResult(case, ms, faults))
    env = {"torch": torch.__version__, "torch_threads": torch.get_num_threads(), "backend": str(V.backend_info())}
    return BridgeReport(results, repeats, env)


_TITLES = {name: name for name in BRIDGE_CONTENDERS} | {"kernels": "kernels, no torch"}  # the table's rows


def _case_table(r: BridgeResult):
    from rich.table import Table

    table = Table(
        title=f"{r.case.label}   [dim]bridge overhead (bridge - kernels): {numfmt.ms(r.overhead_ms)} ms[/]",
        title_justify="left",
    )
    table.add_column("contender", min_width=19)
    for col in ("f+b ms", "/ torch.nn", "/ 1 thread", "faults"):
        table.add_column(col, justify="right")
    for name, title in _TITLES.items():
        table.add_row(
            title,
            numfmt.ms(r.ms[name]),
            numfmt.ratio(r.ms[name] / r.ms["torch.nn"]),
            numfmt.ratio(r.ms[name] / r.ms["torch.nn, 1 thread"]),
            numfmt.count(r.faults[name]),
            style="bold" if name == "microgradnorm.torch" else None,
        )
    return table


def bridge_tables(report: BridgeReport) -> list:
    """The bridge section: a heading, one table per problem (a row per contender), a note on the columns."""
    from rich.text import Text

    env = report.environment
    heading = Text(
        f"microgradnorm.torch beside torch.nn: one training step (forward, backward), median of {report.repeats}",
        style="bold",
    )
    note = (
        "kernels, no torch: the bridge's NumPy kernels called directly on the same arrays; the bridge's overhead "
        "is its time beyond theirs (tensor <-> NumPy views, autograd bookkeeping, the cache rebuilt for the "
        "backward pass), below 0 only by timing noise. faults: fresh pages a step touched (its output arrays), "
        f"mean per step. torch {env['torch']} ({env['torch_threads']} threads); {env['backend']}"
    )
    return [heading, *(_case_table(r) for r in report.results), Text(note, style="dim")]
