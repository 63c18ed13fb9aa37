"""Lessons 15-18 and the ``microgradnorm lab`` command in Simplified Chinese.

Oracles, none of them the Chinese text itself:

- the catalog's own list of the strings marked in the lab's modules (Babel's
  extraction): each must have a Chinese translation;
- the English rendering of the same demo, claim or command: the Chinese shows the
  same numbers, no more and no fewer (a translation that drops, duplicates or
  invents a value fails), and it is not the English;
- runs of English words: Chinese output may name things in English (LayerNorm,
  post-LN, no-1/d, torch.nn.LayerNorm, code), but three or more English words in a
  row is a sentence someone forgot, unless it is a chart's plot row or an author
  cited by name (``tests/zh.py``).

The lesson files' prose is checked with every other lesson's, in ``tests/test_zh_lessons.py``.

The runs are cached per process and may be shown in either language: the claims
are translated when shown, which the tests check by showing one run in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from microgradnorm import cli, i18n
from microgradnorm.i18n import N_
from microgradnorm.lab import experiments as E
from microgradnorm.lab import pairs, show
from microgradnorm.lessons.demos import run_demo
from microgradnorm.lessons.format import lessons_dir, parse_lesson
from tests.helpers import run_cli
from tests.zh import CJK, NUMBER, ZH, demo_calls, demo_text, en_and_zh, english_runs, rendered, untranslated

LESSONS = (
    "15-your-backward-in-a-real-model",
    "16-a-wrong-backward-that-trains",
    "17-pre-ln-and-post-ln-in-training",
    "18-which-norm-and-how-big-a-batch",
)
# The modules whose strings the lab prints (lessons 15-18's demos, the command, the whole lab package).
MODULES = ("lessons/demos_lab.py", "commands/lab.py", *(f"lab/{p.name}" for p in Path(E.__file__).parent.glob("*.py")))
INSTALL = "pip install 'microgradnorm[torch]'"


def _squeezed(text: str) -> str:
    """``text`` without whitespace: Chinese wraps between any two characters, so compare it this way."""
    return "".join(text.split())


def _numbers(text: str) -> list[str]:
    return sorted(set(NUMBER.findall(text)))


# ---- the catalog -------------------------------------------------------------------------------------


def test_every_string_the_lab_marks_has_a_chinese_translation():
    marked, missing = untranslated(MODULES)
    assert marked > 120, "the lab's modules mark their strings"
    assert not missing, f"shown in English under {ZH}: {missing}"


# ---- what the demos print ----------------------------------------------------------------------------


def _calls():
    for stem in LESSONS:
        path = lessons_dir() / f"{stem}.md"
        for k, call in enumerate(demo_calls(path), start=1):
            yield pytest.param(parse_lesson(path).params(), call, id=f"{stem[:2]}-{call.name}-{k}")


@pytest.mark.parametrize(("params", "call"), list(_calls()))
def test_a_demo_prints_chinese_with_the_same_numbers_as_its_english(params, call):
    (_, english), (out, chinese) = en_and_zh(
        lambda: (shown := run_demo(call.name, params, call.args), demo_text(shown))
    )
    assert CJK.search(chinese) and chinese != english
    assert _numbers(chinese) == _numbers(english)
    assert not english_runs(chinese), english_runs(chinese)
    if out.prediction is not None:
        assert CJK.search(out.prediction.question) and CJK.search(out.prediction.why)


@pytest.mark.parametrize(("gap", "answer"), [(3e-14, 0), (1e-4, 1), (0.3, 2)])
def test_the_curve_prediction_explains_each_gap_in_chinese(gap, answer):
    """Every branch of lesson 15's question, including the two a correct backward never reaches."""
    from microgradnorm.lessons.demos_lab import _curve_prediction

    outcome = E.Outcome("t", numbers={"your backward vs torch.nn.LayerNorm": gap})
    english, chinese = en_and_zh(lambda: _curve_prediction(outcome))
    assert chinese.answer == english.answer == answer
    assert CJK.search(chinese.why) and f"{gap:.1e}" in chinese.why and chinese.why != english.why
    assert ("只有舍入" in chinese.why) == (answer == 0)  # the same reading as the English's "only rounding"
    # this outcome has no torch.nn curve; one colon only, since the question follows "先猜一猜："
    assert chinese.question.startswith("这里没有安装 PyTorch，") and "：" not in chinese.question


# ---- a cached run, shown in either language ----------------------------------------------------------


