"""The scalar engine against micrograd 0.1.0's ``Value``: one LayerNorm plus loss, build and backward.

Times alternate between the two engines (:func:`microgradnorm.bench.timing.side_by_side`), each
timed call after a garbage collection (the previous run's graph of Python objects is collected
outside the timing), and the medians are kept. Memory is measured in a separate, untimed run under
tracemalloc: the bytes still held by the graph after backward, over its node count.
"""

from __future__ import annotations

import functools
import gc
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from microgradnorm.bench.timing import Progress, median_ms, side_by_side
from microgradnorm.inputs import check_int

__all__ = ["ENGINE_DIMS", "EngineReport", "EngineResult", "micrograd_available", "run_engine_benchmark"]

ENGINE_DIMS = (768, 2048)


@dataclass
class EngineResult:
    """One engine on one LayerNorm of size d: median time and memory per node."""

    engine: str
    d: int
    ms: float
    nodes: int
    bytes_held: int
    samples: list[float] = field(default_factory=list, repr=False)

    @property
    def bytes_per_node(self) -> float:
        return self.bytes_held / self.nodes if self.nodes else float("nan")


@dataclass
class EngineReport:
    """microgradnorm's Value against micrograd's on LayerNorm + loss, build and backward."""

    results: list[EngineResult]
    repeats: int
    micrograd_version: str | None
    recursion_limit_raised_to: dict[int, int]
    notes: list[str] = field(default_factory=list)

    def get(self, engine: str, d: int) -> EngineResult | None:
        for r in self.results:
            if r.engine == engine and r.d == d:
                return r
        return None

    def speedup(self, d: int) -> float | None:
        """micrograd's median time over ours (above 1: ours is faster)."""
        ours, theirs = self.get("microgradnorm", d), self.get("micrograd", d)
        if ours is None or theirs is None:
            return None
        return theirs.ms / ours.ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "repeats": self.repeats,
            "micrograd_version": self.micrograd_version,
            "recursion_limit_raised_to": {str(k): v for k, v in self.recursion_limit_raised_to.items()},
            "notes": self.notes,
            "results": [
                {"engine": r.engine, "d": r.d, "ms": r.ms, "nodes": r.nodes, "bytes_per_node": r.bytes_per_node}
                for r in self.results
            ],
            "speedup": {str(d): self.speedup(d) for d in sorted({r.d for r in self.results})},
        }


def _engine_problem(d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(0.5, 2.0, d).tolist(),
        rng.uniform(0.5, 1.5, d).tolist(),
        rng.normal(size=d).tolist(),
        rng.normal(size=d).tolist(),
    )


def _ours(x, gamma, beta, dy):
    """LayerNorm, written the natural way for this package."""
    import microgradnorm

    y = microgradnorm.layer_norm(x, gamma, beta)
    loss = y.graph.loss(dy)
    loss.backward()
    return loss


def _micrograd(x, gamma, beta, dy, eps: float = 1e-5):
    """The same LayerNorm written the natural way for micrograd: Python sum() and Value ops."""
    from micrograd.engine import Value

    d = len(x)
    xs = [Value(v) for v in x]
    gs = [Value(v) for v in gamma]
    bs = [Value(v) for v in beta]
    mean = sum(xs) * (1.0 / d)
    xshift = [xi - mean for xi in xs]
    var = sum(c * c for c in xshift) * (1.0 / d)
    rstd = (var + eps) ** -0.5
    ys = [g * (c * rstd) + b for c, g, b in zip(xshift, gs, bs)]
    loss = sum(y * g for y, g in zip(ys, dy))
    loss.backward()
    return loss


def _count_ours(loss) -> int:
    from microgradnorm import topological_order

    return len(topological_order(loss))


def _count_micrograd(loss) -> int:
    seen, stack = {id(loss)}, [loss]
    while stack:
        node = stack.pop()
        for child in node._prev:
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return len(seen)


def _held_bytes(build: Callable[[], Any]) -> tuple[Any, int]:
    """Run ``build`` under tracemalloc; bytes still allocated after it returns (held by its result)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = build()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return result, after - before


def micrograd_available() -> str | None:
    """micrograd's version when it can be imported, else None."""
    try:
        import micrograd.engine  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("micrograd")
    except PackageNotFoundError:
        return "unknown"


def run_engine_benchmark(
    dims: Sequence[int] = ENGINE_DIMS,
    repeats: int = 7,
    warmup: int = 1,
    with_micrograd: bool = True,
    progress: Progress | None = None,
) -> EngineReport:
    """LayerNorm of d numbers plus loss, build and backward: microgradnorm against micrograd.

    See the module docstring. micrograd's recursive topological sort needs a raised
    recursion limit for large d; the limit used is recorded in the report.
    """
    check_int("repeats", repeats)
    mg_version = micrograd_available() if with_micrograd else None
    results: list[EngineResult] = []
    raised: dict[int, int] = {}
    old_limit = sys.getrecursionlimit()
    try:
        for d in dims:
            runs = _engine_runs(d, mg_version is not None, raised)
            timed = side_by_side(
                runs, repeats, warmup, prepare=None, collect_each=True, progress=progress, what=f"d = {d}"
            )
            results += [_engine_result(name, d, run, [s for s, _ in timed[name]]) for name, run in runs.items()]
    finally:
        sys.setrecursionlimit(old_limit)
    notes = [
        f"micrograd's recursive topological sort needed sys.setrecursionlimit({limit}) at d = {d} "
        f"(the default is {old_limit}); microgradnorm's sort is iterative"
        for d, limit in raised.items()
    ]
    return EngineReport(results, repeats, mg_version, raised, notes)


def _engine_runs(d: int, with_micrograd: bool, raised: dict[int, int]) -> dict[str, Callable[[], Any]]:
    """The engines' runs on one problem of size d; raises the recursion limit micrograd needs (in ``raised``)."""
    x, gamma, beta, dy = _engine_problem(d)
    runs: dict[str, Callable[[], Any]] = {"microgradnorm": functools.partial(_ours, x, gamma, beta, dy)}
    if with_micrograd:
        need = 4 * d + 1000  # the depth micrograd's recursive build_topo reaches, with room to spare
        if need > sys.getrecursionlimit():
            sys.setrecursionlimit(need)
            raised[d] = need
        runs["micrograd"] = functools.partial(_micrograd, x, gamma, beta, dy)
    return runs


def _engine_result(name: str, d: int, run: Callable[[], Any], samples: list[float]) -> EngineResult:
    """The median time, and the nodes and bytes of one more (untimed) run's graph."""
    loss, held = _held_bytes(run)
    nodes = _count_ours(loss) if name == "microgradnorm" else _count_micrograd(loss)
    del loss
    return EngineResult(name, d, median_ms(samples), nodes, held, samples)
