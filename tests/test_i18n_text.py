"""Chinese in the terminal: prose wraps between characters, punctuation stays where Chinese puts it,
tables and headers align (double-width characters count two cells), a formula is never cut at its own
spaces, and English is untouched."""

from __future__ import annotations

import io
import itertools
import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich import box
from rich._wrap import divide_line as rich_divide_line
from rich.cells import cell_len
from rich.console import Console
from rich.markdown import Markdown
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from microgradnorm.i18n.text import SHAPE, CJKText, break_opportunities, cjk_markdown, cjk_text, divide_line
from microgradnorm.lessons.demo_tools import number_table
from microgradnorm.verdicts import claims
from tests.helpers import rendered_lines

# The rules as the Chinese punctuation standard (GB/T 15834) states them, written out here rather than
# taken from the module: these may not start a line, these may not end one.
CLOSING = set("，。、；：！？）》」』】”’…")
OPENING = set("（《「『【“‘")

PARAGRAPH = (
    "反向传播时，LayerNorm 之后的层会传回一个上游梯度 `dy`。它沿着三条路径回到输入 `x`：直接的一条，"
    "经过均值 `mean` 的一条，以及经过方差 `var` 的一条（分母里的 `rstd = 1/sqrt(var + eps)` 也依赖 `x`）。\n"
    "把三条路径的贡献相加，就得到自动微分累加在 `x.grad` 上的梯度；写成一个公式就是 "
    "`dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`，其中 `dxhat = gamma * dy`。"
    "所以 `dx` 的各分量之和恒为 0——把所有输入平移同一个量，输出不变，这就是“平移不变性”。"
)


def is_ideograph(char: str) -> bool:
    return unicodedata.category(char) == "Lo" and unicodedata.east_asian_width(char) == "W"


def layout_problems(lines: list[str], width: int) -> list[str]:
    """What a Chinese reader would object to in these wrapped lines of prose."""
    found = []
    for k, line in enumerate(lines):
        text = line.rstrip()
        if cell_len(line) > width:
            found.append(f"line {k + 1} is {cell_len(line)} cells wide")
        if text.lstrip()[:1] in CLOSING:
            found.append(f"line {k + 1} starts with {text.lstrip()[0]}")
        if text[-1:] in OPENING:
            found.append(f"line {k + 1} ends with {text[-1]}")
        following = lines[k + 1].lstrip() if k + 1 < len(lines) else ""
        if text and len(following) >= 2 and all(is_ideograph(c) for c in following[:2]):
            room = 2 if unicodedata.east_asian_width(text[-1]) == "W" else 3  # after Latin, a space may have been
            if width - cell_len(text) >= room:
                found.append(f"line {k + 1} leaves {width - cell_len(text)} cells empty before {following[0]}")
    return found


def plain(markdown: str) -> str:
    """The paragraph's characters as a reader sees them (no backticks), spaces aside."""
    return markdown.replace("`", "").replace(" ", "").replace("\n", "")


# ---- prose -------------------------------------------------------------------------------------------------


def test_a_chinese_paragraph_wraps_between_characters_and_keeps_its_punctuation_at_every_width_from_24_to_100():
    for width in range(24, 101):
        lines = rendered_lines(cjk_markdown(PARAGRAPH), width)
        assert layout_problems(lines, width) == [], width
        assert "".join(lines).replace(" ", "") == plain(PARAGRAPH), width  # nothing lost, repeated or added
        assert len(lines) >= 3


def test_the_checker_finds_what_rich_alone_gets_wrong():
    """The check above can fail: lines as rich lays them out when it only breaks at spaces."""
    bad = [
        "LayerNorm 之后的层会传回              ",  # 16 cells left empty before a clause
        "一个上游梯度 dy，它沿着三条路径回到输入",
        "，经过均值 mean 的一条（",  # closing punctuation first, opening punctuation last
        "分母",
    ]
    found = layout_problems(bad, 40)
    assert any("leaves" in p and "一" in p for p in found)
    assert "line 3 starts with ，" in found and "line 3 ends with （" in found


def test_a_line_break_in_the_source_between_two_chinese_characters_is_not_a_space():
    assert rendered_lines(cjk_markdown("第一行\n第二行"), 40)[0].rstrip() == "第一行第二行"
    assert rendered_lines(cjk_markdown("first line\nsecond"), 40)[0].rstrip() == "first line second"
    assert rendered_lines(cjk_markdown("中文\nEnglish"), 40)[0].rstrip() == "中文 English"
    assert rendered_lines(cjk_markdown("甲、\n`d = e`，\n乙"), 40)[0].rstrip() == "甲、d = e，乙"


