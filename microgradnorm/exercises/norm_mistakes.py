"""The known mistakes of a normalization's forward and backward pass, computed from the closed forms.

Each function returns, for one output of one case, the answers that common
mistakes produce (:class:`.diagnose.Mistake`): the closed form of
:mod:`microgradnorm.formulas` with the one thing changed that the mistake
changes. A learner's answer that matches one of them is that mistake. Shared by
the LayerNorm, BatchNorm and pre-LN exercises; ``info`` is a case's ``info``
(x, gamma, beta, dy, eps, axes, param_axis, n).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from microgradnorm import formulas
from microgradnorm.exercises.diagnose import Finding, Geometry, Mistake, axes_text, finding, mistake
from microgradnorm.exercises.messages import phrase

__all__ = ["geometry", "mistakes", "quantities", "rms_one_term_axis"]


def _other_axes(ndim: int, axes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The single axes a learner might reduce over by mistake."""
    return [(a,) for a in range(ndim) if (a,) != axes]


def wrong_count(info: dict[str, Any]) -> int | None:
    """What a learner divides by who takes the wrong size of x: its first axis (LayerNorm), its last (BatchNorm)."""
    x, axes = info["x"], info["axes"]
    wrong = x.shape[-1] if 0 in axes else x.shape[0]
    return wrong if wrong != info["n"] else None


def _count_words(info: dict[str, Any], wrong: int) -> dict[str, Any]:
    """The parameters of the wrong-count finding: n and ``wrong``, and what each counts."""
    right_what, wrong_what = (
        ("count_batch", "count_features") if 0 in info["axes"] else ("count_row_length", "count_rows")
    )
    return {"right": info["n"], "wrong": wrong, "right_what": phrase(right_what), "wrong_what": phrase(wrong_what)}


