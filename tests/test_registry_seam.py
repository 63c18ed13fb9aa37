"""The registry is the only seam; the core imports only the standard library and NumPy (AST, all imports).

* Only :mod:`microgradnorm.registry` knows a norm by its name: no other module
  compares a value against a norm's name or keeps a dict keyed by them.
* The textbook core (engine, norms, inputs, errors, formulas, the textbook NumPy
  file, the registry's facts) imports only the standard library and NumPy.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from microgradnorm.registry import NORMS

PACKAGE = Path(__file__).resolve().parent.parent / "microgradnorm"
NAMES = frozenset(NORMS)  # the registry's names (titles such as "LayerNorm" label charts, which is fine)
CORE = ("engine.py", "errors.py", "inputs.py", "norms.py", "formulas.py", "registry.py", "textbook.py")


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


def core_imports(path: Path) -> list[str]:
    """The imports of a core module that are neither the standard library, NumPy, nor the core itself."""
    allowed_core = {f"microgradnorm.{c[:-3].replace('/', '.')}" for c in CORE}
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            modules = [f"{base}.{alias.name}" if base == "microgradnorm" else base for alias in node.names]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "numpy" or module in allowed_core:
                continue
            bad.append(f"{path.name}:{node.lineno} imports {module}")
    return bad


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


def test_the_import_scan_sees_function_level_imports_and_tells_the_core_from_the_rest(tmp_path):
    bad = tmp_path / "engine.py"
    bad.write_text(
        "import math\nimport numpy as np\n\ndef f():\n    from microgradnorm.i18n import _\n    import rich\n"
    )
    assert core_imports(bad) == ["engine.py:5 imports microgradnorm.i18n", "engine.py:6 imports rich"]


# ---- the package -----------------------------------------------------------------------------------


def test_only_the_registry_knows_a_norm_by_its_name():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "registry.py" and path.parent == PACKAGE:
            continue
        for line, what in name_uses(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line} {what}")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_only_the_standard_library_and_numpy(module):
    assert core_imports(PACKAGE / module) == []
