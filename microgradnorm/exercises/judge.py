"""Judge what came back from the learner's code: one function per check.

Each check takes the :class:`Evidence` (the cases with their right answers, and
what the child process sent back) and returns a :class:`Verdict`: its rows of
the report's table and, if it failed, how to explain the failure. The checks,
in the order of the table:

* :func:`check_types`: every output a float64 array of the right shape, on all three calls;
* :func:`check_finite`: no NaN or Inf in an output that came back as numbers;
* :func:`check_values`: every output within float64 rounding of the closed form, on the first input;
* :func:`check_second`: the same on the second input (another shape, eps = 0);
* :func:`check_repeatable`: the same answer when called again on the first input;
* :func:`check_untouched`: every input as it was given.

:func:`judge` runs them all and explains the first failure worth explaining
(a wrong type before a changed input before a wrong value), with
:func:`explain_values` for wrong values: every wrong output at once, each named
mistake only where the numbers single it out (a swapped pair, a known mistake or
two, an estimate, a constant or named factor), an output that is right for the
learner's own wrong inputs said to follow from them, a shared upstream cause
(the forward pass, exercise 11's dh) said once, and the geometry of an error
only where nothing else is wrong that could cause it; else which outputs are
off, by how much, and what to check.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from microgradnorm import tolerances as tol
from microgradnorm.exercises import rounding, wire
from microgradnorm.exercises.diagnose import (
    Finding,
    Mistake,
    factor_findings,
    finding,
    geometry_findings,
    match_mistake,
    match_pair,
    matches,
    scale_finding,
    shape_findings,
    worst_entry,
)
from microgradnorm.exercises.messages import listed, say
from microgradnorm.exercises.problems import Case, Problem
from microgradnorm.numfmt import bracketed

__all__ = [
    "CALLS",
    "CheckRow",
    "Evidence",
    "Judgement",
    "Verdict",
    "Worst",
    "explain_values",
    "judge",
]

CALLS = ("a", "b", "a2")  # the first input, the second, the first again
_TEXT_LIMIT = 40  # characters of a type name from the child shown back
# an answer wrong only where eps = 0 and within EPS_FIT_RTOL (relative) of the right one is tested
# for a guard (``eps or 1e-5``): some eps > 0 must explain all but EPS_FIT_SHARE of its error
EPS_FIT_RTOL = 0.1
EPS_FIT_SHARE = 1e-3
EPS_FIT_START = 1e-9  # the first step in eps that measures how the output moves
EPS_FIT_STEPS = 4  # secant steps: a guard's eps is found to rounding in two or three


@dataclass(frozen=True)
class CheckRow:
    """One line of the per-check table. ``ok`` is None when the check could not run."""

    label: str
    ok: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Worst:
    """The entry of a wrong output where the learner's answer is furthest from the right one."""

    output: str
    case: str
    index: tuple[int, ...]
    expected: float
    got: float


Explanation = tuple[list[Finding], Worst | None]


@dataclass
class Verdict:
    rows: list[CheckRow]
    explain: Callable[[], Explanation] | None = None  # None: nothing went wrong here


@dataclass
class Judgement:
    rows: list[CheckRow]
    findings: list[Finding] = field(default_factory=list)
    worst: Worst | None = None

    @property
    def passed(self) -> bool:
        return all(r.ok for r in self.rows)


@dataclass
class Evidence:
    """The cases, and what the child sent back: descriptions per call and output, and arrays."""

    problem: Problem
    cases: list[Case]
    calls: dict[str, Any]
    arrays: dict[str, np.ndarray]
    bad: set[tuple[str, str]] = field(default_factory=set)  # (call, output) of the wrong type or shape

    def case(self, call: str) -> Case:
        return self.cases[1] if call == "b" else self.cases[0]

    def got(self, call: str, name: str) -> np.ndarray | None:
        return self.arrays.get(wire.key(call, "out", name))

    def usable(self, call: str, name: str) -> np.ndarray | None:
        """The output as numbers, if it came back with the right type and shape."""
        return None if (call, name) in self.bad else self.got(call, name)

    def outputs(self, call: str) -> dict[str, np.ndarray]:
        """Every output of ``call`` that came back as numbers of the right type and shape, by name."""
        return {o.name: g for o in self.problem.outputs if (g := self.usable(call, o.name)) is not None}

    def description(self, call: str, name: str) -> dict[str, Any]:
        desc = self.calls.get(call, {}) if isinstance(self.calls, dict) else {}
        found = desc.get(name) if isinstance(desc, dict) else None
        return found if isinstance(found, dict) else {"kind": "missing"}


