"""Helpers the test modules share: rendering a rich renderable to text and running the CLI in-process; reading
what a demo said (a message through the catalog, a recorded ✓/✗) instead of copying its English; the refusal
tables; sample lessons; and the independent oracles the norm tests compare with (PyTorch, finite differences)."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shutil
import string
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.syntax import Syntax

from microgradnorm import cli
from microgradnorm import tolerances as tol
from microgradnorm.commands import exercise

# a sample lesson and its Chinese translation, for the tests of translated lessons (they edit copies of them)
SAMPLE_LESSONS = Path(__file__).resolve().parent / "i18n_fixtures" / "lessons"
SAMPLE_LESSON = "01-chain-rule-sample.md"


def sample_lessons(folder: Path) -> tuple[Path, Path]:
    """A copy of the sample lesson and its translation as the lessons folder ``folder``: (english, translation)."""
    shutil.copytree(SAMPLE_LESSONS, folder)
    return folder / SAMPLE_LESSON, folder / "zh-CN" / SAMPLE_LESSON


def edit(path: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in the file ``path`` with ``new``; ``old`` must be there."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def rendered(renderable: Any, width: int = 100) -> str:
    """``renderable`` as rich prints it to a plain terminal ``width`` cells wide, without colour."""
    console = Console(file=io.StringIO(), width=width, no_color=True, record=True)
    console.print(renderable)
    return console.export_text()


def flat(renderable: Any, width: int = 100) -> str:
    """:func:`rendered` with every run of whitespace (line breaks, table padding) made one space."""
    return " ".join(rendered(renderable, width).split())


def said_in(message: str, text: str) -> dict[str, str] | None:
    """The fields with which ``text`` says ``message`` (a msgid with ``{named}`` fields, rendered through the catalog
    in the current language), or None where it does not: a test asserts which message is shown and the facts filled
    into it, not a copy of its sentence. A field matches a run of non-space characters."""
    from microgradnorm.i18n import _

    pattern = "".join(
        re.escape(literal) + (rf"(?P<{name}>\S+)" if name else "")
        for literal, name, _spec, _conv in string.Formatter().parse(_(message))
    )
    found = re.search(pattern, text)
    return found.groupdict() if found else None


def marked(out: Any, *what: str) -> bool:
    """The ✓ (True) or ✗ (False) that the demo output ``out`` printed for the one claim whose check measures
    ``what`` (the ``Check.what`` of each measurement it is decided by, in order: the code's own names for them):
    the fact behind a "✓ ..." line, asserted without copying the line's English."""
    found = [v.ok for v in out.verdicts if measures(v.check) == what]
    assert len(found) == 1, f"{len(found)} verdicts measure {what!r}: {[measures(v.check) for v in out.verdicts]}"
    return found[0]


def measures(check: Any) -> tuple[str, ...]:
    """The distinct ``Check.what`` of a Check or of every Check in a Checks, in order."""
    parts = getattr(check, "parts", None)
    whats = [w for c in parts for w in measures(c)] if parts else [getattr(check, "what", "")]
    return tuple(dict.fromkeys(whats))


def refuses(make: Any, kind: type[BaseException], words: Any) -> BaseException:
    """``make()`` raises ``kind`` with a message that names every one of ``words`` (the argument, what was
    expected, what was given); the exception, for more checks."""
    import pytest

    with pytest.raises(kind) as info:
        make()
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    return info.value


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``microgradnorm *argv``; argparse's exits (--help, usage errors) too."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def run_exercise(*argv: str, stdin: str = "", width: int = 120, terminal: bool = False) -> tuple[int, str]:
    """(exit code, what it printed) of ``microgradnorm exercise *argv`` through the real parser, printing into a
    string ``width`` columns wide without colour and reading ``stdin``; usage errors raise as the command does."""
    args = cli.build_parser().parse_args(["exercise", *argv])
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=terminal or None)
    code = exercise.main(args, console, io.StringIO(stdin))
    return code, console.file.getvalue()


