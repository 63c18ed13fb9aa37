"""The vectorized benchmark, as pure functions that return result objects (the CLI draws them).

For each problem (norm, shape, dtype) every contender -- the scalar engine (small problems only),
NumPy naive (the closed forms of :mod:`microgradnorm.formulas` one after another), NumPy tuned, the
fused numba kernels and PyTorch CPU (its default threads and one thread) when installed -- runs
forward and forward+backward, side by side, as :mod:`microgradnorm.bench.timing` takes a time.

A memory yardstick in the same run: the time to copy an array of the same size (read it, write
it), measured in the same rotation. The effective bandwidth of a norm counts the bytes it must move
at the very least: forward reads x and writes y; forward+backward also reads dy and x (or xhat) and
writes dx, so 5 arrays. Parameters and statistics are too small to count. The targets
(:mod:`microgradnorm.bench.targets`) also count the traffic a CPU really makes: its stores
write-allocate (a store that misses the cache first reads the line), so a written array crosses
the bus twice: a copy is 3 transfers, forward+backward 7.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from microgradnorm.bench.timing import ColdCache, Progress, Sample, mean_faults, median_ms, run_first, side_by_side
from microgradnorm.inputs import check_int
from microgradnorm.registry import get_norm

__all__ = [
    "CACHE_MODES",
    "CONTENDERS",
    "CONTENDER_TITLES",
    "DEFAULT_CASES",
    "QUICK_CASES",
    "BenchCase",
    "BenchReport",
    "CaseResult",
    "Timing",
    "on_torch_threads",
    "problem",
    "run_benchmark",
    "torch_or_none",
]


CACHE_MODES = ("warm", "cold")

# Arrays that cross the memory bus per call on a CPU whose stores write-allocate (each written
# array is read into the cache, then written back): a copy reads src and writes dst (1 + 2);
# forward+backward reads x, writes y, reads dy, reads x again and writes dx (1 + 2 + 1 + 1 + 2).
COPY_TRANSFERS = 3
FWDBWD_TRANSFERS = 7


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
        return {name: median_ms([seconds[i] for i in kept]) for name, (seconds, _) in zip(contenders, columns)}

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
        """Plain data for ``--json``: every median, ratio and bandwidth (the targets: ``targets.target_dicts``)."""
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
        }


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
    torch = torch_or_none()
    if torch is not None:
        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
    return env


def torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def problem(case: BenchCase, seed: int = 0):
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
    from microgradnorm.vectorized import public_pass

    forward_pass, backward_pass = public_pass(get_norm(case.norm))

    def forward():
        return forward_pass(x, gamma, beta, backend=backend)

    def fwdbwd():
        _, cache = forward_pass(x, gamma, beta, backend=backend)
        return backward_pass(dy, cache)

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
    torch = torch_or_none()
    fn = torch.nn.functional
    xt = torch.from_numpy(x).requires_grad_()
    gt = torch.from_numpy(gamma).requires_grad_()
    bt = None if beta is None else torch.from_numpy(beta).requires_grad_()
    dyt = torch.from_numpy(dy)

    spec = get_norm(case.norm)

    def forward():
        return spec.torch_functional(fn, xt, gt, bt, 1e-5)

    def fwdbwd():
        y = forward()
        y.backward(dyt)
        xt.grad = gt.grad = None
        if bt is not None:
            bt.grad = None
        return y

    return on_torch_threads(forward, threads), on_torch_threads(fwdbwd, threads)


def on_torch_threads(body: Callable[[], Any], threads: int | None) -> Callable[[], Any]:
    """``body`` run with PyTorch on ``threads`` threads (None: ``body`` as it is), its default restored after."""
    if threads is None:
        return body
    torch = torch_or_none()

    def wrapped() -> Any:
        default = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return body()
        finally:
            torch.set_num_threads(default)

    return wrapped


def _contenders(case: BenchCase, include: Sequence[str]) -> dict[str, tuple[Callable, Callable]]:
    from microgradnorm import vectorized as V

    x, gamma, beta, dy = problem(case)
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
            if torch_or_none() is not None:
                pairs[name] = _torch_pair(case, x, gamma, beta, dy, None if name == "torch" else 1)
        else:
            raise ValueError(f"contenders: expected names from {', '.join(CONTENDERS)}, got {name!r}")
    return pairs


def _timing(name: str, forward: list[Sample], fwdbwd: list[Sample]) -> Timing:
    """A :class:`Timing` from the (seconds, faults) of each timed call."""
    f_seconds, f_faults = (list(column) for column in zip(*forward))
    fb_seconds, fb_faults = (list(column) for column in zip(*fwdbwd))
    return Timing(
        name,
        median_ms(f_seconds),
        median_ms(fb_seconds),
        f_seconds,
        fb_seconds,
        mean_faults(f_faults),
        mean_faults(fb_faults),
        f_faults,
        fb_faults,
    )


def _copy(case: BenchCase) -> Callable[[], None]:
    """The memory yardstick: a copy of an array of the case's size and dtype."""
    src = np.empty(case.shape, dtype=case.dtype)
    src.fill(1.0)
    dst = np.empty_like(src)
    return lambda: np.copyto(dst, src)


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
    check_int("repeats", repeats)
    if cache not in CACHE_MODES:
        raise ValueError(f"cache: expected one of {', '.join(CACHE_MODES)}, got {cache!r}")
    prepare = run_first if cache == "warm" else ColdCache()
    results = []
    for case in cases:
        runs: dict[tuple[str, str], Callable[[], Any]] = {("copy", "copy"): _copy(case)}
        for name, (forward, fwdbwd) in _contenders(case, contenders).items():
            runs |= {(name, "forward"): forward, (name, "fwdbwd"): fwdbwd}
        samples = side_by_side(runs, repeats, warmup, prepare=prepare, progress=progress, what=case.label)
        names = dict.fromkeys(name for name, _ in runs if name != "copy")
        timings = {name: _timing(name, samples[name, "forward"], samples[name, "fwdbwd"]) for name in names}
        results.append(CaseResult(case, median_ms([s for s, _ in samples["copy", "copy"]]), timings))
    return BenchReport(results, repeats, _environment(), cache)
