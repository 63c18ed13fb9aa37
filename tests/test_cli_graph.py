"""``microgradnorm graph``: formats, views, the size switch, and one-line errors (including no Graphviz)."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from microgradnorm import cli, i18n, viz
from microgradnorm.commands.graph import SIZE_LIMIT
from tests.helpers import run_cli as run


@pytest.mark.parametrize("norm", ["layernorm", "batchnorm", "rmsnorm"])
def test_graph_writes_an_svg(capsys, tmp_path, needs_dot, norm):
    out = tmp_path / f"{norm}.svg"
    code, stdout, err = run(capsys, "graph", norm, "--grad", "--paths", "-o", str(out))
    assert (code, err) == (0, "")
    assert f"wrote {out}" in stdout
    root = ET.parse(out).getroot()
    text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "gradient paths into x[0" in text and "grad" in text


def test_graph_options_reach_the_drawing_and_dot_output_needs_no_graphviz(capsys, tmp_path, empty_path):
    out = tmp_path / "g.dot"
    argv = ["graph", "ln", "--batch", "2", "--dim", "3", "--paths", "--index", "4", "--highlight", "rstd[1]"]
    code, _, _ = run(capsys, *argv, "--descendants", "--seed", "3", "--edge-labels", "-o", str(out))
    assert code == 0
    dot = out.read_text(encoding="utf-8")
    assert dot.startswith(viz.DOT_HEADER) and dot.count("x[") >= 6 and "cluster_divide" in dot
    assert "gradient paths into x[1,1]" in dot  # flat index 4 of a 2x3 input
    assert viz.FADED_TEXT in dot and viz.HIGHLIGHT in dot
    code, _, _ = run(capsys, "graph", "layernorm", "--collapse", "--rankdir", "TB", "-o", str(out))
    dot = out.read_text(encoding="utf-8")
    assert code == 0 and "s_center" in dot and "rankdir=TB" in dot


@pytest.mark.parametrize(("suffix", "lang"), [(".svg", "en"), (".html", "en"), (".svg", "zh-CN")])
def test_graph_without_dot_writes_the_dot_source_and_says_how_to_install(capsys, tmp_path, empty_path, suffix, lang):
    out = tmp_path / f"ln{suffix}"
    code, _, err = run(capsys, "--lang", lang, "graph", "layernorm", "--grad", "-o", str(out))
    assert code == 1
    assert not out.exists()
    assert (tmp_path / "ln.dot").read_text(encoding="utf-8").startswith(viz.DOT_HEADER)
    lines = err.strip().splitlines()
    assert len(lines) == 1
    with i18n.use_language(lang):  # the install hint in the language asked for, its commands as they are
        assert str(viz.INSTALL_HINT) in lines[0] and ("install Graphviz" in lines[0]) == (lang == "en")
    hints = ("sudo apt-get install graphviz", "brew install graphviz", "conda install -c conda-forge graphviz")
    assert all(hint in lines[0] for hint in hints) and str(tmp_path / "ln.dot") in lines[0]


def test_graph_without_dot_keeps_a_dot_file_it_did_not_write(capsys, tmp_path, empty_path):
    (tmp_path / "ln.dot").write_text("my hand-edited graph")
    code, _, err = run(capsys, "graph", "layernorm", "-o", str(tmp_path / "ln.png"))
    assert code == 1
    assert (tmp_path / "ln.dot").read_text() == "my hand-edited graph"
    assert (tmp_path / "ln.1.dot").read_text(encoding="utf-8").startswith(viz.DOT_HEADER)
    assert "ln.1.dot" in err


def test_graph_without_dot_in_a_fresh_process_prints_no_traceback(tmp_path, empty_path):
    out = tmp_path / "ln.pdf"
    argv = [sys.executable, "-m", "microgradnorm", "graph", "rmsnorm", "-o", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True)  # the PATH without dot, no MICROGRADNORM_DEBUG
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "install Graphviz" in proc.stderr
    assert (tmp_path / "ln.dot").exists() and not out.exists()


@pytest.mark.parametrize(
    "argv,words",
    [
        (["-o", "{tmp}/g.jpg"], ["expected a file name ending in .svg, .png, .pdf, .dot"]),
        (["-o", "{tmp}/missing/g.svg"], ["argument -o/--output: cannot write", "does not exist"]),
        (["-o", "{tmp}"], ["is a directory"]),
        (["--highlight", "nope", "-o", "{tmp}/g.dot"], ["argument --highlight"]),
        (["--descendants", "-o", "{tmp}/g.dot"], ["argument --descendants"]),
        (["--paths", "--index", "3", "-o", "{tmp}/g.dot"], ["argument --index"]),
        (["--index", "-1", "-o", "{tmp}/g.dot"], ["argument --index"]),
        (["--collapse", "--full", "-o", "{tmp}/g.dot"], ["not allowed with"]),
        (
            ["-o", ""],
            ["argument -o/--output: expected a file name ending in .svg, .png, .pdf, .dot or .html, got an empty path"],
        ),
        (
            ["--index", "2", "-o", "{tmp}/g.dot"],
            ["argument --index: needs --paths (it picks the x_i the paths start at), got no --paths"],
        ),
        (["--shape", "2x3", "--dim", "2", "-o", "{tmp}/g.dot"], ["argument --dim: not allowed with argument --shape"]),
        (["--html", "-o", "{tmp}/g.svg"], ["argument --html: expected -o to name a file ending in .html"]),
        (["--dim", "600", "-o", "{tmp}/g.html"], ["at most 512 entries, got 600"]),  # the page's limit
        # inputs too large to build node by node
        (["--dim", "20000", "-o", "{tmp}/g.dot"], ["argument --dim: ", f"at most {SIZE_LIMIT} entries, got 20000"]),
        (
            ["--batch", "3", "--dim", "6000", "-o", "{tmp}/g.dot"],
            ["argument --dim/--batch: ", f"at most {SIZE_LIMIT} entries, got 18000"],
        ),
        (
            ["--shape", "150x150", "-o", "{tmp}/g.dot"],
            ["argument --shape: ", f"at most {SIZE_LIMIT} entries, got 22500"],
        ),
    ],
)
def test_graph_bad_arguments_are_one_line_errors(capsys, tmp_path, argv, words):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run(capsys, "graph", "layernorm", *argv)
    assert code == 2
    for word in words:
        assert word in err, (word, err)
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing written


def test_graph_rejects_a_variance_for_rmsnorm(capsys, tmp_path):
    code, _, err = run(capsys, "graph", "rmsnorm", "--variance", "naive", "-o", str(tmp_path / "g.dot"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "argument --variance: rmsnorm has no variance" in err
    assert not (tmp_path / "g.dot").exists()


def test_graph_into_a_path_under_a_regular_file_says_it_is_not_a_directory(capsys, tmp_path):
    (tmp_path / "a.svg").write_text("a file")
    for target in ("a.svg/x.svg", "a.svg/sub/x.svg"):
        code, _, err = run(capsys, "graph", "layernorm", "-o", str(tmp_path / target))
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert f"argument -o/--output: cannot write {str(tmp_path / target)!r}" in err
        assert f"{str(tmp_path / 'a.svg')!r} is not a directory" in err


def test_an_os_error_while_writing_names_the_output_and_never_the_temporary_file(capsys, tmp_path, monkeypatch):
    import tempfile

    def refuse(*args, dir=None, **kwargs):  # as /sys does: the directory looks writable, creating fails
        raise PermissionError(13, "Permission denied", f"{dir}/.g.dot.x1y2z3.tmp")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out = tmp_path / "g.dot"
    code, _, err = run(capsys, "graph", "layernorm", "-o", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert (
        err.strip() == f"microgradnorm graph: error: argument -o/--output: cannot write {str(out)!r}: Permission denied"
    )


def test_the_highlight_examples_in_help_are_valid_for_the_norms_they_name(capsys, tmp_path):
    code, help_text, _ = run(capsys, "graph", "--help")
    flat = " ".join(help_text.split())
    assert code == 0 and "mean[0]" not in flat
    assert "rstd or xhat[1] for one LayerNorm vector" in flat
    assert "rstd[0] or xhat[1,0] for BatchNorm or with --batch" in flat
    for norm, extra, node in (
        ("layernorm", [], "rstd"),
        ("layernorm", [], "xhat[1]"),
        ("batchnorm", [], "rstd[0]"),
        ("batchnorm", [], "xhat[1,0]"),
        ("layernorm", ["--batch", "2"], "rstd[0]"),
        ("layernorm", ["--batch", "2"], "xhat[1,0]"),
    ):
        code, _, err = run(capsys, "graph", norm, *extra, "--highlight", node, "-o", str(tmp_path / "h.dot"))
        assert code == 0, (norm, extra, node, err)


# ---- sizes: bounded, read-sized by default, warned about when slow -----------------------------


def test_graph_collapses_a_graph_too_large_to_read_says_so_and_full_overrides(capsys, tmp_path, monkeypatch):
    import microgradnorm as mgn

    out = tmp_path / "g.dot"
    monkeypatch.setenv("COLUMNS", "60")  # issue 27, item 15: printed unwrapped, the terminal cut "too many to rea|d"
    code, stdout, err = run(capsys, "graph", "layernorm", "--dim", "64", "-o", str(out))
    note = [line for line in stdout.splitlines() if not line.startswith("wrote ")]  # "wrote PATH" keeps a path whole
    assert len(note) >= 2 and all(len(line) <= 60 for line in note), note
    said = " ".join(stdout.split())  # the note wraps between words at the terminal's width
    assert code == 0 and err == "" and "too many to read" in said and "--full" in said
    wanted = r"The full graph has \d+ nodes, more than \d+, too many to read: drawing the collapsed stage view"
    assert re.search(wanted, said)
    switch = said.index(f"more than {viz.FULL_VIEW_LIMIT}")
    assert said.count("collapsed") == 2 and switch < said.index("(collapsed view")  # the switch, then "wrote ..."
    assert viz.graph_size(mgn.layer_norm([float(i % 7) for i in range(64)]).graph) > viz.FULL_VIEW_LIMIT
    dot = out.read_text(encoding="utf-8")
    assert "s_center" in dot and "v0 [" not in dot
    code, stdout, _ = run(capsys, "graph", "layernorm", "--dim", "16", "-o", str(out))  # 225 nodes: drawn in full
    assert code == 0 and "too many" not in " ".join(stdout.split()) and "v0 [" in out.read_text(encoding="utf-8")
    code, stdout, _ = run(capsys, "graph", "layernorm", "--dim", "64", "--full", "-o", str(out))
    assert code == 0 and "too many" not in " ".join(stdout.split()) and "v0 [" in out.read_text(encoding="utf-8")


def test_graph_warns_before_a_full_layout_that_takes_long(capsys, tmp_path, monkeypatch):
    said_before_drawing = []

    def fake_pipe(dot: str, fmt: str) -> bytes:  # what the console showed when Graphviz was called
        said_before_drawing.append(capsys.readouterr().out)
        return b"<svg/>"

    monkeypatch.setattr(viz, "pipe", fake_pipe)
    code, stdout, _ = run(capsys, "graph", "layernorm", "--dim", "200", "--full", "-o", str(tmp_path / "g.svg"))
    assert code == 0 and len(said_before_drawing) == 1
    assert "Drawing all" in said_before_drawing[0] and "Ctrl+C" in said_before_drawing[0]
    assert "wrote" in stdout
    code, stdout, _ = run(capsys, "graph", "layernorm", "--dim", "8", "--full", "-o", str(tmp_path / "g.svg"))
    assert code == 0 and "Drawing all" not in said_before_drawing[1] + stdout  # a small graph: no warning


def test_graph_refuses_a_full_layout_graphviz_would_take_ages_on(capsys, tmp_path, monkeypatch):
    def never(dot: str, fmt: str) -> bytes:
        raise AssertionError("Graphviz was asked to lay out the graph")

    monkeypatch.setattr(viz, "pipe", never)
    code, _, err = run(capsys, "graph", "layernorm", "--dim", "1200", "--full", "-o", str(tmp_path / "g.svg"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"argument --full: expected a full graph of at most {viz.LAYOUT_LIMIT} nodes" in err
    assert list(tmp_path.iterdir()) == []
    code, _, _ = run(capsys, "graph", "layernorm", "--dim", "1200", "--full", "-o", str(tmp_path / "g.dot"))
    assert code == 0  # DOT source needs no layout


def test_the_page_and_the_command_count_the_graph_alike(needs_dot, capsys, tmp_path):
    out = tmp_path / "ln.html"
    assert cli.main(["graph", "layernorm", "--dim", "24", "--grad", "--html", "-o", str(out)]) == 0
    said = re.search(r"(\d[\d,]*) nodes in the full graph", capsys.readouterr().out.replace("\n", " "))
    note = re.search(r"The full graph has (\d[\d,]*) nodes", out.read_text(encoding="utf-8"))
    assert said and note and said.group(1) == note.group(1)
