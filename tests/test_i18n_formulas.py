"""i18n.text.cjk_text keeps a formula whole: never broken at its own spaces, in either language."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from microgradnorm.i18n.text import cjk_text
from microgradnorm.lessons.demo_tools import number_table
from microgradnorm.verdicts import claims
from tests.helpers import rendered_lines

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
