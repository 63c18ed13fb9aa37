"""The grading side of each exercise: its inputs, its right answers, its known mistakes.

For every exercise a :class:`Problem` makes two cases from a fresh random
generator: the *first* input, and a *second* one of another shape (and, for the
normalizations, eps = 0, where the clean identities sum(dx) = 0 and
dx . xhat = 0 hold exactly). Inputs always have a random upstream gradient and
a gamma that is not 1 (with random signs), so a wrong answer cannot pass by
accident and a hard-coded one fails the second case.

Right answers come from the package's independent oracles, never from a
solution file: the closed forms in :mod:`microgradnorm.formulas` (through the
norm registry, :func:`microgradnorm.registry.get_norm`) and the scalar engine
:class:`microgradnorm.Value` for the local derivatives, the mean and the
variance. Known mistakes are computed from the same closed forms, with the one
thing changed that the mistake changes (see :mod:`.diagnose`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from microgradnorm import formulas
from microgradnorm import tolerances as tol
from microgradnorm.check import random_problem
from microgradnorm.engine import Value
from microgradnorm.exercises.diagnose import Finding, Geometry, Mistake
from microgradnorm.registry import get_norm

__all__ = ["PROBLEMS", "Case", "Output", "Problem", "get_problem"]


@dataclass(frozen=True)
class Output:
    """One graded quantity: the key the runner returns and the row it is shown in."""

    name: str
    label: str
    rtol: float = tol.EXERCISE_RTOL
    atol: float = tol.EXERCISE_ATOL


@dataclass
class Case:
    """One input to call the learner's code on, with the right answers."""

    label: str
    inputs: dict[str, Any]
    expected: dict[str, np.ndarray]
    info: dict[str, Any] = field(default_factory=dict)


class Problem:
    """How one exercise is graded. Subclasses fill in the cases and the mistakes."""

    outputs: tuple[Output, ...] = ()
    swaps: tuple[tuple[str, str], ...] = ()  # pairs of outputs a learner may return in the wrong order

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        raise NotImplementedError

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        """Known wrong answers for output ``name`` on this case."""
        return []

    def geometry(self, case: Case, name: str) -> Geometry | None:
        """What the along-1 / along-xhat decomposition of ``name`` needs, if it applies."""
        return None

    def findings(self, case: Case, name: str, got: np.ndarray) -> list[Finding]:
        """Anything else worth saying about a wrong ``name``."""
        return []

    def x_shape(self, case: Case, name: str) -> tuple[int, ...] | None:
        """The shape of the input ``name`` is reduced from (for wrong-axis shape messages)."""
        return case.info.get("x_shape")


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**32))


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


# ---- 01: local derivatives, from the engine ------------------------------------------


def _engine_grads(op, *args: float, dout: float) -> tuple[float, ...]:
    """d op / d arg * dout for each argument, by building the op from Values and calling backward."""
    leaves = [Value(a) for a in args]
    op(*leaves).backward(dout)
    return tuple(v.grad for v in leaves)