@pytest.mark.parametrize("name", ["wrong", "depth", "norms", "batch"])
def test_a_cached_run_is_shown_in_the_language_current_when_it_is_shown(name):
    result = E.EXPERIMENTS[name](0)

    def shown() -> list[str]:
        return [str(result.title), *(c.text for c in result.claims), *map(result.label, result.curves)]

    english, chinese = en_and_zh(shown)
    assert shown() == english and E.EXPERIMENTS[name](0) is result  # the same cached run, English again
    for en, zh in zip(english[: 1 + len(result.claims)], chinese, strict=False):
        assert CJK.search(zh) and _numbers(zh) == _numbers(en), (en, zh)
        assert not english_runs(zh), (zh, english_runs(zh))


def test_a_claim_the_run_does_not_bear_out_says_so_in_chinese():
    outcome = E.Outcome("t")
    claim = N_("pre-LN trains without warmup: training loss (last {n} minibatches) {loss:.2f}, below half of ln 3")
    outcome.claim("k", claim, False, n=10, loss=0.9)
    english, chinese = en_and_zh(lambda: rendered(show.claim_lines(outcome.claims)))
    assert english.startswith(i18n._("✗ not shown by this run: {claim}").format(claim="pre-LN trains without warmup"))
    # the claim is quoted, so it never reads as if it held
    assert chinese.startswith("✗ 这次运行的数字不支持这句话：“pre-LN 不预热也能训练") and "0.90" in chinese


# ---- the command -------------------------------------------------------------------------------------


def test_lab_prints_its_title_curves_and_claims_in_chinese(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["lab", "depth"]) == 0
    english = capsys.readouterr().out
    assert cli.main(["--lang", "zh-CN", "lab", "depth", "--svg", str(tmp_path / "depth.svg")]) == 0
    chinese = capsys.readouterr().out
    result = E.depth(0)
    assert chinese.startswith("12 个块的残差网络中的 post-LN 与 pre-LN")
    assert chinese.count("✓") == english.count("✓") == len(result.claims)
    flat = _squeezed(chinese)
    assert "post-LN（预热50步）" in flat and f"已写入{tmp_path / 'depth.svg'}" in flat
    shown = chinese.split("已写入")[0]
    assert _numbers(shown) == _numbers(english)
    assert not english_runs(shown), english_runs(shown)
    svg = (tmp_path / "depth.svg").read_text(encoding="utf-8")
    assert "post-LN（不预热）" in svg and "小批量" in svg and "步" in svg  # legend and axes of the figure


def test_lab_help_is_chinese_for_the_command_and_each_experiment(capsys):
    out = run_cli(capsys, "--lang", "zh-CN", "lab", "--help")[1]
    flat = "".join(out.split())  # help wraps Chinese between any two characters
    assert "每个实验都在本包生成的任务上训练几个小网络" in flat and flat.count("（只用NumPy）") == 4
    assert "需要[torch]" in flat and not english_runs(" ".join(out.split()).replace(INSTALL, " "))
    out = run_cli(capsys, "--lang", "zh-CN", "lab", "yours", "--help")[1]
    flat = "".join(out.split())
    for words in ("任务和网络的随机种子", "SVG图", "你的练习文件", "装了PyTorch就用torch"):
        assert words in flat, words
    usage = out.split("\n\n")[1:]  # after the usage lines (the command's own name is English)
    assert not english_runs(" ".join("\n\n".join(usage).split())), english_runs(out)


def test_lab_errors_are_one_chinese_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(E, "EXPERIMENTS", {})  # nothing may train: each error comes first
    code, _, err = run_cli(capsys, "--lang", "zh-CN", "lab", "norms", "--svg", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("microgradnorm lab：错误：参数 --svg：应为文件名")
    code, _, err = run_cli(capsys, "--lang", "zh-CN", "lab", "yours", "--file", str(tmp_path / "missing.py"))
    assert code == 2 and err.startswith("microgradnorm lab：错误：--file：应为你的练习文件（05_layernorm_backward.py）")
    assert "missing.py" in err and err.count("\n") == 1
    from microgradnorm.exercises import translation
    from microgradnorm.exercises.catalog import get_exercise

    scaffold = tmp_path / pairs.EXERCISE_FILE  # what init gives a Chinese learner, derived from the solution
    scaffold.write_text(translation.scaffold(get_exercise(5), "zh-CN").text, encoding="utf-8")
    code, _, err = run_cli(capsys, "--lang", "zh-CN", "lab", "yours", "--file", str(scaffold))
    assert code == 2 and "--file：05_layernorm_backward.py 还没有写完（NotImplementedError）；请先完成练习 5" in err