# ---- demos run once per session ----------------------------------------------------------------------------
# The sweeps over every lesson (each step at two widths, in English and in Chinese, the option grid) read the
# same demo outputs many times over, and running a demo costs far more than reading its output. A demo's output
# is a pure result of what is in the key below, so the sweeps share one run of each. Only for tests that read
# what a demo returns: a test that changes what a demo depends on inside its module (numba hidden, a patched
# helper) calls run_demo itself. A replaced demo (a different registered function) is a different key.
_DEMO_RUNS: dict[tuple, Any] = {}


def run_demo_once(name: str, params: Any, args: Any = None) -> Any:
    """``run_demo(name, params, args)``, run once per session for each demo function, parameters, arguments,
    language and backend setting; a demo that raises is not kept (it raises again next time)."""
    from microgradnorm.i18n import current_language
    from microgradnorm.lessons.demos import load_demos, run_demo
    from microgradnorm.vectorized.backend import get_backend

    spec = load_demos().get(name)  # the spec itself (not its id): a patched demo is a new key
    key = (name, spec, params, repr(sorted(dict(args or {}).items())), current_language(), get_backend())
    if key not in _DEMO_RUNS:
        _DEMO_RUNS[key] = run_demo(name, params, args)
    return _DEMO_RUNS[key]


# ---- a norm's numbers: one pass through the registry's entry, the comparison, the oracles -------------------
# (the vectorized path, the fused kernels, GroupNorm, the scalar graph against NumPy and PyTorch)
# The fused backend needs numba (the [fast] extra); without it, it is not run and tests/test_fused.py skips.
BACKENDS = ("numpy", "fused", "reference") if importlib.util.find_spec("numba") else ("numpy", "reference")
TUNED = tuple(b for b in BACKENDS if b != "reference")
RESULTS = ("y", "dx", "dgamma", "dbeta")


def run(norm: Any, x, gamma, beta, dy, eps=1e-5, backend=None, recompute=None) -> tuple:
    """Forward and backward through the public pass of the registry's entry ``norm`` (a name or the entry
    itself): (y, dx, dgamma, dbeta, cache)."""
    from microgradnorm.registry import get_norm
    from microgradnorm.vectorized import public_pass

    forward, backward = public_pass(get_norm(norm) if isinstance(norm, str) else norm)
    y, cache = forward(x, gamma, beta, eps, backend=backend, recompute=recompute)
    return (y, *backward(dy, cache), cache)


def assert_close(a, b, rtol: float, atol: float, what: str = "") -> None:
    """Normwise ``tol.close``, with the shapes and errors said when it fails."""
    assert a is not None and b is not None, what
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    abs_err, rel_err = tol.normwise_error(a, b)
    assert tol.close(a, b, rtol, atol), f"{what}: max abs error {abs_err:.3g}, normwise relative {rel_err:.3g}"


def assert_results_close(got, want, rtol: float, atol: float, what: str = "") -> None:
    """(y, dx, dgamma, dbeta) against (y, dx, dgamma, dbeta): each close, or both None (no gamma, no beta)."""
    for name, a, b in zip(RESULTS, got, want):
        assert (a is None) == (b is None), f"{name} {what}: {a is None} vs {b is None}"
        if b is not None:
            assert_close(a, b, rtol, atol, f"{name} {what}")


def values(nested) -> np.ndarray:
    """The data of a (nested) list of scalar nodes, as an array of the same shape."""
    return np.array(
        [values(v) for v in nested] if isinstance(nested[0], list) else [v.data for v in nested], dtype=np.float64
    )


def graph_results(graph, shape) -> tuple:
    """(y, dx, dgamma, dbeta) of a scalar graph after its backward: y and dx in ``shape``; None where it has no
    such node."""

    def grads(name):
        return np.array([v.grad for v in graph[name]]) if name in graph else None

    y = np.array([v.data for v in graph["y"]]).reshape(shape)
    return y, grads("x").reshape(shape), grads("gamma"), grads("beta")


