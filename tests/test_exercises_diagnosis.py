"""A corpus of wrong answers, single mistakes and pairs, in which no diagnosis blames code that is right.

Each answer is a reference solution with its planted mistakes (issue 28). For each, ``must`` names the
findings that have to appear (the mistakes the numbers single out) and ``may`` the others that would be
true of it; every other finding that blames something (a path, a term, a slip) is a misdiagnosis. The
neutral findings (which outputs are wrong and by how much, what to check) blame nothing and may always
appear. Judged in this process (tests.grading.judge_source) on several seeds: the grader's own cases.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pytest

from microgradnorm.exercises import messages
from microgradnorm.exercises.diagnose import factor_findings, match_pair, mistake, staged
from tests.grading import changed, judge_source

SEEDS = (0, 1, 2)
NEUTRAL = {
    "several_wrong",
    "no_match",
    "no_match_several",
    "not_paths_alone",
    "not_paths_alone_values",
    "right_first_wrong_second",
    "two_mistakes",
    "forward_first",
    "factor_per_axis",
    "scale_other",
    "follows",
    "all_zero",
    "not_paths_alone_rms",
}

POW = "return p * a ** (p - 1.0) * dout"
DIV = "return dout / b, -a / b**2 * dout"
SQRT = "return 0.5 / np.sqrt(a) * dout"
MUL = "return b * dout, a * dout"
MEAN2 = "return np.ones_like(x) * dmean / d"
VAR2 = "return 2.0 * xshift * dvar / d"
XSHIFT2 = "xshift = x - x.mean(axis=1, keepdims=True)  # N,D"
M3 = "mean = Value.sum(x) * (1.0 / d)"
V3 = "var = Value.sum([s**2 for s in xshift]) * (1.0 / d)"
R3 = "rstd = (var + eps).sqrt() ** -1"
Y3 = "return [g * (s * rstd) + b for s, g, b in zip(xshift, gamma, beta)]"
DG4 = "dgamma = (dy * xhat).sum(axis=lead)  # D"
DB4 = "dbeta = dy.sum(axis=lead)  # D"
DXH4 = "dxhat = dy * gamma  # B,T,D"
MP5 = "mean_part = dxhat.mean(axis=-1, keepdims=True)  # B,T,1: the path through the mean"
VP5 = "var_part = (dxhat * xhat).mean(axis=-1, keepdims=True)  # B,T,1: the path through the variance"
DX5 = "dx = rstd * (dxhat - mean_part - xhat * var_part)  # B,T,D"
DG5 = "dgamma = (dy * xhat).sum(axis=lead)  # D"
DB5 = "dbeta = dy.sum(axis=lead)  # D"
RSTD5 = "rstd = 1.0 / np.sqrt(var + eps)  # B,T,1"
VAR5 = "var = (xshift * xshift).mean(axis=-1, keepdims=True)  # B,T,1"
DVAR6 = "dvar = -0.5 * std**-3 * (dxhat * xshift).sum(axis=0, keepdims=True)  # 1,D"
DMEAN6 = "dmean = -rstd * dxhat.sum(axis=0, keepdims=True)  # 1,D"
DX6 = "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift / m  # M,D"
DX7 = "dx = rstd * (dxhat - dxhat.mean(axis=0) - xhat * (dxhat * xhat).mean(axis=0))  # M,D"
DG7 = "dgamma = (dy * xhat).sum(axis=0)  # D"
DX8 = "dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))  # N,D"
DG8 = "dgamma = (dy * xhat).sum(axis=0)  # D"
P9 = "return (np.outer(ones, ones) + np.outer(xhat, xhat)) / d"
J9 = "return rstd * gamma[:, None] * (np.eye(d) - projection(xhat))"
M10 = "mean += delta / count"
M2_10 = "m2 += delta * (value - mean)"
DH11 = "dh = dy @ W.T  # N,D"
RET11 = "return dy + dx_ln, dgamma, dbeta, dW"
DW11 = "dW = h.T @ dy  # D,D"
DXLN11 = (
    "dx_ln = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))"
)
DXLN11_MEAN_AXIS0 = DXLN11.replace("dxhat - dxhat.mean(axis=-1", "dxhat - dxhat.mean(axis=0")  # its mean term's axis


class Wrong(NamedTuple):
    """A wrong answer: the reference solution of exercise ``number`` (where its id starts) with ``changes`` made;
    the findings it ``must`` get, and those it ``may`` get (true of it too)."""

    id: str
    changes: list[tuple[str, str]]
    must: set[str]
    may: frozenset[str] | set[str] = frozenset()

    @property
    def number(self) -> int:
        return int(self.id.split("-")[0])


# one wrong answer a row, Wrong(id, changes, must[, may]), laid out by hand as a table (fmt: skip)
CORPUS = [
    # ---- 01: the two mistakes of the trial, and others alone and in pairs
    Wrong("1-pow-and-div-sign", [(POW, "return p * a**p * dout"), (DIV, "return dout / b, a / b**2 * dout")],
          {"pow_not_lowered", "sign_flipped"}),
    # may: one mistake (a and b swapped in mul) shown once for both outputs
    Wrong("1-sqrt-and-mul", [(SQRT, "return 1.0 / np.sqrt(a) * dout"), (MUL, "return a * dout, b * dout")],
          {"sqrt_no_half", "mul_swapped_a"}, {"mul_swapped_b"}),
    Wrong("1-div-no-dout", [(DIV, "return 1.0 / b, -a / b**2")], {"no_dout"}),
    Wrong("1-div-da-times-b", [(DIV, "return dout, -a / b**2 * dout")], {"factor_extra"}, {"factor_missing"}),
    Wrong("1-pow-no-p-sqrt-sign", [(POW, "return a ** (p - 1.0) * dout"), (SQRT, "return -0.5 / np.sqrt(a) * dout")],
          {"pow_no_p", "sign_flipped"}),
    # ---- 02
    Wrong("2-mean-no-1/n", [(MEAN2, "return np.ones_like(x) * dmean")], {"scale_missing_1_over_n"}),
    Wrong("2-var-x-not-xshift", [(VAR2, "return 2.0 * x * dvar / d")], {"var_x_not_xshift"}),
    Wrong("2-var-no-2-and-mean-no-1/n", [(VAR2, "return xshift * dvar / d"), (MEAN2, "return np.ones_like(x) * dmean")],
          {"scale_half", "scale_missing_1_over_n"}),
    Wrong("2-var-columns", [(XSHIFT2, "xshift = x - x.mean(axis=0, keepdims=True)")], {"var_mean_wrong_axis"}),
    # ---- 03: graph cuts by .data or a float
    Wrong("3-mean-data", [(M3, "mean = Value(Value.sum(x).data / d)")], {"graph_cut_mean"}),
    Wrong("3-rstd-float", [(R3, "rstd = 1.0 / (var.data + eps) ** 0.5")], {"graph_cut_variance"}),
    # may: true of it too, the breakdown of the one finding
    Wrong("3-both-float", [(M3, "mean = Value.sum(x).data / d"), (R3, "rstd = 1.0 / (var.data + eps) ** 0.5")],
          {"graph_cut_statistics"}, {"graph_cut_mean", "graph_cut_variance"}),
    Wrong("3-unbiased", [(V3, "var = Value.sum([s**2 for s in xshift]) * (1.0 / (d - 1))")],
          {"unbiased_variance"}, {"scale_unbiased_std"}),
    Wrong("3-gamma-float", [(Y3, "return [g.data * (s * rstd) + b for s, g, b in zip(xshift, gamma, beta)]")],
          {"all_zero"}),
    # ---- 04: the product of sums, and pairs
    Wrong("4-product-of-sums", [(DG4, "dgamma = dy.sum(axis=lead) * xhat.sum(axis=lead)")], {"product_of_sums"}),
    Wrong("4-product-of-sums-and-mean-dbeta",
          [(DG4, "dgamma = dy.sum(axis=lead) * xhat.sum(axis=lead)"), (DB4, "dbeta = dy.mean(axis=lead)")],
          {"product_of_sums", "param_mean_not_sum"}),
    Wrong("4-dxhat-no-gamma-and-extra-gamma", [(DXH4, "dxhat = dy"), (DB4, "dbeta = dy.sum(axis=lead) * gamma")],
          {"gamma_left_out_dxhat", "extra_gamma_dbeta"}, {"factor_missing"}),
    # ---- 05: single-term axis swaps, paths, pairs
    Wrong("5-mean-term-axis-1", [(MP5, "mean_part = dxhat.mean(axis=1, keepdims=True)")], {"axis_mean_term"}),
    Wrong("5-var-term-axis-0", [(VP5, "var_part = (dxhat * xhat).mean(axis=0, keepdims=True)")],
          {"axis_variance_term"}),
    Wrong("5-var-term-all-axes", [(VP5, "var_part = (dxhat * xhat).mean(axis=(0, 1), keepdims=True)")],
          {"axis_variance_term"}),
    Wrong("5-no-mean-path-and-dbeta-mean",
          [(DX5, "dx = rstd * (dxhat - xhat * var_part)"), (DB5, "dbeta = dy.mean(axis=lead)")],
          {"mean_path_missing", "param_mean_not_sum"}, {"geometry_mean_missing"}),
    Wrong("5-no-rstd", [(DX5, "dx = dxhat - mean_part - xhat * var_part")], set(), {"factor_missing"}),
    Wrong("5-no-mean-and-no-var-path-halves", [(DX5, "dx = rstd * (dxhat - 0.5 * mean_part - xhat * var_part)")],
          {"geometry_mean_scaled"}),
    Wrong("5-unbiased", [(VAR5, "var = xshift.var(axis=-1, ddof=1, keepdims=True)")],
          {"unbiased_variance"}, {"scale_unbiased_std"}),
    Wrong("5-product-of-sums", [(DG5, "dgamma = dy.sum(axis=lead) * xhat.sum(axis=lead)")], {"product_of_sums"}),
    Wrong("5-mean-term-axis-and-var-path-missing",
          [(MP5, "mean_part = dxhat.mean(axis=1, keepdims=True)"), (DX5, "dx = rstd * (dxhat - mean_part)")],
          set(), {"axis_mean_term", "variance_path_missing"}),
    # ---- 06: staged BatchNorm
    Wrong("6-dmean-no-rstd", [(DMEAN6, "dmean = -dxhat.sum(axis=0, keepdims=True)")], {"factor_missing"}),
    Wrong("6-slip", [(DX6, "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift * (m - 1) / m**2")],
          {"variance_path_slip"}, {"geometry_radial_slip"}),
    Wrong("6-dvar-power", [(DVAR6, "dvar = -0.5 * rstd * (dxhat * xshift).sum(axis=0, keepdims=True)")],
          {"dvar_power"}),
    Wrong("6-dvar-sign", [(DVAR6, "dvar = 0.5 * std**-3 * (dxhat * xshift).sum(axis=0, keepdims=True)")],
          {"sign_flipped"}),
    Wrong("6-dmean-mean", [(DMEAN6, "dmean = -rstd * dxhat.mean(axis=0, keepdims=True)")], {"scale_extra_1_over_n"}),
    # ---- 07
    Wrong("7-wrong-axis",
          [(DX7, "dx = rstd * (dxhat - dxhat.mean(axis=1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=1, "
                 "keepdims=True))")],
          {"wrong_axis_backward"}),
    Wrong("7-mean-term-axis",
          [(DX7, "dx = rstd * (dxhat - dxhat.mean(axis=1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=0))")],
          {"axis_mean_term"}),
    Wrong("7-no-var-path-and-product-of-sums",
          [(DX7, "dx = rstd * (dxhat - dxhat.mean(axis=0))"), (DG7, "dgamma = dy.sum(axis=0) * xhat.sum(axis=0)")],
          {"variance_path_missing", "product_of_sums"}, {"geometry_radial_missing"}),
    # ---- 08
    Wrong("8-layernorm-formula",
          [(DX8, "dx = rrms * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * "
                 "(dxhat * xhat).mean(-1, keepdims=True))")],
          {"rms_layernorm_formula"}, {"geometry_rms_mean_term"}),
    Wrong("8-no-rrms-path", [(DX8, "dx = rrms * dxhat")], {"rms_path_missing"}, {"geometry_radial_missing"}),
    Wrong("8-no-rrms", [(DX8, "dx = dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)")],
          set(), {"factor_missing"}),
    Wrong("8-dgamma-x", [(DG8, "dgamma = (dy * xhat / rrms).sum(axis=0)")], {"rms_x_not_xhat"}),
    # ---- 09: P inside J
    Wrong("9-inner-product", [(P9, "return (np.outer(ones, ones) + xhat @ xhat) / d")], {"p_inner_product"}),
    Wrong("9-inner-product-transpose", [(P9, "return (np.outer(ones, ones) + xhat.T @ xhat) / d")],
          {"p_inner_product"}),
    Wrong("9-elementwise", [(P9, "return (np.outer(ones, ones) + np.diag(xhat * xhat)) / d")], {"p_elementwise"}),
    Wrong("9-no-radial", [(P9, "return np.outer(ones, ones) / d")], {"p_no_radial"}),
    Wrong("9-j-transposed", [(J9, "return rstd * gamma[None, :] * (np.eye(d) - projection(xhat))")], {"j_transposed"}),
    # ---- 10
    Wrong("10-delta-squared", [(M2_10, "m2 += delta * delta")], {"welford_delta_squared"}),
    Wrong("10-old-count", [(M10, "mean += delta / max(count - 1, 1)")], {"welford_old_count"}),
    # ---- 11: the trial's pair, and others
    Wrong("11-w-and-identity", [(DH11, "dh = dy @ W"), (RET11, "return dx_ln, dgamma, dbeta, dW")],
          {"identity_path_missing", "w_not_transposed"}),
    Wrong("11-w-not-transposed", [(DH11, "dh = dy @ W")], {"w_not_transposed"}),
    Wrong("11-dh-scaled", [(DH11, "dh = 2.0 * dy @ W.T")], set(), {"scale_two", "dh_wrong"}),
    Wrong("11-dw-transposed-and-identity", [(DW11, "dW = dy.T @ h"), (RET11, "return dx_ln, dgamma, dbeta, dW")],
          {"dw_transposed", "identity_path_missing"}),
    Wrong("11-mean-term-axis", [(DXLN11, DXLN11_MEAN_AXIS0)], {"axis_mean_term"}),
]  # fmt: skip


# the same slips written the other ways a learner writes them (the held-out set is written from the trial)
CORPUS += [
    Wrong("5-mean-term-sum-axis-over-d", [(MP5, "mean_part = dxhat.sum(axis=1, keepdims=True) / dxhat.shape[-1]")],
          {"axis_mean_term"}),
    Wrong("5-eps-outside-forward", [("rstd = 1.0 / np.sqrt(var + eps)  # B,T,1", "rstd = 1.0 / (np.sqrt(var) + eps)")],
          {"eps_outside_sqrt", "forward_first"}),
    Wrong("3-xshift-data", [("xshift = [xi - mean for xi in x]", "xshift = [Value(xi.data - mean.data) for xi in x]")],
          {"all_zero"}),
    Wrong("3-var-float", [(V3, "var = sum(s.data**2 for s in xshift) / d"), (R3, "rstd = (var + eps) ** -0.5")],
          {"graph_cut_variance"}),
    Wrong("7-no-rstd", [(DX7, "dx = dxhat - dxhat.mean(axis=0) - xhat * (dxhat * xhat).mean(axis=0)")],
          {"factor_missing"}),
    Wrong("8-sum-not-mean", [(DX8, "dx = rrms * (dxhat - xhat * (dxhat * xhat).sum(axis=-1, keepdims=True))")],
          {"geometry_radial_scaled"}),
    Wrong("2-two-multiplied", [(VAR2, "return 2.0 * x * dvar / (d - 1)")], {"var_x_not_xshift", "scale_unbiased"}),
    Wrong("1-pow-not-lowered-and-negated", [(POW, "return -p * a**p * dout")], {"pow_not_lowered", "sign_flipped"}),
    Wrong("5-no-mean-path-doubled", [(DX5, "dx = 2.0 * rstd * (dxhat - xhat * var_part)")],
          {"mean_path_missing", "scale_two"}),
    Wrong("4-dgamma-np-sum-product", [(DG4, "dgamma = np.sum(dy, axis=(0, 1)) * np.sum(xhat, axis=(0, 1))")],
          {"product_of_sums"}),
    Wrong("6-dmean-no-rstd-dx-own",
          [(DMEAN6, "dmean = -dxhat.sum(axis=0, keepdims=True)"),
           (DX6, "dx = dxhat * rstd + dmean * rstd / m + dvar * 2.0 * xshift / m")],
          {"factor_missing"}),
    Wrong("9-inner-np-dot", [(P9, "return (np.outer(ones, ones) + np.dot(xhat, xhat)) / d")], {"p_inner_product"}),
    Wrong("11-w-and-identity-einsum",
          [(DH11, "dh = np.einsum('nd,ed->ne', dy, W.T)"), (RET11, "return dx_ln, dgamma, dbeta, dW")],
          {"identity_path_missing", "w_not_transposed"}),
    Wrong("11-ln-part-no-rstd",
          [(DXLN11, "dx_ln = dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * "
                    "(dxhat * xhat).mean(axis=-1, keepdims=True)")],
          {"factor_missing"}),
    Wrong("1-pow-not-lowered-div-da-db", [(POW, "return p * a**p * dout"), (DIV, "return -a / b**2 * dout, dout / b")],
          {"pow_not_lowered"}, {"div_da_is_db", "swapped_outputs"}),
]  # fmt: skip


# the wrong attempts of an independent learner's pass (tutor-review), each one the grader got wrong or vague before
DX8_RMS_AXIS0 = "dx = rrms * (dxhat - xhat * (dxhat * xhat).mean(axis=0))"
CORPUS += [
    Wrong("3-xshift-minus-data", [("xshift = [xi - mean for xi in x]", "xshift = [xi - mean.data for xi in x]")],
          {"graph_cut_mean"}),
    Wrong("3-xshift-reversed", [("xshift = [xi - mean for xi in x]", "xshift = [mean - xi for xi in x]")],
          {"xshift_reversed"}, {"sign_flipped"}),  # dx and dgamma are the right ones times -1
    Wrong("5-xshift-reversed", [("xshift = x - mean  # B,T,D", "xshift = mean - x  # B,T,D")],
          {"xshift_reversed"}, {"sign_flipped"}),
    Wrong("5-staged-dmean-axis-0",
          [(DX5, "dx = rstd * (dxhat - xhat * var_part) - "
                 "(dxhat * rstd).sum(axis=0, keepdims=True) / dxhat.shape[-1]")],
          {"axis_mean_term"}),
    Wrong("8-eps-outside", [("rrms = 1.0 / np.sqrt(ms + eps)  # N,1", "rrms = 1.0 / (np.sqrt(ms) + eps)  # N,1")],
          {"rms_eps_outside_sqrt", "forward_first"}),
    Wrong("8-rms-term-axis-0", [(DX8, DX8_RMS_AXIS0)], {"axis_variance_term"}),
    Wrong("8-rms-term-axis-0-sum", [(DX8, "dx = rrms * (dxhat - xhat * (dxhat * xhat).sum(axis=0) / dxhat.shape[-1])")],
          {"axis_variance_term"}),
    Wrong("4-dgamma-axis-0-and-dbeta-keepdims",
          [(DG4, "dgamma = (dy * xhat).sum(axis=0)"), (DB4, "dbeta = dy.sum(axis=lead, keepdims=True)")],
          {"wrong_axis_shape", "keepdims"}),
    Wrong("9-p-complement", [(P9, "return np.eye(d) - (np.outer(ones, ones) + np.outer(xhat, xhat)) / d")],
          {"p_complement"}),
    Wrong("11-w-and-mean-term-axis", [(DH11, "dh = dy @ W"), (DXLN11, DXLN11_MEAN_AXIS0)],
          {"w_not_transposed", "axis_mean_term"}),
    Wrong("11-w-and-no-variance-path",
          [(DH11, "dh = dy @ W"), (DXLN11, "dx_ln = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True))")],
          {"w_not_transposed", "variance_path_missing"}),
    Wrong("10-mean-not-updated",
          [(M10, "new_mean = mean + delta / count"), (M2_10, "m2 += delta * (value - new_mean)")],
          {"welford_mean_not_updated"}),
    Wrong("10-m2-divided", [("return count, mean, m2", "return count, mean, m2 / count")], {"welford_m2_divided"}),
    Wrong("2-mean-not-broadcast", [(MEAN2, "return dmean / d")], {"not_broadcast"}),
    Wrong("9-j-unbiased",
          [("rstd = 1.0 / np.sqrt((xshift * xshift).mean() + eps)",
            "rstd = 1.0 / np.sqrt((xshift * xshift).sum() / (d - 1) + eps)")],
          {"unbiased_variance"}),
    Wrong("9-j-p-of-x", [(J9, J9.replace("projection(xhat)", "projection(x)"))], {"j_p_not_of_xhat"}),
    Wrong("9-j-p-of-xshift", [(J9, J9.replace("projection(xhat)", "projection(xshift)"))], {"j_p_not_of_xhat"}),
    Wrong("5-forward-unbiased-and-eps-outside",
          [(VAR5, "var = xshift.var(axis=-1, ddof=1, keepdims=True)"), (RSTD5, "rstd = 1.0 / (np.sqrt(var) + eps)")],
          {"unbiased_variance", "eps_outside_sqrt"}, {"forward_first", "scale_unbiased_std"}),
    Wrong("5-forward-unbiased-and-no-eps",
          [(VAR5, "var = xshift.var(axis=-1, ddof=1, keepdims=True)"), (RSTD5, "rstd = 1.0 / np.sqrt(var)")],
          {"unbiased_variance", "eps_left_out"}, {"forward_first", "scale_unbiased_std"}),
    Wrong("8-rms-term-axis-and-sign", [(DX8, DX8_RMS_AXIS0.replace("dxhat - xhat", "dxhat + xhat"))], set()),
]  # fmt: skip


def _blamed(judgement) -> set[str]:
    keys = set()
    for f in judgement.findings:
        keys.add(f.key)
        keys.update(g.key for g in f.also)
    return keys - NEUTRAL


@pytest.mark.parametrize("wrong", CORPUS, ids=[c.id for c in CORPUS])
@pytest.mark.parametrize("seed", SEEDS)
def test_no_diagnosis_blames_code_that_is_right(wrong, seed):
    result = judge_source(wrong.number, changed(wrong.number, *wrong.changes), seed)
    assert not result.passed
    blamed, must, may = _blamed(result), wrong.must, wrong.may
    said = [(f.key, f.title) for f in result.findings]
    assert blamed <= must | may, f"misdiagnosis: {blamed - must - may} in {said}"
    assert must <= blamed | {f.key for f in result.findings}, f"not named: {must - blamed} in {said}"


def test_two_mistakes_whose_errors_cancel_explain_nothing():
    """A path left out and the same path doubled add up to the right answer: no pair of them may be named
    for an answer that is merely close to it (an eps guard at eps = 0 was once called both)."""
    rng = np.random.default_rng(0)
    right, path = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    nearly = right * (1 + 1e-7)
    pair = [mistake("direct_path_only", right - path), mistake("sign_flipped", right + path)]
    assert match_pair(nearly, right, pair) is None
    both = [mistake("direct_path_only", right - path), mistake("sign_flipped", right + 2 * path)]
    assert match_pair(right + path, right, both) is not None  # errors -path and 2 path: together +path


def test_status_lines_say_what_they_mean_and_the_second_input_is_not_ticked_when_not_compared():
    """Issue 28 item 4: "ran" says three calls of what; the tolerance says what it is; a wrong shape on the
    second input leaves that row unticked."""
    wrong = changed(5, ("return dx, dgamma, dbeta", "return dx, dgamma[:5], dbeta"))  # D = 5 first, 6 second
    result = judge_source(5, wrong, 0)
    rows = {r.label: r for r in result.rows}
    assert rows["ran"].detail == messages.say("row_ran")
    assert rows["second input"].ok is None and "not compared" in rows["second input"].detail
    off = judge_source(5, changed(5, ("dbeta = dy.sum(axis=lead)  # D", "dbeta = 1.001 * dy.sum(axis=lead)")), 0)
    detail = next(r.detail for r in off.rows if r.label == "dbeta")
    assert "tolerance" in detail and "times float64 rounding" in detail


def test_one_mistake_seen_in_several_outputs_is_one_bullet():
    result = judge_source(5, changed(5, (VAR5, "var = xshift.var(axis=-1, ddof=1, keepdims=True)")), 0)
    titles = [f.title for f in result.findings]
    assert len(titles) == len(set(titles)) and sum("unbiased variance" in t for t in titles) == 1, titles


@functools.cache
def _corpus_findings() -> tuple[tuple[str, int, tuple], ...]:
    """(id, exercise, findings on seed 0) of every corpus mistake: judged once for the two tests that read them."""
    return tuple(
        (w.id, w.number, tuple(judge_source(w.number, changed(w.number, *w.changes), 0).findings)) for w in CORPUS
    )


def test_every_fix_is_held_back_the_first_time_and_shown_the_second():
    """Issue 28 item 2 over the corpus: a first failure names its slips but shows no explanation that states
    the fix; once the same mistakes were seen, every explanation is shown."""
    assert messages.REVEALS <= set(messages.FINDINGS)
    for sid, number, findings in _corpus_findings():
        first = staged(findings, set(), number)
        for f in first:
            if f.key in messages.REVEALS:
                assert f.held == number and f.detail == "" and f.title, (sid, f.key)
            else:
                assert f.detail, (sid, f.key)  # what is off (an output, a ratio, a factor) is said at once
        seen = {k for f in findings for k in f.keys}
        assert [f.detail for f in staged(findings, seen, number)] == [f.detail for f in findings], sid


def test_no_explanation_says_a_sentence_twice_and_rmsnorm_hears_of_no_mean_path():
    """The learner's pass (tutor-review): exercise 3's missing-mean explanation came twice on a second check
    (the path and its geometry, both renamed to the same cut node); exercise 8's fallback spoke of the paths
    through the mean and the variance, which RMSNorm does not have, then sent the learner to a self-check that
    only repeats that dx differs."""
    for sid, number, findings in _corpus_findings():
        for f in staged(findings, {k for g in findings for k in g.keys}, number):
            said = [s.strip() for s in f.detail.replace(". ", ".\n").splitlines() if s.strip()]
            assert len(said) == len(set(said)), (sid, f.key, f.detail)
    rms = judge_source(8, changed(8, (DX8, DX8_RMS_AXIS0.replace("dxhat - xhat", "dxhat + xhat"))), 0).findings
    assert [f.key for f in rms] == ["not_paths_alone_rms"], [f.key for f in rms]
    assert "mean" not in rms[0].title and "variance" not in rms[0].detail


def test_status_words_are_not_repeated_and_a_factor_near_one_keeps_the_digits_that_tell_its_ends_apart():
    """The learner's pass: "several outputs are wrong: Wrong: y ..." said it twice, and a factor from 0.9996 to
    0.9999 (eps outside the square root, before that was named) read "from 1 to 1"."""
    right = np.random.default_rng(3).normal(size=(3, 6))
    found = factor_findings("y", right * np.array([[0.9996], [0.9998], [0.9999]]), right, [])
    assert [f.key for f in found] == ["factor_per_axis"]
    assert "from 0.9996 to 0.9999" in found[0].detail, found[0].detail
    wide = factor_findings("y", right * np.array([[0.5], [2.0], [3.0]]), right, [])
    assert "from 0.5 to 3" in wide[0].detail, wide[0].detail
    several = judge_source(8, changed(8, ("rrms = 1.0 / np.sqrt(ms + eps)  # N,1", "rrms = 1.0 / np.sqrt(ms)")), 0)
    detail = next(f.detail for f in several.findings if f.key == "several_wrong")
    assert detail.startswith("y (relative error"), detail


def test_a_slip_in_dx_made_with_w_for_w_t_is_named_and_the_rest_of_dx_is_not_called_right():
    """The learner's pass: W for W.T and the mean term over axis 0 got 'W instead of W.T' and, for dx, only
    'no common mistake, run your file'; naming the axis slip must not claim the rest of dx is right."""
    source = changed(
        11,
        (DH11, "dh = dy @ W"),
        (DXLN11, DXLN11_MEAN_AXIS0),
    )
    findings = judge_source(11, source, 0).findings
    seen = {k for f in findings for k in f.keys}
    assert {"w_not_transposed", "axis_mean_term"} <= seen and "no_match" not in seen, seen
    said = " ".join(f.detail for f in staged(findings, seen, 11))
    assert "axis 0" in said and "rest of dx is right" not in said, said


def test_the_slip_is_one_bullet_not_two():
    """The learner's pass: exercise 6's (m-1)/m slip got two bullets, 'the variance path carries a factor
    (m-1)/m' and 'the path through the variance carries a factor (m-1)/m'."""
    slip = "dx = dxhat * rstd + dmean / m + dvar * 2.0 * xshift * (m - 1) / m**2"
    findings = judge_source(6, changed(6, (DX6, slip)), 0).findings
    assert [f.key for f in findings] == ["variance_path_slip"], [(f.key, f.title) for f in findings]
    assert "geometry_radial_slip" in findings[0].keys


