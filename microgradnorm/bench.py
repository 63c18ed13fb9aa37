"""Benchmarks, as pure functions that return result objects (the CLI draws them).

Two benchmarks:

* :func:`run_benchmark`: the vectorized path. For each problem (norm, shape,
  dtype) every contender -- the scalar engine (small problems only), NumPy
  naive (the closed forms of :mod:`microgradnorm.formulas` one after another),
  NumPy tuned, the fused numba kernels and PyTorch CPU (its default threads and
  one thread) when installed -- runs forward and forward+backward.
* :func:`run_engine_benchmark`: the scalar engine against micrograd 0.1.0's
  ``Value`` on one LayerNorm plus loss, build and backward, with memory per node.

How the numbers are taken, so that they can be trusted on a shared machine:

* side by side: every repeat runs every contender once, in turn, so a burst of
  load from another process slows all of them alike instead of one;
* medians over the repeats, after untimed warm-up runs (the first call of a
  fused kernel loads or compiles it);
* the same cache state for every contender. The arrays are a few times the
  size of the processor's last-level cache at most, so what a call finds in the
  cache depends on what ran just before it; timing contenders one after the
  other would hand each one the leftovers of its neighbour (a contender that
  follows another reading the same ``x`` finds it half cached, and the order
  of the rotation would decide ratios of 0.75 to 0.95). So every timed call is
  prepared: ``cache="warm"`` (the default) runs the same call once, untimed,
  right before (each contender in its own steady state, as in a loop that
  calls it over and over, what ``timeit`` measures); ``cache="cold"`` does
  the same and then reads a buffer twice the size of the last-level cache, so
  the call's arrays come from main memory (what Triton's ``do_bench`` does on
  a GPU by clearing the L2 cache). Cold times show the memory roof: all fast
  contenders meet there. The untimed run matters in cold mode too: without it
  a call would find the memory its neighbour in the rotation had just handed
  back to the system, and pay for fresh output pages (page faults, each page
  zeroed by the system) on top of the memory traffic. After an eviction the
  worker threads of a parallel contender have gone to sleep and the timed call
  wakes them: microseconds on a quiet machine, a scheduler's time slice or
  more on a busy one, where cold times are not worth reading;
* page faults counted per call (Linux and macOS): a fault is a page of memory
  the operating system hands over, zeroed, the first time it is touched. An
  allocator that returns big arrays to the system after each call (glibc does
  for blocks above 32 MiB, and sometimes below) pays thousands of faults on
  the next call, and its time jumps by several milliseconds: a cost of the
  allocator, not of the kernel, so the report shows it next to the time;
* a memory yardstick in the same run: the time to copy an array of the same
  size (read it, write it), measured in the same rotation. The effective
  bandwidth of a norm counts the bytes it must move at the very least: forward
  reads x and writes y; forward+backward also reads dy and x (or xhat) and
  writes dx, so 5 arrays. Parameters and statistics are too small to count.
  The targets also count the traffic a CPU really makes: its stores
  write-allocate (a store that misses the cache first reads the line), so a
  written array crosses the bus twice: a copy is 3 transfers, forward+backward 7.
"""

from __future__ import annotations

import functools
import gc
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from microgradnorm.registry import get_norm

try:
    import resource
except ImportError:  # Windows: no getrusage, so no page-fault counts
    resource = None

__all__ = [
    "DEFAULT_CASES",
    "ENGINE_DIMS",
    "QUICK_CASES",
    "BenchCase",
    "BenchReport",
    "CaseResult",
    "EngineReport",
    "EngineResult",
    "Target",
    "Timing",
    "evaluate_targets",
    "run_benchmark",
    "run_engine_benchmark",
]

Progress = Callable[[str], None]  # called once per finished step with a short description

CACHE_MODES = ("warm", "cold")

# Arrays that cross the memory bus per call on a CPU whose stores write-allocate (each written
# array is read into the cache, then written back): a copy reads src and writes dst (1 + 2);
# forward+backward reads x, writes y, reads dy, reads x again and writes dx (1 + 2 + 1 + 1 + 2).
COPY_TRANSFERS = 3
FWDBWD_TRANSFERS = 7


# ---- the vectorized benchmark -----------------------------------------------------------------


