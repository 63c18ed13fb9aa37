"""The floors of the house run one way (docs: /work/shared/DESIGN.md, "The house"): core -> workshop -> cli.

Read from the source with :mod:`ast`, every ``import`` and ``from ... import`` of the package, at the top of
a module and inside its functions alike (a function-level import is still an arrow between two rooms):

- the textbook core imports only the standard library, NumPy and the core;
- the workshop never imports the CLI's floor (``cli``, ``commands``, the ``__main__`` scripts, the
  translators' tools in ``i18n_tools``);
- the shared drawing packages (charts and figures, the graph drawings in DOT) and the runtime translation
  import no feature (no lesson, lab, exercise, page, file output or command module);
- only ``microgradnorm.torch`` imports torch when it is imported (elsewhere torch is imported where it is used);
- the core imports nothing by a string (``importlib.import_module``): an arrow no reader or tool sees;
- no import circle, whichever floor (a circle is named by all its modules), counting the imports made only
  for type hints (a module that names another's class knows it), and none between rooms either: a
  sub-package (``lessons``, ``lab``, ``vectorized``, ...) is one room, so ``lab`` may import ``lessons`` or
  the other way round, never both.

Known exceptions are listed once, in ``KNOWN``, each with who removes it; an exception that no longer occurs
fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import microgradnorm

PACKAGE = Path(microgradnorm.__file__).resolve().parent
CORE = {
    "microgradnorm.engine",
    "microgradnorm.norms",
    "microgradnorm.formulas",
    "microgradnorm.registry",
    "microgradnorm.errors",  # the core's typed errors
    "microgradnorm.inputs",  # reading nested lists into the builders
    "microgradnorm.textbook",  # the textbook NumPy file
    "microgradnorm.numfmt",  # numbers as the package shows them (standard library only: every floor may use it)
}
# shared by the features above them: the charts and figures, the graph drawings (DOT), the runtime translation
DRAWING_AND_TRANSLATION = ("microgradnorm.drawing", "microgradnorm.viz", "microgradnorm.i18n")
# (rule, importer, imported) -> who removes it. The lead clears this list at the merge.
KNOWN: dict[tuple[str, str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(path: Path, modules: set[str], typing: bool = False) -> list[tuple[str, bool]]:
    """(imported module, at the top of the module?) for every import in ``path``. ``from a import b`` names
    ``a.b`` when that is a module of the package, else ``a``; imports under ``if TYPE_CHECKING:`` are no arrow
    at run time, and counted only with ``typing``."""
    name = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = (
        set()
        if typing
        else {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
    )
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "__import__"):
            found.append(("importlib.import_module", id(node) in top))  # by a string: seen by no reader
        elif isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full if full in modules else base, id(node) in top))
    return found


def package_graph(typing: bool = False) -> tuple[dict[str, list[tuple[str, bool]]], set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules, typing) for p in files}, modules


def rooms_graph(graph: Mapping[str, list[tuple[str, bool]]], modules: set[str]) -> dict[str, list[tuple[str, bool]]]:
    """The same arrows between rooms: a module of the package's top level, or a whole sub-package."""
    rooms: dict[str, list[tuple[str, bool]]] = {}
    for importer, imports in graph.items():
        arrows = rooms.setdefault(_room(importer), [])
        arrows += [(_room(_owner(i, modules)), top) for i, top in imports if _owner(i, modules)]
    return rooms


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _inside(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _floor(module: str) -> str:
    if module in CORE:
        return "core"
    if module.endswith("__main__") or _inside(module, ("microgradnorm.cli", "microgradnorm.commands")):
        return "cli"
    if _inside(module, ("microgradnorm.i18n_tools",)):
        return "cli"  # the translators' tools read lessons and exercises: above the workshop, beside the CLI
    return "workshop"


def _owner(module: str, modules: set[str]) -> str:
    """The package module ``module`` names (itself, or the package it is inside), else "" (outside)."""
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module


def violations(graph: Mapping[str, list[tuple[str, bool]]], modules: set[str]) -> set[tuple[str, str, str]]:
    """(rule, importer, imported) for every arrow against the floors."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    found = set()
    for importer, imports in graph.items():
        for imported, at_top in imports:
            root = imported.split(".")[0]
            target = _owner(imported, modules)
            if _floor(importer) == "core" and imported == "importlib.import_module":
                found.add(("hidden", importer, imported))
            elif _floor(importer) == "core" and not (root in stdlib or root == "numpy" or target in CORE):
                found.add(("core", importer, target or root))
            if _floor(importer) == "workshop" and target and _floor(target) == "cli":
                found.add(("floor", importer, target))
            if (
                _inside(importer, DRAWING_AND_TRANSLATION)
                and target
                and not _inside(target, DRAWING_AND_TRANSLATION)
                and target not in CORE  # the core's typed errors are said in the learner's language
            ):
                found.add(("shared", importer, target))
            if root == "torch" and at_top and not _inside(importer, ("microgradnorm.torch",)):
                found.add(("torch", importer, "torch"))
    return found


def circles(
    graph: Mapping[str, list[tuple[str, bool]]], modules: set[str], kind: str = "circle"
) -> set[tuple[str, str, str]]:
    """(kind, first module, the others) for each set of modules that reach each other (a strongly
    connected component of the import graph, named by its members in order)."""
    edges = {m: {_owner(i, modules) for i, _top in imports} - {"", m} for m, imports in graph.items()}
    reach = {m: _reachable(m, edges) for m in edges}
    found = set()
    for m in edges:  # m's component: m and every module that m reaches and that reaches m back
        first, *rest = sorted({m} | {w for w in reach[m] if m in reach.get(w, ())})
        if rest:
            found.add((kind, first, " ".join(rest)))
    return found


def _reachable(start: str, edges: Mapping[str, set[str]]) -> set[str]:
    """Every module that ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in edges.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_checker_sees_an_upward_import_a_circle_and_a_core_import_of_rich():
    """The rules themselves, on a made-up package: each kind of arrow against the floors is found."""
    modules = {"microgradnorm.engine", "microgradnorm.lessons.runner", "microgradnorm.cli", "microgradnorm.a"}
    modules |= {"microgradnorm.b", "microgradnorm.drawing.charts", "microgradnorm.viz.dot", "microgradnorm.page.render"}
    graph = {
        "microgradnorm.engine": [("rich.text", True), ("math", True), ("importlib.import_module", False)],
        "microgradnorm.lessons.runner": [("microgradnorm.cli", False)],
        "microgradnorm.a": [("microgradnorm.b", False)],
        "microgradnorm.b": [("microgradnorm.a", True), ("torch", True)],
        "microgradnorm.drawing.charts": [("microgradnorm.lessons.runner", False)],
        "microgradnorm.viz.dot": [("microgradnorm.page.render", False), ("microgradnorm.i18n", True)],
        "microgradnorm.cli": [],
    }
    assert violations(graph, modules) == {
        ("core", "microgradnorm.engine", "rich"),
        ("hidden", "microgradnorm.engine", "importlib.import_module"),
        ("floor", "microgradnorm.lessons.runner", "microgradnorm.cli"),
        ("shared", "microgradnorm.drawing.charts", "microgradnorm.lessons.runner"),
        ("shared", "microgradnorm.viz.dot", "microgradnorm.page.render"),
        ("torch", "microgradnorm.b", "torch"),
    }
    assert circles(graph, modules) == {("circle", "microgradnorm.a", "microgradnorm.b")}


def test_the_reader_sees_function_level_relative_and_typing_only_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "microgradnorm" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import n\n"
        "if TYPE_CHECKING:\n    from microgradnorm.cli import main\n"
        "def f():\n    import microgradnorm.viz\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "microgradnorm")
    found = imports_of(pkg / "m.py", {"microgradnorm.sub.n", "microgradnorm.viz"})
    assert ("microgradnorm.sub.n", True) in found and ("microgradnorm.viz", False) in found
    assert not [name for name, _top in found if name.startswith("microgradnorm.cli")]
    typed = imports_of(pkg / "m.py", {"microgradnorm.sub.n", "microgradnorm.viz"}, typing=True)
    assert [name for name, _top in typed if name.startswith("microgradnorm.cli")] == ["microgradnorm.cli"]


def test_a_circle_through_a_type_hint_or_between_two_rooms_is_found():
    """Two sub-packages that import each other through different modules, and a circle that closes only under
    ``if TYPE_CHECKING:``: neither is a module circle at run time, both are circles of the house."""
    modules = {"microgradnorm.lab", "microgradnorm.lab.show", "microgradnorm.lessons", "microgradnorm.lessons.demos"}
    modules |= {"microgradnorm.lessons.verdicts", "microgradnorm.check", "microgradnorm.present"}
    graph = {
        "microgradnorm.lab.show": [("microgradnorm.lessons.verdicts", True)],
        "microgradnorm.lessons.demos": [("microgradnorm.lab.show", False)],
        "microgradnorm.check": [("microgradnorm.present", False)],
        "microgradnorm.present": [("microgradnorm.check", True)],  # as imports_of(typing=True) reads it
    }
    assert circles(rooms_graph(graph, modules), {_room(m) for m in modules}, "rooms") == {
        ("rooms", "microgradnorm.check", "microgradnorm.present"),
        ("rooms", "microgradnorm.lab", "microgradnorm.lessons"),
    }
    del graph["microgradnorm.lessons.demos"]
    assert circles(rooms_graph(graph, modules), {_room(m) for m in modules}) == {
        ("circle", "microgradnorm.check", "microgradnorm.present")
    }


@pytest.fixture(scope="module")
def found() -> set[tuple[str, str, str]]:
    graph, modules = package_graph()
    typed, _modules = package_graph(typing=True)
    rooms = circles(rooms_graph(typed, modules), {_room(m) for m in modules}, "rooms")
    core_typed = {v for v in violations(typed, modules) if v[0] == "core"}  # a type-only import is knowledge too
    return violations(graph, modules) | core_typed | circles(typed, modules) | rooms


def test_no_import_runs_against_the_floors_and_there_is_no_circle(found):
    unexpected = sorted(found - set(KNOWN))
    assert not unexpected, "\n".join(f"{rule}: {a} imports {b}" for rule, a, b in unexpected)


def test_every_known_exception_still_occurs(found):
    """A removed exception leaves the list, so that it cannot come back unnoticed."""
    gone = sorted(set(KNOWN) - found)
    assert not gone, f"fixed, take them off KNOWN: {gone}"


def test_nothing_imports_the_cli():
    graph, modules = package_graph()
    importers = {m for m, imports in graph.items() for i, _top in imports if _owner(i, modules) == "microgradnorm.cli"}
    assert importers <= {"microgradnorm.__main__"}, importers
