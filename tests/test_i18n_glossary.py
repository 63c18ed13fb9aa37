"""The glossary maps English terms to Chinese one to one, and translations use its terms."""

from __future__ import annotations

from pathlib import Path

import pytest

from microgradnorm.i18n import SIMPLIFIED_CHINESE
from microgradnorm.i18n_tools.glossary import glossary_problems, lesson_term_problems, load_glossary, term_problems
from microgradnorm.lessons.format import parse_lesson
from microgradnorm.lessons.translation import read_translation, translation_problems
from tests.helpers import SAMPLE_LESSON, SAMPLE_LESSONS, edit, sample_lessons

FIXTURES, NAME = SAMPLE_LESSONS, SAMPLE_LESSON
HEADER = "# English\tChinese\tavoid\tchecked\tnote\n"


def test_the_glossary_maps_one_to_one_and_covers_the_field():
    assert glossary_problems() == []
    terms = load_glossary()
    assert len(terms) >= 40
    chinese = {t.chinese for t in terms}
    assert {"层归一化", "批归一化", "反向传播", "雅可比矩阵", "投影", "计算图", "梯度", "均值", "方差"} <= chinese
    by_english = {variant: t.chinese for t in terms for variant in t.english}
    assert by_english["layer normalization"] == "层归一化" and by_english["backpropagation"] == "反向传播"


def write(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "glossary.tsv"
    path.write_text(HEADER + "".join(row + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (["gradient\t梯度\t\tyes\t", "slope|gradient\t斜率\t\tyes\t"], "glossary.tsv:3: 'gradient' is also on line 2"),
        (["gradient\t梯度\t\tyes\t", "grad\t梯度\t\tyes\t"], "glossary.tsv:3: 梯度 is also the term of line 2"),
        (["normalization\t归一化\t规范化\tyes\t", "regularization\t正则化\t归一\tyes\t"], "'归一' is to be avoided"),
        (["gradient\t梯度\tyes\t"], "glossary.tsv:2: expected 5 tab-separated columns"),
        (["gradient\t梯度\t\tmaybe\t"], "glossary.tsv:2: expected 5 tab-separated columns"),
    ],
)
def test_a_glossary_that_is_not_one_to_one_is_reported(tmp_path, rows, expected):
    found = glossary_problems(write(tmp_path, rows))
    assert len(found) == 1 and expected in found[0], found


def test_a_term_matches_its_variants_plurals_and_hyphens_but_not_inside_words(tmp_path):
    (term,) = load_glossary(write(tmp_path, ["layer normalization|layer norm\t层归一化\t\tyes\t"]))
    pattern = term.pattern()
    for text in ("Layer normalization", "layer-norm", "two layer norms", "layer\nnormalization"):
        assert pattern.search(text), text
    for text in ("multilayer normalization", "layer normalizations-based"):
        assert not pattern.search(text), text


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "计算图里的\n一个节点",
            "计算图里的\n一个结点",
            [
                "sample: step 1: uses 结点; the glossary's term is 节点",
                "sample: step 1: the English says 'node'; the translation lacks 节点",
            ],
        ),
        (
            "以及有限差分",
            "以及数值差分",
            ["sample: step 2: the English says 'finite difference'; the translation lacks 有限差分"],
        ),
    ],
)
def test_a_translation_that_strays_from_the_glossary_is_reported(tmp_path, old, new, expected):
    folder = tmp_path / "lessons"
    english_file, path = sample_lessons(folder)
    edit(path, old, new)
    english = parse_lesson(english_file, check_demos=False)
    assert term_problems(english, read_translation(path).lesson, load_glossary(), "sample") == expected
    assert lesson_term_problems(SIMPLIFIED_CHINESE, folder) == [line.replace("sample", str(path)) for line in expected]
    assert translation_problems(SIMPLIFIED_CHINESE, folder) == []  # the structure is fine: terms are the tools'


def test_the_sample_translation_uses_the_glossarys_terms_and_english_terms_inside_code_are_not_prose():
    english = parse_lesson(FIXTURES / NAME, check_demos=False)
    translated = read_translation(FIXTURES / SIMPLIFIED_CHINESE / NAME).lesson
    assert term_problems(english, translated, load_glossary(), "sample") == []
    english.steps[0].blocks[0].text = "Call `finite_difference(gradient)` here.\n\n```python\nloss = variance\n```"
    translated.steps[0].blocks[0].text = "在这里调用 `finite_difference(gradient)`。\n\n```python\nloss = variance\n```"
    assert term_problems(english, translated, load_glossary(), "sample") == []