@dataclass(frozen=True)
class BenchCase:
    """One problem: a norm, an input shape and a dtype."""

    norm: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def label(self) -> str:
        return f"{self.norm} [{','.join(map(str, self.shape))}] {self.dtype}"

    @property
    def size(self) -> int:
        return math.prod(self.shape)


DEFAULT_CASES: tuple[BenchCase, ...] = (
    BenchCase("layernorm", (8, 64), "float64"),  # small enough for the scalar engine
    BenchCase("layernorm", (32, 128, 768), "float32"),
    BenchCase("layernorm", (32, 128, 768), "float64"),
    BenchCase("layernorm", (8, 512, 1024), "float32"),
    BenchCase("layernorm", (8, 512, 1024), "float64"),
    BenchCase("batchnorm", (256, 1024), "float32"),
    BenchCase("batchnorm", (32, 64, 28, 28), "float32"),
    BenchCase("rmsnorm", (32, 128, 768), "float32"),
)
QUICK_CASES: tuple[BenchCase, ...] = (
    BenchCase("layernorm", (8, 64), "float64"),
    BenchCase("layernorm", (32, 128, 768), "float32"),
    BenchCase("layernorm", (32, 128, 768), "float64"),
    BenchCase("batchnorm", (32, 64, 28, 28), "float32"),
    BenchCase("rmsnorm", (32, 128, 768), "float32"),
)

SCALAR_MAX_SIZE = 4096  # the scalar engine runs only on problems up to this many numbers

CONTENDERS = ("scalar", "naive", "numpy", "fused", "torch", "torch1")
CONTENDER_TITLES = {
    "scalar": "scalar engine",
    "naive": "NumPy naive",
    "numpy": "NumPy tuned",
    "fused": "fused (numba)",
    "torch": "PyTorch",
    "torch1": "PyTorch, 1 thread",
}


@dataclass
class Timing:
    """One contender on one case: medians in milliseconds, and the raw samples.

    ``*_faults`` are the page faults per call, averaged over the timed calls
    (None where the system does not count them): a mean, not a median, because
    an allocator that faults in some of the calls only still pays for it, and
    the median could hide that. ``*_fault_samples`` are the counts of every call.
    """

    contender: str
    forward_ms: float
    fwdbwd_ms: float
    forward_samples: list[float] = field(default_factory=list, repr=False)
    fwdbwd_samples: list[float] = field(default_factory=list, repr=False)
    forward_faults: float | None = None
    fwdbwd_faults: float | None = None
    forward_fault_samples: list[int] = field(default_factory=list, repr=False)
    fwdbwd_fault_samples: list[int] = field(default_factory=list, repr=False)

    def faults(self, phase: str) -> float | None:
        return self.forward_faults if phase == "forward" else self.fwdbwd_faults

    def samples(self, phase: str) -> tuple[list[float], list[int]]:
        """(seconds, page faults) of every timed call of ``phase``; faults empty where not counted."""
        if phase == "forward":
            return self.forward_samples, self.forward_fault_samples
        return self.fwdbwd_samples, self.fwdbwd_fault_samples


