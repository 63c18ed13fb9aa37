"""The benchmarks' measurement functions and the bench command, on tiny problems.

Nothing here asserts a time: only the structure of the reports and that the
derived numbers (ratios, bandwidths, node counts) are consistent with the raw ones.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math

import numpy as np
import pytest
from rich.console import Group

from microgradnorm import bench, fused, topological_order, vectorized
from microgradnorm.commands import bench as bench_command
from tests.helpers import rendered, run_cli

TINY = (
    bench.BenchCase("layernorm", (4, 8), "float64"),
    bench.BenchCase("batchnorm", (4, 3, 2, 2), "float32"),
    bench.BenchCase("rmsnorm", (3, 8), "float32"),
)


@pytest.fixture(scope="module")
def report():
    steps = []
    result = bench.run_benchmark(TINY, repeats=3, warmup=1, progress=steps.append)
    result.steps = steps
    return result


HAS_TORCH = importlib.util.find_spec("torch") is not None


def _targets(*cases: bench.CaseResult, repeats: int) -> dict[str, bench.Target]:
    """The targets of a report of ``cases``, by name."""
    return {t.name: t for t in bench.evaluate_targets(bench.BenchReport(list(cases), repeats, ENV))}


def test_every_case_and_contender_is_measured_side_by_side(report):
    assert [r.case for r in report.cases] == list(TINY)
    assert len(report.steps) == len(TINY) * 3
    for result in report.cases:
        expected = {"naive", "numpy"}
        if result.case.dtype == "float64":  # the scalar engine runs on small float64 problems only
            expected.add("scalar")
        if vectorized.resolve_backend("auto") == "fused":
            expected.add("fused")
        if HAS_TORCH:
            expected |= {"torch", "torch1"}
        assert set(result.timings) == expected
        for t in result.timings.values():
            assert len(t.forward_samples) == len(t.fwdbwd_samples) == 3
            assert t.forward_ms == pytest.approx(float(np.median(t.forward_samples)) * 1e3)
            assert t.fwdbwd_ms == pytest.approx(float(np.median(t.fwdbwd_samples)) * 1e3)
            assert t.forward_ms > 0 and t.fwdbwd_ms > 0
        assert result.copy_ms > 0


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_every_timed_call_is_prepared_the_same_way(monkeypatch, cache):
    """warm: each timed call follows an untimed run of itself; cold: that run, then a cache eviction."""
    calls: list[str] = []

    def counting(case, include):
        def fn(tag):
            return lambda: calls.append(tag)

        return {name: (fn(f"{name} fwd"), fn(f"{name} f+b")) for name in include}

    monkeypatch.setattr(bench.vectorized, "_contenders", counting)
    monkeypatch.setattr(bench.timing.ColdCache, "__init__", lambda self: None)
    monkeypatch.setattr(bench.timing.ColdCache, "evict", lambda self: calls.append("evict"))
    report = bench.run_benchmark(TINY[:1], repeats=3, warmup=0, contenders=("numpy", "fused"), cache=cache)
    assert report.cache == cache and report.to_dict()["cache"] == cache
    for tag in ("numpy fwd", "numpy f+b", "fused fwd", "fused f+b"):
        assert calls.count(tag) == 3 * 2, tag
    # cold: one eviction between the untimed run and the timed call, the copy yardstick's included
    assert calls.count("evict") == (0 if cache == "warm" else 3 * (1 + 4))
    if cache == "cold":
        timed = [i for i, tag in enumerate(calls) if tag == "numpy fwd"][1::2]
        assert all(calls[i - 2 : i + 1] == ["numpy fwd", "evict", "numpy fwd"] for i in timed)


def test_the_command_offers_the_cache_modes_the_benchmark_knows():
    parser = argparse.ArgumentParser()
    bench_command.add_arguments(parser)
    (cache,) = [a for a in parser._actions if "--cache" in a.option_strings]
    assert tuple(cache.choices) == bench.CACHE_MODES


def test_an_unknown_cache_mode_is_refused():
    with pytest.raises(ValueError, match="cache: expected one of warm, cold, got 'hot'"):
        bench.run_benchmark(TINY[:1], repeats=1, cache="hot")


@pytest.mark.skipif(bench.timing.resource is None, reason="this system does not count page faults (no getrusage)")
def test_a_timed_call_counts_the_pages_it_touches_for_the_first_time():
    import mmap

    pages = 64  # 256 KiB: too small for a transparent huge page, so one fault per page

    def touch_fresh_pages():
        with mmap.mmap(-1, pages * mmap.PAGESIZE) as fresh:
            for offset in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
                fresh[offset] = 1

    reused = bytearray(pages * mmap.PAGESIZE)

    def touch_old_pages():
        for offset in range(0, len(reused), mmap.PAGESIZE):
            reused[offset] = 1

    seconds, faults = bench.timing.time_call(touch_fresh_pages)
    assert seconds > 0 and faults >= pages
    _, faults = bench.timing.time_call(touch_old_pages)
    assert faults < pages


def test_page_faults_are_averaged_so_that_a_minority_of_faulting_calls_shows():
    timing = bench.vectorized._timing(
        "numpy", [(1e-3, 0), (2e-3, 0), (3e-3, 60)], [(4e-3, None), (5e-3, None), (6e-3, None)]
    )
    assert timing.forward_ms == pytest.approx(2.0) and timing.fwdbwd_ms == pytest.approx(5.0)
    assert timing.faults("forward") == pytest.approx(20.0)  # the median, 0, would hide the third call
    assert timing.forward_fault_samples == [0, 0, 60]
    assert timing.faults("fwdbwd") is None  # a system without counts reports none, not zero


def test_the_last_level_cache_size_is_read_or_assumed():
    size = bench.timing.last_level_cache_bytes()
    assert isinstance(size, int) and size >= 1 << 20


def test_ratios_and_bandwidths_follow_from_the_medians(report):
    for result in report.cases:
        nbytes = result.case.size * np.dtype(result.case.dtype).itemsize
        assert result.nbytes == nbytes
        assert result.copy_gbps == pytest.approx(2 * nbytes / (result.copy_ms * 1e-3) / 1e9)
        for name, t in result.timings.items():
            assert result.gbps(name, "forward") == pytest.approx(2 * nbytes / (t.forward_ms * 1e-3) / 1e9)
            assert result.gbps(name, "fwdbwd") == pytest.approx(5 * nbytes / (t.fwdbwd_ms * 1e-3) / 1e9)
            assert result.ratio(name, "fwdbwd", to="numpy") == pytest.approx(
                t.fwdbwd_ms / result.timings["numpy"].fwdbwd_ms
            )
            if HAS_TORCH:
                assert result.ratio(name, "forward") == pytest.approx(t.forward_ms / result.timings["torch"].forward_ms)
        assert result.ratio("torch" if HAS_TORCH else "numpy", "forward", to="nobody") is None


def test_json_is_complete_and_targets_without_their_cases_are_not_run(report):
    data = json.loads(json.dumps(bench_command._plain(report.to_dict()), allow_nan=False))
    assert [c["norm"] for c in data["cases"]] == ["layernorm", "batchnorm", "rmsnorm"]
    fields = {"forward_ms", "fwdbwd_ms", "forward_gbps", "forward_page_faults", "fwdbwd_page_faults"}
    assert set(data["cases"][0]["contenders"]["numpy"]) >= fields
    assert data["environment"]["numpy"] == np.__version__
    targets = bench.evaluate_targets(report)
    assert len(targets) == len(bench.target_dicts(report)) == 8
    assert all(t.measured is None and t.met is None for t in targets)  # the tiny run has none of the target shapes


def test_a_target_is_met_or_not_by_its_limit():
    assert bench.Target("t", 0.8, 0.9, "at_most", "x").met is True
    assert bench.Target("t", 1.2, 0.9, "at_most", "x").met is False
    assert bench.Target("t", 0.4, 0.5, "at_least", "").met is False
    assert bench.Target("t", math.nan, 0.5, "at_least", "").met is None


def test_the_tables_render_every_case_and_the_targets(report):
    text = rendered(Group(*bench_command.bench_tables(report)), 120)
    for case in TINY:
        assert case.label in text
    assert "NumPy tuned" in text and {t.measured for t in bench.evaluate_targets(report)} == {None}  # and why:
    missing = not (HAS_TORCH and fused.AVAILABLE)
    reason = "not installed here" if missing else "these problems measure none"
    assert reason in " ".join(text.split())
    assert "faults" in text and "page faults per f+b call (mean)" in text


def test_the_engine_benchmark_counts_nodes_and_bytes():
    report = bench.run_engine_benchmark(dims=(6,), repeats=2, warmup=0)
    ours = report.get("microgradnorm", 6)
    assert len(ours.samples) == 2 and ours.ms > 0 and ours.bytes_held > 0
    x, gamma, beta, dy = bench.engine._engine_problem(6)
    assert ours.nodes == len(topological_order(bench.engine._ours(x, gamma, beta, dy)))
    assert ours.bytes_per_node == ours.bytes_held / ours.nodes
    if report.micrograd_version is not None:
        theirs = report.get("micrograd", 6)
        # x, gamma, beta leaves, the chain of sum(), ... : more nodes than ours, whose sums are single nodes
        assert theirs.nodes > ours.nodes
        assert report.speedup(6) == pytest.approx(theirs.ms / ours.ms)
    data = json.loads(json.dumps(bench_command._plain(report.to_dict())))
    assert data["results"][0]["engine"] == "microgradnorm"


def test_the_engine_benchmark_without_micrograd_times_only_ours():
    report = bench.run_engine_benchmark(dims=(4,), repeats=1, warmup=0, with_micrograd=False)
    assert [r.engine for r in report.results] == ["microgradnorm"]
    assert report.speedup(4) is None and report.micrograd_version is None


def test_micrograd_needs_a_raised_recursion_limit_for_large_d_and_the_report_says_so():
    pytest.importorskip("micrograd")
    import sys

    limit = sys.getrecursionlimit()
    report = bench.run_engine_benchmark(dims=(400,), repeats=1, warmup=0)
    assert sys.getrecursionlimit() == limit  # restored
    assert 400 in report.recursion_limit_raised_to
    assert any("setrecursionlimit" in note for note in report.notes)


def test_bench_command_json(capsys, monkeypatch):
    monkeypatch.setattr(bench, "QUICK_CASES", (bench.BenchCase("rmsnorm", (2, 16), "float32"),))
    code, out, _ = run_cli(capsys, "bench", "--quick", "--json", "--repeats", "1")
    assert code == 0
    data = json.loads(out)
    assert data["repeats"] == 1 and data["cases"][0]["shape"] == [2, 16]
    assert [t["name"] for t in data["targets"]] == [t.name for t in bench.evaluate_targets(bench.run_benchmark(()))]


def test_bench_command_tables_and_engine(capsys, monkeypatch):
    monkeypatch.setattr(bench, "QUICK_CASES", (bench.BenchCase("layernorm", (2, 8), "float64"),))
    code, out, _ = run_cli(capsys, "bench", "--quick", "--repeats", "1", "--norm", "ln")
    assert code == 0 and "layernorm [2,8] float64" in out and "scalar engine" in out
    code, out, _ = run_cli(capsys, "bench", "--engine", "--dims", "5", "--repeats", "1")
    assert code == 0 and "microgradnorm" in out and "bytes per node" in out


def test_bench_engine_without_micrograd_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setattr(bench.engine, "micrograd_available", lambda: None)
    code, out, _ = run_cli(capsys, "bench", "--engine", "--dims", "4", "--repeats", "1")
    assert code == 0 and "pip install micrograd==0.1.0" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["bench", "--dims", "768"], "--dims: only used with --engine"),
        (["bench", "--norm", "instancenorm"], "norm: expected one of"),
        (["bench", "--norm", "groupnorm"], "argument --norm: no benchmark cases for groupnorm"),
        (["bench", "--engine", "--dims", "1"], "expected sizes of at least 2"),
        (["bench", "--repeats", "0"], "positive integer"),
        (["bench", "--cache", "hot"], "argument --cache: invalid choice: 'hot'"),
        (["bench", "--no-micrograd"], "argument --no-micrograd: only used with --engine"),
        (["bench", "--engine", "--norm", "rms"], "argument --norm: not used with --engine"),
        (["bench", "--engine", "--cache", "cold"], "argument --cache: not used with --engine"),
    ],
)
def test_bad_bench_arguments_give_one_line_and_exit_two(capsys, argv, words):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and words in err and "Traceback" not in err and out == ""
    assert len(err.strip().splitlines()) == 1


def _synthetic_report(torch_faults: float, torch1_faults: float) -> bench.BenchReport:
    ms = {"numpy": 12.0, "fused": 2.0, "torch": 4.0, "torch1": 3.0}
    faults = {"torch": torch_faults, "torch1": torch1_faults}
    timings = {name: bench.Timing(name, t, t, fwdbwd_faults=faults.get(name, 0.0)) for name, t in ms.items()}
    return bench.BenchReport([_ln_case("float32", 1.0, **timings)], 1, ENV)


def test_a_ratio_is_marked_only_where_its_reference_took_page_faults():
    report = _synthetic_report(torch_faults=3000, torch1_faults=0)
    targets = {t.name: t for t in bench.evaluate_targets(report)}
    assert targets["fused LayerNorm fwd+bwd float32 / torch"].reference_faults == 3000
    assert targets["NumPy tuned LayerNorm fwd+bwd float32 / torch 1 thread"].reference_faults == 0
    text = rendered(bench_command.targets_table(report), 200)
    assert "0.50x*" in text and "4.00x*" not in text and "4.00x" in text
    assert "PyTorch took page faults" in text
    assert "Performance targets" in text and "RMSNorm" not in text  # only the targets this run measured
    # no mark where the reference took next to no page faults
    text = rendered(bench_command.targets_table(_synthetic_report(torch_faults=3, torch1_faults=0)), 200)
    assert "*" not in text and "page faults" not in text


def _timing(name, seconds, faults):
    """A Timing whose fwd+bwd calls took ``seconds`` with ``faults`` page faults each."""
    return bench.vectorized._timing(name, list(zip(seconds, faults)), list(zip(seconds, faults)))


def _ln_case(dtype, copy_ms, **timings):
    return bench.CaseResult(bench.BenchCase("layernorm", (32, 128, 768), dtype), copy_ms, timings)


ENV = {"numpy": "x", "cpus": 2, "backend": "fused"}


def test_the_float64_target_compares_only_repeats_in_which_neither_side_took_page_faults():
    fused = _timing("fused", [1e-3, 1e-3, 5e-3, 1e-3], [0, 0, 0, 300])
    torch = _timing("torch", [2e-3, 9e-3, 2e-3, 2e-3], [0, 500, 0, 0])
    case = _ln_case("float64", 1.0, fused=fused, torch=torch)
    assert case.fault_free_ms(["fused", "torch"], "fwdbwd") == pytest.approx({"fused": 3.0, "torch": 2.0})
    target = _targets(case, repeats=4)["fused LayerNorm fwd+bwd float64 / torch, calls without faults"]
    assert target.measured == pytest.approx(1.5) and target.limit == 0.95 and target.met is False
    # every repeat faulted on one side or the other: nothing to compare, not a made-up number
    torch_always = _timing("torch", [2e-3] * 4, [0, 0, 1, 0])
    fused_faulting = _timing("fused", [1e-3] * 4, [9, 9, 0, 9])
    case = _ln_case("float64", 1.0, fused=fused_faulting, torch=torch_always)
    assert _targets(case, repeats=4)["fused LayerNorm fwd+bwd float64 / torch, calls without faults"].measured is None


def test_a_system_without_fault_counts_compares_every_repeat():
    case = _ln_case("float64", 1.0, fused=_timing("fused", [1e-3, 3e-3], [None, None]),
                    torch=_timing("torch", [4e-3, 4e-3], [None, None]))  # fmt: skip
    assert case.fault_free_ms(["fused", "torch"], "fwdbwd") == pytest.approx({"fused": 2.0, "torch": 4.0})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_traffic_target_counts_write_allocate_against_the_copy(dtype):
    # copy: 3 transfers in 1 ms; fwd+bwd: 7 transfers in 2 ms (the faulting 9 ms call left out)
    fused = _timing("fused", [2e-3, 9e-3, 2e-3], [0, 800, 0])
    case = _ln_case(dtype, 1.0, fused=fused)
    assert case.traffic_share("fused") == pytest.approx((7 / 2.0) / (3 / 1.0))
    target = _targets(case, repeats=3)[f"fused LayerNorm fwd+bwd {dtype} traffic / copy's, write-allocate"]
    assert target.measured == pytest.approx(7 / 6) and target.kind == "at_least" and target.met is True
    slow = _ln_case(dtype, 1.0, fused=_timing("fused", [5e-3, 5e-3], [0, 0]))  # 7/5 over 3/1 = 0.47
    assert _targets(slow, repeats=2)[target.name].met is False


def test_without_pytorch_the_ratios_are_to_numpy_naive():
    timings = {
        "naive": _timing("naive", [4e-3], [0]),
        "numpy": _timing("numpy", [2e-3], [0]),
        "fused": _timing("fused", [1e-3], [0]),
    }
    env = {**ENV, "torch": None, "numba": "0.1"}
    report = bench.BenchReport([_ln_case("float32", 0.5, **timings)], 1, env)
    text = rendered(Group(*bench_command.bench_tables(report)), 120)
    assert bench_command._ratio_reference(report) == "naive"
    assert f"ratio = time / {bench_command._REFERENCE_TITLES['naive']}" in " ".join(text.split())
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 3}
    assert "0.50x" in rows["NumPy tuned"] and "0.25x" in rows["fused (numba)"] and "1.00x" in rows["NumPy naive"]
