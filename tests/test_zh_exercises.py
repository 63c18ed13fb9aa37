"""The exercises in Chinese: the translated files, the grader's words, and the command, end to end.

Oracles: the English files (the Chinese code must be their code, token for
token, so the grader grades both the same), the hashes the translations record
(a change in the English must show the English until the translation catches
up), the child process's real messages (produced by the sandbox's and the
drivers' own code, recognised and said again in Chinese), the zh_CN catalog,
and the terminal (rich's cell widths, a real tmux at 60 columns). English
output is held by the other exercise tests, which run in English (conftest).
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Group

from microgradnorm import i18n
from microgradnorm.exercises import catalog, drivers, messages, render, sandbox, translation
from microgradnorm.exercises import workspace as ws
from microgradnorm.exercises.catalog import EXERCISES, MARKERS, derive_scaffold, get_exercise
from microgradnorm.exercises.diagnose import Geometry, geometry_findings, scale_finding, shape_findings
from microgradnorm.i18n.text import NO_START
from microgradnorm.i18n_tools.glossary import _CODE, load_glossary
from tests.grading import changed, grade_all, written
from tests.helpers import rendered_lines, run_cli, said_in
from tests.zh import CJK, en_and_zh, po_entries

ZH = i18n.SIMPLIFIED_CHINESE
# three or more lowercase English words in a row, one space apart: prose, not a formula, a name or code
WORD = r"(?<![\w.`'])[a-z]{2,}(?![\w(`'])"
ENGLISH_RUN = re.compile(rf"{WORD}(?: {WORD}){{2,}}")
COMMAND = re.compile(r"microgradnorm exercise [a-z]+")  # a command to type stays as it is
IDS = [ex.name for ex in EXERCISES]


@pytest.fixture(autouse=True)
def _no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")


def english_runs(text: str) -> list[str]:
    return [m.group(0) for line in text.splitlines() for m in ENGLISH_RUN.finditer(COMMAND.sub("", line))]


def chinese_body(english: Path) -> str:
    """A translated solution as a learner gets it (its first line, the mark, left out); the solutions are the only
    translated files: each scaffold is derived from its solution, in each language."""
    state, body, problems = translation._file_state(english, ZH)
    assert state == translation.TRANSLATED, problems
    return body


def docstrings_and_comments(text: str) -> tuple[list[str], list[str]]:
    """The docstrings of a Python file's module and functions, and its comments."""
    tree = ast.parse(text)
    documented = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef))]
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    return [d for n in documented if (d := ast.get_docstring(n))], comments


def glossary_misses(english: str, chinese: str) -> list[tuple]:
    """(term, what is wrong) for each glossary term ``chinese`` renders as the glossary avoids, or lacks where its
    ``english`` uses a checked term."""
    misses = []
    for term in load_glossary():
        misses += [(term.english[0], avoided) for avoided in term.avoid if avoided in chinese]
        if term.checked and term.pattern().search(english) and term.chinese not in chinese:
            misses.append((term.english[0], f"lacks {term.chinese}"))
    return misses


# ---- the translated files -------------------------------------------------------------------------------


def code_tokens(text: str) -> list[tuple[int, str]]:
    """The tokens of ``text`` that the grader's run depends on: comments, line breaks inside brackets and
    docstrings aside; the text of a string under ``if __name__ == "__main__":`` (what the file prints when
    run on its own, never run by the grader) aside, but not the string's place."""
    tree = ast.parse(text)
    docstrings = {
        (node.body[0].lineno, node.body[0].col_offset)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node) is not None
    }
    main = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "__name__ == '__main__'"]
    lines = range(main[0].lineno, main[0].end_lineno + 1) if main else range(0)
    shown = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL):
            continue
        if tok.type == tokenize.STRING and tok.start in docstrings:
            out.append((tok.type, "<docstring>"))
        elif tok.type in shown and tok.start[0] in lines:
            out.append((tok.type, "<printed text>"))
        else:
            out.append((tok.type, tok.string))
    return out


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_chinese_code_is_the_english_code_token_for_token_and_its_scaffold_the_solution_emptied(ex):
    solution = chinese_body(ex.solution)  # in step with its English, or it fails
    assert code_tokens(solution) == code_tokens(ex.solution.read_text(encoding="utf-8"))
    scaffold = translation.scaffold(ex, ZH).text
    assert scaffold == derive_scaffold(solution) != solution
    start, end = MARKERS[ZH]
    assert scaffold.count(start) == scaffold.count(end) == len(ex.functions)
    assert catalog.CODE_START not in scaffold  # the markers are in the file's language


