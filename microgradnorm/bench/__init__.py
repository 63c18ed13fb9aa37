"""Benchmarks, as pure functions that return result objects (the CLI draws them).

- :mod:`.timing`: how a time is taken (side by side, warm or cold caches, page faults, medians),
  once for every benchmark;
- :mod:`.vectorized`: the vectorized path's contenders on each problem, with a copy as the memory yardstick;
- :mod:`.targets`: the performance targets, read off a vectorized report;
- :mod:`.engine`: the scalar engine against micrograd 0.1.0 (time and memory per node).

The bridge beside ``torch.nn`` is :mod:`microgradnorm.torch.bench` (it needs torch).
"""

from __future__ import annotations

from microgradnorm.bench.engine import (
    ENGINE_DIMS,
    EngineReport,
    EngineResult,
    micrograd_available,
    run_engine_benchmark,
)
from microgradnorm.bench.targets import Target, evaluate_targets, target_dicts
from microgradnorm.bench.vectorized import (
    CACHE_MODES,
    CONTENDER_TITLES,
    CONTENDERS,
    DEFAULT_CASES,
    QUICK_CASES,
    BenchCase,
    BenchReport,
    CaseResult,
    Timing,
    run_benchmark,
    torch_or_none,
)

__all__ = [
    "CACHE_MODES",
    "CONTENDERS",
    "CONTENDER_TITLES",
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
    "micrograd_available",
    "run_benchmark",
    "run_engine_benchmark",
    "target_dicts",
    "torch_or_none",
]
