"""README.zh-CN.md follows README.md: the link between them, the English it translates, its sections and commands.

The Chinese README records the English it translates on its first line, as the translated lesson pages do
(``<!-- english: README.md <hash> -->``, the hash of ``lessons.translation.page_hash``). Whenever README.md
changes, the hash test fails until the Chinese is brought up to date and the line replaced. The structure tests
say what differs: the headings (their number, levels and order), the fenced blocks (their number and language),
the commands of each shell block and the code of each Python block (comments may be translated; a printed
value may not), the images, and the links, which must work from the repository root, where both files live.

A Chinese shell block may add lines the English does not have only to show a command in Chinese: the same
``microgradnorm`` command as one of its block's English lines, with ``--lang zh-CN`` after ``microgradnorm``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from microgradnorm.lessons.translation import page_hash

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = ROOT / "README.md"
CHINESE = ROOT / "README.zh-CN.md"
CHINESE_OPTION = "--lang zh-CN"

FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")
CJK = re.compile(r"[\u4e00-\u9fff]")
MARK = re.compile(r"\A<!-- english: README\.md ([0-9a-f]{12}) -->\n")  # as a translated lesson page records its English


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# ---- what each file is made of --------------------------------------------------------------------------------


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each Markdown heading outside fenced blocks."""
    prose = FENCE.sub("", text)
    return [(len(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^(#{1,6})\s+(.*)$", prose, re.M)]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def strip_comment(line: str, language: str) -> str:
    """A line without its comment: a shell or Python comment is prose, and prose is translated."""
    if language == "python" and line.lstrip().startswith("print("):
        return line.rstrip()  # a print's comment is the value it prints: it stays as it is
    if line.lstrip().startswith("#"):
        return ""
    return re.split(r"\s+#\s", line, maxsplit=1)[0].rstrip()


def code_lines(body: str, language: str) -> list[str]:
    return [kept for line in body.splitlines() if (kept := strip_comment(line, language))]


def targets(text: str, images: bool | None = None) -> list[str]:
    """The targets of the Markdown links (or only the images, or only the other links) outside fenced blocks."""
    prose = FENCE.sub("", text)
    return [m.group(2) for m in LINK.finditer(prose) if images is None or bool(m.group(1)) == images]


def in_chinese(line: str) -> str | None:
    """The English command a line shows in Chinese (``--lang zh-CN`` taken out), or None for any other line."""
    words = line.split()
    if words[:3] != ["microgradnorm", *CHINESE_OPTION.split()]:
        return None
    return " ".join(["microgradnorm", *words[3:]])


# ---- how the Chinese can differ from the English --------------------------------------------------------------


def heading_problems(english: str, chinese: str) -> list[str]:
    en, zh = headings(english), headings(chinese)
    if [level for level, _ in en] != [level for level, _ in zh]:
        return [
            f"headings: README.md has {len(en)} ({' '.join('#' * level for level, _ in en)}), "
            f"README.zh-CN.md has {len(zh)} ({' '.join('#' * level for level, _ in zh)}): "
            f"the English's are {[title for _, title in en]}"
        ]
    return [
        f"heading {k + 1} ({en_title!r}) is not translated: {zh_title!r}"
        for k, ((_, en_title), (_, zh_title)) in enumerate(zip(en, zh))
        if k > 0 and not CJK.search(zh_title)  # the first is the project's name
    ]


def block_problems(english: str, chinese: str) -> list[str]:
    en, zh = blocks(english), blocks(chinese)
    if [lang for lang, _ in en] != [lang for lang, _ in zh]:
        return [
            f"fenced blocks: README.md has {[lang or 'plain' for lang, _ in en]}, "
            f"README.zh-CN.md has {[lang or 'plain' for lang, _ in zh]}"
        ]
    problems = []
    for k, ((lang, en_body), (_, zh_body)) in enumerate(zip(en, zh), start=1):
        en_lines, zh_lines = code_lines(en_body, lang), code_lines(zh_body, lang)
        if lang == "bash":
            extra = [line for line in zh_lines if in_chinese(line) is not None]
            problems += [
                f"block {k}: {line!r} shows in Chinese a command its English block does not have"
                for line in extra
                if in_chinese(line) not in en_lines
            ]
            zh_lines = [line for line in zh_lines if line not in extra]
        if lang != "bash" and lang != "python":
            en_lines, zh_lines = en_body.splitlines(), zh_body.splitlines()  # a diagram stays as it is
        if en_lines != zh_lines:
            problems.append(f"block {k} ({lang or 'plain'}): the English has {en_lines}, the Chinese {zh_lines}")
    return problems


def link_problems(english: str, chinese: str) -> list[str]:
    problems = []
    if sorted(targets(english, images=True)) != sorted(targets(chinese, images=True)):
        problems.append(
            f"images: README.md shows {targets(english, images=True)}, README.zh-CN.md {targets(chinese, images=True)}"
        )
    for target in targets(chinese):
        if re.match(r"[a-z]+:|#", target):
            continue
        if not (ROOT / target.split("#")[0]).exists():
            problems.append(f"README.zh-CN.md links to {target}, which is not in the repository")
    return problems


def structure_problems(english: str, chinese: str) -> list[str]:
    return heading_problems(english, chinese) + block_problems(english, chinese) + link_problems(english, chinese)


# ---- the shipped files ----------------------------------------------------------------------------------------


def first_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip())


def test_the_readme_links_to_its_chinese_companion_at_its_top():
    top = first_line(read(ENGLISH))
    assert targets(top) == [CHINESE.name] and "简体中文" in top, top


def test_the_chinese_readme_links_back_to_the_english_at_its_top():
    lines = read(CHINESE).splitlines()
    assert MARK.match(read(CHINESE))  # the mark, invisible on the rendered page
    visible = first_line("\n".join(lines[1:]))
    assert ENGLISH.name in targets(visible), visible


def test_the_chinese_readme_translates_the_current_english():
    mark = MARK.match(read(CHINESE))
    assert mark, "README.zh-CN.md: its first line must be '<!-- english: README.md <hash> -->'"
    now = page_hash(read(ENGLISH))
    assert mark.group(1) == now, (
        f"README.md changed since README.zh-CN.md was translated (recorded {mark.group(1)}, now {now}): "
        f"bring the Chinese up to date (git log -p README.md), then make its first line "
        f"'<!-- english: README.md {now} -->'"
    )


def test_the_chinese_readme_has_the_englishs_sections_blocks_commands_and_images():
    assert structure_problems(read(ENGLISH), read(CHINESE)) == []
    assert len(blocks(read(CHINESE))) >= 10 and len(headings(read(CHINESE))) >= 10  # there was something to compare


# ---- the checks can fail ----------------------------------------------------------------------------------------


def edited(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


IMAGE = "![another figure](lessons/assets/other.svg)"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("## Development\n", "## Development\n\n### Linting\n", "headings: README.md has 16"),
        ("## License", "### License", "headings:"),
        ("microgradnorm lesson 1          #", "microgradnorm lesson 2          #", "block 3 (bash)"),
        ("pytest                      #", "pytest -x                   #", "block 16 (bash)"),
        ('print(g["mean"][0].data, g["var"][0].data)    # 2.5 1.25', "print(g)", "block 2 (python)"),
        ("```bash\nmicrogradnorm check layernorm", "```sh\nmicrogradnorm check layernorm", "fenced blocks:"),
        ("## License\n", f"## License\n\n{IMAGE}\n", "images:"),
    ],
)
def test_a_change_to_the_english_readme_is_reported_until_the_chinese_follows(old, new, expected):
    english, chinese = read(ENGLISH), read(CHINESE)
    changed = edited(english, old, new)
    problems = structure_problems(changed, chinese)
    assert any(expected in p for p in problems), problems
    assert page_hash(changed) != page_hash(english)  # and the recorded hash no longer matches either


def test_a_chinese_variant_must_show_a_command_of_its_own_block():
    chinese = edited(read(CHINESE), "microgradnorm --lang zh-CN lesson 1 ", "microgradnorm --lang zh-CN lesson 7 ")
    assert structure_problems(read(ENGLISH), chinese) == [
        "block 3: 'microgradnorm --lang zh-CN lesson 7' shows in Chinese a command its English block does not have"
    ]


def test_a_broken_link_and_an_untranslated_heading_are_reported():
    chinese = edited(read(CHINESE), "[docs/grader.md](docs/grader.md)", "[docs/grader.md](docs/grader-zh.md)")
    chinese = edited(chinese, "## 许可证", "## License")
    assert structure_problems(read(ENGLISH), chinese) == [
        "heading 15 ('License') is not translated: 'License'",
        "README.zh-CN.md links to docs/grader-zh.md, which is not in the repository",
    ]