def test_the_code_comparison_tells_a_comment_from_code():
    english = get_exercise(5).solution.read_text(encoding="utf-8")
    same = code_tokens(english.replace("# B,T,D", "# 形状 B,T,D").replace("Exercise 05", "练习 05"))
    assert same == code_tokens(english)
    for old, new in (
        ("1.0 / np.sqrt", "1.001 / np.sqrt"),
        ("x.mean(axis=-1, keepdims=True)", "x.mean(axis=-2, keepdims=True)"),
        ("[0]", "[1]"),
    ):
        assert code_tokens(english.replace(old, new, 1)) != code_tokens(english), old


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_chinese_files_speak_chinese(ex):
    text = chinese_body(ex.solution)
    docstrings, comments = docstrings_and_comments(text)
    assert ast.get_docstring(ast.parse(text)) and len(docstrings) > len(ex.functions) - 1
    assert all(CJK.search(d) for d in docstrings), docstrings
    assert english_runs("\n".join(docstrings + comments)) == []


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_chinese_hints_are_in_step_and_speak_chinese(ex):
    state, in_step, problems = translation._hints_state(ex, ZH)
    assert state == translation.TRANSLATED, problems
    hints, note = translation.hints(ex, ZH)
    assert note is None and hints == in_step
    assert len(hints) == len(catalog.hints(ex)) > 0  # the hints seen are counted across languages
    for hint, english in zip(hints, catalog.hints(ex)):
        assert english_runs(hint) == [], hint
        # Chinese, unless the hint is a formula alone (the same, but for its full stop)
        assert CJK.search(hint) or hint.rstrip("。") == english.rstrip("."), hint
        assert "\n" not in hint or all(p.strip() for p in hint.split("\n"))


def _prose(text: str) -> str:
    """The docstrings and comments of a Python file, without inline code."""
    docstrings, comments = docstrings_and_comments(text)
    # a line break between two Chinese characters is no break in the text (a term may be split by one)
    return re.sub(r"(?<=[\u4e00-\u9fff])\n(?=[\u4e00-\u9fff])", "", _CODE.sub("", "\n".join(docstrings + comments)))


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_the_chinese_files_and_hints_use_the_glossary(ex):
    """A checked term the English uses has its Chinese term in the translation; no rendering the glossary avoids."""
    pairs = [(_prose(ex.solution.read_text(encoding="utf-8")), _prose(chinese_body(ex.solution)))]
    pairs.append((_CODE.sub("", "\n".join(catalog.hints(ex))), "\n".join(translation.hints(ex, ZH)[0])))
    for english, chinese in pairs:
        assert glossary_misses(english, chinese) == []


def test_a_learner_gets_the_file_without_its_mark():
    ex = get_exercise(5)
    given = translation.scaffold(ex, ZH)
    assert given.language == ZH and given.note is None
    assert given.text.startswith('"""练习 05') and "# english:" not in given.text
    assert translation.scaffold(ex, i18n.ENGLISH).text == ex.scaffold_text


# ---- drift: the English changes, the learner sees the English until the translation catches up -----------


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """The exercises' files copied to a folder of their own, which catalog and translation read instead."""
    folder = tmp_path / "exercises"
    folder.mkdir()
    shutil.copytree(catalog.PACKAGE_DIR / "solutions", folder / "solutions")
    for name in ("hints.md", f"hints.{ZH}.md"):
        shutil.copy2(catalog.PACKAGE_DIR / name, folder / name)
    monkeypatch.setattr(catalog, "PACKAGE_DIR", folder)
    monkeypatch.setattr(translation, "PACKAGE_DIR", folder)
    return folder