def test_a_first_failure_title_does_not_state_the_right_power():
    """The learner's pass: exercise 6's 'the power -1/2 instead of -3/2' handed over the corrected exponent in
    the title, which is never held back."""
    wrong = (DVAR6, "dvar = -0.5 * rstd * (dxhat * xshift).sum(axis=0, keepdims=True)")
    first = staged(judge_source(6, changed(6, wrong), 0).findings, set(), 6)
    assert any(f.key == "dvar_power" for f in first)
    assert all("3/2" not in f.title and "3/2" not in f.detail for f in first), [(f.title, f.detail) for f in first]


def test_a_keepdims_shape_with_wrong_values_says_what_to_do_not_see_below():
    """The learner's pass: 'the values differ too, see below once the shape is fixed' pointed below at nothing."""
    result = judge_source(4, changed(4, (DB4, "dbeta = dy.mean(axis=lead, keepdims=True)")), 0)
    detail = next(f.detail for f in result.findings if f.key == "keepdims")
    assert "check again" in detail and "below" not in detail, detail


def test_fix_y_first_comes_with_how_to_check_y():
    """The learner's pass: y returned in reverse order got only 'fix y first', with nothing on how to check y;
    exercise 11's y was sent to a self-check that cannot see a forward mistake."""
    reversed_y = changed(3, (Y3, Y3 + "[::-1]"))
    said = {f.key: f.detail for f in judge_source(3, reversed_y, 0).findings}
    assert "forward_first" in said and "(y - beta) / gamma" in said.get("no_match", ""), said
    no_residual = changed(11, ("return x + h @ W,", "return (x + h @ W)[::-1],"))
    findings = judge_source(11, no_residual, 0).findings
    assert any(f.key == "no_match" and "h = LN(x)" in f.detail for f in findings), [f.detail for f in findings]
