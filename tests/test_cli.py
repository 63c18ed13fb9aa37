"""The command line: the check command, --help and --version, and one-line errors for bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from microgradnorm import cli, formulas, i18n
from microgradnorm.commands.check import SIZE_LIMIT as CHECK_LIMIT
from tests.helpers import check_report, rendered, said_in
from tests.helpers import run_cli as run


@pytest.mark.parametrize(
    "argv",
    # every name and alias; an option said in the heading; at the size limit
    [
        *"layernorm batchnorm rmsnorm ln BN rms".split(),
        "ln --variance naive",
        f"rms --dim {CHECK_LIMIT} --fd-entries 2",
    ],
)
def test_check_prints_the_per_node_table_and_exits_zero(capsys, argv):
    code, out, _ = run(capsys, "check", *argv.split())
    assert code == 0
    assert "All agree" in out
    for node in ("x[", "xhat[", "y[", "gamma["):
        assert node in out
    assert ("variance naive" in " ".join(out.split())) == ("--variance naive" in argv)  # the heading says it


def test_check_accepts_every_option(capsys):
    argv = "check batchnorm --shape 2x3x2x2 --eps 0 --seed 5 --variance naive --fd-entries 2 --full".split()
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "mean[2]" in out and "x[1,2,1,1]" in out


@pytest.mark.parametrize(
    ("lang", "said", "unsaid"), [("en", "Disagreement", "All agree"), ("zh-CN", "不一致：x。", "全部一致")]
)
def test_check_exits_one_when_a_formula_disagrees(capsys, monkeypatch, lang, said, unsaid):
    monkeypatch.setattr(formulas, "dx_simplified", lambda dxhat, xhat, rstd, axes: rstd * dxhat)
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run(capsys, "--lang", lang, "check", "layernorm", "--dim", "5")
    assert code == 1 and said in out and "✗" in out and unsaid not in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["check", "instancenorm"], ["norm", "layernorm, batchnorm, rmsnorm, groupnorm", "instancenorm"]),
        (["check", "layernorm", "--dim", "0"], ["--dim", "positive integer", "0"]),
        (["check", "layernorm", "--dim", "abc"], ["--dim", "positive integer", "abc"]),
        (["check", "layernorm", "--eps", "nan"], ["--eps", "nan"]),
        (["check", "layernorm", "--seed", "x"], ["--seed", "x"]),
        (["check", "layernorm", "--shape", "2x3x4"], ["--shape", "1-D or 2-D", "2x3x4"]),
        (["check", "batchnorm", "--shape", "2,0"], ["--shape", "positive"]),
        (["check", "layernorm", "--shape", "4x"], ["--shape", "expected a shape like 2x3", "'4x'"]),
        (
            ["check", "layernorm", "--dim", "1", "--eps", "0"],
            ["the std of the input is 0 (all its values are equal) and eps = 0", "eps > 0"],
        ),
        (["check", "layernorm", "--variance", "welford"], ["--variance", "welford"]),
        (["check", "layernorm", "--dim", "10000"], ["--dim", "at most 512 entries", "10000"]),
        (["check", "layernorm", "--dim", "3", "--batch", "200"], ["--dim/--batch", "at most 512", "600 (200x3)"]),
        (["check", "batchnorm", "--dim", "200"], ["--dim", "at most 512", "800 (4x200)"]),
        (["check", "batchnorm", "--shape", "2x64x2x4"], ["--shape", "at most 512", "1024 (2x64x2x4)"]),
        (["check", "layernorm", "--shape", "2x3", "--dim", "5"], ["--dim", "not allowed with argument --shape", "5"]),
        (["check", "batchnorm", "--shape", "2x3", "--batch", "4"], ["--batch", "not allowed with argument --shape"]),
        (["check", "rmsnorm", "--variance", "naive"], ["--variance", "rmsnorm has no variance", "naive"]),
        (["lesson", "3", "--seed", "-1e3"], ["argument --seed: expected an integer seed >= 0, got '-1e3'"]),
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
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(name in out for name in cli.COMMANDS)


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


def test_importing_the_package_and_help_load_neither_numpy_rich_the_drawing_code_nor_the_page():
    code = (
        "import sys, microgradnorm, microgradnorm.cli as c; c.build_parser(); print(sorted(m for m in"
        " ('numpy', 'rich', 'microgradnorm.viz', 'graphviz', 'microgradnorm.page') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_check_table_keeps_every_number_whole_at_60_columns():
    from microgradnorm.present import check_table

    report = check_report("batchnorm", (2, 3, 2, 2), seed=1)
    for width in (60, 100):
        text = rendered(check_table(report), width)
        assert "…" not in text
        assert max(len(line) for line in text.splitlines()) <= width
        assert f"{report.node('xhat').autograd[report.node('xhat').worst]:.6g}" in text


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
        note = i18n._(
            "abs: the absolute error instead, where the reference is about 0 and a relative error would divide by it."
        )
        assert x_row.count(" abs") == 2 and note in flat
        assert "within 1e-10 relative + 1e-12 absolute" in flat
    else:
        only, mixed = (
            "{error} absolute (the gradient is about 0)",
            "{error} relative ({absolute} absolute where the gradient is about 0)",
        )
        assert said_in(only, flat) or said_in(mixed, flat)


@pytest.mark.parametrize("action", ["check", "hint"])
def test_exercise_check_and_hint_still_work_in_a_read_only_state_folder(capsys, tmp_path, read_only_state, action):
    """Issue 27, item 2: graded and hinted, not recorded, and said so once; no refusal."""
    code, _, err = run(capsys, "exercise", "init", str(tmp_path / "ws"))
    assert code == 0 and err == ""
    argv = ["exercise", "check", "1", "--dir", str(tmp_path / "ws")] if action == "check" else ["exercise", "hint", "1"]
    code, out, err = run(capsys, *argv)
    flat = " ".join(out.split())
    assert err == "" and code == (1 if action == "check" else 0)
    assert flat.count("Progress is not saved: cannot write in the state directory") == 1
    assert ("NotImplementedError" in flat) if action == "check" else ("Hints for 01_local_derivatives" in flat)
    assert list(read_only_state.iterdir()) == []


def test_exercise_check_still_grades_when_the_state_folder_cannot_be_created(capsys, tmp_path, state_home):
    code, _, _ = run(capsys, "exercise", "init", str(tmp_path / "ws"))
    state_home.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(state_home)
    state_home.write_text("a file where the folder should be")
    code, out, err = run(capsys, "exercise", "check", "1", "--dir", str(tmp_path / "ws"))
    assert err == "" and code == 1
    assert "Progress is not saved: MICROGRADNORM_HOME: expected a directory" in " ".join(out.split())


@pytest.mark.parametrize("value", ["-1e-5", "-inf", "-.5", "-1"])
def test_a_negative_number_reaches_the_options_own_check(capsys, value):
    """Issue 27, item 9: argparse read -1e-5 as an option ("expected one argument"); now every negative
    number gets the option's own message."""
    code, out, err = run(capsys, "check", "layernorm", "--eps", value)
    assert code == 2 and out == ""
    assert err.startswith(f"microgradnorm check: error: argument --eps: expected a finite number >= 0, got {value}")
    assert len(err.splitlines()) == 1


