"""The check, graph and bench commands in Chinese: --help, errors, check's report, graph's messages, the page.

Oracles: the parser's own list of options (every help text of these commands
must come out in Chinese), the zh_CN catalog read with Babel (every string the
modules of these commands mark has a translation), rich's cell widths (a Chinese
character is two cells: the report's columns must still line up), and the
English output, which the commands' own tests check (they run in English,
conftest). Numbers never depend on the language: the page's data and the
report's numbers are compared between the two languages.
"""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len

from microgradnorm import cli, i18n
from microgradnorm.present import check_table
from microgradnorm.registry import get_norm
from tests.helpers import check_report, embedded_data, rendered_lines
from tests.helpers import run_cli as run
from tests.zh import CJK, cells, en_and_zh, po_entries

ZH = i18n.SIMPLIFIED_CHINESE
# the modules whose marked strings these commands show (the page's words included)
MODULES = (
    "commands/check.py",
    "commands/graph.py",
    "commands/bench.py",
    "check.py",
    "present.py",
    "registry.py",
    "norms.py",
    "viz/dot.py",
    "viz/graph.py",
    "viz/paths.py",
    "viz/render.py",
    "viz/style.py",
    "page/data.py",
    "page/render.py",
    "page/text.py",
    "lessons/runner.py",
    "vectorized/backend.py",
    "torch/__init__.py",
    "torch/learner.py",
)
# words every English error of these commands uses, and no Chinese one may still contain
ENGLISH_ERROR_WORDS = re.compile(r"\b(expected|got|error|argument|cannot)\b")


@pytest.fixture(autouse=True)
def _no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")


def zh(*argv: str) -> list[str]:
    return ["--lang", ZH, *argv]


def test_every_string_these_commands_mark_has_a_chinese_translation():
    ours = po_entries(tuple(f"microgradnorm/{module}" for module in MODULES))  # as the catalog writes its locations
    assert len(ours) > 150  # the strings are there to be checked: the commands, the report and the page
    missing = [m.id for m in ours if not m.string or "fuzzy" in m.flags]
    assert missing == []


# ---- --help --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "graph", "bench"])
def test_every_option_of_the_command_is_explained_in_chinese_and_help_fits_80_columns(capsys, monkeypatch, command):
    with i18n.use_language(ZH):
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]
        helps = {a.option_strings[0] if a.option_strings else a.dest: a.help for a in sub._actions}
        assert CJK.search(sub.description), sub.description
    del helps["-h"]  # argparse's own words, translated while the CLI runs (printed below)
    english = [name for name, text in helps.items() if text and not CJK.search(str(text))]
    assert english == []
    assert len(helps) >= 5
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, *zh(command, "--help"))
    assert code == 0
    assert out.startswith("用法：") and "选项：" in out
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "--dim" in out or "--engine" in out  # option names stay as they are


# ---- errors ---------------------------------------------------------------------------------------------------

ERRORS = [
    (["check", "layernorm", "--dim", "600"], ["参数 --dim", "512", "600"]),
    (["check", "layernorm", "--shape", "30x30"], ["参数 --shape", "900", "30x30"]),
    (["check", "instancenorm"], ["norm", "layernorm, batchnorm, rmsnorm, groupnorm", "'instancenorm'"]),
    (["check", "layernorm", "--dim", "1", "--eps", "0"], ["layer_norm", "输入的标准差为 0", "eps > 0"]),
    (["check", "batchnorm", "--shape", "1x3", "--eps", "0"], ["batch_norm", "第 0 列", "eps > 0"]),
    (["graph", "layernorm", "--html", "-o", "{tmp}/ln.svg"], ["参数 --html", ".html", "ln.svg"]),
    (["graph", "layernorm", "--descendants", "-o", "{tmp}/ln.svg"], ["参数 --descendants", "--highlight"]),
    (["graph", "layernorm", "--index", "1", "-o", "{tmp}/ln.svg"], ["参数 --index", "--paths"]),
    (["graph", "layernorm", "--paths", "--index", "9", "-o", "{tmp}/ln.svg"], ["参数 --index", "0 到 2", "9"]),
    (["graph", "layernorm", "--highlight", "nope", "-o", "{tmp}/ln.svg"], ["参数 --highlight", "xhat[0]", "'nope'"]),
    (["graph", "layernorm", "-o", "{tmp}/ln.txt"], ["参数 -o/--output", ".svg", "'.txt'"]),
    (["graph", "layernorm", "-o", "{tmp}/missing/ln.svg"], ["参数 -o/--output", "无法写入", "不存在"]),
    (["graph", "layernorm", "-o", " "], ["参数 -o/--output", "空路径"]),
    (["graph", "layernorm", "--html", "--dim", "600", "-o", "{tmp}/ln.html"], ["参数 --dim", "512", "600"]),
    (["graph", "layernorm", "--dim", "20000", "-o", "{tmp}/ln.svg"], ["参数 --dim", "16384", "20000"]),
    (["bench", "--dims", "1"], ["参数 --dims", "768,2048", "'1'"]),
    (["bench", "--no-micrograd"], ["参数 --no-micrograd", "--engine"]),
    (["bench", "--engine", "--norm", "rmsnorm"], ["参数 --norm", "--engine", "LayerNorm"]),
]