def test_an_english_solution_edited_gives_the_english_scaffold_until_its_translation_is_updated(package_copy):
    ex = get_exercise(5)
    assert ex.solution.parent.parent == package_copy
    english = ex.solution.read_text(encoding="utf-8")
    ex.solution.write_text(english.replace("Try it:", "Run it:"), encoding="utf-8")
    problems = translation.translation_problems(ZH)
    assert len(problems) == 1 and "solutions/05_layernorm_backward.py changed in the English" in problems[0]
    with i18n.use_language(ZH):
        given = translation.scaffold(ex)
    assert given.language == i18n.ENGLISH and given.text == ex.scaffold_text and "Run it:" in given.text
    assert given.note == "练习 5 的英文原文在翻译之后改过，译文更新之前先给你英文版的文件。"
    assert translation.solution(ex, ZH).language == i18n.ENGLISH
    assert translation.scaffold(get_exercise(4), ZH).language == ZH  # only the exercise that changed
    # the translator updates the translation, then its first line
    chinese = translation.translated_path(ex.solution, ZH)
    lines = chinese.read_text(encoding="utf-8").splitlines(keepends=True)
    chinese.write_text(translation.file_mark(ex.solution) + "".join(lines[1:]), encoding="utf-8")
    assert translation.translation_problems(ZH) == []
    assert translation.scaffold(ex, ZH).language == ZH


def test_english_hints_edited_show_the_english_until_their_translation_is_updated(package_copy):
    ex = get_exercise(2)
    hints_md = package_copy / "hints.md"
    hints_md.write_text(hints_md.read_text(encoding="utf-8").replace("is one way.", "is one way to write it."))
    assert [p for p in translation.translation_problems(ZH) if "02_mean_variance_backward" in p]
    with i18n.use_language(ZH):
        hints, note = translation.hints(ex)
    assert "is one way to write it." in hints[1]
    assert note == "练习 2 的提示的英文原文在翻译之后改过，译文更新之前先以英文显示。"
    assert translation.hints(get_exercise(1), ZH)[1] is None  # the other exercises' hints stay Chinese
    chinese = package_copy / f"hints.{ZH}.md"
    text = chinese.read_text(encoding="utf-8")
    old = re.search(r"## 02_mean_variance_backward\n(<!-- english: \w+ -->)", text).group(1)
    chinese.write_text(text.replace(old, translation.hint_mark(ex)), encoding="utf-8")
    assert translation.translation_problems(ZH) == []
    assert translation.hints(ex, ZH)[1] is None


def test_a_translation_without_its_mark_or_with_other_code_is_not_given(package_copy):
    ex = get_exercise(3)
    chinese = translation.translated_path(ex.solution, ZH)
    chinese.write_text(chinese.read_text(encoding="utf-8").split("\n", 1)[1], encoding="utf-8")
    expected = "expected a first line '# english: 03_layernorm_from_values.py <hash>'"
    assert expected in translation.translation_problems(ZH)[0]
    assert translation.solution(ex, ZH).language == i18n.ENGLISH
    hints_zh = package_copy / f"hints.{ZH}.md"
    hints_zh.write_text(hints_zh.read_text(encoding="utf-8").replace("\n4. rstd = (var", "\n   rstd = (var"))
    assert any("3 hints where the English has 4" in p for p in translation.translation_problems(ZH))
    assert translation.hints(ex, ZH)[0] == catalog.hints(ex)


def test_the_translators_tool_prints_the_first_lines(package_copy, capsys):
    ex = get_exercise(7)
    assert translation.main([f"solutions/{ex.filename}"]) == 0
    first = translation.translated_path(ex.solution, ZH).read_text(encoding="utf-8").splitlines()[0]
    assert capsys.readouterr().out == first + "\n"
    assert translation.scaffold(ex, ZH).text == derive_scaffold(chinese_body(ex.solution))


# ---- the grader's words ---------------------------------------------------------------------------------

# templates that are only a formula, a list of names or code, the same in every language
SAME_IN_CHINESE = {"dy/dx = (1/std) diag(gamma) (I - P)", "{first} {second}"}


def _templates() -> list[str]:
    found = [t for pair in messages.FINDINGS.values() for t in pair]
    found += [*messages.SAYINGS.values(), *messages.CHILD.values(), *messages.CHILD_TYPES.values()]
    found += [t for ex in EXERCISES for t in (ex.title, ex.topic, ex.uses_text)]
    found += translation._NOTES.values()
    return sorted(set(found))


@pytest.mark.parametrize("template", _templates())
def test_every_template_of_the_exercises_has_a_chinese_translation(template):
    with i18n.use_language(ZH):
        said = i18n._(template)
    if template in SAME_IN_CHINESE:
        return
    assert said != template and (CJK.search(said) or said.strip(" ,.") != template.strip(" ,."))
    assert not said.startswith(" "), "Chinese joins sentences without a space"


