"""The grading side of each exercise: its inputs, its right answers, how close they must be, its known mistakes.

For every exercise a :class:`Problem` draws two cases from a fresh random
generator: the *first* input, and a *second* one of another shape (and, for the
normalizations, eps = 0, where the clean identities sum(dx) = 0 and
dx . xhat = 0 hold exactly). Inputs always have a random upstream gradient and
a gamma that is not 1 (with random signs), so a wrong answer cannot pass by
accident and a hard-coded one fails the second case.

``Problem.solve`` computes the right answers from the inputs alone, with the
package's independent oracles, never a solution file: the closed forms of
:mod:`microgradnorm.formulas` (through the norm registry) and the scalar engine
:class:`microgradnorm.Value` for the local derivatives, the mean and the
variance. The same function gives, through :func:`.rounding.tolerance`, how
far a correct float64 answer may be from them, entry by entry. Known mistakes
are computed from the same closed forms, with the one thing changed that the
mistake changes (:mod:`.norm_mistakes`, :mod:`.diagnose`).

All of this runs in the grading process only: the child process that runs the
learner's code gets the inputs and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from microgradnorm import formulas
from microgradnorm.check import random_problem
from microgradnorm.engine import Value
from microgradnorm.exercises import norm_mistakes, rounding
from microgradnorm.exercises.diagnose import (
    Count,
    Finding,
    Geometry,
    Mistake,
    factor_findings,
    finding,
    matches,
    mistake,
)
from microgradnorm.exercises.messages import listed, phrase, say
from microgradnorm.i18n import N_, LazyText, _
from microgradnorm.numfmt import bracketed
from microgradnorm.registry import get_norm
from microgradnorm.vectorized import public_pass

__all__ = ["PROBLEMS", "Case", "Output", "Problem", "get_problem"]


@dataclass(frozen=True)
class Output:
    """One graded quantity: the key the child sends back and the row it is shown in.

    ``shown`` is how messages name it after the learner's own code ("mul_backward: da"; the key by
    default); ``gradient`` False marks a value of the forward pass (y, a mean, a variance, P). ``label``
    and ``shown`` are English, marked for translation where they are words, and said in the learner's
    language by :attr:`row` and :attr:`called`.
    """

    name: str
    label: str
    shown: str = ""
    gradient: bool = True

    @property
    def called(self) -> str:
        return _(self.shown) if self.shown else self.name

    @property
    def row(self) -> str:
        """The label of its row in the report."""
        return _(self.label)


@dataclass
class Case:
    """One input to call the learner's code on, with the right answers and how close they must be."""

    about: str | LazyText  # what the input is ("x [3, 5], eps = 0.001")
    second: bool  # the second input (another shape; eps = 0 for the normalizations), or the first
    inputs: dict[str, Any]
    expected: dict[str, np.ndarray]
    allowed: dict[str, np.ndarray]  # per entry: the largest error float64 rounding explains
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """ "first input: x [3, 5], eps = 0.001", in the learner's language."""
        return say("case_second" if self.second else "case_first", about=self.about)

    def right(self, name: str, got: np.ndarray) -> bool:
        """Whether ``got`` is the right ``name``, to float64 rounding."""
        return rounding.within(got, self.expected[name], self.allowed[name])