@dataclass
class CaseResult:
    """Every contender on one case, with the copy yardstick measured alongside."""

    case: BenchCase
    copy_ms: float
    timings: dict[str, Timing]

    @property
    def nbytes(self) -> int:
        """Bytes of one array of the case (x, y, dy or dx)."""
        return self.case.size * np.dtype(self.case.dtype).itemsize

    @property
    def copy_gbps(self) -> float:
        """Bandwidth of a plain copy (read + write one array), GB/s."""
        return 2 * self.nbytes / (self.copy_ms * 1e-3) / 1e9

    def gbps(self, contender: str, phase: str) -> float:
        """Effective bandwidth: the bytes the phase must move at least, over its median time."""
        arrays = 2 if phase == "forward" else 5
        ms = self.ms(contender, phase)
        return arrays * self.nbytes / (ms * 1e-3) / 1e9 if ms and ms > 0 else float("nan")

    def ms(self, contender: str, phase: str) -> float | None:
        t = self.timings.get(contender)
        if t is None:
            return None
        return t.forward_ms if phase == "forward" else t.fwdbwd_ms

    def ratio(self, contender: str, phase: str, to: str = "torch") -> float | None:
        """This contender's median time over ``to``'s (below 1: faster than ``to``)."""
        a, b = self.ms(contender, phase), self.ms(to, phase)
        if a is None or b is None or b <= 0:
            return None
        return a / b

    def fault_free_ms(self, contenders: Sequence[str], phase: str) -> dict[str, float] | None:
        """Median ms of each contender over the repeats in which none of ``contenders`` took a page fault.

        The repeats are matched by their index (each repeat times every contender once, in
        turn). None when a contender did not run, or no repeat was free of faults for all.
        Where the system counts no faults, every repeat counts.
        """
        timings = [self.timings.get(name) for name in contenders]
        if any(t is None for t in timings):
            return None
        columns = [t.samples(phase) for t in timings]
        repeats = range(min(len(seconds) for seconds, _ in columns))
        kept = [i for i in repeats if all(not faults or faults[i] in (0, None) for _, faults in columns)]
        if not kept:
            return None
        return {name: _median_ms([seconds[i] for i in kept]) for name, (seconds, _) in zip(contenders, columns)}

    def traffic_share(self, contender: str) -> float | None:
        """Forward+backward memory traffic per second over a copy's, both counted with write-allocate.

        FWDBWD_TRANSFERS arrays in the contender's median time over its calls without page
        faults, against COPY_TRANSFERS arrays in the copy's median time.
        """
        ms = self.fault_free_ms([contender], "fwdbwd")
        if ms is None or not ms[contender] > 0:
            return None
        return (FWDBWD_TRANSFERS / ms[contender]) / (COPY_TRANSFERS / self.copy_ms)


@dataclass
class BenchReport:
    """The whole run: environment, settings and one :class:`CaseResult` per case."""

    cases: list[CaseResult]
    repeats: int
    environment: dict[str, Any]
    cache: str = "warm"

    def case(self, norm: str, shape: Sequence[int], dtype: str) -> CaseResult | None:
        for r in self.cases:
            if r.case.norm == norm and tuple(r.case.shape) == tuple(shape) and r.case.dtype == dtype:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: every median, ratio and bandwidth, and the targets."""
        out = []
        for r in self.cases:
            rows = {}
            for name, t in r.timings.items():
                rows[name] = {
                    "forward_ms": t.forward_ms,
                    "fwdbwd_ms": t.fwdbwd_ms,
                    "forward_ratio_to_torch": r.ratio(name, "forward"),
                    "fwdbwd_ratio_to_torch": r.ratio(name, "fwdbwd"),
                    "forward_gbps": r.gbps(name, "forward"),
                    "fwdbwd_gbps": r.gbps(name, "fwdbwd"),
                    "forward_page_faults": t.forward_faults,
                    "fwdbwd_page_faults": t.fwdbwd_faults,
                }
            out.append(
                {
                    "norm": r.case.norm,
                    "shape": list(r.case.shape),
                    "dtype": r.case.dtype,
                    "copy_ms": r.copy_ms,
                    "copy_gbps": r.copy_gbps,
                    "contenders": rows,
                }
            )
        return {
            "repeats": self.repeats,
            "cache": self.cache,
            "environment": self.environment,
            "cases": out,
            "targets": [asdict(t) for t in evaluate_targets(self)],
        }


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _environment() -> dict[str, Any]:
    import os
    import platform

    from microgradnorm import vectorized

    info = vectorized.backend_info()
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "backend": str(info),
        "numba": info.numba_version,
        "torch": None,
        "torch_threads": None,
    }
    torch = _torch()
    if torch is not None:
        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
    return env


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _problem(case: BenchCase, seed: int = 0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(case.dtype)
    spec = get_norm(case.norm)
    p = spec.param_size(case.shape)
    x = rng.normal(0.5, 2.0, size=case.shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, size=p).astype(dtype)
    beta = rng.normal(size=p).astype(dtype) if spec.has_beta else None
    dy = rng.normal(size=case.shape).astype(dtype)
    return x, gamma, beta, dy


def _vectorized_pair(case: BenchCase, backend: str, x, gamma, beta, dy):
    """(forward, forward+backward) closures calling microgradnorm.vectorized with ``backend``."""
    spec = get_norm(case.norm)

    def forward():
        return spec.forward(x, gamma, beta, backend=backend)

    def fwdbwd():
        _, cache = spec.forward(x, gamma, beta, backend=backend)
        return spec.backward(dy, cache)

    return forward, fwdbwd


def _scalar_pair(case: BenchCase, x, gamma, beta, dy):
    """The scalar engine: build the graph (forward), and build + loss + backward."""
    spec = get_norm(case.norm)
    xl, gl = x.tolist(), gamma.tolist()
    bl = None if beta is None else beta.tolist()
    dyl = dy.tolist()

    def forward():
        return spec.build_graph(xl, gl, bl, 1e-5)

    def fwdbwd():
        graph = spec.build_graph(xl, gl, bl, 1e-5)
        loss = graph.loss(dyl)
        loss.backward()
        return loss

    return forward, fwdbwd


def _torch_pair(case: BenchCase, x, gamma, beta, dy, threads: int | None):
    """PyTorch's own functional norm, forward with autograd on (as in training) and backward."""
    torch = _torch()
    fn = torch.nn.functional
    xt = torch.from_numpy(x).requires_grad_()
    gt = torch.from_numpy(gamma).requires_grad_()
    bt = None if beta is None else torch.from_numpy(beta).requires_grad_()
    dyt = torch.from_numpy(dy)

    spec = get_norm(case.norm)

    def run_forward():
        return spec.torch_functional(fn, xt, gt, bt, 1e-5)

    def with_threads(body):
        if threads is None:
            return body
        default = torch.get_num_threads()

        def wrapped():
            torch.set_num_threads(threads)
            try:
                return body()
            finally:
                torch.set_num_threads(default)

        return wrapped

    def forward():
        return run_forward()

    def fwdbwd():
        y = run_forward()
        y.backward(dyt)
        xt.grad = gt.grad = None
        if bt is not None:
            bt.grad = None
        return y

    return with_threads(forward), with_threads(fwdbwd)


