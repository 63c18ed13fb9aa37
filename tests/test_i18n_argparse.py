"""argparse's own words in the learner's language, help that wraps Chinese by cells, and the --help texts."""

from __future__ import annotations

import argparse
import gettext
import inspect
import io

import pytest
from rich.cells import cell_len

from microgradnorm import cli, i18n
from microgradnorm.i18n.argparse_text import MESSAGES, NOT_SHOWN, HelpFormatter, translated_argparse
from microgradnorm.i18n.text import NO_START

babel = pytest.importorskip("babel", reason="reading argparse's messages needs Babel (the test extra installs it)")
from babel.messages.extract import extract_python  # noqa: E402

from microgradnorm.i18n_tools import catalogs  # noqa: E402
from tests.helpers import run_cli as run  # noqa: E402

ZH = i18n.SIMPLIFIED_CHINESE


def argparse_messages() -> set[str]:
    """Every message the running Python's argparse passes to gettext (Babel reads its source)."""
    source = inspect.getsource(argparse).encode("utf-8")
    found = set()
    for _line, _function, message, _comments in extract_python(
        io.BytesIO(source), {"_": None, "ngettext": (1, 2)}, [], {}
    ):
        if isinstance(message, tuple):
            found.update(m for m in message if m)
        elif message:
            found.add(message)
    return found


def test_every_message_of_this_pythons_argparse_is_translated_or_never_shown():
    """A new Python that adds a message fails here until someone marks it (MESSAGES) or says why not (NOT_SHOWN)."""
    plural = {"expected %s argument", "expected %s arguments"}
    unknown = argparse_messages() - set(MESSAGES) - NOT_SHOWN - plural
    assert unknown == set(), f"argparse messages neither marked nor listed as never shown: {sorted(unknown)}"
    assert argparse_messages() & set(MESSAGES), "Babel found none of argparse's messages: the check would be empty"


def test_every_argparse_message_we_show_has_a_chinese_translation():
    po = catalogs.read_po(catalogs.po_path(ZH), ZH)
    missing = [m for m in MESSAGES if not po.get(m) or not po.get(m).string or po.get(m).fuzzy]
    assert missing == []
    plural = po.get("expected %s argument")
    assert plural is not None and all(plural.string) and not plural.fuzzy


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["nosuch"],
            ["microgradnorm：错误：参数 COMMAND：无效的选项值：'nosuch'（可选：", "（参见 microgradnorm --help）"],
        ),
        (["check"], ["microgradnorm check：错误：缺少以下必需的参数：NORM"]),
        (["lesson", "--bogus"], ["无法识别的参数：--bogus"]),
        (["lesson", "1", "--dim"], ["参数 --dim：需要一个值"]),
        (["lesson", "1", "--dim", "x"], ["参数 --dim：应为正整数，实际为 'x'"]),
        (["lesson", "--lang", "fr"], ["microgradnorm lesson：错误：参数 --lang：应为 en 或 zh-CN，实际为 'fr'"]),
    ],
)
def test_argparses_errors_are_in_chinese(capsys, monkeypatch, argv, words):
    monkeypatch.setenv(i18n.ENV_VAR, ZH)  # --lang fr is not a language: the environment's is used
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert [word for word in words if word not in err] == [], err
    assert "error" not in err and "argument" not in err


def test_argparse_speaks_english_again_after_a_chinese_command(capsys):
    run(capsys, "--lang", "zh-CN", "lesson", "--bogus")
    assert argparse._ is gettext.gettext and argparse.ngettext is gettext.ngettext
    parser = argparse.ArgumentParser(prog="other")
    parser.add_argument("x")
    assert "usage: other" in parser.format_usage() and "positional arguments" in parser.format_help()
    with translated_argparse(), i18n.use_language(ZH):
        assert argparse._ is not gettext.gettext
        assert "用法：" in parser.format_usage()
    assert argparse._ is gettext.gettext


def test_the_help_of_the_lesson_command_is_chinese_and_fits_60_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")  # argparse sizes help to the terminal, COLUMNS first
    code, out, _ = run(capsys, "--lang", "zh-CN", "lesson", "--help")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("用法：microgradnorm lesson [-h]")
    for words in (
        "位置参数：",
        "选项：",
        "-h, --help       显示本帮助信息并退出",
        "不给 LESSON 时，列出所有课程和你的进度。",
    ):
        assert words in out, words
    assert "usage" not in out and "options" not in out and "show this help" not in out
    assert all(cell_len(line) <= 60 for line in lines), max(lines, key=cell_len)
    assert not [line for line in lines if line.strip()[:1] in NO_START]
    # the usage's continuation lines start under the first option, counted in cells ("用法：" is 6 cells, 3 characters)
    first_option = cell_len(lines[0][: lines[0].index("[-h]")])
    usage = lines[1 : lines.index("")]
    assert usage and all(cell_len(line) - cell_len(line.lstrip()) == first_option for line in usage)


def test_the_top_level_help_lists_the_commands_in_chinese(capsys):
    code, out, _ = run(capsys, "--lang", "zh-CN", "--help")
    assert code == 0
    assert "用标量节点搭出 LayerNorm、BatchNorm 和 RMSNorm" in out
    assert "".join("在终端里一步一步学一课（从这里开始：microgradnorm lesson）".split()) in "".join(out.split())
    assert "显示程序的版本号并退出" in out
    assert "用各种归一化训练小网络，检验课程里的结论" in "".join(out.split())  # the lab's line


def test_english_help_is_exactly_what_argparse_writes(capsys, monkeypatch):
    """HelpFormatter changes nothing for English text: the same parser, formatted both ways."""
    monkeypatch.setenv("COLUMNS", "70")
    with i18n.use_language(i18n.ENGLISH):
        parser = cli.build_parser()
        command = parser._subparsers._group_actions[0].choices["lesson"]
        for p in (parser, command):
            ours = p.format_help()
            p.formatter_class = argparse.HelpFormatter
            assert p.format_help() == ours
            p.formatter_class = HelpFormatter


def test_a_commands_help_marked_with_the_pattern_is_translated_when_the_parser_is_built():
    """The pattern other commands follow: help=_("...") inside add_arguments, lazy_gettext for HELP."""
    HELP = i18n.lazy_gettext("step through a lesson in the terminal (start here: microgradnorm lesson)")

    def add_arguments(parser):
        parser.add_argument("--auto", action="store_true", help=i18n._("print every step without pausing"))

    texts = {}
    for language in (i18n.ENGLISH, ZH):
        with i18n.use_language(language):
            parser = argparse.ArgumentParser(prog="x", description=i18n._(HELP), formatter_class=HelpFormatter)
            add_arguments(parser)
            texts[language] = parser.format_help()
    assert "print every step without pausing" in texts[i18n.ENGLISH] and "step through a lesson" in texts["en"]
    assert "不停顿，一次打印所有步骤" in texts[ZH] and "在终端里一步一步学一课" in texts[ZH]
