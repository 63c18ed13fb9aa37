"""LayerNorm as ``(forward, backward)`` pairs: the package's, the exercise's answer, yours, and two wrong ones.

Every pair has the signature of exercise 05 (``microgradnorm exercise check 5`` grades it)::

    y, cache = forward(x, gamma, beta, eps)          # x [B, T, D] (any leading axes), gamma, beta [D]
    dx, dgamma, dbeta = backward(dy, cache)

so the lab's network and :func:`microgradnorm.torch.layer_norm_function` take
any of them. :func:`gradient_check` is the node-by-node referee: the pair's
gradients against central finite differences in float64.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from microgradnorm import formulas as F
from microgradnorm import tolerances as tol
from microgradnorm import vectorized as V
from microgradnorm.finite_diff import numerical_gradient
from microgradnorm.i18n import _, pgettext
from microgradnorm.verdicts import Check, at_most

__all__ = [
    "MISTAKES",
    "GradientCheck",
    "NormPair",
    "gradient_check",
    "learner_pair",
    "mistake_pair",
    "package_pair",
    "reference_pair",
]

NormPair = tuple[Callable[..., Any], Callable[..., Any]]
EXERCISE_FILE = "05_layernorm_backward.py"
FORWARD_NAME, BACKWARD_NAME = "layernorm_forward", "layernorm_backward"


def package_pair() -> NormPair:
    """The vectorized path's LayerNorm (fused kernels when numba is installed)."""
    return V.layer_norm_forward, V.layer_norm_backward