def torch_results(norm: str, x, gamma, beta, dy, eps: float, groups: int = 1) -> tuple:
    """(y, dx, dgamma, dbeta) from torch.nn.functional in x's dtype, written out here (not the registry's)."""
    import torch

    fn = torch.nn.functional
    xt, gt, bt = (None if a is None else torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    y = {  # each norm's call (a norm the registry gains is a KeyError here until it is written out)
        "layernorm": lambda: fn.layer_norm(xt, (x.shape[-1],), gt, bt, eps),
        "rmsnorm": lambda: fn.rms_norm(xt, (x.shape[-1],), gt, eps),
        "groupnorm": lambda: fn.group_norm(xt, groups, gt, bt, eps),
        "batchnorm": lambda: fn.batch_norm(xt, None, None, gt, bt, True, 0.1, eps),  # training-mode statistics
    }[norm]()
    y.backward(torch.tensor(dy))
    return (y.detach().numpy(), *(None if t is None else t.grad.numpy() for t in (xt, gt, bt)))


def numeric_grad(loss, a) -> np.ndarray:
    """Central finite differences of a scalar function of an array (or a sequence of numbers), in float64, with a
    step of ``tol.FD_STEP`` relative to each entry (at least FD_STEP)."""
    a = np.asarray(a, dtype=np.float64)
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        h = tol.FD_STEP * max(1.0, abs(a[i]))
        up, down = a.copy(), a.copy()
        up[i] += h
        down[i] -= h
        g[i] = (loss(up) - loss(down)) / (2 * h)
    return g


def problem(norm: Any, shape: tuple[int, ...], seed: int, dtype: Any = None) -> tuple:
    """``check.random_problem`` of the registry's entry ``norm`` (a name or the entry itself): (x, gamma, beta, dy),
    each cast to ``dtype`` where one is given (None, as RMSNorm's beta, stays None)."""
    from microgradnorm.check import random_problem
    from microgradnorm.registry import get_norm

    arrays = random_problem(get_norm(norm) if isinstance(norm, str) else norm, shape, seed)
    return tuple(a if a is None or dtype is None else a.astype(dtype) for a in arrays)


def graph_problem(norm: str = "layernorm", shape: tuple[int, ...] = (3,), backward: bool = True, seed: int = 0):
    """The scalar graph of ``problem(norm, shape, seed)`` with eps = 1e-5, and its arrays (x, gamma, beta, dy);
    with ``backward`` the loss sum(y * dy) has run backward()."""
    from microgradnorm.registry import get_norm

    arrays = problem(norm, shape, seed)
    graph = get_norm(norm).build_graph(*arrays[:3], 1e-5)
    if backward:
        graph.loss(arrays[3].tolist()).backward()
    return graph, arrays


def check_report(norm: str = "layernorm", shape: tuple[int, ...] = (4,), seed: int = 0) -> Any:
    """``check_norm``'s report on ``problem(norm, shape, seed)`` with eps = 1e-5."""
    from microgradnorm.check import check_norm

    x, gamma, beta, dy = problem(norm, shape, seed)
    return check_norm(norm, x, gamma, beta, 1e-5, dy, seed=seed)


def embedded_data(page: str) -> dict:
    """The JSON a graph page carries in its graph-data script."""
    m = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page, re.S)
    assert m, "the page carries its data"
    return json.loads(m.group(1).replace("<\\/", "</"))


def scalar_results(norm: Any, x, gamma, beta, dy, eps: float) -> tuple:
    """(y, dx, dgamma, dbeta) of the scalar graph that the registry's entry ``norm`` (a name or the entry) builds
    for ``x``, after the backward of loss = sum(y * dy): the scalar engine as an oracle for the other paths."""
    from microgradnorm.registry import get_norm

    graph = (get_norm(norm) if isinstance(norm, str) else norm).build_graph(x, gamma, beta, eps)
    graph.loss(np.asarray(dy).tolist()).backward()
    return graph_results(graph, np.shape(x))


def rendered_lines(renderable: Any, width: int = 100) -> list[str]:
    """The lines of :func:`rendered`: ``renderable`` as a plain terminal ``width`` cells wide shows it."""
    return rendered(renderable, width).splitlines()


# ---- shared by the lesson tests ------------------------------------------------------------------------------