class LocalDerivatives(Problem):
    outputs = (
        Output("mul_da", "mul: da"),
        Output("mul_db", "mul: db"),
        Output("pow_da", "pow: da"),
        Output("sqrt_da", "sqrt: da"),
        Output("div_da", "divide: da"),
        Output("div_db", "divide: db"),
    )

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        size = 7 if second else 5
        a = rng.uniform(0.5, 3.0, size)
        b = rng.uniform(0.5, 2.0, size) * rng.choice([-1.0, 1.0], size)
        p = float(rng.choice([-1.5, 2.5, 3.0])) if second else float(rng.choice([0.5, 1.5, -2.0]))
        dout = rng.normal(0.0, 1.0, size)
        expected: dict[str, list[float]] = {k.name: [] for k in self.outputs}
        for ai, bi, gi in zip(a, b, dout):
            da, db = _engine_grads(lambda u, v: u * v, ai, bi, dout=gi)
            expected["mul_da"].append(da)
            expected["mul_db"].append(db)
            expected["pow_da"].append(_engine_grads(lambda u: u**p, ai, dout=gi)[0])
            expected["sqrt_da"].append(_engine_grads(lambda u: u.sqrt(), ai, dout=gi)[0])
            da, db = _engine_grads(lambda u, v: u / v, ai, bi, dout=gi)
            expected["div_da"].append(da)
            expected["div_db"].append(db)
        label = f"{'second' if second else 'first'} input: {size} values, p = {p:g}"
        return Case(
            label,
            {"a": a, "b": b, "p": np.float64(p), "dout": dout},
            {k: np.array(v) for k, v in expected.items()},
            {"a": a, "b": b, "p": p, "dout": dout},
        )

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        a, b, p, g = case.info["a"], case.info["b"], case.info["p"], case.info["dout"]
        no_dout = Mistake(
            "the upstream gradient is missing",
            "You returned the local derivative alone. The chain rule multiplies it by dout, "
            "the gradient arriving from above.",
            case.expected[name] / g,
        )
        table = {
            "mul_da": [
                Mistake("a and b swapped", "d(a*b)/da is b, not a: the other factor.", a * g),
            ],
            "mul_db": [
                Mistake("a and b swapped", "d(a*b)/db is a, not b: the other factor.", b * g),
            ],
            "pow_da": [
                Mistake(
                    "the exponent was not lowered",
                    "d(a**p)/da = p * a**(p-1): the power drops by one.",
                    p * a**p * g,
                ),
                Mistake(
                    "the factor p is missing", "d(a**p)/da = p * a**(p-1): p comes down in front.", a ** (p - 1) * g
                ),
            ],
            "sqrt_da": [
                Mistake(
                    "the factor 1/2 is missing",
                    "sqrt(a) = a**(1/2), so its derivative is (1/2) a**(-1/2) = 1 / (2 sqrt(a)).",
                    g / np.sqrt(a),
                ),
            ],
            "div_da": [
                Mistake("the derivative of b instead", "d(a/b)/da = 1/b; -a/b**2 is d(a/b)/db.", -a / b**2 * g),
            ],
            "div_db": [
                Mistake(
                    "b is not squared",
                    "a/b = a * b**-1, and d(b**-1)/db = -b**-2, so d(a/b)/db = -a / b**2.",
                    -a / b * g,
                ),
                Mistake("a is missing", "d(a/b)/db = -a / b**2: a stays as a factor.", -g / b**2),
            ],
        }
        return [*table.get(name, []), no_dout]


# ---- 02: mean and variance backward, from the engine ---------------------------------


class MeanVariance(Problem):
    outputs = (Output("dx_mean", "mean: dx"), Output("dx_var", "variance: dx"))

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        shape = (4, 6) if second else (3, 5)
        x = rng.normal(0.5, 2.0, shape)
        dmean = rng.normal(0.0, 1.0, (shape[0], 1))
        dvar = rng.normal(0.0, 1.0, (shape[0], 1))
        dx_mean, dx_var = np.zeros(shape), np.zeros(shape)
        for r, row in enumerate(x):
            xs = [Value(float(v)) for v in row]
            Value.mean(xs).backward(float(dmean[r, 0]))
            dx_mean[r] = [v.grad for v in xs]
            xs = [Value(float(v)) for v in row]
            mu = Value.mean(xs)
            Value.mean([(v - mu) ** 2 for v in xs]).backward(float(dvar[r, 0]))
            dx_var[r] = [v.grad for v in xs]
        label = f"{'second' if second else 'first'} input: x {_shape(shape)}"
        return Case(
            label,
            {"x": x, "dmean": dmean, "dvar": dvar},
            {"dx_mean": dx_mean, "dx_var": dx_var},
            {"x": x, "dvar": dvar, "n": shape[1], "x_shape": shape},
        )

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        if name != "dx_var":
            return []
        x, dvar, n = case.info["x"], case.info["dvar"], case.info["n"]
        return [
            Mistake(
                "x instead of x - mean",
                "d var / d x_i = (2/n) (x_i - mean): the deviation from the mean, not x_i itself. (The route "
                "through the mean adds nothing, since the deviations sum to 0.)",
                dvar * 2.0 * x / n,
            )
        ]


