"""How long and how branchy the package's functions are: the readable-core rule, made visible.

Run ``python -m tests.readable`` for the longest and branchiest functions. The rule
(``tests/test_readable.py`` holds it): no function longer than ``MAX_LINES`` lines, at
most ``MAX_LONG`` longer than ``LONG_LINES``, none with more than ``MAX_BRANCHES``
branch points (if, for, while, except, a conditional expression, each extra operand of
``and``/``or``, each ``if`` of a comprehension), unless a comment in the function's
first lines says ``readable-core: whole`` and why it must stay whole.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "microgradnorm"
MAX_LINES = 80
LONG_LINES = 50
MAX_LONG = 10
MAX_BRANCHES = 25
EXEMPT_MARK = "readable-core: whole"


@dataclass(frozen=True)
class FunctionSize:
    where: str  # path:line qualified.name
    lines: int
    branches: int
    exempt: bool


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and everything in it but the functions nested in a ``body`` (each of those is measured on its
    own): ast.walk without descending into them."""
    todo = [node]
    while todo:
        parent = todo.pop()
        yield parent
        body = getattr(parent, "body", None)
        body = body if isinstance(body, list) else []
        nested = {id(c) for c in body if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef))}
        todo.extend(c for c in ast.iter_child_nodes(parent) if id(c) not in nested)


def _branches(node: ast.AST) -> int:
    count = 0
    for child in _own_nodes(node):
        if isinstance(child, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler)):
            count += 1
        elif isinstance(child, ast.BoolOp):
            count += len(child.values) - 1
        elif isinstance(child, ast.comprehension):
            count += len(child.ifs)
    return count


def measure(root: Path = PACKAGE) -> list[FunctionSize]:
    sizes = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            parent, prefix = stack.pop()
            for node in ast.iter_child_nodes(parent):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{node.name}"
                    stack.append((node, name + "."))
                    if isinstance(node, ast.ClassDef):
                        continue
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    head = "\n".join(lines[first - 1 : first + 5])
                    sizes.append(
                        FunctionSize(
                            where=f"{path.relative_to(root.parent)}:{node.lineno} {name}",
                            lines=node.end_lineno - first + 1,
                            branches=_branches(node),
                            exempt=EXEMPT_MARK in head,
                        )
                    )
    return sizes


def violations(sizes: list[FunctionSize]) -> list[str]:
    found = []
    counted = [s for s in sizes if not s.exempt]
    found += [f"{s.where}: {s.lines} lines (at most {MAX_LINES})" for s in counted if s.lines > MAX_LINES]
    found += [
        f"{s.where}: {s.branches} branch points (at most {MAX_BRANCHES})" for s in counted if s.branches > MAX_BRANCHES
    ]
    long = [s for s in counted if s.lines > LONG_LINES]
    if len(long) > MAX_LONG:
        names = ", ".join(s.where for s in long)
        found.append(f"{len(long)} functions are longer than {LONG_LINES} lines (at most {MAX_LONG}): {names}")
    return found


def main() -> int:
    sizes = measure()
    print("longest:")
    for s in sorted(sizes, key=lambda s: -s.lines)[:15]:
        print(f"  {s.lines:4d} lines {s.branches:3d} branches {'(whole) ' if s.exempt else ''}{s.where}")
    print("branchiest:")
    for s in sorted(sizes, key=lambda s: -s.branches)[:10]:
        print(f"  {s.branches:4d} branches {s.lines:3d} lines {'(whole) ' if s.exempt else ''}{s.where}")
    problems = violations(sizes)
    print("\n".join(["rule broken:", *problems]) if problems else "the readable-core rule holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