def chinese_prose_problems(text: str, width: int) -> list[str]:
    """What is wrong with the Chinese prose of ``text`` printed ``width`` cells wide (its lines with wide
    characters, bar a rule or a step header): a line that starts with punctuation that may not start one, a line
    wider than ``width``, no paragraph wrapped inside Chinese text, or one wrapped before its line was full."""
    import unicodedata

    from rich.cells import cell_len

    from microgradnorm.i18n.text import NO_START

    def ideograph(char: str) -> bool:
        return unicodedata.category(char) == "Lo" and unicodedata.east_asian_width(char) == "W"

    lines = text.splitlines()
    prose = [k for k, line in enumerate(lines) if any(map(ideograph, line)) and not line.startswith(("─", "第"))]
    found = [f"line {k + 1} starts with {lines[k].lstrip()[0]}" for k in prose if lines[k].lstrip()[:1] in NO_START]
    found += [f"line {k + 1} is {cell_len(lines[k])} cells wide" for k in prose if cell_len(lines[k]) > width]
    continued = [k for k in prose if k + 1 in prose and ideograph((lines[k + 1].lstrip() or " ")[0])]
    if not continued:
        found.append("no paragraph wraps inside Chinese text")
    found += [
        f"line {k + 1} leaves {width - cell_len(lines[k].rstrip())} cells empty before a character"
        for k in continued
        if cell_len(lines[k].rstrip()) < width - 2
    ]
    return found


def asking_steps(lesson: Any) -> list[int]:
    """The indices (from 0) of the steps of ``lesson`` whose demos, run with its defaults, ask a question first."""
    from microgradnorm.lessons.runner import step_outputs

    params = lesson.params()
    return [
        index
        for index in range(len(lesson.steps))
        if any(getattr(out, "prediction", None) is not None for out in step_outputs(lesson, index, params))
    ]


def standardize(x: np.ndarray, axis: Any, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) along ``axis``, written out from the definition (the lesson tests' oracle)."""
    mu = x.mean(axis=axis, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axis, keepdims=True) + eps)


def torch_stack_grads(weights: Any, arrangement: str) -> tuple[np.ndarray, float]:
    """(|dL/dh| at the input of each block, |dL/dh| at the top) of lesson 11's residual stack, written out in
    PyTorch from ``weights`` (a ``demos_residual.StackWeights``): "pre" blocks h + f(LN(h)) under a last LN,
    "post" blocks LN(h + f(h)), f(u) = tanh(u·w1 + b1)·w2, eps 1e-5, and the loss sum(out · weights.g)."""
    import torch

    def ln(v):
        return torch.nn.functional.layer_norm(v, (v.shape[-1],), eps=1e-5)

    h, inputs = torch.tensor(weights.x, requires_grad=True), []
    for w1, b1, w2 in zip(weights.w1, weights.b1, weights.w2):
        h.retain_grad()
        inputs.append(h)
        w1, b1, w2 = (torch.tensor(a) for a in (w1, b1, w2))
        if arrangement == "pre":
            h = h + torch.tanh(ln(h) @ w1 + b1) @ w2
        else:
            h = ln(h + torch.tanh(h @ w1 + b1) @ w2)
    h.retain_grad()
    ((ln(h) if arrangement == "pre" else h) * torch.tensor(weights.g)).sum().backward()
    return np.array([float(t.grad.norm()) for t in inputs]), float(h.grad.norm())


def assert_demo_passes(name: str, params: Any, args: Any = None, widths: tuple[int, ...] = (60, 100)) -> None:
    """The demo ``name``, run with ``params`` and ``args``, shows something at each of ``widths`` columns, within
    them, and no failed check (✗)."""
    from microgradnorm.lessons.demos import run_demo

    out = run_demo(name, params, args)
    for width in widths:
        text = rendered(out.renderable, width)
        assert text.strip(), f"{name} {args} shows nothing at {params}"
        assert "✗" not in text, f"{name} {args} reports a failed check at {params}:\n{text}"
        assert max(len(line) for line in text.splitlines()) <= width, f"{name} {args} at {width} columns:\n{text}"


def syntax_blocks(renderable) -> list[Syntax]:
    """Every rich Syntax block inside a demo's ``renderable``: the package code it shows (lessons/source.py)."""
    if isinstance(renderable, Syntax):
        return [renderable]
    return [block for child in getattr(renderable, "renderables", ()) for block in syntax_blocks(child)]
