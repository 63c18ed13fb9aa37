"""The readable-core rule (tests/readable.py): the package holds it, and the measuring code measures right.

The rule: no function longer than MAX_LINES lines, at most MAX_LONG longer than
LONG_LINES, none with more than MAX_BRANCHES branch points, except a function
whose first lines say ``readable-core: whole`` and why.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests import readable

# the modules the core of the package is made of (the engine, the norms, the check, the fused
# kernels, the benchmarks and their commands): they keep the rule on their own
CORE = (
    "engine",
    "norms",
    "registry",
    "fused",
    "check",
    "tolerances",
    "bench/timing",
    "bench/vectorized",
    "bench/targets",
    "bench/engine",
    "present",
    "formulas",
    "jacobian",
    "commands/bench",
    "commands/check",
)


@pytest.fixture(scope="module")
def package_sizes() -> list[readable.FunctionSize]:
    """Every function of the package, measured once for the tests of the rule."""
    return readable.measure()


def test_the_package_keeps_the_readable_core_rule(package_sizes):
    problems = readable.violations(package_sizes)
    assert problems == [], "\n".join(["the readable-core rule is broken (python -m tests.readable):", *problems])


def test_the_core_modules_keep_the_rule_on_their_own(package_sizes):
    core = [s for s in package_sizes if any(f"microgradnorm/{m}.py:" in s.where for m in CORE)]
    assert len(core) > 100  # the filter found the modules
    assert [v for v in readable.violations(core) if "functions are longer" not in v] == []
    assert [s.where for s in core if s.lines > readable.LONG_LINES and not s.exempt] == []


# ---- the measuring code, on small synthetic sources ------------------------------------------


def measure(tmp_path: Path, source: str) -> dict[str, readable.FunctionSize]:
    package = tmp_path / "pkg"
    package.mkdir(exist_ok=True)
    (package / "mod.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return {s.where.split(" ")[1]: s for s in readable.measure(package)}


def function(name: str, lines: int, head: str = "") -> str:
    """A function ``lines`` lines long (def line included), with ``head`` as its first body line."""
    body = [head] if head else []
    body += [f"x{i} = {i}" for i in range(lines - 1 - len(body))]
    return f"def {name}():\n" + "".join(f"    {line}\n" for line in body)


def test_lines_run_from_the_first_decorator_to_the_last_line(tmp_path):
    sizes = measure(tmp_path, "import functools\n\n@functools.cache\n" + function("f", 10))
    assert sizes["f"].lines == 11 and sizes["f"].where.startswith("pkg/mod.py:4 ")


def test_each_kind_of_branch_point_counts(tmp_path):
    source = """
        def f(xs, a, b, c):
            if a:                                  # 1
                pass
            elif b:                                # 2 (an elif is an if)
                pass
            for x in xs:                           # 3
                while x:                           # 4
                    x -= 1
            try:
                pass
            except ValueError:                     # 5
                pass
            except KeyError:                       # 6
                pass
            y = 1 if a else 2                      # 7
            z = a and b and c                      # 8, 9
            w = a or b                             # 10
            return [v for v in xs if v if v > 1]   # 11, 12
    """
    assert measure(tmp_path, source)["f"].branches == 12


def test_a_nested_function_is_measured_on_its_own_and_not_in_its_parent(tmp_path):
    source = """
        class C:
            def method(self, a):
                def inner(b):
                    if b:
                        return 1
                    return 2 if b else 3
                if a:
                    return inner(a)
    """
    sizes = measure(tmp_path, source)
    assert sizes["C.method"].branches == 1 and sizes["C.method.inner"].branches == 2
    assert sizes["C.method"].lines == 7 and sizes["C.method.inner"].lines == 4


def test_a_function_over_the_line_limit_breaks_the_rule(tmp_path):
    sizes = measure(tmp_path, function("long", readable.MAX_LINES + 1) + function("ok", readable.MAX_LINES))
    problems = readable.violations(list(sizes.values()))
    assert problems == [f"pkg/mod.py:1 long: {readable.MAX_LINES + 1} lines (at most {readable.MAX_LINES})"]


def test_a_function_over_the_branch_limit_breaks_the_rule(tmp_path):
    def branchy(name: str, n: int) -> str:
        return f"def {name}(a):\n" + "".join(f"    if a == {i}:\n        return {i}\n" for i in range(n))

    sizes = measure(tmp_path, branchy("many", readable.MAX_BRANCHES + 1) + branchy("enough", readable.MAX_BRANCHES))
    assert sizes["many"].branches == readable.MAX_BRANCHES + 1
    problems = readable.violations(list(sizes.values()))
    assert len(problems) == 1 and "many" in problems[0] and "branch points" in problems[0]


@pytest.mark.parametrize("count", [readable.MAX_LONG, readable.MAX_LONG + 1])
def test_only_so_many_functions_may_be_long(tmp_path, count):
    source = "".join(function(f"f{i}", readable.LONG_LINES + 1) for i in range(count))
    source += function("short", readable.LONG_LINES)
    problems = readable.violations(list(measure(tmp_path, source).values()))
    if count == readable.MAX_LONG:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(f"{count} functions are longer than")


def test_a_function_marked_whole_is_exempt_but_only_near_its_top(tmp_path):
    mark = f"# {readable.EXEMPT_MARK}: a kernel reads best as one loop"
    marked = function("marked", readable.MAX_LINES + 5, head=mark)
    late = function("late", readable.MAX_LINES + 5).replace("    x20 = 20\n", f"    {mark}\n")
    sizes = measure(tmp_path, marked + late)
    assert sizes["marked"].exempt and not sizes["late"].exempt
    problems = readable.violations(list(sizes.values()))
    assert len(problems) == 1 and "late" in problems[0]
