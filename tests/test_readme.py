"""The README's Python snippets run, and each commented print shows what it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

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


def test_every_command_in_the_readme_parses():
    import shlex

    from microgradnorm import cli

    parser = cli.build_parser()
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            for part in line.split("&&"):
                part = part.split("  #")[0].strip()
                if part.startswith("microgradnorm "):
                    commands.append(shlex.split(part)[1:])
    assert len(commands) >= 12
    for argv in commands:
        args = parser.parse_args(argv)
        assert args.command == argv[0]