# ---- normalizations: shared cases and mistakes ------------------------------------------


def _norm_case(norm: str, shape: tuple[int, ...], rng: np.random.Generator, eps: float, second: bool) -> Case:
    spec = get_norm(norm)
    seed = _seed(rng)
    x, gamma, beta, dy = random_problem(spec, shape, seed)
    axes, pa = spec.axes(shape), spec.param_axis(shape)
    grads = spec.node_grads(x, gamma, beta, eps, dy)
    g, b = formulas.param_view(gamma, x.ndim, pa), formulas.param_view(beta, x.ndim, pa)
    if norm == "rmsnorm":
        xhat = formulas.rms_moments(x, axes, eps).xhat
    else:
        xhat = formulas.moments(x, axes, eps).xhat
    expected = {"y": formulas.affine(xhat, g, b), "dx": grads["x"], "dgamma": grads["gamma"]}
    for key, node in (("dbeta", "beta"), ("dxhat", "xhat"), ("dvar", "var"), ("dmean", "mean")):
        if node in grads:
            expected[key] = grads[node]
    inputs: dict[str, Any] = {"x": x, "gamma": gamma, "dy": dy, "eps": np.float64(eps)}
    if beta is not None:
        inputs["beta"] = beta
    label = f"{'second' if second else 'first'} input: x {_shape(shape)}, eps = {eps:g}"
    info = {"x": x, "gamma": gamma, "beta": beta, "dy": dy, "eps": eps, "axes": axes, "param_axis": pa}
    info.update(x_shape=shape, n=formulas.group_size(shape, axes), norm=norm)
    return Case(label, inputs, expected, info)


