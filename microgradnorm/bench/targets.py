"""The performance targets of the vectorized path, read off a benchmark report.

Each target is a ratio to PyTorch or a share of the copy yardstick measured in the same run
(:mod:`microgradnorm.bench.vectorized`); a target whose problem did not run is not measured.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from microgradnorm.bench.vectorized import BenchReport, CaseResult

__all__ = ["Target", "evaluate_targets", "target_dicts"]


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


def target_dicts(report: BenchReport) -> list[dict[str, Any]]:
    """The targets as plain data, for ``bench --json``."""
    return [asdict(t) for t in evaluate_targets(report)]
