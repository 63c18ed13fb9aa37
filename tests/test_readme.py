"""The README's Python snippets run, and each commented print shows what it prints; its commands parse."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from tests.test_readme_zh import CHINESE, CHINESE_OPTION, blocks, code_lines

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def expected_output(block: str) -> list[str]:
    """The output each print promises: its trailing comment, or the comment line right after it."""
    lines = block.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        _, _, comment = line.partition("  # ")
        if comment:
            out.append(comment.strip())
        elif i + 1 < len(lines) and lines[i + 1].startswith("# "):
            out.append(lines[i + 1][2:].strip())
    return out


def test_the_first_look_snippet_prints_what_its_comments_say():
    block = python_blocks()[0]
    want = expected_output(block)
    assert len(want) == 4
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(block, "README.md", "exec"), {})
    assert buffer.getvalue().splitlines() == want


def test_the_vectorized_snippet_runs():
    namespace: dict = {}
    exec(compile(python_blocks()[1], "README.md", "exec"), namespace)
    dx = namespace["dx"]
    assert dx.shape == (32, 128, 768) and dx.dtype.name == "float32"


@pytest.mark.parametrize("readme", [README, CHINESE], ids=["en", "zh-CN"])
def test_every_command_in_the_readme_parses(readme):
    """Each `microgradnorm ...` of a shell block (after `&&` too) is a command of the parser; the Chinese README
    shows some with --lang zh-CN."""
    from microgradnorm import cli

    parser = cli.build_parser()
    text = readme.read_text(encoding="utf-8")
    lines = [line for lang, body in blocks(text) if lang == "bash" for line in code_lines(body, lang)]
    parts = [part.strip() for line in lines for part in line.split("&&")]
    commands = [shlex.split(part)[1:] for part in parts if part.startswith("microgradnorm ")]
    assert len(commands) >= (12 if readme == README else 15)
    for argv in commands:
        command = argv[2:] if argv[:2] == CHINESE_OPTION.split() else argv
        assert parser.parse_args(argv).command == command[0], argv
    chosen = [argv for argv in commands if argv[:2] == CHINESE_OPTION.split()]
    assert all(parser.parse_args(argv).lang == "zh-CN" for argv in chosen)
    assert chosen or readme == README  # the Chinese README shows some commands in Chinese