def _contenders(case: BenchCase, include: Sequence[str]) -> dict[str, tuple[Callable, Callable]]:
    from microgradnorm import vectorized as V

    x, gamma, beta, dy = _problem(case)
    pairs: dict[str, tuple[Callable, Callable]] = {}
    for name in include:
        if name == "scalar":
            if case.size <= SCALAR_MAX_SIZE and case.dtype == "float64":
                pairs[name] = _scalar_pair(case, x, gamma, beta, dy)
        elif name == "naive":
            pairs[name] = _vectorized_pair(case, "reference", x, gamma, beta, dy)
        elif name == "numpy":
            pairs[name] = _vectorized_pair(case, "numpy", x, gamma, beta, dy)
        elif name == "fused":
            if V.resolve_backend("auto") == "fused":
                pairs[name] = _vectorized_pair(case, "fused", x, gamma, beta, dy)
        elif name in ("torch", "torch1"):
            if _torch() is not None:
                pairs[name] = _torch_pair(case, x, gamma, beta, dy, None if name == "torch" else 1)
        else:
            raise ValueError(f"contenders: expected names from {', '.join(CONTENDERS)}, got {name!r}")
    return pairs


def _page_faults() -> int | None:
    """Minor page faults of this process (all its threads) so far; None where not counted."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _time(fn: Callable[[], Any]) -> tuple[float, int | None]:
    """One call of ``fn``: its wall-clock seconds and the page faults it took."""
    faults = _page_faults()
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return seconds, None if faults is None else _page_faults() - faults


def last_level_cache_bytes() -> int:
    """The largest CPU cache, read from Linux's sysfs; 32 MiB where that is not available."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text(encoding="ascii").strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=32 << 20)


class _ColdCache:
    """Cold: the call once, untimed (as warm), then the caches evicted, so its arrays come from memory.

    The untimed run gives the call the memory it will get in a loop (the output arrays
    the allocator hands back, already paged in): what the cold call then measures is
    the kernel against main memory, not page faults its neighbours caused.
    """

    def __init__(self) -> None:
        self.buffer = np.ones(2 * last_level_cache_bytes(), dtype=np.uint8)

    def __call__(self, fn: Callable[[], Any]) -> None:
        fn()
        self.evict()

    def evict(self) -> None:
        """Read one byte per 64-byte line of a buffer twice the last-level cache."""
        int(self.buffer[::64].sum())  # reads allocate cache lines, pushing everything else out