@pytest.mark.parametrize(("argv", "words"), ERRORS, ids=[" ".join(a[:3]) for a, _ in ERRORS])
def test_a_bad_argument_gives_one_chinese_line_that_names_it(capsys, tmp_path, argv, words):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run(capsys, *zh(*argv))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"microgradnorm {argv[0]}：错误：")
    assert [word for word in words if word not in line] == [], line
    assert ENGLISH_ERROR_WORDS.search(line) is None, line
    assert not list(tmp_path.glob("ln.*"))  # nothing was written


# ---- check's report -------------------------------------------------------------------------------------------


def assert_columns_line_up(lines: list[str], names: list[str], rows: int) -> None:
    """Each right-aligned column of the table ends in the same cell in the header and in every row."""
    header_at = next(i for i, line in enumerate(lines) if names[0] in line and names[-1] in line)
    header = lines[header_at]
    assert set(lines[header_at + 1].strip()) == {"─"}
    edges = [cell_len(header[: header.index(name)] + name) for name in names]  # the cell just after each name
    body = lines[header_at + 2 : header_at + 2 + rows]
    for line in body:
        row = cells(line)
        for edge in edges:
            assert row[edge - 1] not in ("", " ") and (edge == len(row) or row[edge] == " "), (line, edge)


with i18n.use_language(ZH):
    NUMBER_HEADERS = [i18n.pgettext("check table header", h) for h in ("autograd", "closed form", "finite diff")]
    ERROR_HEADERS = [i18n.pgettext("check table header", h) for h in ("err cf", "err fd")]


@pytest.mark.parametrize("width", [60, 80, 100])
def test_check_report_in_chinese_fits_and_its_columns_line_up(width):
    r = check_report()
    with i18n.use_language(ZH):
        lines = rendered_lines(check_table(r), width)
    text = "\n".join(lines)
    assert max(cell_len(line) for line in lines) <= width
    assert lines[0].startswith("x [4] 的 LayerNorm，eps = 1e-05，")
    wide = width >= 80  # 60 columns: the three gradients and one summary line (as in English)
    names = NUMBER_HEADERS + (ERROR_HEADERS if wide else [])
    assert all(name in text for name in names)
    assert_columns_line_up(lines, names, rows=len(r.nodes))
    verdict = "".join(text.split())
    assert f"全部一致。共{len(r.nodes)}个节点" in verdict
    if wide:
        assert "误差：自动微分相对闭式公式" in verdict and "1e-10" in verdict
    else:
        assert "每行：自动微分与闭式公式相差最大的那个元素。" in verdict and "最大相对误差" in verdict
    assert not re.search(r"\b(agree|nodes|relative|absolute|entry)\b", text), text
    assert not any(line.startswith(("，", "。", "：", "；", "）")) for line in lines)


@pytest.mark.parametrize("width", [60, 100])
def test_check_full_report_in_chinese_lines_up_entry_by_entry(width):
    r = check_report("batchnorm", (3, 2))
    with i18n.use_language(ZH):
        lines = rendered_lines(check_table(r, full=True), width)
    assert max(cell_len(line) for line in lines) <= width
    rows = sum(len(n.autograd) for n in r.nodes)
    names = NUMBER_HEADERS + (ERROR_HEADERS if width >= 80 else [])
    assert_columns_line_up(lines, names, rows=rows)
    assert sum(line.rstrip().endswith("✓") for line in lines) == rows


def test_the_chinese_report_shows_the_same_numbers_as_the_english_one():
    r = check_report("rmsnorm", (2, 3))
    english, chinese = en_and_zh(lambda: rendered_lines(check_table(r), 100))
    numbers = re.compile(r"-?\d+\.\d+(?:e[+-]\d+)?|-?\d+e[+-]\d+")
    assert numbers.findall("\n".join(english)) == numbers.findall("\n".join(chinese))


def test_check_from_the_command_line_at_60_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = run(capsys, *zh("check", "batchnorm"))
    assert code == 0
    assert max(cell_len(line) for line in out.splitlines()) <= 60
    assert "全部一致。" in out and NUMBER_HEADERS[0] in out


# ---- graph's messages and the page ------------------------------------------------------------------------------


