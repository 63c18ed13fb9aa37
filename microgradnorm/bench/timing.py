"""How the benchmarks take a time, once for all three (the vectorized path, the engine, the torch bridge).

So that the numbers can be trusted on a shared machine:

* side by side (:func:`side_by_side`): every repeat runs every contender once, in turn, so a burst of
  load from another process slows all of them alike instead of one;
* medians over the repeats, after untimed warm-up runs (the first call of a
  fused kernel loads or compiles it);
* the same cache state for every contender. The arrays are a few times the
  size of the processor's last-level cache at most, so what a call finds in the
  cache depends on what ran just before it; timing contenders one after the
  other would hand each one the leftovers of its neighbour (a contender that
  follows another reading the same ``x`` finds it half cached, and the order
  of the rotation would decide ratios of 0.75 to 0.95). So every timed call is
  prepared: warm (:func:`run_first`) runs the same call once, untimed,
  right before (each contender in its own steady state, as in a loop that
  calls it over and over, what ``timeit`` measures); cold (:class:`ColdCache`) does
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
  allocator, not of the kernel, so the reports show it next to the time.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

try:
    import resource
except ImportError:  # Windows: no getrusage, so no page-fault counts
    resource = None

Progress = Callable[[str], None]  # called once per finished step with a short description
Sample = tuple[float, int | None]  # one timed call: its seconds and page faults (None where not counted)
Prepare = Callable[[Callable[[], Any]], None]


def page_faults() -> int | None:
    """Minor page faults of this process (all its threads) so far; None where not counted."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_call(fn: Callable[[], Any]) -> Sample:
    """One call of ``fn``: its wall-clock seconds and the page faults it took."""
    faults = page_faults()
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return seconds, None if faults is None else page_faults() - faults


def median_ms(samples: list[float]) -> float:
    """The median of some seconds, in milliseconds."""
    return statistics.median(samples) * 1e3


def mean_faults(counts: list[int | None]) -> float | None:
    """Page faults per call: a mean, not a median (a call that faults only sometimes still pays for it)."""
    return None if not counts or None in counts else float(statistics.fmean(counts))


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


def run_first(fn: Callable[[], Any]) -> None:
    """Warm: the same call once, untimed, so the timed call finds what its own previous call left."""
    fn()


class ColdCache:
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


def side_by_side(
    runs: Mapping[Hashable, Callable[[], Any]],
    repeats: int,
    warmup: int,
    *,
    prepare: Prepare | None = run_first,
    collect_each: bool = False,
    progress: Progress | None = None,
    what: str = "",
) -> dict[Hashable, list[Sample]]:
    """Each run timed ``repeats`` times, the runs taking turns, after ``warmup`` untimed rounds.

    ``prepare`` is called with each run right before it is timed (warm or cold caches; None: nothing).
    The garbage collector runs after each round, or with ``collect_each`` before every timed call (a
    graph of Python objects left by the previous run would otherwise be collected inside the next).
    ``progress`` is called after each round with ``"{what}: repeat i/repeats"``.
    """
    for _ in range(warmup):
        for run in runs.values():
            run()
    samples: dict[Hashable, list[Sample]] = {name: [] for name in runs}
    for rep in range(repeats):
        for name, run in runs.items():
            if collect_each:
                gc.collect()
            if prepare is not None:
                prepare(run)
            samples[name].append(time_call(run))
        if not collect_each:
            gc.collect()
        if progress is not None:
            progress(f"{what}: repeat {rep + 1}/{repeats}")
    return samples