class Problem:
    """How one exercise is graded. Subclasses draw the inputs, solve them, and name the mistakes."""

    outputs: tuple[Output, ...] = ()
    swaps: tuple[tuple[str, str], ...] = ()  # pairs of outputs a learner may return in the wrong order
    exact: tuple[str, ...] = ()  # inputs that are counts, not rounded measurements
    reduced_from = "x"  # the input (its shape: info["x_shape"]) a wrong-axis reduction is explained by
    # what to check when no mistake is singled out (keys of messages.SAYINGS): per output, else the default
    advice_for: tuple[tuple[str, str], ...] = ()
    advice_default = "advice_selfcheck"

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        about, inputs, info = self.draw(rng, second)
        expected = self.solve(inputs)
        allowed = rounding.tolerance(self.solve, inputs, self.exact, self.terms(inputs))
        return Case(about, second, inputs, expected, allowed, info)

    def terms(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """Per output, the size of terms that cancel and that no input scales (see :func:`.rounding.tolerance`)."""
        return {}

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[str | LazyText, dict[str, Any], dict[str, Any]]:
        """(what the input is, inputs sent to the learner's code, what the diagnosis needs besides)."""
        raise NotImplementedError

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """The right answer of every output, from the inputs alone."""
        raise NotImplementedError

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        """Known wrong answers for output ``name`` on this case."""
        return []

    def output(self, name: str) -> Output:
        return next(o for o in self.outputs if o.name == name)

    def geometry(self, case: Case, name: str) -> Geometry | None:
        """What the along-1 / along-xhat decomposition of ``name`` needs, if it applies."""
        return None

    def findings(self, case: Case, name: str, got: np.ndarray) -> list[Finding]:
        """Anything else worth saying about a wrong ``name``."""
        return []

    def counts(self, case: Case, name: str) -> tuple[Count, ...]:
        """The counts ``name``'s formula divides by, the right one first (for the scale diagnosis)."""
        return ()

    def group_size(self, case: Case, name: str) -> int | None:
        """The n of the factors n/(n-1) and 1/n the scale diagnosis names (a normalization's group size)."""
        return case.info.get("n")

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        """Named arrays a wrong ``name`` may carry as an extra factor, or lack (rstd, gamma, b)."""
        return []

    def advice(self, name: str) -> LazyText:
        """What to check when no mistake is singled out: the file's own self-check, or what instead."""
        return phrase(dict(self.advice_for).get(name, self.advice_default))

    def upstream(self, case: Case, got: dict[str, np.ndarray], unexplained: list[str]) -> list[Finding]:
        """One finding for several wrong outputs that share a wrong input (the forward pass, exercise 11's dh):
        with y wrong, a gradient no mistake explains is computed from a wrong forward pass's cache."""
        if "y" in got and any(n != "y" for n in unexplained):
            return [finding("forward_first")]
        return []

    def renamed(self, f: Finding) -> Finding:
        """``f`` in the words this exercise has taught (exercise 3 writes no derivative)."""
        return f

    def follows(self, case: Case, name: str, got: dict[str, np.ndarray]) -> Finding | None:
        """A finding when ``name`` is right for the learner's own wrong outputs it is built from (J from P,
        dx from the stages): the mistake is in those, not here."""
        return None


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**32))


# ---- 01: local derivatives, from the engine ------------------------------------------


def _engine_grads(op: Callable[..., Value], *args: float, dout: float) -> tuple[float, ...]:
    """d op / d arg * dout for each argument, by building the op from Values and calling backward."""
    leaves = [Value(float(a)) for a in args]
    op(*leaves).backward(float(dout))
    return tuple(v.grad for v in leaves)


class LocalDerivatives(Problem):
    outputs = (
        Output("mul_da", "mul: da", "mul_backward: da"),
        Output("mul_db", "mul: db", "mul_backward: db"),
        Output("pow_da", "pow: da", "pow_backward: da"),
        Output("sqrt_da", "sqrt: da", "sqrt_backward: da"),
        Output("div_da", "divide: da", "div_backward: da"),
        Output("div_db", "divide: db", "div_backward: db"),
    )

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        size = 7 if second else 5
        a = rng.uniform(0.5, 3.0, size)
        b = rng.uniform(0.5, 2.0, size) * rng.choice([-1.0, 1.0], size)
        p = float(rng.choice([-1.5, 2.5, 3.0])) if second else float(rng.choice([0.5, 1.5, -2.0]))
        inputs = {"a": a, "b": b, "p": np.float64(p), "dout": rng.normal(0.0, 1.0, size)}
        return phrase("about_values", size=size, p=p), inputs, {}

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        p = float(inputs["p"])
        rows = []
        for a, b, g in zip(inputs["a"], inputs["b"], inputs["dout"]):
            rows.append(
                (
                    *_engine_grads(lambda u, v: u * v, a, b, dout=g),
                    *_engine_grads(lambda u: u**p, a, dout=g),
                    *_engine_grads(lambda u: u.sqrt(), a, dout=g),
                    *_engine_grads(lambda u, v: u / v, a, b, dout=g),
                )
            )
        columns = np.array(rows).T
        return {o.name: columns[i] for i, o in enumerate(self.outputs)}

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        a, b, p, g = (case.inputs[k] for k in ("a", "b", "p", "dout"))
        table = {
            "mul_da": [mistake("mul_swapped_a", a * g)],
            "mul_db": [mistake("mul_swapped_b", b * g)],
            "pow_da": [mistake("pow_not_lowered", p * a**p * g), mistake("pow_no_p", a ** (p - 1) * g)],
            "sqrt_da": [mistake("sqrt_no_half", g / np.sqrt(a))],
            "div_da": [mistake("div_da_is_db", -a / b**2 * g)],
            "div_db": [mistake("div_b_not_squared", -a / b * g), mistake("div_no_a", -g / b**2)],
        }
        return [*table.get(name, []), mistake("no_dout", case.expected[name] / g)]

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        a, b = case.inputs["a"], case.inputs["b"]
        return [("dout", case.inputs["dout"]), ("a", a), ("b", b), ("sqrt(a)", np.sqrt(a))]


