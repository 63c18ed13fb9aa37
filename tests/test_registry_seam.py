"""The registry is the only seam (AST): only :mod:`microgradnorm.registry` knows a norm by its name, no other
module compares a value against a norm's name or keeps a dict keyed by them. (That the textbook core imports only
the standard library and NumPy is tests/test_layering.py's rule.)"""

from __future__ import annotations

import ast
from pathlib import Path

from microgradnorm.registry import NORMS

PACKAGE = Path(__file__).resolve().parent.parent / "microgradnorm"
NAMES = frozenset(NORMS)  # the registry's names (titles such as "LayerNorm" label charts, which is fine)


def _strings(node: ast.AST) -> list[str]:
    """The string constants ``node`` is, or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def name_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each comparison against a norm's name and each dict keyed by one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += [(node.lineno, f"compares against {s!r}") for s in _strings(operand) if s in NAMES]
        elif isinstance(node, ast.Dict):
            found += [
                (node.lineno, f"a dict keyed by {s!r}") for k in node.keys if k for s in _strings(k) if s in NAMES
            ]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
            found += [(node.lineno, f"dict({kw.arg}=...)") for kw in node.keywords if kw.arg in NAMES]
        elif isinstance(node, ast.match_case):
            found += [
                (node.pattern.lineno, f"matches {s!r}")
                for s in _strings(getattr(node.pattern, "value", None) or ast.Pass())
                if s in NAMES
            ]
    return found


# ---- the scans themselves can fail ----------------------------------------------------------------


def test_the_name_scan_finds_each_way_of_knowing_a_norm_by_name():
    source = (
        'if kind == "layernorm": pass\n'
        'ok = norm in ("rmsnorm", "other")\n'
        'TABLE = {"batchnorm": 1}\n'
        "T2 = dict(groupnorm=2)\n"
        'get_norm("layernorm")  # asking the registry is fine\n'
    )
    assert [line for line, _ in name_uses(source)] == [1, 2, 3, 4]


# ---- the package -----------------------------------------------------------------------------------


def test_only_the_registry_knows_a_norm_by_its_name():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "registry.py" and path.parent == PACKAGE:
            continue
        for line, what in name_uses(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line} {what}")
    assert found == [], "\n".join(found)