def _run_first(fn: Callable[[], Any]) -> None:
    """Warm: the same call once, untimed, so the timed call finds what its own previous call left."""
    fn()


def _prepared_time(fn: Callable[[], Any], prepare: Callable[[Callable[[], Any]], None]) -> tuple[float, int | None]:
    prepare(fn)
    return _time(fn)


def _mean_faults(counts: list[int | None]) -> float | None:
    return None if not counts or None in counts else float(statistics.fmean(counts))


def _timing(name: str, forward: list[tuple[float, int | None]], fwdbwd: list[tuple[float, int | None]]) -> Timing:
    """A :class:`Timing` from the (seconds, faults) of each timed call."""
    f_seconds, f_faults = (list(column) for column in zip(*forward))
    fb_seconds, fb_faults = (list(column) for column in zip(*fwdbwd))
    return Timing(
        name,
        _median_ms(f_seconds),
        _median_ms(fb_seconds),
        f_seconds,
        fb_seconds,
        _mean_faults(f_faults),
        _mean_faults(fb_faults),
        f_faults,
        fb_faults,
    )


def run_benchmark(
    cases: Sequence[BenchCase] = DEFAULT_CASES,
    repeats: int = 15,
    warmup: int = 2,
    contenders: Sequence[str] = CONTENDERS,
    progress: Progress | None = None,
    cache: str = "warm",
) -> BenchReport:
    """Time every contender on every case, side by side; see the module docstring.

    ``cache`` ("warm" or "cold") is what each timed call is prepared with.

    ``progress`` (if given) is called once per case and repeat, so a caller
    can advance a progress bar by ``len(cases) * repeats`` steps in all.
    """
    if repeats < 1:
        raise ValueError(f"repeats: expected a positive integer, got {repeats}")
    if cache not in CACHE_MODES:
        raise ValueError(f"cache: expected one of {', '.join(CACHE_MODES)}, got {cache!r}")
    prepare = _run_first if cache == "warm" else _ColdCache()
    results = []
    for case in cases:
        pairs = _contenders(case, contenders)
        src = np.empty(case.shape, dtype=case.dtype)
        src.fill(1.0)
        dst = np.empty_like(src)

        def copy(src=src, dst=dst):
            np.copyto(dst, src)

        for _ in range(warmup):
            copy()
            for forward, fwdbwd in pairs.values():
                forward()
                fwdbwd()
        copy_samples: list[float] = []
        samples = {name: ([], []) for name in pairs}
        for rep in range(repeats):
            copy_samples.append(_prepared_time(copy, prepare)[0])
            for name, (forward, fwdbwd) in pairs.items():
                samples[name][0].append(_prepared_time(forward, prepare))
                samples[name][1].append(_prepared_time(fwdbwd, prepare))
            gc.collect()
            if progress is not None:
                progress(f"{case.label}: repeat {rep + 1}/{repeats}")
        timings = {name: _timing(name, f, fb) for name, (f, fb) in samples.items()}
        results.append(CaseResult(case, _median_ms(copy_samples), timings))
    return BenchReport(results, repeats, _environment(), cache)


# ---- the performance targets -------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One performance target and what this run measured for it."""

    name: str
    measured: float | None
    limit: float
    kind: str  # "at_most" or "at_least"
    unit: str
    reference_faults: float | None = None  # a ratio's reference: its mean page faults per call

    @property
    def met(self) -> bool | None:
        if self.measured is None or math.isnan(self.measured):
            return None
        return self.measured <= self.limit if self.kind == "at_most" else self.measured >= self.limit