# ---- 02: mean and variance backward, from the engine ---------------------------------


class MeanVariance(Problem):
    outputs = (
        Output("dx_mean", "mean: dx", "mean_backward: dx"),
        Output("dx_var", "variance: dx", "variance_backward: dx"),
    )

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
        shape = (4, 6) if second else (3, 5)
        inputs = {
            "x": rng.normal(0.5, 2.0, shape),
            "dmean": rng.normal(0.0, 1.0, (shape[0], 1)),
            "dvar": rng.normal(0.0, 1.0, (shape[0], 1)),
        }
        return f"x {bracketed(shape)}", inputs, {"n": shape[1], "x_shape": shape}

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        x = inputs["x"]
        dx_mean, dx_var = np.zeros(x.shape), np.zeros(x.shape)
        for r, row in enumerate(x):
            xs = [Value(float(v)) for v in row]
            Value.mean(xs).backward(float(inputs["dmean"][r, 0]))
            dx_mean[r] = [v.grad for v in xs]
            xs = [Value(float(v)) for v in row]
            mu = Value.mean(xs)
            Value.mean([(v - mu) ** 2 for v in xs]).backward(float(inputs["dvar"][r, 0]))
            dx_var[r] = [v.grad for v in xs]
        return {"dx_mean": dx_mean, "dx_var": dx_var}

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        if name != "dx_var":
            return []
        x, dvar = case.inputs["x"], case.inputs["dvar"]
        d = x.shape[1]
        right = dvar * 2.0 * (x - x.mean(axis=1, keepdims=True)) / d
        return [
            mistake("var_x_not_xshift", dvar * 2.0 * x / d),
            mistake("variance_path_slip", right * (d - 1) / d, factor=(d - 1) / d, m=d),
            mistake("var_mean_wrong_axis", dvar * 2.0 * (x - x.mean(axis=0, keepdims=True)) / d),
        ]

    def counts(self, case: Case, name: str) -> tuple[Count, ...]:
        rows, d = case.inputs["x"].shape
        return (Count(d, phrase("count_row_length")), Count(rows, phrase("count_rows")))


# ---- normalizations: LayerNorm, BatchNorm ----------------------------------------------------


def _norm_draw(
    norm: str, shape: tuple[int, ...], rng: np.random.Generator, eps: float
) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
    spec = get_norm(norm)
    x, gamma, beta, dy = random_problem(spec, shape, _seed(rng))
    axes, pa = spec.axes(shape), spec.param_axis(shape)
    inputs: dict[str, Any] = {"x": x, "gamma": gamma, "dy": dy, "eps": np.float64(eps)}
    if beta is not None:
        inputs["beta"] = beta
    info = {"x": x, "gamma": gamma, "beta": beta, "dy": dy, "eps": eps, "axes": axes, "param_axis": pa}
    info.update(x_shape=shape, n=formulas.group_size(shape, axes), norm=norm)
    info.update(g=formulas.param_view(gamma, x.ndim, pa), b=formulas.param_view(beta, x.ndim, pa))
    return phrase("about_x_eps", shape=bracketed(shape), eps=eps), inputs, info


