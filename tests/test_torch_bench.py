"""The bench's bridge section on tiny problems: its structure and derived numbers, never a time (needs torch)."""

from __future__ import annotations

import json

import pytest
from rich.console import Group

from microgradnorm import bench, cli
from tests.helpers import rendered

torch = pytest.importorskip("torch")
from microgradnorm.torch import bench as bridge  # noqa: E402

TINY = (
    bench.BenchCase("layernorm", (3, 8), "float32"),
    bench.BenchCase("layernorm", (4, 8), "float64"),
    bench.BenchCase("batchnorm", (4, 3, 2, 2), "float32"),
    bench.BenchCase("batchnorm", (6, 3), "float32"),
    bench.BenchCase("rmsnorm", (3, 8), "float32"),
)


@pytest.fixture(scope="module")
def report():
    steps = []
    result = bridge.run_bridge_benchmark(bridge.bridge_cases(TINY), repeats=2, warmup=1, progress=steps.append)
    result.steps = steps
    return result


def test_the_bridge_runs_on_the_main_runs_float32_problems_after_the_tiny_one():
    cases = bridge.bridge_cases(TINY)
    assert cases[0] == bridge.OVERHEAD_CASE
    assert cases[1:] == tuple(c for c in TINY if c.dtype == "float32")
    assert bridge.bridge_cases((TINY[-1],)) == (TINY[-1],)  # no LayerNorm asked for: no tiny LayerNorm either


def test_every_contender_is_timed_on_every_problem_side_by_side(report):
    assert [r.case for r in report.results] == list(bridge.bridge_cases(TINY))
    assert len(report.steps) == len(report.results) * report.repeats
    for r in report.results:
        assert set(r.ms) == set(r.faults) == set(bridge.BRIDGE_CONTENDERS)
        assert all(ms > 0 for ms in r.ms.values())
        assert r.ratio == r.ms["microgradnorm.torch"] / r.ms["torch.nn"]
        assert r.overhead_ms == r.ms["microgradnorm.torch"] - r.ms["kernels"]


def test_the_tables_name_every_problem_and_contender(report):
    text = rendered(Group(*bridge.bridge_tables(report)), 80)
    assert all(r.case.label in text for r in report.results)
    assert text.count("microgradnorm.torch ") >= len(report.results) and "kernels, no torch" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_bench_command_adds_the_bridge_to_its_json(capsys, monkeypatch):
    monkeypatch.setattr(bench, "QUICK_CASES", (bench.BenchCase("rmsnorm", (2, 16), "float32"),))
    assert cli.main(["bench", "--quick", "--json", "--repeats", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    (case,) = data["bridge"]["cases"]
    assert case["label"] == "rmsnorm [2,16] float32" and set(case["ms"]) == set(bridge.BRIDGE_CONTENDERS)
    assert case["ratio_to_torch_nn"] == case["ms"]["microgradnorm.torch"] / case["ms"]["torch.nn"]