def evaluate_targets(report: BenchReport) -> list[Target]:
    """The performance targets, read off a report (measured is None where a case did not run)."""
    ln32 = report.case("layernorm", (32, 128, 768), "float32")
    ln64 = report.case("layernorm", (32, 128, 768), "float64")
    rms = report.case("rmsnorm", (32, 128, 768), "float32")
    bn = report.case("batchnorm", (32, 64, 28, 28), "float32")
    return [
        _ratio_target("fused LayerNorm fwd+bwd float32 / torch", ln32, "fused", "torch", 0.9),
        _fault_free_ratio_target("fused LayerNorm fwd+bwd float64 / torch, calls without faults", ln64, 0.95),
        Target("fused LayerNorm forward float32, share of copy bandwidth", _forward_share(ln32), 0.5, "at_least", ""),
        Target("fused LayerNorm fwd+bwd float32 traffic / copy's, write-allocate", _traffic(ln32), 0.6, "at_least", ""),
        Target("fused LayerNorm fwd+bwd float64 traffic / copy's, write-allocate", _traffic(ln64), 0.6, "at_least", ""),
        _ratio_target("NumPy tuned LayerNorm fwd+bwd float32 / torch 1 thread", ln32, "numpy", "torch1", 4.5),
        _ratio_target("fused RMSNorm fwd+bwd float32 / torch", rms, "fused", "torch", 0.5),
        _ratio_target("fused BatchNorm [32,64,28,28] fwd+bwd / torch", bn, "fused", "torch", 1.0),
    ]


def _ratio_target(name: str, result: CaseResult | None, contender: str, to: str, limit: float) -> Target:
    """contender's fwd+bwd median over ``to``'s, with ``to``'s mean page faults for the table to flag."""
    if result is None:
        return Target(name, None, limit, "at_most", "x")
    reference = result.timings.get(to)
    faults = None if reference is None else reference.faults("fwdbwd")
    return Target(name, result.ratio(contender, "fwdbwd", to), limit, "at_most", "x", faults)


def _fault_free_ratio_target(name: str, result: CaseResult | None, limit: float) -> Target:
    """fused fwd+bwd over PyTorch's, both over the repeats in which neither took a page fault."""
    ms = None if result is None else result.fault_free_ms(["fused", "torch"], "fwdbwd")
    measured = None if ms is None or not ms["torch"] > 0 else ms["fused"] / ms["torch"]
    return Target(name, measured, limit, "at_most", "x")


def _forward_share(result: CaseResult | None) -> float | None:
    if result is None or result.ms("fused", "forward") is None:
        return None
    return result.gbps("fused", "forward") / result.copy_gbps


def _traffic(result: CaseResult | None) -> float | None:
    return None if result is None else result.traffic_share("fused")


# ---- the scalar engine against micrograd ------------------------------------------------------

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

    Times alternate between the two engines (side by side) and the medians
    are kept. Memory is measured in a separate, untimed run under tracemalloc:
    the bytes still held by the graph after backward, over its node count.
    micrograd's recursive topological sort needs a raised recursion limit for
    large d; the limit used is recorded in the report.
    """
    if repeats < 1:
        raise ValueError(f"repeats: expected a positive integer, got {repeats}")
    mg_version = micrograd_available() if with_micrograd else None
    results: list[EngineResult] = []
    raised: dict[int, int] = {}
    old_limit = sys.getrecursionlimit()
    try:
        for d in dims:
            runs = _engine_runs(d, mg_version is not None, raised)
            samples = _alternate(runs, repeats, warmup, progress, f"d = {d}")
            results += [_engine_result(name, d, run, samples[name]) for name, run in runs.items()]
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


def _alternate(
    runs: dict[str, Callable[[], Any]], repeats: int, warmup: int, progress: Progress | None, what: str
) -> dict[str, list[float]]:
    """Seconds of each run, ``repeats`` times, the runs taking turns (after ``warmup`` untimed rounds)."""
    for _ in range(warmup):
        for run in runs.values():
            run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for rep in range(repeats):
        for name, run in runs.items():
            gc.collect()
            samples[name].append(_time(run)[0])
        if progress is not None:
            progress(f"{what}: repeat {rep + 1}/{repeats}")
    return samples


def _engine_result(name: str, d: int, run: Callable[[], Any], samples: list[float]) -> EngineResult:
    """The median time, and the nodes and bytes of one more (untimed) run's graph."""
    loss, held = _held_bytes(run)
    nodes = _count_ours(loss) if name == "microgradnorm" else _count_micrograd(loss)
    del loss
    return EngineResult(name, d, _median_ms(samples), nodes, held, samples)