def _unbiased(m: formulas.Moments, n: int, eps: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(xhat, rstd) had the variance been divided by n - 1, and the factor c = n / (n - 1)."""
    c = n / (n - 1)
    rstd = 1.0 / np.sqrt(m.var * c + eps)
    return m.xshift * rstd, rstd, c


def _divided_by(x: np.ndarray, axes: tuple[int, ...], eps: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(xhat, rstd) with the mean and the variance divided by ``count`` instead of n."""
    mean = x.sum(axis=axes, keepdims=True) / count
    xshift = x - mean
    rstd = 1.0 / np.sqrt((xshift * xshift).sum(axis=axes, keepdims=True) / count + eps)
    return xshift * rstd, rstd


def _unbiased_text(n: int) -> dict[str, Any]:
    return {"n": n, "n_minus_1": n - 1, "factor": math.sqrt(n / (n - 1))}


def _pair(name: str, answer: np.ndarray, first: Finding, second: Finding) -> Mistake:
    """Two slips of the forward pass at once, as one answer (their errors do not add, so no sum finds them)."""
    both = finding("two_mistakes", name=name, first=first.title, second=second.title)
    return Mistake(Finding(both.key, both.params, also=(first, second)), np.asarray(answer, dtype=np.float64))


def _y_mistakes(info: dict[str, Any]) -> list[Mistake]:
    x, eps, axes, n = info["x"], info["eps"], info["axes"], info["n"]
    g, b = info["g"], info["b"]
    m = formulas.moments(x, axes, eps)
    out = []
    if n > 1:
        out.append(mistake("unbiased_variance", formulas.affine(_unbiased(m, n, eps)[0], g, b), **_unbiased_text(n)))
    if eps > 0:
        out.append(mistake("eps_left_out", formulas.affine(formulas.moments(x, axes, 0.0).xhat, g, b), eps=eps))
        out.append(mistake("eps_outside_sqrt", formulas.affine(m.xshift / (np.sqrt(m.var) + eps), g, b)))
        if n > 1:  # ddof=1 with eps outside the square root, or without eps
            unbiased, c = finding("unbiased_variance", **_unbiased_text(n)), n / (n - 1)
            outside = m.xshift / (np.sqrt(m.var * c) + eps)
            out.append(_pair("y", formulas.affine(outside, g, b), unbiased, finding("eps_outside_sqrt")))
            left_out = m.xshift / np.sqrt(m.var * c)
            out.append(_pair("y", formulas.affine(left_out, g, b), unbiased, finding("eps_left_out", eps=eps)))
    out += [
        mistake("xshift_reversed", formulas.affine(-m.xhat, g, b)),
        mistake("gamma_beta_swapped", formulas.affine(m.xhat, b, g)),
        mistake("beta_left_out", formulas.affine(m.xhat, g, None)),
        mistake("gamma_left_out", formulas.affine(m.xhat, None, b)),
    ]
    wrong = wrong_count(info)
    if wrong is not None:
        xhat_w = _divided_by(x, axes, eps, wrong)[0]
        out.append(mistake("wrong_count", formulas.affine(xhat_w, g, b), **_count_words(info, wrong)))
    for ax in _other_axes(x.ndim, axes):
        xhat_w = formulas.moments(x, ax, eps).xhat
        out.append(mistake("wrong_axis", formulas.affine(xhat_w, g, b), wrong=axes_text(ax), right=axes_text(axes)))
    return out


def _path_mistakes(info: dict[str, Any], gx: np.ndarray, m: formulas.Moments) -> list[Mistake]:
    """A path left out, or the (m-1)/m slip on the variance path."""
    n = info["n"]
    direct, via_mean, via_var = formulas.dx_paths(gx, m.xshift, m.std, m.rstd, info["axes"])
    out = [
        mistake("mean_path_missing", direct + via_var),
        mistake("variance_path_missing", direct + via_mean),
        mistake("direct_path_only", direct),
    ]
    if n > 1:
        out.append(mistake("variance_path_slip", direct + via_mean + via_var * (n - 1) / n, factor=(n - 1) / n, m=n))
    return out


def _dx_mistakes(info: dict[str, Any], dy: np.ndarray) -> list[Mistake]:
    x, eps, axes, n = info["x"], info["eps"], info["axes"], info["n"]
    m = formulas.moments(x, axes, eps)
    gx = formulas.dxhat(dy, info["g"])
    out = [*_path_mistakes(info, gx, m), mistake("gamma_left_out_dx", formulas.dx_simplified(dy, m.xhat, m.rstd, axes))]
    if n > 1:
        xhat_u, rstd_u, c = _unbiased(m, n, eps)
        for xhat in (xhat_u * math.sqrt(c), xhat_u):
            out.append(
                mistake("unbiased_variance", formulas.dx_simplified(gx, xhat, rstd_u, axes), **_unbiased_text(n))
            )
    if eps > 0:
        m0 = formulas.moments(x, axes, 0.0)
        out.append(mistake("eps_left_out", formulas.dx_simplified(gx, m0.xhat, m0.rstd, axes), eps=eps))
    wrong = wrong_count(info)
    if wrong is not None:
        backward = m.rstd * (
            gx - gx.sum(axis=axes, keepdims=True) / wrong - m.xhat * (gx * m.xhat).sum(axis=axes, keepdims=True) / wrong
        )
        out.append(mistake("wrong_count", backward, **_count_words(info, wrong)))
    out += _one_term_axis(gx, m, axes, x.ndim)
    for ax in _other_axes(x.ndim, axes):
        mw = formulas.moments(x, ax, eps)
        words = {"wrong": axes_text(ax), "right": axes_text(axes)}
        out.append(mistake("wrong_axis", formulas.dx_simplified(gx, mw.xhat, mw.rstd, ax), **words))
        out.append(mistake("wrong_axis_backward", formulas.dx_simplified(gx, m.xhat, m.rstd, ax), **words))
    return out


def _other_axis_sets(ndim: int, axes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every set of axes a learner might reduce over instead of ``axes`` (one axis, or all but the right one)."""
    sets = [(a,) for a in range(ndim)] + [tuple(a for a in range(ndim) if a not in axes)]
    if ndim > 2:
        sets += [tuple(range(ndim))]
    return [s for s in dict.fromkeys(sets) if s and s != tuple(axes)]


def _one_term_axis(gx: np.ndarray, m: formulas.Moments, axes: tuple[int, ...], ndim: int) -> list[Mistake]:
    """dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)) with ONE of its two means over the wrong axes."""
    mean_term = gx.mean(axis=axes, keepdims=True)
    var_term = (gx * m.xhat).mean(axis=axes, keepdims=True)
    out = []
    n = formulas.group_size(gx.shape, axes)
    for ax in _other_axis_sets(ndim, axes):
        words = {"wrong": axes_text(ax), "right": axes_text(axes)}
        # the mean over the wrong axes, or their sum divided by the right count (.sum(axis=k) / D)
        for wrong_mean, wrong_var in (
            (gx.mean(axis=ax, keepdims=True), (gx * m.xhat).mean(axis=ax, keepdims=True)),
            (gx.sum(axis=ax, keepdims=True) / n, (gx * m.xhat).sum(axis=ax, keepdims=True) / n),
        ):
            out.append(mistake("axis_mean_term", m.rstd * (gx - wrong_mean - m.xhat * var_term), **words))
            out.append(mistake("axis_variance_term", m.rstd * (gx - mean_term - m.xhat * wrong_var), **words))
        # the staged form, dx = rstd * dxhat + dmean / n + ...: dmean's sum over the wrong axes, rstd inside it
        staged_mean = (m.rstd * gx).sum(axis=ax, keepdims=True) / n
        out.append(mistake("axis_mean_term", m.rstd * (gx - m.xhat * var_term) - staged_mean, **words))
    return out


def rms_one_term_axis(gx: np.ndarray, xhat: np.ndarray, rrms: np.ndarray, axes: tuple[int, ...]) -> list[Mistake]:
    """RMSNorm's dx = rrms * (gx - xhat * mean(gx * xhat)) with its one mean over the wrong axes (or sum / D)."""
    n = formulas.group_size(gx.shape, axes)
    out = []
    for ax in _other_axis_sets(gx.ndim, axes):
        words = {"wrong": axes_text(ax), "right": axes_text(axes)}
        for wrong in ((gx * xhat).mean(axis=ax, keepdims=True), (gx * xhat).sum(axis=ax, keepdims=True) / n):
            out.append(mistake("axis_variance_term", rrms * (gx - xhat * wrong), **words))
    return out