def test_a_zero_width_space_is_a_break_opportunity():
    formula = "dxhat*xhat*rstd\u200bmean(dxhat*xhat)"
    assert break_opportunities(formula) == [formula.index("\u200b") + 1]
    assert [line.rstrip().replace("\u200b", "") for line in rendered_lines(cjk_text(formula), 20)] == [
        "dxhat*xhat*rstd",
        "mean(dxhat*xhat)",
    ]


@pytest.mark.parametrize("mark", ["——", "……"])
def test_a_dash_or_an_ellipsis_is_never_split_and_an_ellipsis_never_starts_a_line(mark):
    text = "这一段话" * 3 + mark + "然后继续" * 3
    for width in range(6, 40):
        lines = [line.strip() for line in rendered_lines(cjk_text(text), width)]
        assert "".join(lines) == text
        assert not any(a.endswith(mark[0]) and b.startswith(mark[0]) for a, b in itertools.pairwise(lines))
        assert mark == "——" or not any(line.startswith(mark[0]) for line in lines), (width, lines)


# ---- English is wrapped exactly as rich wraps it ---------------------------------------------------------------

ASCII_CHARS = [*"abcdefghij ,.;:!?()[]{}%'\"-=+*/0123456789", "  ", "\t"]
# English without a bracketed shape: there the breaks are rich's (a shape is the one exception, below)
ASCII_TEXT = st.lists(st.sampled_from(ASCII_CHARS), max_size=120).map("".join).filter(lambda t: not SHAPE.search(t))


@given(text=ASCII_TEXT, width=st.integers(1, 100))
def test_english_breaks_where_rich_breaks_it(text, width):
    line = text.replace("\t", " ")
    assert divide_line(line, width) == rich_divide_line(line, width)
    assert divide_line(line, width, fold=False) == rich_divide_line(line, width, fold=False)


def test_every_english_lesson_renders_as_with_riches_markdown():
    from microgradnorm.lessons.format import Prose, load_lessons

    lessons = load_lessons(check_demos=False)
    prose = [b.text for lesson in lessons for step in lesson.steps for b in step.blocks if isinstance(b, Prose)]
    assert len(prose) > len(lessons)
    for text in prose:
        for width in (60, 100):
            ours, riches = rendered_lines(cjk_markdown(text), width), rendered_lines(Markdown(text), width)
            if not SHAPE.search(text) and "`" not in text:
                assert ours == riches, text[:60]
                continue
            # with a shape or inline code (kept whole where it fits): the same words, and no line that ends
            # inside a shape ("... Add 1e9 to [4, 7, 13,")
            assert " ".join(" ".join(ours).split()) == " ".join(" ".join(riches).split()), text[:60]
            assert not [line for line in ours if re.search(r"\[[^\]]*,\s*$", line)], text[:60]


@pytest.mark.parametrize("width", range(20, 61))
def test_a_bracketed_shape_is_never_split_across_lines(width):
    """Issue 27, item 15: the glossary broke "[N,\nC, H, W]"; a shape is one piece, as a word is."""
    text = "C, H, W: channels, height and width of an image batch [N, C, H, W]. BatchNorm averages [B, T, D]."
    lines = [line.rstrip() for line in rendered_lines(cjk_text(text), width)]
    assert "[N, C, H, W]." in lines[next(k for k, line in enumerate(lines) if "[N" in line)]
    assert any("[B, T, D]" in line for line in lines)
    assert divide_line("a [N, C, H, W] b", 6, fold=False) == [2, 15]  # alone on its (too narrow) line


# ---- mixed text: properties -------------------------------------------------------------------------------------

MIXED_PIECES = [*"梯度均值方差反向传播层归一化，。、；：！？（）“”《》——……", "LayerNorm", "dx", "x", "0.5", " "]
MIXED = st.lists(st.sampled_from(MIXED_PIECES), max_size=80).map("".join)