def _other_axes(ndim: int, axes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The single axes a learner might reduce over by mistake."""
    return [(a,) for a in range(ndim) if (a,) != axes]


def _unbiased(m: formulas.Moments, n: int, eps: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(xhat, rstd) had the variance been divided by n - 1, and the factor c = n / (n - 1)."""
    c = n / (n - 1)
    rstd = 1.0 / np.sqrt(m.var * c + eps)
    return m.xshift * rstd, rstd, c


def _ln_mistakes(info: dict[str, Any], name: str, dy: np.ndarray | None = None) -> list[Mistake]:
    """Known wrong y, dx, dgamma, dbeta (and stages) of LayerNorm or BatchNorm on this input.

    ``dy`` overrides the upstream gradient (the pre-LN block feeds LN with dh).
    """
    x, gamma, beta, eps, axes, pa, n = (info[k] for k in ("x", "gamma", "beta", "eps", "axes", "param_axis", "n"))
    dy = info["dy"] if dy is None else dy
    g = formulas.param_view(gamma, x.ndim, pa)
    b = formulas.param_view(beta, x.ndim, pa)
    m = formulas.moments(x, axes, eps)
    gx = formulas.dxhat(dy, g)
    shared = formulas.param_axes(x.ndim, pa)
    out: list[Mistake] = []
    wrong_axes = _other_axes(x.ndim, axes)
    xhat_u, rstd_u, c = _unbiased(m, n, eps) if n > 1 else (m.xhat, m.rstd, 1.0)
    unbiased = (
        f"The variance was divided by n - 1 = {n - 1} (unbiased, as np.var(ddof=1) or torch.var do by default). "
        f"Normalization layers divide by n = {n}: xhat comes out sqrt(n/(n-1)) = {math.sqrt(c):.6g} times too "
        "small."
    )
    if name == "y":
        out.append(Mistake("unbiased variance", unbiased, formulas.affine(xhat_u, g, b)))
        if eps > 0:
            m0 = formulas.moments(x, axes, 0.0)
            out.append(
                Mistake("eps left out", f"std = sqrt(var + eps) with eps = {eps:g}.", formulas.affine(m0.xhat, g, b))
            )
            out.append(
                Mistake(
                    "eps outside the square root",
                    "eps goes inside: sqrt(var + eps), not sqrt(var) + eps.",
                    formulas.affine(m.xshift / (np.sqrt(m.var) + eps), g, b),
                )
            )
        out.append(Mistake("gamma and beta swapped", "y = gamma * xhat + beta.", formulas.affine(m.xhat, b, g)))
        out.append(Mistake("beta left out", "y = gamma * xhat + beta: add beta.", formulas.affine(m.xhat, g, None)))
        out.append(
            Mistake("gamma left out", "y = gamma * xhat + beta: scale by gamma.", formulas.affine(m.xhat, None, b))
        )
        for ax in wrong_axes:
            mw = formulas.moments(x, ax, eps)
            out.append(Mistake("normalized over the wrong axis", _axis_text(axes, ax), formulas.affine(mw.xhat, g, b)))
    elif name == "dx":
        direct, via_mean, via_var = formulas.dx_paths(gx, m.xshift, m.std, m.rstd, axes)
        out += [
            Mistake(
                "the path through the mean is missing",
                "x_i also moves the mean, and the mean moves every xhat_j: add dmean / n to every dx_i "
                "(dmean = -rstd * sum_j dxhat_j).",
                direct + via_var,
            ),
            Mistake(
                "the path through the variance is missing",
                "x_i also moves the variance: add dvar * 2 (x_i - mean) / n "
                "(dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j (x_j - mean)).",
                direct + via_mean,
            ),
            Mistake(
                "only the direct path",
                "dx_i = dxhat_i * rstd is only the direct path: the mean and the variance depend on x_i too.",
                direct,
            ),
        ]
        if n > 1:
            out.append(
                Mistake(
                    "seed 003's (m-1)/m slip",
                    f"Your variance path is (m-1)/m = {(n - 1) / n:.6g} times the right one (m = {n}). Seed 003 "
                    "adds a second route from x to the variance, through the mean, worth -(2/m)(x_i - mean)/m. "
                    "That route is 0: dvar/dmean = -(2/m) sum_j (x_j - mean) and the deviations sum to 0.",
                    direct + via_mean + via_var * (n - 1) / n,
                )
            )
        out.append(
            Mistake(
                "gamma left out of dx",
                "dxhat = gamma * dy: the upstream gradient passes through the scale first.",
                formulas.dx_simplified(dy, m.xhat, m.rstd, axes),
            )
        )
        if n > 1:
            out.append(
                Mistake("unbiased variance", unbiased, formulas.dx_simplified(gx, xhat_u * math.sqrt(c), rstd_u, axes))
            )
            out.append(Mistake("unbiased variance", unbiased, formulas.dx_simplified(gx, xhat_u, rstd_u, axes)))
        if eps > 0:
            m0 = formulas.moments(x, axes, 0.0)
            out.append(
                Mistake(
                    "eps left out",
                    f"rstd = 1 / sqrt(var + eps) with eps = {eps:g}.",
                    formulas.dx_simplified(gx, m0.xhat, m0.rstd, axes),
                )
            )
        for ax in wrong_axes:
            mw = formulas.moments(x, ax, eps)
            out.append(
                Mistake(
                    "reduced over the wrong axis",
                    _axis_text(axes, ax),
                    formulas.dx_simplified(gx, mw.xhat, mw.rstd, ax),
                )
            )
            out.append(
                Mistake(
                    "reduced over the wrong axis in the backward pass",
                    _axis_text(axes, ax) + " The forward pass is right; the means in dx are taken over the wrong axis.",
                    formulas.dx_simplified(gx, m.xhat, m.rstd, ax),
                )
            )
    elif name == "dgamma":
        out += [
            Mistake(
                "x instead of xhat", "dgamma = sum of dy * xhat: the normalized input.", formulas.dgamma(dy, x, shared)
            ),
            Mistake(
                "x - mean instead of xhat",
                "dgamma = sum of dy * xhat; x - mean is not yet divided by the std.",
                formulas.dgamma(dy, m.xshift, shared),
            ),
            Mistake(
                "an extra factor gamma",
                "y = gamma * xhat + beta, so dy/dgamma = xhat: gamma itself does not appear in dgamma.",
                formulas.dgamma(dy, m.xhat, shared) * gamma,
            ),
        ]
    elif name == "dbeta":
        out.append(
            Mistake(
                "an extra factor gamma",
                "dy/dbeta = 1: dbeta is the plain sum of dy.",
                formulas.dbeta(dy, shared) * gamma,
            )
        )
    elif name == "dxhat":
        out.append(Mistake("gamma left out", "dxhat = gamma * dy.", dy + 0.0))
        out.append(Mistake("xhat instead of gamma", "dxhat = dy * dy/dxhat = dy * gamma.", dy * m.xhat))
    elif name == "dvar":
        out.append(
            Mistake(
                "the power -1/2 instead of -3/2",
                "xhat = xshift * (var + eps)^(-1/2), so dxhat/dvar = -1/2 xshift (var + eps)^(-3/2).",
                -0.5 * m.rstd * (gx * m.xshift).sum(axis=axes, keepdims=True),
            )
        )
        out.append(
            Mistake(
                "xhat instead of x - mean",
                "dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j (x_j - mean): the deviations, not xhat.",
                -0.5 * m.rstd**3 * (gx * m.xhat).sum(axis=axes, keepdims=True),
            )
        )
    return out


def _axis_text(right: tuple[int, ...], wrong: tuple[int, ...]) -> str:
    return (
        f"You reduced over axis {wrong[0] if len(wrong) == 1 else wrong}; this norm takes its statistics over "
        f"axis {right[0] if len(right) == 1 else right}."
    )


def _ln_geometry(info: dict[str, Any], dy: np.ndarray | None = None) -> Geometry:
    x, gamma, eps, axes, pa, n = (info[k] for k in ("x", "gamma", "eps", "axes", "param_axis", "n"))
    dy = info["dy"] if dy is None else dy
    m = formulas.moments(x, axes, eps)
    gx = formulas.dxhat(dy, formulas.param_view(gamma, x.ndim, pa))
    dvar = formulas.dvar(gx, m.xshift, m.std, axes)
    return Geometry(
        axes=axes,
        xhat=m.xhat,
        mean_path=formulas.dmean(gx, m.rstd, axes) / n,
        radial_coef=dvar * 2.0 * m.std / n,
        eps=eps,
    )


class NormProblem(Problem):
    """LayerNorm or BatchNorm forward and backward: shared by exercises 03, 05, 06 and 07."""

    swaps = (("dgamma", "dbeta"),)

    def __init__(self, norm: str, shapes: tuple[tuple[int, ...], tuple[int, ...]], outputs: tuple[Output, ...]):
        self.norm = norm
        self.shapes = shapes
        self.outputs = outputs

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        return _norm_case(self.norm, self.shapes[second], rng, 0.0 if second else 1e-3, second)

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        return _ln_mistakes(case.info, name)

    def geometry(self, case: Case, name: str) -> Geometry | None:
        return _ln_geometry(case.info) if name == "dx" else None


_FORWARD = Output("y", "forward")
_DX, _DGAMMA, _DBETA = Output("dx", "dx"), Output("dgamma", "dgamma"), Output("dbeta", "dbeta")


class AffineProblem(Problem):
    """Exercise 04 is given dy, xhat and gamma of a [B, T, D] LayerNorm, not x."""

    outputs = (Output("dgamma", "dgamma"), Output("dbeta", "dbeta"), Output("dxhat", "dxhat"))
    swaps = (("dgamma", "dbeta"),)

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        case = _norm_case("layernorm", (3, 4, 6) if second else (2, 3, 5), rng, 1e-5, second)
        info = case.info
        xhat = formulas.moments(info["x"], info["axes"], info["eps"]).xhat
        inputs = {"dy": info["dy"], "xhat": xhat, "gamma": info["gamma"]}
        label = case.label.split(",")[0].replace(": x ", ": dy and xhat ")
        return Case(label, inputs, {k: case.expected[k] for k in ("dgamma", "dbeta", "dxhat")}, info)

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        return _ln_mistakes(case.info, name)


# ---- 08: RMSNorm ---------------------------------------------------------------------


class RMSProblem(Problem):
    outputs = (_FORWARD, _DX, _DGAMMA)

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        return _norm_case("rmsnorm", (4, 5) if second else (3, 6), rng, 0.0 if second else 1e-3, second)

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        info = case.info
        x, gamma, eps, axes, dy = (info[k] for k in ("x", "gamma", "eps", "axes", "dy"))
        g = formulas.param_view(gamma, x.ndim, info["param_axis"])
        r = formulas.rms_moments(x, axes, eps)
        gx = formulas.dxhat(dy, g)
        if name == "y":
            m = formulas.moments(x, axes, eps)
            out = [
                Mistake(
                    "the mean was subtracted", "RMSNorm divides x itself by its rms; it does not center x.", g * m.xhat
                ),
                Mistake("gamma left out", "y = gamma * x / rms.", r.xhat),
                Mistake(
                    "sum instead of mean",
                    "rms = sqrt(mean(x**2) + eps): the mean of the squares, not their sum.",
                    g * x / np.sqrt((x * x).sum(axis=axes, keepdims=True) + eps),
                ),
            ]
            if eps > 0:
                out.append(
                    Mistake(
                        "eps left out",
                        f"rms = sqrt(mean(x**2) + eps), eps = {eps:g}.",
                        g * formulas.rms_moments(x, axes, 0.0).xhat,
                    )
                )
            return out
        if name == "dx":
            out = [
                Mistake(
                    "the LayerNorm formula",
                    "You subtracted mean(dxhat), the LayerNorm term for the path through the mean. RMSNorm has no "
                    "mean, so dx = rrms * (dxhat - xhat * mean(dxhat * xhat)).",
                    formulas.dx_simplified(gx, r.xhat, r.rrms, axes),
                ),
                Mistake(
                    "the path through the rms is missing",
                    "x_i also changes the rms that divides every x_j: subtract xhat_i * mean_j(dxhat_j xhat_j), "
                    "times rrms.",
                    gx * r.rrms,
                ),
                Mistake("gamma left out of dx", "dxhat = gamma * dy.", formulas.rms_dx(dy, r.xhat, r.rrms, axes)),
            ]
            if eps > 0:
                r0 = formulas.rms_moments(x, axes, 0.0)
                out.append(
                    Mistake(
                        "eps left out",
                        f"rms = sqrt(mean(x**2) + eps), eps = {eps:g}.",
                        formulas.rms_dx(gx, r0.xhat, r0.rrms, axes),
                    )
                )
            return out
        if name == "dgamma":
            shared = formulas.param_axes(x.ndim, info["param_axis"])
            return [
                Mistake(
                    "x instead of xhat", "dgamma = sum of dy * xhat, xhat = x / rms.", formulas.dgamma(dy, x, shared)
                )
            ]
        return []

    def geometry(self, case: Case, name: str) -> Geometry | None:
        if name != "dx":
            return None
        info = case.info
        x, gamma, eps, axes, dy = (info[k] for k in ("x", "gamma", "eps", "axes", "dy"))
        r = formulas.rms_moments(x, axes, eps)
        gx = formulas.dxhat(dy, formulas.param_view(gamma, x.ndim, info["param_axis"]))
        m2 = (gx * r.xhat).mean(axis=axes, keepdims=True)
        return Geometry(axes=axes, xhat=r.xhat, mean_path=None, radial_coef=-r.rrms * m2, eps=eps, radial_name="rms")


# ---- 09: the Jacobian ------------------------------------------------------------------


class JacobianProblem(Problem):
    outputs = (Output("P", "projection P"), Output("J", "Jacobian J"))

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        d = 6 if second else 5
        eps = 0.0 if second else 1e-3
        x, gamma, _, _ = random_problem(get_norm("layernorm"), (d,), _seed(rng))
        m = formulas.moments(x, (0,), eps)
        rstd = float(m.rstd[0])
        expected = {"P": formulas.projection(m.xhat), "J": formulas.layer_norm_jacobian(m.xhat, rstd, gamma)}
        label = f"{'second' if second else 'first'} input: x [{d}], eps = {eps:g}"
        info = {"xhat": m.xhat, "rstd": rstd, "gamma": gamma, "d": d, "n": d}
        return Case(label, {"x": x, "gamma": gamma, "eps": np.float64(eps), "xhat": m.xhat}, expected, info)

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        xhat, rstd, gamma, d = (case.info[k] for k in ("xhat", "rstd", "gamma", "d"))
        ones = np.ones((d, d)) / d
        radial = np.outer(xhat, xhat) / d
        P = formulas.projection(xhat)
        eye = np.eye(d)
        if name == "P":
            return [
                Mistake("the 1/d is missing", "P = (1/d) (1 1^T + xhat xhat^T).", P * d),
                Mistake("the xhat xhat^T term is missing", "P projects on both 1 and xhat: add xhat xhat^T / d.", ones),
                Mistake("the 1 1^T term is missing", "P projects on both 1 and xhat: add 1 1^T / d.", radial),
            ]
        if name == "J":
            j = formulas.layer_norm_jacobian(xhat, rstd, gamma)
            return [
                Mistake(
                    "transposed",
                    "J[i, j] = dy_i / dx_j: row i belongs to output y_i, so gamma_i scales row i "
                    "(diag(gamma) on the left).",
                    j.T,
                ),
                Mistake("gamma left out", "dy/dx = (1/sigma) diag(gamma) (I - P).", rstd * (eye - P)),
                Mistake("the 1/sigma is missing", "dy/dx = (1/sigma) diag(gamma) (I - P).", gamma[:, None] * (eye - P)),
                Mistake(
                    "the path through the variance is missing",
                    "I - P must remove xhat xhat^T / d too: that is the path through the variance.",
                    rstd * gamma[:, None] * (eye - ones),
                ),
                Mistake(
                    "the path through the mean is missing",
                    "I - P must remove 1 1^T / d too: that is the path through the mean.",
                    rstd * gamma[:, None] * (eye - radial),
                ),
            ]
        return []


# ---- 10: Welford ---------------------------------------------------------------------


class WelfordProblem(Problem):
    outputs = (Output("mean", "mean"), Output("var", "variance", rtol=tol.EXERCISE_STABLE_VARIANCE_RTOL))

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        shape = (3, 64)
        offset = 1e8 if second else float(rng.uniform(1.0, 4.0))
        x = offset + rng.normal(0.0, 1.0, shape) * (1.0 if second else 2.0)
        mean = formulas.mean(x, (1,))
        var = formulas.variance(x - mean, (1,))
        label = (
            f"second input: 3 rows of 64 values near {offset:.0e} (spread about 1)"
            if second
            else "first input: 3 rows of 64 ordinary values"
        )
        return Case(label, {"x": x}, {"mean": mean.ravel(), "var": var.ravel()}, {"offset": offset, "n": shape[1]})

    def findings(self, case: Case, name: str, got: np.ndarray) -> list[Finding]:
        if name != "var" or case.info["offset"] < 1e6:
            return []
        _, rel = tol.normwise_error(got, case.expected["var"])
        return [
            Finding(
                "cancellation",
                f"On this input every value is about {case.info['offset']:.0e} and the spread only about 1: "
                f"your variance is off by {rel:.2g} relative. Sums of x**2 are then about 1e16 per value, where "
                "a double holds only about 2 units of precision, and subtracting mean**2 cancels everything "
                "that mattered. Update m2 with deltas from the running mean instead: "
                "m2 += (x - old mean) * (x - new mean).",
            )
        ]


# ---- 11: pre-LN residual block -------------------------------------------------------------


class PreLNProblem(Problem):
    outputs = (Output("y", "forward"), _DX, _DGAMMA, _DBETA, Output("dW", "dW"))
    swaps = (("dgamma", "dbeta"),)

    def make_case(self, rng: np.random.Generator, second: bool) -> Case:
        shape = (4, 6) if second else (3, 5)
        eps = 0.0 if second else 1e-3
        case = _norm_case("layernorm", shape, rng, eps, second)
        info = case.info
        x, gamma, beta, dy = info["x"], info["gamma"], info["beta"], info["dy"]
        d = shape[-1]
        W = rng.normal(0.0, 1.0 / math.sqrt(d), (d, d))
        spec = get_norm("layernorm")
        m = formulas.moments(x, (1,), eps)
        h = formulas.affine(m.xhat, gamma, beta)
        dh = dy @ W.T
        ln = spec.node_grads(x, gamma, beta, eps, dh)
        expected = {
            "y": x + h @ W,
            "dx": dy + ln["x"],
            "dgamma": ln["gamma"],
            "dbeta": ln["beta"],
            "dW": h.T @ dy,
        }
        info.update(W=W, h=h, dh=dh)
        inputs = {**case.inputs, "W": W}
        return Case(case.label, inputs, expected, info)

    def mistakes(self, case: Case, name: str) -> list[Mistake]:
        info = case.info
        x, W, h, dh, dy = (info[k] for k in ("x", "W", "h", "dh", "dy"))
        exp = case.expected
        if name == "y":
            return [
                Mistake("the residual is missing", "out = x + LN(x) @ W: add x back.", h @ W),
                Mistake("W transposed", "out = x + LN(x) @ W, with h [N, D] times W [D, D].", x + h @ W.T),
            ]
        if name == "dx":
            ln_wrong_w = get_norm("layernorm").node_grads(x, info["gamma"], info["beta"], info["eps"], dy @ W)["x"]
            out = [
                Mistake(
                    "the identity path is missing",
                    "out = x + f(x): the residual connection hands dy straight to dx. dx = dy + (the LN path).",
                    exp["dx"] - dy,
                ),
                Mistake(
                    "only the identity path",
                    "dx = dy + (the gradient through LN and W): the second part is missing.",
                    dy + 0.0,
                ),
                Mistake(
                    "W instead of W.T",
                    "h @ W sends dy back to h as dh = dy @ W.T (the transpose), not dy @ W.",
                    dy + ln_wrong_w,
                ),
            ]
            out += [Mistake(m.title, m.detail, dy + m.answer) for m in _ln_mistakes(info, "dx", dh)]
            return out
        if name == "dW":
            return [
                Mistake("transposed", "dW[i, j] = sum_n h[n, i] dy[n, j], i.e. h.T @ dy.", dy.T @ h),
                Mistake("x instead of LN(x)", "W multiplies h = LN(x), so dW = h.T @ dy, not x.T @ dy.", x.T @ dy),
            ]
        if name in ("dgamma", "dbeta"):
            shared = (0,)
            m = formulas.moments(x, (1,), info["eps"])
            direct = formulas.dgamma(dy, m.xhat, shared) if name == "dgamma" else formulas.dbeta(dy, shared)
            return [
                Mistake(
                    "dy instead of dh",
                    "gamma and beta sit inside the block: the gradient reaching them is dh = dy @ W.T, not dy.",
                    direct,
                ),
                *_ln_mistakes(info, name, dh),
            ]
        return []

    def geometry(self, case: Case, name: str) -> Geometry | None:
        return _ln_geometry(case.info, case.info["dh"]) if name == "dx" else None


PROBLEMS: dict[str, Problem] = {
    "01_local_derivatives": LocalDerivatives(),
    "02_mean_variance_backward": MeanVariance(),
    "03_layernorm_from_values": NormProblem("layernorm", ((3, 5), (4, 6)), (_FORWARD, _DX, _DGAMMA, _DBETA)),
    "04_affine_backward": AffineProblem(),
    "05_layernorm_backward": NormProblem("layernorm", ((2, 3, 5), (3, 4, 6)), (_FORWARD, _DX, _DGAMMA, _DBETA)),
    "06_batchnorm_staged": NormProblem(
        "batchnorm",
        ((6, 4), (5, 3)),
        (
            _FORWARD,
            _DBETA,
            _DGAMMA,
            Output("dxhat", "dxhat"),
            Output("dvar", "dvar"),
            Output("dmean", "dmean"),
            _DX,
        ),
    ),
    "07_batchnorm_simplified": NormProblem("batchnorm", ((6, 4), (5, 3)), (_FORWARD, _DX, _DGAMMA, _DBETA)),
    "08_rmsnorm_backward": RMSProblem(),
    "09_layernorm_jacobian": JacobianProblem(),
    "10_stable_variance": WelfordProblem(),
    "11_preln_residual": PreLNProblem(),
}


def get_problem(name: str) -> Problem:
    return PROBLEMS[name]
