"""The demo registry: the only place a lesson's numbers come from.

A lesson file never contains a computed number. It names a demo in a fenced
``demo`` block, and the demo -- a Python function registered here with
:func:`demo` -- computes everything live with the engine, the formulas and the
registry, and returns a rich renderable (wrapped in :class:`DemoOutput` when
the step also has a graph to draw with the runner's ``g`` key)::

    from microgradnorm.lessons.demos import DemoOutput, LessonParams, demo

    @demo("forward_table")
    def forward_table(p: LessonParams, norm: str = "layernorm") -> DemoOutput:
        ...
        return DemoOutput(table, graph=graph)

The registry is filled by importing the modules listed in :data:`DEMO_MODULES`
(call :func:`load_demos`); each lesson engineer owns their own modules and adds
their names to that tuple.

A demo is pure: it never prints, reads input or sleeps, it renders at 60
columns and with NO_COLOR, and it takes well under a second at the lesson's
default parameters.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from microgradnorm.inputs import check_eps, check_int

__all__ = [
    "DEMOS",
    "DEMO_MODULES",
    "DemoOutput",
    "DemoSpec",
    "LessonParams",
    "Prediction",
    "demo",
    "load_demos",
    "run_demo",
]

# Modules whose import registers demos. Lesson authors append their module here
# (a one-line edit); the order is the order demos are listed in error messages.
DEMO_MODULES: tuple[str, ...] = (
    "microgradnorm.lessons.demos_chain_rule",
    "microgradnorm.lessons.demos_ln_forward",
    "microgradnorm.lessons.demos_backward",
    "microgradnorm.lessons.demos_forms",
    "microgradnorm.lessons.demos_jacobian",
    "microgradnorm.lessons.demos_batchnorm",
    "microgradnorm.lessons.demos_rmsnorm",
    "microgradnorm.lessons.demos_practice",
    "microgradnorm.lessons.demos_residual",
    "microgradnorm.lessons.demos_why",
    "microgradnorm.lessons.demos_traps",
    "microgradnorm.lessons.demos_kernel",
    "microgradnorm.lessons.demos_geometry",
    "microgradnorm.lessons.demos_lab",
)


@dataclass(frozen=True)
class LessonParams:
    """The numbers a lesson runs on: the lesson's ``defaults`` overridden by the CLI.

    ``dim`` is the feature size d (LayerNorm, RMSNorm) or the column count
    (BatchNorm); ``seed`` seeds every random draw of the lesson; ``eps`` is the
    epsilon added to the variance; ``batch`` is the number of rows, None for a
    single vector (a demo that needs rows picks its own small default then).
    """

    dim: int = 4
    seed: int = 0
    eps: float = 1e-5
    batch: int | None = None

    def __post_init__(self) -> None:
        check_int("dim", self.dim)
        check_int("seed", self.seed, 0)
        if self.batch is not None:
            check_int("batch", self.batch)
        check_eps(self.eps)

    def replace(self, **changes: Any) -> LessonParams:
        """A copy with some fields changed (None values are ignored, so CLI defaults pass through)."""
        fields = {"dim": self.dim, "seed": self.seed, "eps": self.eps, "batch": self.batch}
        for key, value in changes.items():
            if key not in fields:
                raise TypeError(f"LessonParams has no field {key!r}; it has {', '.join(fields)}")
            if value is not None:
                fields[key] = value
        return LessonParams(**fields)


@dataclass(frozen=True)
class Prediction:
    """A question the learner answers before the demo's numbers appear ("ask before telling").

    Everything is computed live by the demo: ``answer`` is the index into ``choices``
    that the numbers below it make true, and ``why`` explains the answer from those
    numbers (so it can never contradict them). The runner asks the question, takes one
    key (1, 2, ...), then shows the demo's renderable and whether the guess was right;
    ``--auto`` prints the question and the answer without waiting.
    """

    question: str
    choices: tuple[str, ...]
    answer: int
    why: str
    # One measured condition per choice (a :class:`~microgradnorm.verdicts.Check`, or None for a
    # choice with none): the option-grid test asserts that the answer's holds under every option.
    evidence: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if not 2 <= len(self.choices) <= 9:
            raise ValueError(f"choices: expected 2 to 9 choices, got {len(self.choices)}")
        if self.evidence and len(self.evidence) != len(self.choices):
            raise ValueError(f"evidence: expected one per choice ({len(self.choices)}), got {len(self.evidence)}")
        if not 0 <= self.answer < len(self.choices):
            raise ValueError(f"answer: expected an index into the {len(self.choices)} choices, got {self.answer}")

    @classmethod
    def from_evidence(cls, question: str, choices: tuple[str, ...], why: str, evidence: tuple[Any, ...]) -> Prediction:
        """The question, answered by the first choice whose evidence holds (verdicts.first_holding)."""
        from microgradnorm.verdicts import first_holding  # rich: not for `microgradnorm lesson --help`

        return cls(question, choices, first_holding(evidence), why, evidence)


@dataclass
class DemoOutput:
    """What a demo returns: the renderable shown in the step, and the graph ``g`` draws.

    ``graph`` is anything :func:`microgradnorm.output.render` accepts (a
    ``NormGraph``, a ``Value`` or a list of Values), a
    :class:`microgradnorm.drawing.figure.Figure` (written as it is), or None when the
    step has no graph. ``graph_options`` are passed on to ``output.render`` (for example
    ``{"paths": True}`` to colour the three paths into x). ``prediction``, when
    set, is asked before ``renderable`` is shown (see :class:`Prediction`).
    """

    renderable: Any
    graph: Any = None
    graph_options: dict[str, Any] = field(default_factory=dict)
    prediction: Prediction | None = None
    # every ✓/✗ the demo printed, with what it was measured against (filled in by run_demo)
    verdicts: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class DemoSpec:
    """One registered demo: its function and the keyword parameters a lesson may set."""

    name: str
    function: Callable[..., Any]
    module: str
    parameters: tuple[str, ...]
    required: tuple[str, ...]
    summary: str

    @property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.function)


DEMOS: dict[str, DemoSpec] = {}


def demo(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the demo ``name``.

    The function's first parameter receives the :class:`LessonParams`; its other
    parameters are the ``key: value`` lines a lesson may write under the demo
    name (checked when the lesson is loaded).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"demo name: expected an identifier like 'forward_table', got {name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(fn).parameters.values())
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            raise TypeError(f"demo {name!r}: the first parameter must take the LessonParams, got {fn.__qualname__}")
        rest = params[1:]
        for q in rest:
            if q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD, q.POSITIONAL_ONLY):
                raise TypeError(f"demo {name!r}: parameter {q.name!r} must be a plain keyword parameter")
        existing = DEMOS.get(name)
        if existing is not None and (existing.module, existing.function.__qualname__) != (
            fn.__module__,
            fn.__qualname__,
        ):
            raise ValueError(
                f"demo {name!r} is defined twice: in {existing.module} ({existing.function.__qualname__}) "
                f"and in {fn.__module__} ({fn.__qualname__})"
            )
        doc = inspect.getdoc(fn) or ""
        DEMOS[name] = DemoSpec(
            name=name,
            function=fn,
            module=fn.__module__,
            parameters=tuple(q.name for q in rest),
            required=tuple(q.name for q in rest if q.default is q.empty),
            summary=doc.splitlines()[0] if doc else "",
        )
        return fn

    return register


_loaded = False


def load_demos() -> dict[str, DemoSpec]:
    """Import every module in :data:`DEMO_MODULES` (once) and return the registry."""
    global _loaded
    if not _loaded:
        for module in DEMO_MODULES:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ImportError(
                    f"demo module {module} (listed in DEMO_MODULES) could not be imported: {exc}"
                ) from exc
        _loaded = True
    return DEMOS


def run_demo(name: str, params: LessonParams, args: Mapping[str, Any] | None = None) -> DemoOutput:
    """Call the demo ``name`` with the lesson's params and the block's arguments.

    A demo that returns a bare renderable is wrapped in a :class:`DemoOutput`
    without a graph.
    """
    load_demos()
    try:
        spec = DEMOS[name]
    except KeyError:
        raise KeyError(f"unknown demo {name!r}; known demos: {', '.join(sorted(DEMOS))}") from None
    from microgradnorm.verdicts import recording

    with recording() as marks:
        result = spec.function(params, **dict(args or {}))
    out = result if isinstance(result, DemoOutput) else DemoOutput(result)
    out.verdicts = list(marks)
    return out