@given(text=MIXED, width=st.integers(8, 100))
def test_mixed_text_fits_keeps_every_character_and_starts_no_line_with_closing_punctuation(text, width):
    console = Console(file=io.StringIO(), width=width)
    lines = [line.plain for line in CJKText(text).wrap(console, width)]
    assert all(cell_len(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    widest_piece = max((cell_len(text[a:b].rstrip()) for a, b in _pieces(text)), default=0)
    if widest_piece <= width:  # nothing had to be folded: every break is a permitted one
        assert not any(line.lstrip()[:1] in CLOSING for line in lines[1:] if line.strip())
        assert not any(line.rstrip()[-1:] in OPENING for line in lines[:-1])


def _pieces(text: str) -> list[tuple[int, int]]:
    starts = [0, *break_opportunities(text)]
    return list(zip(starts, [*starts[1:], len(text)]))


# ---- tables and headers ------------------------------------------------------------------------------------------


def column_borders(line: str) -> list[int]:
    """The cell columns at which the box's vertical lines stand."""
    return [cell_len(line[:i]) for i, char in enumerate(line) if char in "│├┤┼"]


@pytest.mark.parametrize("width", (60, 80, 100))
def test_a_table_with_chinese_cells_keeps_its_columns_aligned(width):
    table = Table(box=box.SQUARE, title="LayerNorm 的前向节点")
    for header in ("节点", "含义", "公式"):
        table.add_column(header)
    table.add_row("mean", "所有输入的均值", "`sum(x) / d`")
    table.add_row("var", cjk_text("方差：先减去均值，再求平方的平均（两遍算法，数值上更稳定）"), "sum(xshift**2) / d")
    table.add_row("rstd", "标准差的倒数", "1 / sqrt(var + eps)")
    lines = [line for line in rendered_lines(table, width) if "│" in line or "┼" in line]
    assert lines and {cell_len(line) for line in lines} == {cell_len(lines[0])} and cell_len(lines[0]) <= width
    assert len({tuple(column_borders(line)) for line in lines}) == 1, "\n".join(lines)
    wrapped = [line.split("│")[2].strip() for line in lines if line.count("│") == 4]
    assert not any(cell[:1] in CLOSING for cell in wrapped)


@pytest.mark.parametrize("width", (60, 80, 100))
def test_a_markdown_table_in_chinese_aligns(width):
    markdown = "| 节点 | 含义 |\n|---|---|\n| `mean` | 均值：所有输入的平均 |\n| `var` | 方差（两遍算法） |\n"
    lines = [line for line in rendered_lines(cjk_markdown(markdown), width) if line.strip()]
    assert len({cell_len(line) for line in lines}) == 1
    header, _rule, *rows = lines
    starts = {cell_len(line[: line.index(word)]) for line, word in zip(rows, ("均值", "方差"))}
    assert starts == {cell_len(header[: header.index("含义")])}


@pytest.mark.parametrize("width", (60, 80, 100))
def test_a_header_rule_with_a_chinese_title_fills_the_line_exactly(width):
    for title in ("03 · LayerNorm 的前向传播", "07 · 雅可比矩阵是一个投影"):
        (line,) = rendered_lines(Rule(Text(title)), width)
        assert cell_len(line) == width and title in line
    step = cjk_text(Text.assemble(("第 3 步，共 9 步 · ", "dim"), ("从损失到平方根：反向传播的前半段", "bold")))
    assert layout_problems(rendered_lines(step, 40), 40) == []


def test_a_long_chinese_cell_measures_by_its_pieces_not_as_one_word():
    console = Console(width=100)
    text = "方差：先减去均值，再求平方的平均"
    measured = cjk_text(text).__rich_measure__(console, console.options)
    assert measured.maximum == cell_len(text)
    assert measured.minimum == cell_len("差：")  # a character with the punctuation that must follow it


@pytest.mark.parametrize("width", range(12, 30))
def test_a_line_with_wide_characters_that_breaks_at_a_space_is_never_cut_with_an_ellipsis(width):
    """rich's rstrip_end counts characters, not cells: a wrapped line of Chinese ending in the space it
    broke at was one cell too wide and lost its last letter to an ellipsis (the glossary's table at 60)."""
    text = "sigma、σ、sqrt(var + eps) 与 x_hat、normalized 以及 gamma · dy"
    lines = rendered_lines(CJKText(text, overflow="ellipsis"), width)
    assert "…" not in "".join(lines)
    assert "".join(line.strip() for line in lines).replace(" ", "") == text.replace(" ", "")
    assert all(cell_len(line) <= width for line in lines)


def test_a_piece_wider_than_its_cell_without_a_trailing_space_keeps_its_text():
    """The line 'grad_input、' is 12 cells in an 11-cell column: it is cut, never emptied."""
    markdown = "| a | b |\n|---|---|\n| `dx` | `grad_input`、`∂L/∂x`、`x.grad`、`dw`、`db` |\n"
    lines = rendered_lines(cjk_markdown(markdown), 16)
    assert "grad_inpu" in "".join(lines) and all(cell_len(line) <= 16 for line in lines)


def test_sentences_are_joined_by_a_space_in_english_and_by_nothing_after_a_chinese_full_stop():
    from microgradnorm.i18n.text import sentences

    assert sentences(["One.", "Two."]) == "One. Two."
    assert sentences(["一。", "二。"]) == "一。二。"
    assert sentences(["一。", "Two."]) == "一。Two."
    assert sentences(["", "Two."]) == "Two."
    assert sentences(["One.", "二。", "Three."]) == "One. 二。Three."


@pytest.mark.parametrize("width", range(24, 61))
def test_inline_code_that_fits_is_never_broken_at_its_spaces(width):
    """Issue 22, item 9: `y = beta` split as "(so y =" / "beta)"; a command split at its spaces."""
    codes = ("y = beta", "microgradnorm check layernorm", "eps = 0", "(m − 1)/m")
    text = "With eps > 0 the output is constant (so `y = beta`), and `microgradnorm check layernorm` says so; "
    text += "只有在 `eps = 0` 时，斜率才按 `(m − 1)/m` 缩小。"
    lines = [line.rstrip() for line in rendered_lines(cjk_markdown(text), width)]
    for code in codes:  # code wider than the line (with a closing mark after it) breaks as prose does
        assert cell_len(code) + 2 >= width or any(code in line for line in lines), (code, lines)
    assert layout_problems(lines, width) == []


# ---- a formula stays whole: never broken at its own spaces, in either language (cjk_text) -----------------------

OPERATORS = "=−+·×÷/"
# a line that starts with an operator and a space, or ends with a space and an operator: a formula cut in two
CUT = re.compile(rf"^\s*[{OPERATORS}] |\S [{OPERATORS}]$")

WORDS = st.lists(st.sampled_from(["the", "variance", "of", "a", "row", "is", "kept", "here", "once"]), max_size=12)
CJK = st.lists(st.sampled_from(["方差", "每一行", "保存", "这里", "只有一次", "归一化"]), max_size=12)
FORMULAS = st.sampled_from(
    ["sqrt(var) + eps", "dx = rstd · (g − mean(g))", "var ÷ (N − 1)", "x − mean", "y = gamma · xhat + beta"]
)


@given(before=WORDS, after=WORDS, formula=FORMULAS, width=st.integers(30, 70))
def test_an_english_formula_is_never_cut(before, after, formula, width):
    text = " ".join([*before, formula, *after])
    lines = rendered_lines(cjk_text(text), width)
    assert not [line for line in lines if CUT.search(line)], lines
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())  # nothing lost or added


@given(before=CJK, after=CJK, formula=FORMULAS, width=st.integers(30, 70))
def test_a_formula_in_chinese_is_never_cut(before, after, formula, width):
    text = "".join(before) + "：" + formula + "，" + "".join(after) + "。"
    lines = rendered_lines(cjk_text(text), width)
    assert not [line for line in lines if CUT.search(line)], lines


def test_without_the_mark_the_same_sentence_is_cut():
    """The test above can fail: the plain text breaks inside the formula at this width."""
    text = "outside: the square root of the variance, sqrt(var) + eps, built by hand"
    plain = rendered_lines(text, 52)
    assert any(CUT.search(line) for line in plain), plain
    assert not any(CUT.search(line) for line in rendered_lines(cjk_text(text), 52))


def test_backticks_mark_a_formula_and_are_not_shown_and_an_unpaired_one_stays():
    assert rendered_lines(cjk_text("inside `sqrt(var + eps)` here"), 60) == ["inside sqrt(var + eps) here"]
    assert rendered_lines(cjk_text("a lone ` stays"), 60) == ["a lone ` stays"]


def test_a_claim_and_a_table_caption_keep_their_formulas_and_styles():
    text = "it normalizes with the batch's own variance, var ÷ N, as every training batch does"
    for width in range(30, 60):
        shown = rendered_lines(claims([(True, text)]), width) + rendered_lines(
            number_table(["a"], [["1"]], caption=text, title=text), width
        )
        assert not [line for line in shown if CUT.search(line)], (width, shown)
    caption = number_table(["a"], [["1"]], caption="x = 1").renderables[-1]
    assert str(caption.style) == "dim"


def test_ln_and_its_argument_stay_together():
    text = "Losses after 200 steps: post-LN 1.05, pre-LN 0.23 (a guess: ln 3 = 1.10), below half of ln 3"
    for width in range(20, 60):
        for line in rendered_lines(cjk_text(text), width):
            assert not line.rstrip().endswith(" ln") and not line.lstrip().startswith("3 ="), (width, line)