def _text(value: Any) -> str:
    return str(value)[:_TEXT_LIMIT]


def _index(idx: tuple[int, ...]) -> str:
    return bracketed(idx) if idx else ""


# ---- types and shapes ------------------------------------------------------------------


def _type_problem(name: str, desc: dict[str, Any], got: np.ndarray | None, expected: np.ndarray) -> str | None:
    kind, want = desc.get("kind"), say("type_want", shape=tuple(expected.shape))
    if kind == "missing":
        return say("type_missing", name=name, want=want)
    if kind == "none":
        return say("type_none", name=name, want=want)
    if kind in ("list", "scalar"):
        return say(f"type_{kind}", name=name, type=_text(desc.get("type")), want=want)
    if kind != "array":
        return say("type_other", name=name, type=_text(desc.get("type", "nothing")), want=want)
    if desc.get("dtype") != "float64":
        return say("type_dtype", name=name, dtype=_text(desc.get("dtype")))
    if got is None:
        return say("type_too_large", name=name, size=_text(desc.get("shape")), want=want)
    if got.shape != expected.shape:
        return say("type_shape", name=name, got=got.shape, expected=tuple(expected.shape))
    return None


def _shape_of(desc: dict[str, Any], got: np.ndarray | None) -> tuple[int, ...] | None:
    if got is not None:
        return got.shape
    shape = desc.get("shape")  # from the child: believed only if it looks like a shape
    if isinstance(shape, list) and len(shape) <= 32 and all(type(s) is int and 0 <= s < 2**31 for s in shape):
        return tuple(shape)
    return None


def _explain_shape(ev: Evidence, call: str, name: str) -> Explanation:
    case, got = ev.case(call), ev.got(call, name)
    expected = case.expected[name]
    shape = _shape_of(ev.description(call, name), got)
    if shape is None or shape == expected.shape:
        return [], None
    squeezed = (
        got is not None and got.size == expected.size and tol.close(got.reshape(expected.shape), expected, 1e-8, 1e-10)
    )
    called, problem = f"`{ev.problem.output(name).called}`", ev.problem
    if shape == () and expected.ndim == 2:  # a number where a matrix belongs: an inner product, most often
        return [finding("number_for_matrix", name=called, expected=expected.shape)], None
    x_shape = case.info.get("x_shape")
    return shape_findings(called, shape, expected.shape, x_shape, squeezed, problem.reduced_from), None


def check_types(ev: Evidence) -> Verdict:
    errors = []
    for call in CALLS:
        for o in ev.problem.outputs:
            msg = _type_problem(
                o.called, ev.description(call, o.name), ev.got(call, o.name), ev.case(call).expected[o.name]
            )
            if msg:
                errors.append((call, o.name, msg))
                ev.bad.add((call, o.name))
    if not errors:
        return Verdict([CheckRow(say("check_types"), True, say("row_types_ok"))])
    call, _name, msg = errors[0]
    names = list(dict.fromkeys(n for c, n, _m in errors if c == call))  # two shapes wrong: both explained

    def explain() -> Explanation:
        return [f for n in names for f in _explain_shape(ev, call, n)[0]], None

    return Verdict([CheckRow(say("check_types"), False, msg)], explain)


# ---- finite ---------------------------------------------------------------------------------