def test_the_catalog_entries_of_the_exercises_use_the_glossary():
    entries = po_entries(("exercise",))
    assert len(entries) > 400
    for message in entries:
        english = "" if message.id in OTHER_SENSE else _CODE.sub("", str(message.id))
        assert glossary_misses(english, message.string) == [], message.id


# entries where a glossary word means something else: here "kernel" is the operating system's, not a GPU's
OTHER_SENSE = {"kernel refused"}


def test_a_finding_is_data_said_in_the_language_of_the_reader():
    right = np.random.default_rng(1).normal(size=(3, 5))
    found = scale_finding(right * 5 / 4, right, 5)
    shapes = shape_findings("dgamma", (1, 1, 8), (8,))[0]
    with i18n.use_language(ZH):
        assert (found.title, shapes.title) == ("用了无偏方差", "keepdims 造成的形状错误")
        assert "n/(n-1) = 1.25（n = 5）" in found.detail
        assert shapes.detail.startswith("dgamma 的形状是 (1, 1, 8)，应为 (8,)：某次归约保留了轴（keepdims=True）")
    assert found.title == "unbiased variance" and "n/(n-1) = 1.25 (n = 5)" in found.detail


def test_the_words_inside_a_geometry_finding_follow_the_language():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 6))
    xhat = (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)
    geom = Geometry(axes=(1,), xhat=xhat, mean_path=None, radial_coef=np.full((4, 1), 0.3), eps=0.0, radial_name="rms")
    found = geometry_findings(1.0 + 1.3 * xhat, 1.0 + xhat, geom)[0]  # the error is 0.3 xhat: the rms path, scaled
    english, chinese = en_and_zh(lambda: f"{found.title} {found.detail}")
    assert "rms" in english and "均方根" in chinese and "along xhat" in english
    assert english_runs(chinese) == [] and "误差的" in chinese


def _child_messages() -> list[str]:
    """Messages exactly as the child writes them: from the audit hook's own functions and the drivers."""
    uses = catalog.USES["numpy"]
    said = [sandbox._import_message(name, "exercise 5", uses) for name in ("microgradnorm.formulas", "torch", "socket")]
    hook = sandbox.make_hook(sandbox.Policy("exercise 5", uses, ("/nowhere",)))
    events = [
        ("open", ("/etc/passwd", "r", 0)),
        ("open", ("/tmp/out.txt", "w", 0)),
        ("os.listdir", ("/etc",)),
        ("mmap.__new__", (3, 4096)),
        ("object.__getattr__", (len, "__defaults__")),
        ("import", (3, None)),
        ("os.kill", (1, 9)),
        ("subprocess.Popen", ()),
        ("resource.setrlimit", ()),
        ("os.remove", ()),
        ("gc.get_objects", ()),
        ("ctypes.dlopen", ()),
    ]
    for event, args in events:
        with pytest.raises((sandbox.Refused, sandbox.RefusedImport)) as refused:
            hook(event, args)
        said.append(str(refused.value))

    class Module:
        def welford_update(self, count, mean, m2, value):
            return count + 1, "mean", m2

    module = Module()
    bad_calls = [
        lambda: drivers._function(module, "layernorm_forward"),
        lambda: drivers._unpack((1, 2), ("dx", "dgamma", "dbeta"), "layernorm_backward"),
        lambda: drivers._unpack(None, ("y", "cache"), "layernorm_forward"),
        lambda: drivers._number("a", "the count `welford_update` returns"),
        lambda: drivers._welford_row(module.welford_update, (2, 0.0, 0.0), np.ones(1)),
        lambda: drivers._welford_row(lambda c, m, s, v: (c, m, s), (2, 0.0, 0.0), np.ones(1)),
        lambda: drivers._values([1.0, 2.0], 2, complex),
        lambda: drivers._values(7, 2, complex),
    ]
    for call in bad_calls:
        with pytest.raises(drivers.DriverError) as error:
            call()
        said.append(str(error.value))
    return said


@pytest.mark.parametrize("text", _child_messages())
def test_every_message_of_the_child_is_recognised_and_said_again_in_chinese(text):
    found = messages.recognise(text)
    assert found is not None, text
    english = messages.child_message(text)
    assert english == text  # the template is the child's sentence, word for word
    with i18n.use_language(ZH):
        chinese = messages.child_message(text, exercise="练习 5", uses="NumPy 和 Python 标准库")
    assert CJK.search(chinese) and english_runs(chinese) == [], chinese


