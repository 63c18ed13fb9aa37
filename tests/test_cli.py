"""The command line: the check command, --help and --version, and one-line errors for bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from microgradnorm import cli, formulas


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse exits for --help, --version and usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm", "rmsnorm", "ln", "BN", "rms"])
def test_check_prints_the_per_node_table_and_exits_zero(capsys, norm):
    code, out, _ = run(capsys, "check", norm)
    assert code == 0
    assert "All agree" in out
    for node in ("x[", "xhat[", "y[", "gamma["):
        assert node in out


def test_check_accepts_every_option(capsys):
    code, out, _ = run(
        capsys,
        "check",
        "batchnorm",
        "--shape",
        "2x3x2x2",
        "--eps",
        "0",
        "--seed",
        "5",
        "--variance",
        "naive",
        "--fd-entries",
        "2",
        "--full",
    )
    assert code == 0 and "mean[2]" in out and "x[1,2,1,1]" in out


def test_check_exits_one_when_a_formula_disagrees(capsys, monkeypatch):
    monkeypatch.setattr(formulas, "dx_simplified", lambda dxhat, xhat, rstd, axes: rstd * dxhat)
    code, out, _ = run(capsys, "check", "layernorm", "--dim", "5")
    assert code == 1
    assert "Disagreement" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["check", "instancenorm"], ["norm", "layernorm, batchnorm, rmsnorm, groupnorm", "instancenorm"]),
        (["check", "layernorm", "--dim", "0"], ["--dim", "positive integer", "0"]),
        (["check", "layernorm", "--dim", "abc"], ["--dim", "positive integer", "abc"]),
        (["check", "layernorm", "--eps", "-1"], ["--eps", ">= 0", "-1"]),
        (["check", "layernorm", "--eps", "nan"], ["--eps", "nan"]),
        (["check", "layernorm", "--seed", "x"], ["--seed", "x"]),
        (["check", "layernorm", "--shape", "2x3x4"], ["--shape", "1-D or 2-D", "2x3x4"]),
        (["check", "batchnorm", "--shape", "2,0"], ["--shape", "positive"]),
        (["check", "layernorm", "--shape", "4x"], ["--shape", "expected a shape like 2x3", "'4x'"]),
        (["check", "layernorm", "--dim", "1", "--eps", "0"], ["std", "eps > 0"]),
        (["check", "layernorm", "--variance", "welford"], ["--variance", "welford"]),
        (["check", "layernorm", "--dim", "10000"], ["--dim", "at most 512 entries", "10000"]),
        (["check", "layernorm", "--dim", "3", "--batch", "200"], ["--dim/--batch", "at most 512", "600 (200x3)"]),
        (["check", "batchnorm", "--dim", "200"], ["--dim", "at most 512", "800 (4x200)"]),
        (["check", "batchnorm", "--shape", "2x64x2x4"], ["--shape", "at most 512", "1024 (2x64x2x4)"]),
        (["check", "layernorm", "--shape", "2x3", "--dim", "5"], ["--dim", "not allowed with argument --shape", "5"]),
        (["check", "batchnorm", "--shape", "2x3", "--batch", "4"], ["--batch", "not allowed with argument --shape"]),
        (["check", "rmsnorm", "--variance", "naive"], ["--variance", "rmsnorm has no variance", "naive"]),
        (["check"], ["NORM"]),
        (["frobnicate"], ["frobnicate"]),
    ],
)
def test_bad_arguments_give_one_line_and_exit_two(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("microgradnorm ")
    code, out, _ = run(capsys)
    assert code == 0 and "check" in out


def test_every_command_has_help(capsys):
    for name in cli.COMMANDS:
        code, out, _ = run(capsys, name, "--help")
        assert code == 0 and "usage: microgradnorm " + name in out


def test_the_installed_command_and_python_dash_m_work():
    env = {**os.environ, "COLUMNS": "100"}
    for argv in (["microgradnorm"], [sys.executable, "-m", "microgradnorm"]):
        done = subprocess.run([*argv, "check", "rmsnorm", "--dim", "3"], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert "All agree" in done.stdout
        bad = subprocess.run([*argv, "check", "rmsnorm", "--eps", "-2"], capture_output=True, text=True, env=env)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_importing_the_package_and_help_load_neither_numpy_nor_rich():
    code = (
        "import sys, microgradnorm, microgradnorm.cli as c; c.build_parser();"
        "print(sorted(m for m in ('numpy', 'rich') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_check_table_keeps_every_number_whole_at_60_columns():
    from rich.console import Console

    from microgradnorm.check import check_norm, random_problem
    from microgradnorm.present import check_table
    from microgradnorm.registry import get_norm

    spec = get_norm("batchnorm")
    x, gamma, beta, dy = random_problem(spec, (2, 3, 2, 2), seed=1)
    report = check_norm(spec, x, gamma, beta, 1e-5, dy)
    for width in (60, 100):
        console = Console(width=width, record=True, color_system=None)
        console.print(check_table(report))
        text = console.export_text()
        assert "…" not in text
        assert max(len(line) for line in text.splitlines()) <= width
        assert f"{report.node('xhat').autograd[report.node('xhat').worst]:.6g}" in text


def test_check_runs_at_its_size_limit(capsys):
    from microgradnorm.commands.check import SIZE_LIMIT

    code, out, _ = run(capsys, "check", "rmsnorm", "--dim", str(SIZE_LIMIT), "--fd-entries", "2")
    assert code == 0 and "All agree" in out


def test_check_passes_variance_naive_through(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run(capsys, "check", "layernorm", "--variance", "naive")
    assert code == 0 and "variance naive" in out


@pytest.mark.parametrize("columns", ["120", "60"])
def test_a_zero_gradient_shows_its_absolute_error_not_a_relative_one_that_contradicts_the_verdict(
    capsys, monkeypatch, columns
):
    # d = 2 with eps = 0: dL/dx is 0 up to rounding, and its relative error (1.0) would contradict "All agree"
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run(capsys, "check", "layernorm", "--dim", "2", "--eps", "0")
    assert code == 0 and "All agree" in out
    flat = " ".join(out.split())
    assert "1.0e+00" not in flat and "inf" not in flat
    if columns == "120":
        x_row = next(line for line in out.splitlines() if line.startswith("x[0]"))
        assert x_row.count(" abs") == 2 and "abs: the absolute error instead" in flat
        assert "within 1e-10 relative + 1e-12 absolute" in flat
    else:
        assert "absolute (the gradient is about 0)" in flat or "absolute where the gradient is about 0" in flat