def check_finite(ev: Evidence) -> Verdict:
    bad, checked, skipped = [], 0, 0
    for call in ("a", "b"):
        for o in ev.problem.outputs:
            g = ev.usable(call, o.name)
            if g is None:
                skipped += 1
                continue
            checked += 1
            if not np.all(np.isfinite(g)):
                bad.append((call, o.called, int(np.isnan(g).sum()), int(np.isinf(g).sum())))
    if not checked:
        return Verdict([CheckRow(say("check_finite"), None, say("row_finite_none"))])
    if not bad:
        among = say("row_finite_among", count=checked) if skipped else ""
        return Verdict([CheckRow(say("check_finite"), True, say("row_finite_ok", among=among))])
    call, name, nan, inf = bad[0]
    detail = say("row_nonfinite", name=name, nan=nan, inf=inf, call=say(f"call_{call}"))
    eps0 = say("finite_eps0") if call == "b" and ev.case(call).info.get("eps") == 0 else ""
    row = CheckRow(say("check_finite"), False, detail)
    return Verdict([row], lambda: ([finding("not_finite", detail=detail, eps0=eps0)], None))


# ---- values ---------------------------------------------------------------------------------


def check_values(ev: Evidence) -> Verdict:
    rows: list[CheckRow] = []
    failing: list[str] = []
    case = ev.cases[0]
    for o in ev.problem.outputs:
        g = ev.usable("a", o.name)
        if g is None:
            rows.append(CheckRow(o.row, None, say("row_not_compared")))
            continue
        ok = case.right(o.name, g)
        rel = rounding.relative_error(g, case.expected[o.name])
        if not math.isfinite(rel):
            detail = say("row_not_finite")
        elif ok:
            detail = say("row_value", rel=rel)
        else:
            allowed = rounding.allowed_relative(case.expected[o.name], case.allowed[o.name])
            detail = say("row_value_bad", rel=rel, allowed=allowed, times=allowed / rounding.UNIT_ROUNDOFF / 2)
        rows.append(CheckRow(o.row, ok, detail))
        if not ok:
            failing.append(o.name)
    if not failing:
        return Verdict(rows)
    return Verdict(rows, lambda: explain_values(ev.problem, case, ev.outputs("a"), failing, first_ok=False))


def check_second(ev: Evidence) -> Verdict:
    case, got = ev.cases[1], ev.outputs("b")
    if not got:
        return Verdict([CheckRow(say("check_second"), None, say("row_not_compared"))])
    wrong = [n for n, g in got.items() if not case.right(n, g)]
    second = str(case.about)
    unseen = [o.called for o in ev.problem.outputs if ("b", o.name) in ev.bad]
    if not wrong:  # what could be compared is right; where the rest was not compared, no ✓
        ok, detail = (None, say("row_second_partly", second=second, names=listed(unseen))) if unseen else (True, second)
        return Verdict([CheckRow(say("check_second"), ok, detail)])
    names = listed([ev.problem.output(n).called for n in wrong])
    row = CheckRow(say("check_second"), False, say("row_second_wrong", second=second, names=names))
    first_ok = all(ev.cases[0].right(n, g) for n, g in ev.outputs("a").items())
    return Verdict([row], lambda: explain_values(ev.problem, case, got, wrong, first_ok=first_ok))


# ---- the same answer twice, inputs untouched ------------------------------------------------------


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def check_repeatable(ev: Evidence) -> Verdict:
    differs = []
    for o in ev.problem.outputs:
        a, a2 = ev.usable("a", o.name), ev.usable("a2", o.name)
        if a is not None and a2 is not None and not _same(a, a2):
            differs.append(o.name)
    if not differs:
        return Verdict([CheckRow(say("check_repeat"), True, say("row_repeat_ok"))])
    name, called = differs[0], [ev.problem.output(n).called for n in differs]

    def explain() -> Explanation:
        idx, first, second = worst_entry(ev.usable("a2", name), ev.usable("a", name))  # type: ignore[arg-type]
        return [finding("second_run_differs", name=called[0], index=_index(idx), first=first, second=second)], None

    return Verdict([CheckRow(say("check_repeat"), False, say("row_repeat_bad", names=listed(called)))], explain)