def test_a_message_of_the_child_that_no_template_knows_is_shown_as_it_is():
    with i18n.use_language(ZH):
        assert messages.child_message("something new went wrong") == "something new went wrong"


# ---- grading in Chinese ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory):
    """A right answer (the Chinese reference), a typical mistake, hostile and malformed files, graded in Chinese."""
    right, scaffold = chinese_body(get_exercise(5).solution), translation.scaffold(get_exercise(6), ZH).text
    sources = {"right": (5, right), "scaffold": (6, scaffold)}
    plants = {  # id: (exercise, the edit that plants the mistake in its English solution)
        "no-mean": (5, ("dx = rstd * (dxhat - mean_part - xhat * var_part)", "dx = rstd * (dxhat - xhat * var_part)")),
        "torch": (1, ("import numpy as np\n", "import numpy as np\nimport torch\n")),
        "open": (2, ("    d = x.shape[1]\n    return", "    open('/etc/passwd')\n    return")),
        "engine": (3, ("from microgradnorm import Value\n", "from microgradnorm import Value, layer_norm\n")),
        "returns": (4, ("return dgamma, dbeta, dxhat", "return dgamma, dbeta")),
    }
    sources |= {sid: (number, changed(number, edit)) for sid, (number, edit) in plants.items()}
    previous = i18n.set_language(ZH)  # the graders run in threads: the process-wide language reaches them
    try:
        return grade_all(written(tmp_path_factory.mktemp("zh"), sources))
    finally:
        i18n.set_language(previous)


def _said(result) -> str:
    with i18n.use_language(ZH):
        findings = " ".join(f"{f.title}：{f.detail}" for f in result.findings)
    rows = " ".join(f"{r.label} {r.detail}" for r in result.rows)
    return f"{result.summary} {rows} {findings}"


def test_a_right_answer_passes_in_chinese_with_every_row_in_chinese(graded_zh):
    result = graded_zh["right"]
    assert result.passed and result.summary == "每项检查都通过了。"
    labels = "运行 类型与形状 有限值 前向传播 dx dgamma dbeta 第二组输入 两次答案相同 输入未被改动".split()
    assert [r.label for r in result.rows] == labels
    assert english_runs(_said(result)) == []


def test_the_untouched_chinese_scaffold_is_not_written_yet(graded_zh):
    result = graded_zh["scaffold"]
    assert result.status == "not_written"
    assert result.summary == "还没写：`batchnorm_backward_staged` 仍然抛出 NotImplementedError。把那一行换成你的代码。"
    assert result.where.startswith("第 ") and result.rows[0].detail == "还没写"


def test_a_typical_mistake_is_diagnosed_in_chinese(graded_zh):
    result = graded_zh["no-mean"]
    assert not result.passed and result.summary == "还没通过：dx、第二组输入。"
    with i18n.use_language(ZH):
        assert result.findings[0].title == "缺了经过均值的路径"
        assert "误差的 0% 在 xhat 方向，100% 在全 1 向量 (1, ..., 1) 方向" in result.findings[0].detail
    assert result.worst is not None and result.worst.case.startswith("第一组输入：x [2, 3, 5]，eps = 0.001")
    assert english_runs(_said(result)) == []


@pytest.mark.parametrize(
    ("sid", "said"),
    [
        ("torch", "评分期间不能导入 `torch`：这里要的是你自己写出梯度，而不是让某个库替你求出来。"),
        ("open", "评分期间，你的代码不能打开 '/etc/passwd'：它不需要任何文件，只需要它的参数。"),
        ("engine", "评分期间不能使用 `microgradnorm.layer_norm`：只有 Value 可以用。"),
        # the child's "dgamma, dbeta, dxhat" is English: the list separator is the learner's
        ("returns", "`affine_backward` 必须返回 3 个值（dgamma、dbeta、dxhat），实际返回了一个长度为 2 的 tuple。"),
    ],
)
def test_hostile_and_malformed_code_is_refused_in_chinese(graded_zh, sid, said):
    result = graded_zh[sid]
    assert not result.passed and result.summary == said
    assert english_runs(_said(result)) == []


# ---- the command, end to end ----------------------------------------------------------------------------


def solve_in_chinese(folder: Path, number: int) -> None:
    ex = get_exercise(number)
    (folder / ex.filename).write_text(chinese_body(ex.solution), encoding="utf-8")