def _load(path: Path, what: str) -> NormPair:
    """The two functions of an exercise-05 file, or a one-line error saying what is wrong with it."""
    if not path.is_file():
        raise ValueError(
            # Translators: {what} is --file (the option) or "reference"; {file} is 05_layernorm_backward.py
            _("{what}: expected your exercise file ({file}), got {path!r}, which is not a file").format(
                what=what, file=EXERCISE_FILE, path=str(path)
            )
        )
    spec = importlib.util.spec_from_file_location(f"_microgradnorm_lab_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's file: any error in it is reported, not raised
        raise ValueError(
            # Translators: {error} is Python's, e.g. "SyntaxError: invalid syntax"
            _("{what}: {name} could not be run: {error}").format(
                what=what, name=path.name, error=f"{type(exc).__name__}: {exc}"
            )
        ) from None
    missing = [n for n in (FORWARD_NAME, BACKWARD_NAME) if not callable(getattr(module, n, None))]
    if missing:
        functions = pgettext("alternatives", " or ").join(missing)  # "layernorm_forward or layernorm_backward"
        raise ValueError(
            _("{what}: {name} defines no function {functions} (see exercise 5)").format(
                what=what, name=path.name, functions=functions
            )
        )
    return getattr(module, FORWARD_NAME), getattr(module, BACKWARD_NAME)


def reference_pair() -> NormPair:
    """The exercise's own answer: plain NumPy, llm.c style (what ``--file`` replaces with yours)."""
    return _load(Path(__file__).parents[1] / "exercises" / "solutions" / EXERCISE_FILE, "reference")


def learner_pair(path: str | Path) -> NormPair:
    """Your ``layernorm_forward`` and ``layernorm_backward``, tried once on a small input first.

    A function still raising NotImplementedError (the scaffold as it comes) or
    returning the wrong shapes is a one-line ValueError, before any training.
    """
    pair = _load(Path(path), "--file")
    try:
        gradient_check(pair, points=1)
    except NotImplementedError:
        raise ValueError(
            _(
                "--file: {name} is not written yet (NotImplementedError); solve exercise 5 first "
                "(microgradnorm exercise check 5), or leave out --file to use the reference answer"
            ).format(name=Path(path).name)
        ) from None
    except Exception as exc:  # the learner's code: report it in one line
        raise ValueError(
            # Translators: {error} is Python's, e.g. "ValueError: operands could not be broadcast together"
            _("--file: {name} fails on a small input: {error}").format(
                name=Path(path).name, error=f"{type(exc).__name__}: {exc}"
            )
        ) from None
    return pair


# ---- two backward passes with a slip ----------------------------------------------------------------


def _textbook_forward(x, gamma, beta, eps):
    """LayerNorm over the last axis from formulas.py; the cache is (moments, gamma)."""
    m = F.moments(np.asarray(x, dtype=np.float64), (-1,), eps)  # mean, xshift, var, std, rstd: [..., 1]; xhat
    return F.affine(m.xhat, gamma, beta), (m, gamma)


def _without_the_mean_path(dy, cache):
    """dx from the direct path and the variance path only: the mean's dependence on x is forgotten."""
    m, gamma = cache
    direct, _via_mean, via_var = F.dx_paths(F.dxhat(dy, gamma), m.xshift, m.std, m.rstd, (-1,))
    return direct + via_var, *_param_grads(dy, m)


def _without_one_over_d(dy, cache):
    """The compact form rstd / D * (D * g - sum(g) - xhat * sum(g * xhat)) with its leading 1 / D forgotten."""
    m, gamma = cache
    d = dy.shape[-1]
    dx = F.dx_simplified(F.dxhat(dy, gamma), m.xhat, m.rstd, (-1,))
    return d * dx, *_param_grads(dy, m)


def _param_grads(dy, m):
    lead = tuple(range(dy.ndim - 1))
    return F.dgamma(dy, m.xhat, lead), F.dbeta(dy, lead)


# name -> (what the slip is, its backward pass)
MISTAKES: dict[str, tuple[str, Callable[..., Any]]] = {
    "no-mean-path": ("the path through the mean left out", _without_the_mean_path),
    "no-1/d": ("the 1/d in front of the compact form forgotten: dx is d times too large", _without_one_over_d),
}


def mistake_pair(name: str) -> NormPair:
    """A LayerNorm whose forward is right and whose backward has the slip ``name`` (a key of MISTAKES)."""
    if name not in MISTAKES:
        raise ValueError(f"mistake: expected one of {', '.join(MISTAKES)}, got {name!r}")
    return _textbook_forward, MISTAKES[name][1]


# ---- the referee -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientCheck:
    """Normwise relative errors of dx, dgamma and dbeta against central finite differences (float64)."""

    dx: float
    dgamma: float
    dbeta: float
    shape: tuple[int, ...] = ()  # x's shape in the check; shape[-1] is d, the features LayerNorm averages

    @property
    def worst(self) -> float:
        return max(self.dx, self.dgamma, self.dbeta)

    @property
    def passed(self) -> bool:
        return self.worst <= tol.FD_RTOL

    @property
    def verdict(self) -> Check:
        """:attr:`passed` with its measurement, for a ✓/✗ line (microgradnorm.verdicts)."""
        return at_most(self.worst, tol.FD_RTOL, "worst relative error against finite differences")


def gradient_check(pair: NormPair, seed: int = 0, points: int = 5, eps: float = 1e-5) -> GradientCheck:
    """Run ``pair`` on a random [2, points, 6] problem and check every gradient by finite differences.

    The loss is ``sum(y * dy)`` with a random dy (not ``sum(y)``, whose dx is
    zero when gamma is 1 and so hides a wrong backward).
    """
    forward, backward = pair
    rng = np.random.default_rng([seed, 17])
    x = rng.normal(0.5, 2.0, (2, points, 6))
    gamma, beta, dy = rng.uniform(0.5, 1.5, 6), rng.normal(size=6), rng.normal(size=(2, points, 6))

    def loss(x_, g_, b_) -> float:
        return float(np.sum(np.asarray(forward(x_.copy(), g_.copy(), b_.copy(), eps)[0]) * dy))

    _, cache = forward(x.copy(), gamma.copy(), beta.copy(), eps)
    dx, dgamma, dbeta = backward(dy.copy(), cache)
    numerical = (
        numerical_gradient(lambda v: loss(v, gamma, beta), x.copy()),
        numerical_gradient(lambda v: loss(x, v, beta), gamma.copy()),
        numerical_gradient(lambda v: loss(x, gamma, v), beta.copy()),
    )
    errors = [tol.normwise_error(np.reshape(a, n.shape), n)[1] for a, n in zip((dx, dgamma, dbeta), numerical)]
    return GradientCheck(*errors, shape=x.shape)