def _norm_solve(norm: str, inputs: dict[str, Any], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    spec = get_norm(norm)
    x, gamma, beta, dy, eps = inputs["x"], inputs["gamma"], inputs.get("beta"), inputs["dy"], float(inputs["eps"])
    grads = spec.node_grads(x, gamma, beta, eps, dy)
    y, _cache = public_pass(spec)[0](x, gamma, beta, eps, backend="reference")  # the closed forms of formulas.py
    node = {"dx": "x", "dgamma": "gamma", "dbeta": "beta", "dxhat": "xhat", "dvar": "var", "dmean": "mean"}
    return {name: y if name == "y" else grads[node[name]] for name in names}


class NormProblem(Problem):
    """LayerNorm or BatchNorm forward and backward: exercises 03, 05, 06 and 07."""

    swaps = (("dgamma", "dbeta"),)
    advice_for = (("y", "advice_forward"),)

    def __init__(
        self,
        norm: str,
        shapes: tuple[tuple[int, ...], tuple[int, ...]],
        outputs: tuple[Output, ...],
        values: bool = False,
    ):
        self.norm, self.shapes, self.outputs = norm, shapes, outputs
        self.values = values  # built from Values (exercise 3): a path is missing only where the graph was cut
        self.advice_default = "advice_values" if values else "advice_selfcheck"

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        return _norm_draw(self.norm, self.shapes[second], rng, 0.0 if second else 1e-3)

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        return _norm_solve(self.norm, inputs, tuple(o.name for o in self.outputs))

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        return norm_mistakes.mistakes(case.info, name)

    def geometry(self, case: Case, name: str) -> Geometry | None:
        return norm_mistakes.geometry(case.info) if name == "dx" else None

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        return norm_mistakes.quantities(case.info)

    def renamed(self, f: Finding) -> Finding:
        if not self.values:
            return f
        key = _GRAPH_CUT.get(f.key, f.key)
        # a path missing and its geometry both become the same cut node: said once, not twice
        also = tuple(g for g in (self.renamed(g) for g in f.also) if g.key != key)
        return Finding(key, f.params, also, f.output)

    def follows(self, case: Case, name: str, got: dict[str, np.ndarray]) -> Finding | None:
        """In the staged exercise, a stage right for the learner's own earlier stages (each from the ones it uses)."""
        uses = _STAGE_INPUTS.get(name, ())
        if not uses or name not in got or not all(u in got for u in uses):
            return None
        wrong = [u for u in uses if not case.right(u, got[u])]
        if not wrong:
            return None  # its inputs are right: its own mistake
        info, dxhat = case.info, got["dxhat"]
        axes, n = info["axes"], info["n"]
        m = formulas.moments(info["x"], axes, info["eps"])
        if name == "dx":
            want = dxhat * m.rstd + got["dmean"] / n + got["dvar"] * 2.0 * m.xshift / n
        elif name == "dvar":
            want = formulas.dvar(dxhat, m.xshift, m.std, axes)
        else:
            want = formulas.dmean(dxhat, m.rstd, axes)
        if not matches(got[name], want):
            return None
        return finding("follows", name=name, inputs=listed(wrong))


# which earlier stages each stage of the staged BatchNorm is computed from
_STAGE_INPUTS = {"dvar": ("dxhat",), "dmean": ("dxhat",), "dx": ("dxhat", "dvar", "dmean")}


# exercise 3 writes no derivative: a missing path there is a node the graph does not reach
_GRAPH_CUT = {
    "mean_path_missing": "graph_cut_mean",
    "geometry_mean_missing": "graph_cut_mean",
    "variance_path_missing": "graph_cut_variance",
    "geometry_radial_missing": "graph_cut_variance",
    "direct_path_only": "graph_cut_statistics",
    "not_paths_alone": "not_paths_alone_values",
}


_FORWARD = Output("y", N_("forward"), gradient=False)
_DX, _DGAMMA, _DBETA, _DXHAT = (Output(name, name) for name in ("dx", "dgamma", "dbeta", "dxhat"))
_NORM_OUTPUTS = (_FORWARD, _DX, _DGAMMA, _DBETA)


class AffineProblem(Problem):
    """Exercise 04 is given dy, xhat and gamma of a [B, T, D] LayerNorm, not x."""

    outputs = (_DGAMMA, _DBETA, _DXHAT)
    swaps = (("dgamma", "dbeta"),)
    reduced_from = "dy"

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        shape = (3, 4, 6) if second else (2, 3, 5)
        _about, norm_inputs, info = _norm_draw("layernorm", shape, rng, 1e-5)
        xhat = formulas.moments(info["x"], info["axes"], info["eps"]).xhat
        inputs = {"dy": norm_inputs["dy"], "xhat": xhat, "gamma": norm_inputs["gamma"]}
        return phrase("about_dy_xhat", shape=bracketed(shape)), inputs, {**info, "xhat": xhat}

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        dy, xhat, gamma = inputs["dy"], inputs["xhat"], inputs["gamma"]
        lead = tuple(range(dy.ndim - 1))
        return {
            "dgamma": formulas.dgamma(dy, xhat, lead),
            "dbeta": formulas.dbeta(dy, lead),
            "dxhat": formulas.dxhat(dy, gamma),
        }

    def counts(self, case: Case, name: str) -> tuple[Count, ...]:
        d = case.inputs["dy"].shape[-1]
        return (Count(d, phrase("count_row_length_d"), divides=False),) if name in ("dgamma", "dbeta") else ()

    def group_size(self, case: Case, name: str) -> int | None:
        return None  # nothing here is a mean over a group: no n/(n-1), no 1/n

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        return [("gamma", case.inputs["gamma"])]

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        if name == "dxhat":  # the staged BatchNorm's dxhat mistakes: xhat is the LayerNorm's of the case's x
            return norm_mistakes.mistakes(case.info, name)
        return norm_mistakes.param_mistakes(name, case.inputs["dy"], case.inputs["xhat"], case.info)


# ---- 08: RMSNorm ---------------------------------------------------------------------


class RMSProblem(Problem):
    outputs = (_FORWARD, _DX, _DGAMMA)
    advice_for = (("y", "advice_forward_rms"),)

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        return _norm_draw("rmsnorm", (4, 5) if second else (3, 6), rng, 0.0 if second else 1e-3)

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        return _norm_solve("rmsnorm", inputs, ("y", "dx", "dgamma"))

    def _y_mistakes(self, info: dict[str, Any]) -> list[Mistake]:
        x, eps, axes, g = info["x"], info["eps"], info["axes"], info["g"]
        out = [
            mistake("rms_centered", g * formulas.moments(x, axes, eps).xhat),
            mistake("rms_gamma_left_out", formulas.rms_moments(x, axes, eps).xhat),
            mistake("rms_sum_not_mean", g * x / np.sqrt((x * x).sum(axis=axes, keepdims=True) + eps)),
        ]
        if eps > 0:
            out.append(mistake("rms_eps_left_out", g * formulas.rms_moments(x, axes, 0.0).xhat, eps=eps))
            ms = (x * x).mean(axis=axes, keepdims=True)
            out.append(mistake("rms_eps_outside_sqrt", g * x / (np.sqrt(ms) + eps)))
        return out

    def _dx_mistakes(self, info: dict[str, Any]) -> list[Mistake]:
        x, eps, axes, dy = info["x"], info["eps"], info["axes"], info["dy"]
        r = formulas.rms_moments(x, axes, eps)
        gx = formulas.dxhat(dy, info["g"])
        out = [
            mistake("rms_layernorm_formula", formulas.dx_simplified(gx, r.xhat, r.rrms, axes)),
            mistake("rms_path_missing", gx * r.rrms),
            mistake("rms_gamma_left_out_dx", formulas.rms_dx(dy, r.xhat, r.rrms, axes)),
            *norm_mistakes.rms_one_term_axis(gx, r.xhat, r.rrms, axes),
        ]
        if eps > 0:
            r0 = formulas.rms_moments(x, axes, 0.0)
            out.append(mistake("rms_eps_left_out", formulas.rms_dx(gx, r0.xhat, r0.rrms, axes), eps=eps))
        return out

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        info = case.info
        if name == "y":
            return self._y_mistakes(info)
        if name == "dx":
            return self._dx_mistakes(info)
        shared = formulas.param_axes(info["x"].ndim, info["param_axis"])
        xhat = formulas.rms_moments(info["x"], info["axes"], info["eps"]).xhat
        x_not_xhat = mistake("rms_x_not_xhat", formulas.dgamma(info["dy"], info["x"], shared))
        return [x_not_xhat, *norm_mistakes.param_mistakes("dgamma", info["dy"], xhat, info)]

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        info = case.info
        return [("rrms", formulas.rms_moments(info["x"], info["axes"], info["eps"]).rrms), ("gamma", info["g"])]

    def geometry(self, case: Case, name: str) -> Geometry | None:
        if name != "dx":
            return None
        info = case.info
        x, eps, axes = info["x"], info["eps"], info["axes"]
        r = formulas.rms_moments(x, axes, eps)
        m2 = (formulas.dxhat(info["dy"], info["g"]) * r.xhat).mean(axis=axes, keepdims=True)
        return Geometry(axes=axes, xhat=r.xhat, mean_path=None, radial_coef=-r.rrms * m2, eps=eps, radial_name="rms")


# ---- 09: the Jacobian ------------------------------------------------------------------


def _jacobian_parts(x: np.ndarray, eps: float) -> tuple[np.ndarray, float]:
    m = formulas.moments(x, (0,), eps)
    return m.xhat, float(m.rstd[0])


class JacobianProblem(Problem):
    outputs = (Output("P", N_("projection P"), gradient=False), Output("J", N_("Jacobian J")))
    advice_for, advice_default = (("P", "advice_projection"),), "advice_jacobian"

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        d, eps = (6, 0.0) if second else (5, 1e-3)
        x, gamma, _, _ = random_problem(get_norm("layernorm"), (d,), _seed(rng))
        xhat, _ = _jacobian_parts(x, eps)
        inputs = {"x": x, "gamma": gamma, "eps": np.float64(eps), "xhat": xhat}
        return phrase("about_x_eps", shape=f"[{d}]", eps=eps), inputs, {"n": d, "eps": eps}

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        xhat, rstd = _jacobian_parts(inputs["x"], float(inputs["eps"]))
        return {
            "P": formulas.projection(inputs["xhat"]),
            "J": formulas.layer_norm_jacobian(xhat, rstd, inputs["gamma"]),
        }

    def terms(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """J = rstd diag(gamma) (I - 1 1^T / D - xhat xhat^T / D): where one x_i dominates, xhat_i^2 / D nears
        1 - 1/D and J_ii is a difference of terms of size |gamma_i| rstd that x cannot scale (xhat saturates)."""
        xhat, rstd = _jacobian_parts(inputs["x"], float(inputs["eps"]))
        d = xhat.shape[0]
        return {"J": np.abs(inputs["gamma"])[:, None] * rstd * (np.eye(d) + 1.0 / d + np.abs(np.outer(xhat, xhat)) / d)}

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        x, gamma, eps = case.inputs["x"], case.inputs["gamma"], float(case.inputs["eps"])
        xhat, rstd = _jacobian_parts(x, eps)
        d = x.shape[0]
        ones, radial, eye = np.ones((d, d)) / d, np.outer(xhat, xhat) / d, np.eye(d)
        if name == "P":
            P = formulas.projection(case.inputs["xhat"])
            given = case.inputs["xhat"]
            inner = float(given @ given) / d  # xhat @ xhat, or xhat.T @ xhat of a 1-D array: a number
            return [
                mistake("p_no_1_over_d", P * d),
                mistake("p_no_radial", ones),
                mistake("p_no_ones", np.outer(given, given) / d),
                mistake("p_inner_product", ones + inner, what="xhat xhat^T"),
                mistake("p_inner_product", 1.0 + np.outer(given, given) / d, what="1 1^T"),
                mistake("p_inner_product", 1.0 + inner + 0 * ones, what="1 1^T, xhat xhat^T"),
                mistake("p_elementwise", ones + np.diag(given * given) / d),
                mistake("p_complement", eye - P),
            ]
        J, P = formulas.layer_norm_jacobian(xhat, rstd, gamma), formulas.projection(xhat)
        out = [
            mistake("j_transposed", J.T),
            mistake("j_gamma_left_out", rstd * (eye - P)),
            mistake("j_no_sigma", gamma[:, None] * (eye - P)),
            mistake("j_variance_path_missing", rstd * gamma[:, None] * (eye - ones)),
            mistake("j_mean_path_missing", rstd * gamma[:, None] * (eye - radial)),
        ]
        if eps > 0:
            xhat0, rstd0 = _jacobian_parts(x, 0.0)
            out.append(mistake("j_eps_left_out", formulas.layer_norm_jacobian(xhat0, rstd0, gamma), eps=eps))
        m = formulas.moments(x, (0,), eps)
        for what, v in (("x", x), ("x - mean", m.xshift)):  # P built from an unnormalized vector
            out.append(mistake("j_p_not_of_xhat", rstd * gamma[:, None] * (eye - formulas.projection(v)), what=what))
        # the variance divided by d - 1, in sigma and in xhat alike
        rstd_u = 1.0 / math.sqrt(float(m.var[0]) * d / (d - 1) + eps)
        unbiased = formulas.layer_norm_jacobian(m.xshift * rstd_u, rstd_u, gamma)
        out.append(mistake("unbiased_variance", unbiased, n=d, n_minus_1=d - 1, factor=math.sqrt(d / (d - 1))))
        return out

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        return [("gamma_i", case.inputs["gamma"][:, None]), ("gamma_j", case.inputs["gamma"][None, :])]

    def follows(self, case: Case, name: str, got: dict[str, np.ndarray]) -> Finding | None:
        """J built on a wrong P: J is right for the learner's own P, so P is the one mistake."""
        if name != "J" or "P" not in got or "J" not in got:
            return None
        xhat, rstd = _jacobian_parts(case.inputs["x"], float(case.inputs["eps"]))
        on_yours = rstd * case.inputs["gamma"][:, None] * (np.eye(xhat.shape[0]) - got["P"])
        return finding("follows", name="J", inputs="P") if matches(got["J"], on_yours) else None


# ---- 10: Welford ---------------------------------------------------------------------


def _merge(count0: np.ndarray, mean0: np.ndarray, m2_0: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, m2) of values already summarised by (count0, mean0, m2_0) together with the rows of x.

    The exact combination of two groups' statistics (Chan, Golub and LeVeque):
    m2 = m2_a + m2_b + delta^2 * n_a n_b / (n_a + n_b), delta = mean_b - mean_a.
    """
    n = x.shape[1]
    mean_b = x.mean(axis=1)
    m2_b = ((x - mean_b[:, None]) ** 2).sum(axis=1)
    total = count0 + n
    delta = mean_b - mean0
    return mean0 + delta * n / total, m2_0 + m2_b + delta * delta * count0 * n / total


def _welford_increment(value: float, old: float, new: float) -> float:
    """The right growth of m2: (value - old mean) * (value - new mean)."""
    return (value - old) * (value - new)


def _welford_stream(
    inputs: dict[str, Any],
    increment: Callable[[float, float, float], float] = _welford_increment,
    late: int = 0,
    keep_mean: bool = False,
    divide_m2: bool = False,
) -> dict[str, np.ndarray]:
    """What an update with m2 += increment(value, old mean, new mean) gives, from the given states.

    ``late`` 1: the mean moves by (value - mean) / (the count before this value), one count late.
    ``keep_mean``: the new mean is computed but the old one returned. ``divide_m2``: m2 / count returned as m2.
    """
    means, variances = [], []
    for row, count, mean, m2 in zip(inputs["x"], inputs["count0"], inputs["mean0"], inputs["m2_0"]):
        count, mean, m2 = int(count), float(mean), float(m2)
        for value in row:
            count += 1
            old, new = mean, mean + (value - mean) / (count - late)
            m2 += increment(value, old, new)
            mean = old if keep_mean else new
            m2 = m2 / count if divide_m2 else m2
        means.append(mean)
        variances.append(m2 / count)
    return {"mean": np.array(means), "var": np.array(variances)}


class WelfordProblem(Problem):
    outputs = (
        Output("mean", N_("mean"), gradient=False),
        Output("var", N_("variance"), N_("variance (m2 / count)"), False),
    )
    exact = ("count0",)
    advice_default = "advice_welford"

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        rows, seen, streamed = 3, int(rng.integers(16, 48)), 64
        offset = 1e8 if second else float(rng.uniform(1.0, 4.0))
        values = offset + rng.normal(0.0, 1.0, (rows, seen + streamed)) * (1.0 if second else 2.0)
        before, x = values[:, :seen], values[:, seen:]
        mean0 = before.mean(axis=1)
        inputs = {
            "x": x,
            "count0": np.full(rows, float(seen)),
            "mean0": mean0,
            "m2_0": ((before - mean0[:, None]) ** 2).sum(axis=1),
        }
        counts = {"rows": rows, "streamed": streamed, "seen": seen}
        about = phrase("about_welford_large", offset=offset, **counts) if second else phrase("about_welford", **counts)
        return about, inputs, {"offset": offset, "n": seen + streamed, "seen": seen}

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        mean, m2 = _merge(inputs["count0"], inputs["mean0"], inputs["m2_0"], inputs["x"])
        return {"mean": mean, "var": m2 / (inputs["count0"] + inputs["x"].shape[1])}

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        x = case.inputs["x"]
        fresh = {"mean": x.mean(axis=1), "var": x.var(axis=1)}
        out = [
            mistake("welford_ignores_state", fresh[name], count=case.info["seen"]),
            mistake("welford_old_count", _welford_stream(case.inputs, late=1)[name]),
            mistake("welford_mean_not_updated", _welford_stream(case.inputs, keep_mean=True)[name]),
        ]
        if name == "var":
            out.append(mistake("welford_m2_divided", _welford_stream(case.inputs, divide_m2=True)["var"]))
            squared = _welford_stream(case.inputs, lambda v, old, new: (v - old) ** 2)["var"]
            new_squared = _welford_stream(case.inputs, lambda v, old, new: (v - new) ** 2)["var"]
            out += [mistake("welford_delta_squared", squared), mistake("welford_new_delta_squared", new_squared)]
        return out

    def findings(self, case: Case, name: str, got: np.ndarray) -> list[Finding]:
        if name != "var" or case.info["offset"] < 1e6:
            return []
        return [
            finding("cancellation", offset=case.info["offset"], rel=rounding.relative_error(got, case.expected["var"]))
        ]


# ---- 11: pre-LN residual block -------------------------------------------------------------


class PreLNProblem(Problem):
    outputs = (*_NORM_OUTPUTS, Output("dW", "dW"))
    swaps = (("dgamma", "dbeta"),)
    advice_for = (("y", "advice_forward_preln"),)

    def draw(self, rng: np.random.Generator, second: bool) -> tuple[LazyText, dict[str, Any], dict[str, Any]]:
        shape = (4, 6) if second else (3, 5)
        about, inputs, info = _norm_draw("layernorm", shape, rng, 0.0 if second else 1e-3)
        d = shape[-1]
        inputs["W"] = rng.normal(0.0, 1.0 / math.sqrt(d), (d, d))
        return about, inputs, info

    def solve(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        x, W, h, dh, dy = self._block(inputs)
        ln = get_norm("layernorm").node_grads(x, inputs["gamma"], inputs["beta"], float(inputs["eps"]), dh)
        return {"y": x + h @ W, "dx": dy + ln["x"], "dgamma": ln["gamma"], "dbeta": ln["beta"], "dW": h.T @ dy}

    @staticmethod
    def _block(inputs: dict[str, Any]) -> tuple[np.ndarray, ...]:
        """(x, W, h = LayerNorm(x), dh = dy W^T, dy): the block's forward and the gradient reaching its LayerNorm."""
        x, gamma, beta, W, dy, eps = (inputs[k] for k in ("x", "gamma", "beta", "W", "dy", "eps"))
        h = formulas.affine(formulas.moments(x, (1,), float(eps)).xhat, gamma, beta)
        return x, W, h, dy @ W.T, dy

    def _dx_mistakes(self, case: Case) -> list[Mistake]:
        x, W, _, dh, dy = self._block(case.inputs)
        info = case.info
        ln_wrong_w = get_norm("layernorm").node_grads(x, info["gamma"], info["beta"], info["eps"], dy @ W)["x"]
        out = [
            mistake("identity_path_missing", case.expected["dx"] - dy),
            mistake("identity_path_only", dy + 0.0),
            mistake("w_not_transposed", dy + ln_wrong_w),
        ]
        out += [Mistake(m.finding, dy + m.answer) for m in norm_mistakes.mistakes(info, "dx", dh)]
        # a LayerNorm slip on top of W for W.T: dgamma and dbeta name the W, dx names the slip
        return out + [Mistake(m.finding, dy + m.answer) for m in norm_mistakes.mistakes(info, "dx", dy @ W)]

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        x, W, h, dh, dy = self._block(case.inputs)
        if name == "y":
            return [mistake("residual_missing", h @ W), mistake("w_transposed_forward", x + h @ W.T)]
        if name == "dx":
            return self._dx_mistakes(case)
        if name == "dW":
            return [mistake("dw_transposed", dy.T @ h), mistake("dw_x_not_h", x.T @ dy)]
        xhat = formulas.moments(x, (1,), case.info["eps"]).xhat
        direct = formulas.dgamma(dy, xhat, (0,)) if name == "dgamma" else formulas.dbeta(dy, (0,))
        wrong_w = formulas.dgamma(dy @ W, xhat, (0,)) if name == "dgamma" else formulas.dbeta(dy @ W, (0,))
        return [
            mistake("dy_not_dh", direct),
            mistake("w_not_transposed", wrong_w),
            *norm_mistakes.mistakes(case.info, name, dh),
        ]

    def quantities(self, case: Case, name: str) -> list[tuple[str, np.ndarray]]:
        return norm_mistakes.quantities(case.info) if name in ("dgamma", "dbeta") else []

    def findings(self, case: Case, name: str, got: np.ndarray) -> list[Finding]:
        """dx = dy + (the LayerNorm part): a factor on the LayerNorm part alone (rstd left out of it)."""
        if name != "dx":
            return []
        dy = case.inputs["dy"]
        part = say("ln_part")
        return factor_findings(part, got - dy, case.expected["dx"] - dy, norm_mistakes.quantities(case.info))

    def upstream(self, case: Case, got: dict[str, np.ndarray], unexplained: list[str]) -> list[Finding]:
        """dgamma and dbeta see only dh and xhat: wrong with a right forward pass, dh is wrong, upstream of LN."""
        params = [n for n in ("dgamma", "dbeta") if n in unexplained]
        if "y" in got or not params or "dx" not in got:
            return super().upstream(case, got, unexplained)
        return [finding("dh_wrong", names=listed(params))]

    def geometry(self, case: Case, name: str) -> Geometry | None:
        return norm_mistakes.geometry(case.info, self._block(case.inputs)[3]) if name == "dx" else None


_BN_STAGES = (_FORWARD, _DBETA, _DGAMMA, _DXHAT, Output("dvar", "dvar"), Output("dmean", "dmean"), _DX)

PROBLEMS: dict[str, Problem] = {
    "01_local_derivatives": LocalDerivatives(),
    "02_mean_variance_backward": MeanVariance(),
    "03_layernorm_from_values": NormProblem("layernorm", ((3, 5), (4, 6)), _NORM_OUTPUTS, values=True),
    "04_affine_backward": AffineProblem(),
    "05_layernorm_backward": NormProblem("layernorm", ((2, 3, 5), (3, 4, 6)), _NORM_OUTPUTS),
    "06_batchnorm_staged": NormProblem("batchnorm", ((6, 4), (5, 3)), _BN_STAGES),
    "07_batchnorm_simplified": NormProblem("batchnorm", ((6, 4), (5, 3)), _NORM_OUTPUTS),
    "08_rmsnorm_backward": RMSProblem(),
    "09_layernorm_jacobian": JacobianProblem(),
    "10_stable_variance": WelfordProblem(),
    "11_preln_residual": PreLNProblem(),
}


def get_problem(name: str) -> Problem:
    return PROBLEMS[name]