def _python_m(*argv: str, **env: str) -> list[str]:
    return [sys.executable, "-m", "microgradnorm", *argv]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MICROGRADNORM_LANG", "LANGUAGE", "LC_ALL", "LANG")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parent.parent), **extra)
    return env


@pytest.mark.parametrize("argv", [("lesson", "3", "--auto"), ("lesson", "11", "--auto"), ("check", "layernorm")])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv):
    """Issue 27, item 10: `lesson 3 --auto | head -1` printed 'error: [Errno 32] Broken pipe' (exit 2)."""
    proc = subprocess.Popen(_python_m(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    proc.stdout.close()  # before the first line is written: every write meets a closed pipe
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1
    assert err == b""


@pytest.mark.parametrize(("lang", "words"), [("en", "the output encoding is ascii"), ("zh-CN", "输出编码是 ascii")])
def test_an_output_encoding_that_cannot_show_the_text_gets_one_line_of_advice(lang, words):
    """Issue 27, item 11: a codec error (escaped, in Chinese) became one readable line saying what to set."""
    proc = subprocess.run(
        _python_m("--lang", lang, "check", "layernorm"),
        capture_output=True,
        env=_env(LC_ALL="C", PYTHONIOENCODING="ascii"),
        timeout=120,
    )
    err = proc.stderr.decode("utf-8")  # written as UTF-8, whatever the declared encoding
    assert proc.returncode == 2 and proc.stdout == b""
    assert len(err.splitlines()) == 1 and words in err and "PYTHONIOENCODING=utf-8" in err
    assert "codec" not in err and "\\u" not in err


@pytest.mark.parametrize("name", ["x.png", "curves", "loss.svg.txt"])
def test_lab_svg_refuses_a_file_name_that_is_not_svg_before_training(capsys, tmp_path, monkeypatch, name):
    """Issue 27, item 12: `lab depth --svg x.png` wrote SVG into x.png with exit 0; graph refuses such names."""
    from microgradnorm.lab import experiments

    monkeypatch.setattr(experiments, "EXPERIMENTS", {})  # nothing may train: the check comes first
    code, out, err = run(capsys, "lab", "depth", "--svg", str(tmp_path / name))
    assert code == 2 and out == ""
    expected = f"argument --svg: expected a file name ending in .svg, got {str(tmp_path / name)!r}"
    assert err == f"microgradnorm lab: error: {expected}\n"
    assert not (tmp_path / name).exists()


def test_bench_help_says_what_quick_costs_not_a_few_seconds(capsys, monkeypatch):
    """Issue 27, item 22: --quick measured 14-40 s of wall time on 2 cores (about 20 s of CPU), not "a few
    seconds"; the help gives the measured CPU time (the measurement is in the report of issue 27)."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "bench", "--help")
    quick = next(line for line in out.splitlines() if line.strip().startswith("--quick "))  # under options
    assert code == 0 and "a few seconds" not in quick and "20 s of CPU time" in quick