def check_untouched(ev: Evidence) -> Verdict:
    changed = []
    for call in CALLS:
        for name, value in ev.case(call).inputs.items():
            before = np.asarray(value, dtype=np.float64)
            if before.ndim == 0:
                continue
            after = ev.arrays.get(wire.key(call, "in", name))
            if after is None or not _same(after, before):
                changed.append((name, after, before))
    if not changed:
        return Verdict([CheckRow(say("check_inputs"), True, say("row_inputs_ok"))])
    name, after, before = changed[0]

    def explain() -> Explanation:
        if after is None or after.shape != before.shape:
            return [], None
        idx, was, now = worst_entry(after, before)
        return [finding("input_modified", name=name, index=_index(idx), now=now, was=was)], None

    return Verdict([CheckRow(say("check_inputs"), False, say("row_inputs_bad", name=name))], explain)


# ---- explaining a wrong value --------------------------------------------------------------


def _swapped(problem: Problem, case: Case, name: str, g: np.ndarray) -> list[Finding]:
    """A finding when ``name`` holds the right value of the output it is paired with."""
    for first, second in problem.swaps:
        if name not in (first, second):
            continue
        other = second if first == name else first
        if matches(g, case.expected[other]):
            return [finding("swapped_outputs", first=first, second=second, name=name, other=other)]
    return []


def _named_mistakes(problem: Problem, case: Case, name: str, g: np.ndarray) -> list[Finding]:
    """A known mistake the answer matches (or two at once), with the geometry of its error as further explanation."""
    mistakes = problem.mistakes(case, name)
    m = match_mistake(g, mistakes)
    if m is None:
        pair = match_pair(g, case.expected[name], mistakes) or _scaled_mistake(problem, case, name, g, mistakes)
        if pair is None:
            return []
        first, second = (p.finding if isinstance(p, Mistake) else p for p in pair)
        both = finding("two_mistakes", name=problem.output(name).called, first=first.title, second=second.title)
        return [both, first, second]
    if m.finding.key == "two_mistakes":  # a known pair computed as one answer: each slip its own bullet
        return [Finding(m.finding.key, m.finding.params), *m.finding.also]
    geom = problem.geometry(case, name)
    seen = geometry_findings(g, case.expected[name], geom, explain_outside=False) if geom is not None else []
    same = [f for f in seen if f.title == m.title or _SAYS_THE_SAME.get(m.finding.key) == f.key]
    named = Finding(m.finding.key, m.finding.params, also=tuple(same))
    return [named, *(f for f in seen if f not in same), *problem.findings(case, name, g)]


# a known mistake and the geometry finding that names the same slip in other words: one bullet, not two
_SAYS_THE_SAME = {"variance_path_slip": "geometry_radial_slip"}


def _off_by(problem: Problem, case: Case, name: str, g: np.ndarray, rel: float) -> dict[str, Any]:
    """How far ``g`` is off: its significant digits and the entry furthest outside the rounding bound."""
    expected, allowed = case.expected[name], case.allowed[name]
    off = np.abs(g - expected)
    over = np.where(allowed > 0, off / np.where(allowed > 0, allowed, 1.0), np.where(off > 0, np.inf, 0.0))
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(over)), over.shape)) if over.ndim else ()
    params = {"name": problem.output(name).called, "digits": max(int(-math.log10(rel)), 1), "index": _index(idx)}
    return {**params, "diff": float(off[idx]), "allowed": float(allowed[idx])}