def test_init_check_hint_and_solution_with_the_lang_option(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    folder = tmp_path / "练习"
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "init", str(folder))
    assert code == 0 and "复制了 11 个练习模板" in out and "从 01_local_derivatives.py 开始" in out
    given = (folder / "05_layernorm_backward.py").read_text(encoding="utf-8")
    assert given == translation.scaffold(get_exercise(5), ZH).text
    code, out, _ = run_cli(capsys, "exercise", "check", "1", "--lang", "zh-CN")
    assert code == 1 and "还没写：mul_backward 仍然抛出 NotImplementedError" in out
    solve_in_chinese(folder, 1)
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "check", "1")
    assert code == 0 and "每项检查都通过了。" in out and "下一道：02_mean_variance_backward" in out
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "hint", "2")
    assert "02_mean_variance_backward 的提示（第 1 条，共 4 条）" in out
    assert "再运行一次同样的命令，看第 2 条提示。" in out
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "solution", "1")
    assert code == 0 and out == chinese_body(get_exercise(1).solution)  # not a terminal: the file itself
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "solution", "2")
    assert code == 1 and "02_mean_variance_backward 还没通过。" in out


def test_the_locale_alone_gives_chinese(tmp_path, capsys, monkeypatch):
    for name in ("MICROGRADNORM_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "exercise", "init", str(tmp_path / "w"))
    assert code == 0 and "练习目录：" in out
    (tmp_path / "w" / "01_local_derivatives.py").write_text("import torch\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, "exercise", "check", "1")
    assert code == 1 and "评分期间不能导入 torch" in " ".join(out.split())
    code, out, _ = run_cli(capsys, "exercise", "list")
    assert "已完成 0/11" in out and "✗ 未通过" in out


def test_usage_errors_and_help_are_chinese(tmp_path, capsys):
    for argv, said in (
        (["exercise", "hint", "50"], "NAME：应为练习编号（1-11）或名字，实际为 '50'"),
        (["exercise", "check", "--timeout", "0"], "参数 --timeout：应为正的秒数，实际为 0"),
        (["exercise", "check", "--memory", "9"], "应为 256 到 1048576 之间的 MiB 数，实际为 9"),
        (["exercise", "check", "--dir", str(tmp_path / "no")], "--dir：应为一个练习目录"),
        (["exercise", "watch"], "还没有练习目录：先运行 `microgradnorm exercise init [DIR]`"),
        (["exercise", "list", "extra"], "无法识别的参数：extra"),
    ):
        code, out, err = run_cli(capsys, "--lang", "zh-CN", *argv)
        assert code == 2 and said in err and err.count("\n") == 1, (argv, err)
        assert "错误：" in err and "error:" not in err
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "check", "--help")
    assert code == 0 and "给一道练习评分（默认：下一道还没通过的）" in out and "每次检查的墙钟时间上限" in out
    assert out.startswith("用法：") and english_runs(out) == []


def test_an_english_workspace_becomes_chinese_where_the_learner_has_not_started(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    folder = tmp_path / "w"
    run_cli(capsys, "exercise", "init", str(folder))
    mine = folder / "02_mean_variance_backward.py"
    mine.write_text(mine.read_text(encoding="utf-8") + "# my own notes\n", encoding="utf-8")
    ex1 = get_exercise(1)
    (folder / ex1.filename).write_text(ex1.solution.read_text(encoding="utf-8"), encoding="utf-8")
    assert run_cli(capsys, "exercise", "check", "1")[0] == 0  # passed in English
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "init", str(folder))
    flat = "".join(out.split())
    assert "你还没动过的9个文件换成了中文版" in flat
    assert "保留了你改过的文件，没有覆盖：01_local_derivatives.py、02_mean" in flat
    assert mine.read_text(encoding="utf-8").endswith("# my own notes\n")  # never overwritten
    assert (folder / "03_layernorm_from_values.py").read_text(encoding="utf-8").startswith('"""练习 03')
    assert not ws.is_edited(folder, get_exercise(3)) and ws.is_edited(folder, get_exercise(2))
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "list")
    assert "✓ 完成" in out and "已完成 1/11" in out  # progress is the same in every language
    code, out, _ = run_cli(capsys, "--lang", "zh-CN", "exercise", "reset", "2", "--yes")
    assert "已恢复成练习模板。你之前的版本在" in "".join(out.split())
    assert mine.read_text(encoding="utf-8") == translation.scaffold(get_exercise(2), ZH).text
    code, out, _ = run_cli(capsys, "exercise", "init", str(folder))  # and back to English
    assert code == 0
    switched = said_in("{n} file(s) you had not started are now the English version: {names}", " ".join(out.split()))
    assert switched is not None and switched["n"] == "10"