def test_graph_says_what_it_wrote_in_chinese(needs_dot, capsys, tmp_path):
    out_file = tmp_path / "ln.svg"
    code, out, err = run(capsys, *zh("graph", "layernorm", "--grad", "-o", str(out_file)))
    assert code == 0 and err == ""
    assert out.strip().startswith(f"已写出 {out_file}（完整视图，完整计算图有 ") and out.strip().endswith("个节点）")
    svg = out_file.read_text(encoding="utf-8")  # a browser draws an SVG's letters, with a font it has: Chinese
    assert "x [3] 的 LayerNorm" in svg and "值 " in svg and "data " not in svg


def test_graph_says_in_chinese_why_a_large_graph_is_collapsed(needs_dot, capsys, tmp_path):
    code, out, _ = run(capsys, *zh("graph", "layernorm", "--dim", "40", "-o", str(tmp_path / "ln.dot")))
    assert code == 0
    flat = "".join(out.split())
    assert "多得读不过来：改画按阶段折叠的视图（加--full仍会画出每个节点）。" in flat
    assert "折叠视图" in flat


NUMBER_KEYS = ("value", "valueText", "grad", "gradText", "inputs", "forward", "partials", "m", "check", "name")


def test_the_chinese_page_has_chinese_words_and_the_same_numbers(needs_dot, capsys, tmp_path):
    en, cn = tmp_path / "en.html", tmp_path / "zh.html"
    assert run(capsys, "graph", "layernorm", "--dim", "4", "--grad", "--html", "-o", str(en))[0] == 0
    code, out, _ = run(capsys, *zh("graph", "layernorm", "--dim", "4", "--grad", "--html", "-o", str(cn)))
    assert code == 0 and "可逐步播放的网页" in out
    page_en, page_zh = en.read_text(encoding="utf-8"), cn.read_text(encoding="utf-8")
    assert '<html lang="en"' in page_en and '<html lang="zh-CN"' in page_zh
    assert "$ui_" not in page_zh and "$ui_" not in page_en
    assert '<h2 id="step-heading">步骤</h2>' in page_zh and ">▶ 播放</button>" in page_zh
    assert '<h2 id="step-heading">Step</h2>' in page_en and ">▶ Play</button>" in page_en
    data_en, data_zh = embedded_data(page_en), embedded_data(page_zh)
    for a, b in zip(data_en["nodes"], data_zh["nodes"], strict=True):
        assert {k: a[k] for k in NUMBER_KEYS} == {k: b[k] for k in NUMBER_KEYS}
    assert [c["total"] for c in data_en["backward"]] == [c["total"] for c in data_zh["backward"]]
    assert [c["why"] for c in data_en["backward"]] == [c["why"] for c in data_zh["backward"]]  # formulas
    assert all("累计" in c["text"] for c in data_zh["backward"])
    assert all(CJK.search(text) for text in data_zh["ui"].values() if re.search("[A-Za-z]{3}", text))
    assert CJK.search(data_zh["title"]) and CJK.search(data_zh["check"]["text"])
    paths = data_zh["paths"]["byNode"][str(data_zh["paths"]["inputs"][0])]
    assert [p["title"] for p in paths["paths"]] == ["直接路径", "经过均值", "经过方差"]


def test_to_html_takes_the_language_as_an_argument(needs_dot, tmp_path):
    from microgradnorm.output import to_html

    graph = get_norm("rmsnorm").build_graph([1.0, -2.0, 0.5], [1.0, 1.0, 1.0], None, 1e-5)
    page = to_html(graph, tmp_path / "rms.html", lang=ZH).read_text(encoding="utf-8")
    assert '<html lang="zh-CN"' in page
    data = embedded_data(page)
    assert "还没有梯度" in data["view"]["note"] and data["title"].startswith("x (3) 的 RMSNorm")
    assert i18n.current_language() == i18n.ENGLISH  # the argument changed nothing outside the page
    english = to_html(graph, tmp_path / "rms-en.html").read_text(encoding="utf-8")
    assert '<html lang="en"' in english and "No gradients yet" in english


# ---- one-line errors of the vectorized path and the PyTorch bridge that reach a learner -----------------------


def test_a_bad_backend_setting_is_named_in_chinese(monkeypatch):
    from microgradnorm.vectorized import backend

    monkeypatch.setattr(backend, "_setting", None)
    monkeypatch.setenv(backend.ENV_VAR, "gpu")
    with i18n.use_language(ZH), pytest.raises(ValueError) as info:
        backend.get_backend()
    assert str(info.value) == f"环境变量 {backend.ENV_VAR}：应为 auto, numpy, fused, reference 之一，实际为 'gpu'"


def test_the_learners_torch_function_complains_in_chinese():
    pytest.importorskip("torch", reason="PyTorch is optional: the bridge's errors need it")
    from microgradnorm.torch import layer_norm_function

    with i18n.use_language(ZH), pytest.raises(TypeError) as info:
        layer_norm_function(42, lambda dy, cache: None)
    assert str(info.value) == "forward：应为函数，实际为 int"