def _near_miss(problem: Problem, case: Case, name: str, g: np.ndarray, first_ok: bool) -> Finding | None:
    """An answer close to the right one but outside the rounding bound, and why: ``eps_zero_changed`` when it is
    right on the first input and on this one (eps = 0) gives what a small eps put in its place gives; else
    ``estimate`` (``estimate_value`` for an output that is not a gradient): estimated, rounded or nudged."""
    rel = rounding.relative_error(g, case.expected[name])
    guarded = first_ok and case.info.get("eps") == 0 and 0 < rel <= EPS_FIT_RTOL
    if guarded and _fitted_eps(problem, case, name, g) is not None:
        return finding("eps_zero_changed", **_off_by(problem, case, name, g, rel))
    if not 0 < rel <= rounding.ESTIMATE_RTOL:
        return None
    key = "estimate" if problem.output(name).gradient else "estimate_value"
    return finding(key, **_off_by(problem, case, name, g, rel))


def _fitted_eps(problem: Problem, case: Case, name: str, g: np.ndarray) -> float | None:
    """The eps > 0 that, put where ``case`` has eps = 0, gives ``g`` (a guard like ``eps or 1e-5``); else None.

    Near eps = 0 an output moves along one direction as eps grows, so a few secant
    steps on ``g``'s projection onto that direction find the eps; it counts only if
    the answer at that eps leaves at most ``EPS_FIT_SHARE`` of the error unexplained.
    """
    expected = case.expected[name]
    miss = float(np.linalg.norm(g - expected))

    def at(eps: float) -> np.ndarray:
        return problem.solve({**case.inputs, "eps": np.float64(eps)})[name]

    eps, step = 0.0, EPS_FIT_START
    for _ in range(EPS_FIT_STEPS):
        here = at(eps)
        slope = (at(eps + step) - here) / step
        if not np.any(slope):
            return None
        eps += float(np.vdot(g - here, slope) / np.vdot(slope, slope))
        if not 0 < eps < 1:
            return None
        step = eps * 1e-3
    return eps if float(np.linalg.norm(g - at(eps))) <= EPS_FIT_SHARE * miss else None


def _scaled_mistake(
    problem: Problem, case: Case, name: str, g: np.ndarray, mistakes: list[Mistake]
) -> tuple[Mistake, Finding] | None:
    """A known mistake and a named constant factor on top of it (a sign, n/(n-1), a missing 1/n): two at once."""
    n, counts = problem.group_size(case, name), problem.counts(case, name)
    for m in mistakes:
        if m.answer.shape != g.shape or scale_finding(m.answer, case.expected[name], n, counts) is not None:
            continue  # a mistake that is itself a constant factor: a factor on top of it is one factor
        s = scale_finding(g, m.answer, n, counts)
        if s is not None and s.key != "scale_other" and s.title != m.title:
            return m, s
    return None


def _sure(problem: Problem, case: Case, name: str, g: np.ndarray, first_ok: bool) -> list[Finding]:
    """What the evidence of ``name`` alone singles out: a swap, a named mistake (or two), a guard, an
    estimate, a constant factor, a factor that is a named quantity; [] when nothing does."""
    named = _swapped(problem, case, name, g) or _named_mistakes(problem, case, name, g)
    if named:
        return named
    if not np.any(g) and np.any(case.expected[name]):
        return [finding("all_zero", name=problem.output(name).called)]
    expected, n, counts = case.expected[name], problem.group_size(case, name), problem.counts(case, name)
    first = _near_miss(problem, case, name, g, first_ok) or scale_finding(g, expected, n, counts)
    found = [first] if first is not None else []
    if first is None or first.key == "scale_other":  # a factor that is a named quantity says more than its value
        found = factor_findings(problem.output(name).called, g, expected, problem.quantities(case, name)) or found
    return [*found, *problem.findings(case, name, g)]


def _no_match(problem: Problem, name: str) -> Finding:
    """Nothing names the mistake in ``name``: what to check, and how."""
    return finding("no_match", name=problem.output(name).called, advice=problem.advice(name))


def _unnamed(problem: Problem, case: Case, name: str, g: np.ndarray) -> list[Finding]:
    """Nothing singled out: the geometry of the error where it applies, else what to check and how."""
    geom = problem.geometry(case, name)
    found = geometry_findings(g, case.expected[name], geom) if geom is not None else []
    # a path singled out, or which terms to check when none is: the self-check would only repeat it
    return found or [_no_match(problem, name)]