def quantities(info: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """rstd and gamma, as they broadcast against x: the factors a dx, dmean or dvar may carry or lack."""
    m = formulas.moments(info["x"], info["axes"], info["eps"])
    return [("rstd", m.rstd), ("gamma", info["g"])]


def param_mistakes(name: str, dy: np.ndarray, xhat: np.ndarray, info: dict[str, Any]) -> list[Mistake]:
    """dgamma and dbeta: an extra gamma, a mean over the positions instead of their sum."""
    gamma, pa = info["gamma"], info["param_axis"]
    shared = formulas.param_axes(dy.ndim, pa)
    positions = int(np.prod([dy.shape[a] for a in shared]))
    right = formulas.dgamma(dy, xhat, shared) if name == "dgamma" else formulas.dbeta(dy, shared)
    where = phrase("shared_every_row") if len(shared) == 1 and shared[0] == 0 else phrase("shared_axes", axes=shared)
    out = [
        mistake("extra_gamma_dgamma" if name == "dgamma" else "extra_gamma_dbeta", right * gamma),
        mistake("param_mean_not_sum", right / positions, param=name[1:], count=positions, where=where),
    ]
    if name == "dgamma":  # sum(dy) * sum(xhat): the product of the sums, not the sum of the products
        out.append(mistake("product_of_sums", formulas.dbeta(dy, shared) * xhat.sum(axis=shared)))
    return out


def _stage_mistakes(name: str, info: dict[str, Any], dy: np.ndarray) -> list[Mistake]:
    x, axes = info["x"], info["axes"]
    m = formulas.moments(x, axes, info["eps"])
    gx = formulas.dxhat(dy, info["g"])
    if name == "dgamma":
        shared = formulas.param_axes(x.ndim, info["param_axis"])
        return [
            mistake("x_not_xhat", formulas.dgamma(dy, x, shared)),
            mistake("xshift_not_xhat", formulas.dgamma(dy, m.xshift, shared)),
            *param_mistakes(name, dy, m.xhat, info),
        ]
    if name == "dbeta":
        return param_mistakes(name, dy, m.xhat, info)
    if name == "dxhat":
        return [mistake("gamma_left_out_dxhat", dy + 0.0), mistake("xhat_not_gamma", dy * m.xhat)]
    if name == "dvar":
        return [
            mistake("dvar_power", -0.5 * m.rstd * (gx * m.xshift).sum(axis=axes, keepdims=True)),
            mistake("dvar_xhat", -0.5 * m.rstd**3 * (gx * m.xhat).sum(axis=axes, keepdims=True)),
        ]
    return []


def mistakes(info: dict[str, Any], name: str, dy: np.ndarray | None = None) -> list[Mistake]:
    """Known wrong answers for output ``name`` (y, dx, dgamma, dbeta or a stage) of a LayerNorm or BatchNorm.

    ``dy`` overrides the upstream gradient (the pre-LN block feeds LN with dh).
    """
    dy = info["dy"] if dy is None else dy
    if name == "y":
        return _y_mistakes(info)
    if name == "dx":
        return _dx_mistakes(info, dy)
    return _stage_mistakes(name, info, dy)


def geometry(info: dict[str, Any], dy: np.ndarray | None = None) -> Geometry:
    """What the along-1 / along-xhat decomposition of a LayerNorm or BatchNorm dx needs."""
    x, eps, axes, n = info["x"], info["eps"], info["axes"], info["n"]
    dy = info["dy"] if dy is None else dy
    m = formulas.moments(x, axes, eps)
    gx = formulas.dxhat(dy, info["g"])
    dvar = formulas.dvar(gx, m.xshift, m.std, axes)
    return Geometry(
        axes=axes,
        xhat=m.xhat,
        mean_path=formulas.dmean(gx, m.rstd, axes) / n,
        radial_coef=dvar * 2.0 * m.std / n,
        eps=eps,
    )