@pytest.mark.parametrize("width", [60, 80, 100])
def test_the_list_in_chinese_fits_and_aligns(width):
    progress = ws.Progress(workspace=None, exercises={"01_local_derivatives": {"passed": True, "hints": 2}})
    with i18n.use_language(ZH):
        shown = render.exercise_list(progress, Path("/tmp/w"), {}, {ex.name: True for ex in EXERCISES})
        lines = rendered_lines(shown, width)
    assert max(cell_len(line.rstrip()) for line in lines) <= width
    rows = [line for line in lines if re.match(r"\s*\d+\s+\d\d_", line)]
    assert len(rows) == len(EXERCISES)
    for column in ("_", "✓", "·"):  # the name, and the status in the cells it starts at
        starts = {cell_len(row[: row.index(column)]) for row in rows if column in row}
        assert len(starts) == 1, (column, starts)
    header = next(line for line in lines if "状态" in line)
    status = {cell_len(row[: row.index("·")]) for row in rows if "·" in row}
    assert status == {cell_len(header[: header.index("状态")])}
    flat = "".join("".join(lines).split())
    with i18n.use_language(ZH):
        assert all("".join(render.about(ex).split()) in flat for ex in EXERCISES)
    assert not any(line.lstrip()[:1] in NO_START for line in lines if line.strip())


def test_the_watch_keys_line_wraps_the_chinese_way_at_60_columns():
    with i18n.use_language(ZH):
        lines = [line.rstrip() for line in rendered_lines(Group(render.watch_help(), render.watch_unknown("x")), 60)]
    assert lines[0].startswith("保存文件即检查 · 输入字母后回车：n 下一道")
    assert all(cell_len(line) <= 60 and line[:1] not in NO_START for line in lines)
    assert "q 退出" in "".join(lines)


def test_a_chinese_file_run_on_its_own_speaks_chinese(tmp_path):
    env = {**os.environ, "MICROGRADNORM_LANG": "en"}  # the file's own language wins: one run, one language

    def run(name: str, text: str) -> subprocess.CompletedProcess:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=60)

    done = run("05.py", translation.scaffold(get_exercise(5), ZH).text)
    assert done.returncode == 1 and "`layernorm_forward`（第 " in done.stderr and "还没写" in done.stderr
    assert "Traceback" not in done.stderr
    done = run("05s.py", chinese_body(get_exercise(5).solution))
    assert done.returncode == 0 and done.stdout.count("-> 一致") == 3 and "你的梯度与中心差分的比较：" in done.stdout
    done = run("05e.py", get_exercise(5).solution.read_text(encoding="utf-8"))
    assert done.stdout.count("-> agrees") == 3


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_watch_in_chinese_in_a_real_terminal_at_60_columns(tmp_path):
    from tests.test_exercises_terminal import Terminal

    home, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    locale = {"MICROGRADNORM_LANG": "", "LANGUAGE": "", "LC_ALL": "", "LANG": "zh_CN.UTF-8"}
    term = Terminal(home, work, width=60, height=40, env=locale)
    cmd = f"{sys.executable} -m microgradnorm exercise"
    try:
        term.type(f"{cmd} init w && {cmd} watch 4")
        term.wait_for("当前练习：04_affine_backward")
        screen = term.wait_for("q 退出")
        solve_in_chinese(work / "w", 4)
        screen = term.wait_for("每项检查都通过了。")
        screen = term.wait_for("输入 n 并回车，进入 05_layernorm_backward")
        term.type("h")
        screen = term.wait_for("再按 h 并回车，看第 2 条提示。")
        term.type("n")
        screen = term.wait_for("当前练习：05_layernorm_backward")
        term.type("q")
        term.type("echo watch=$?")
        screen = term.wait_for("watch=0")
    finally:
        term.close()
    lines = [line.rstrip() for line in screen.splitlines()]
    assert all(cell_len(line) <= 60 for line in lines)
    assert not any(line[:1] in NO_START for line in lines if line)
    assert "Current exercise" not in screen and "Every check passed" not in screen
    assert "✓  类型与形状" in screen