def _how_far(problem: Problem, case: Case, got: dict[str, np.ndarray], wrong: list[str]) -> str:
    """ "dx (relative error 3.1e-01), dgamma (1.0e+00)": which outputs are wrong and by how much."""
    return listed(
        say("output_off", name=problem.output(n).called, rel=rounding.relative_error(got[n], case.expected[n]))
        for n in wrong
    )


def explain_values(
    problem: Problem, case: Case, got: dict[str, np.ndarray], wrong: list[str], first_ok: bool
) -> Explanation:
    """Why the outputs ``wrong`` are not right on ``case``: a mistake named only where the evidence singles
    it out (every output it touches agrees), else which outputs are off and by how much."""
    sure = {}
    for n in wrong:
        follows = problem.follows(case, n, got)
        sure[n] = [follows] if follows is not None else _sure(problem, case, n, got[n], first_ok)
    found: list[Finding] = []
    if first_ok:
        guess = "" if any(sure.values()) else say("guess_eps0" if case.info.get("eps") == 0 else "guess_size")
        found.append(finding("right_first_wrong_second", second=case.about, guess=guess))
    unexplained = [n for n in wrong if not sure[n]]
    upstream = problem.upstream(case, {n: got[n] for n in wrong}, unexplained)
    if len(wrong) > 1 and (unexplained or upstream):
        found.append(finding("several_wrong", outputs=_how_far(problem, case, got, wrong)))
    titles: set[str] = set()
    kept: list[tuple[str, Finding]] = []
    for n in wrong:
        for f in sure[n]:
            said = Finding(f.key, f.params).title  # its title without the output it is about
            if f.key not in titles and said not in titles:  # one bullet per mistake, however many outputs show it
                titles.update((f.key, said))
                kept.append((n, f))
    several = len({n for n, _f in kept}) > 1  # name the output only where the bullets are about several
    found += [replace(f, output=problem.output(n).called) if several and f.key != "follows" else f for n, f in kept]
    found += [f for f in upstream if f.key not in titles]
    if "y" in unexplained and any(f.key == "forward_first" for f in upstream):  # fix y first: and how to check it
        found.append(_no_match(problem, "y"))
    if unexplained and not upstream:
        if len(wrong) == 1:  # the geometry of an error only where nothing else is wrong that could cause it
            found += _unnamed(problem, case, unexplained[0], got[unexplained[0]])
        elif len(unexplained) == 1:
            found.append(_no_match(problem, unexplained[0]))
        else:
            names = listed(problem.output(n).called for n in unexplained)
            advice = listed(str(problem.advice(n)) for n in unexplained[:1])
            found.append(finding("no_match_several", names=names, advice=advice))
    found = [problem.renamed(f) for f in found]
    name = wrong[0]
    idx, e, v = worst_entry(got[name], case.expected[name])
    return found, Worst(problem.output(name).called, case.label, idx, e, v)


# ---- all checks ------------------------------------------------------------------------------

_EXPLAIN_ORDER = (0, 1, 4, 5, 2, 3)  # types, finite, same answer twice, inputs, then the values


def judge(problem: Problem, cases: list[Case], calls: dict[str, Any], arrays: dict[str, np.ndarray]) -> Judgement:
    """Run every check on what came back; explain the first failure worth explaining."""
    ev = Evidence(problem, cases, calls, arrays)
    verdicts = [
        check(ev)
        for check in (check_types, check_finite, check_values, check_second, check_repeatable, check_untouched)
    ]
    rows = [CheckRow(say("check_ran"), True, say("row_ran")), *(r for v in verdicts for r in v.rows)]
    out = Judgement(rows)
    for i in _EXPLAIN_ORDER:
        explain = verdicts[i].explain
        if explain is not None:
            out.findings, out.worst = explain()
            if out.findings:
                break
    return out
