"""``python -m microgradnorm.i18n_tools COMMAND``: the translators' and developers' tools (see docs/translating.md).

    refresh            extract the marked strings (.pot), update each .po, compile each .mo
    check              every drift: catalogs vs code, .mo vs .po, lesson and exercise translations vs English, glossary
    untranslated       the catalog strings still shown in English
    hashes NN          the 'english:' front-matter block a translation of lesson NN must carry
    hashes PAGE        the first line a translation of REFERENCES.md or GLOSSARY.md must carry

The catalog commands need Babel (``pip install babel``); ``hashes`` does not.
"""

from __future__ import annotations

import argparse
import sys

from microgradnorm.i18n import SIMPLIFIED_CHINESE, language_arg


def _refresh(args: argparse.Namespace) -> int:
    from microgradnorm.i18n_tools.catalogs import refresh

    written = refresh()
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("catalogs already up to date")
    return 0


def _check(args: argparse.Namespace) -> int:
    from microgradnorm.exercises.translation import translation_problems as exercise_problems
    from microgradnorm.i18n_tools.catalogs import problems
    from microgradnorm.i18n_tools.glossary import glossary_problems, lesson_term_problems
    from microgradnorm.lessons.translation import translation_problems

    found = problems() + glossary_problems() + translation_problems(args.lang) + lesson_term_problems(args.lang)
    found += exercise_problems(args.lang)
    for line in found:
        print(line)
    print(f"{len(found)} problem(s)" if found else "catalogs, lesson and exercise translations and glossary in step")
    return 1 if found else 0


def _untranslated(args: argparse.Namespace) -> int:
    from microgradnorm.i18n_tools.catalogs import untranslated

    missing = untranslated(args.lang)
    for line in missing:
        print(line)
    print(f"{len(missing)} string(s) shown in English for {args.lang}")
    return 0


def _hashes(args: argparse.Namespace) -> int:
    from microgradnorm.lessons.format import lessons_dir
    from microgradnorm.lessons.translation import PAGES, english_lesson, front_matter_block, page_mark

    page = next((name for name in PAGES if args.lesson.upper().removesuffix(".MD") == name.removesuffix(".md")), None)
    if page is not None:
        print(page_mark(lessons_dir() / page), end="")
    else:
        print(front_matter_block(english_lesson(args.lesson)), end="")
    return 0


PROG = "python -m microgradnorm.i18n_tools"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("refresh", help="extract, update and compile the catalogs").set_defaults(run=_refresh)
    for name, run, text in (
        ("check", _check, "report every drift; exit status 1 if there is one"),
        ("untranslated", _untranslated, "list the catalog strings still in English"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--lang", type=language_arg, default=SIMPLIFIED_CHINESE, help="default zh-CN")
        cmd.set_defaults(run=run)
    cmd = sub.add_parser("hashes", help="print the front matter block that records which English a translation follows")
    cmd.add_argument(
        "lesson",
        metavar="NN",
        help="a lesson's number or file name (3, 03-layernorm-forward.md) or a page (REFERENCES.md, GLOSSARY.md)",
    )
    cmd.set_defaults(run=_hashes)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, OSError) as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
