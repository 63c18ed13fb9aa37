"""Every sentence the grader says, keyed: the one place its words live.

A diagnosis is data, a key and its parameters (:class:`.diagnose.Finding`), and
becomes text only here: :func:`title` and :func:`detail` for findings (the
known mistakes among them), :func:`say` for the one-line messages of a check
(its summary, the rows of its table), :func:`child_message` for what the
sandboxed process reports in English (it never loads a catalog: the grading
process says it again in the learner's language). Templates are ``str.format``
strings marked for gettext: English here, every other language in its catalog
(``microgradnorm/locale``), so a new language is a new catalog, not new grader
code. Numbers come in raw and are formatted by the template (``{n}``,
``{factor:.6g}``). A parameter that is itself words (which count, which path)
is a :class:`~microgradnorm.i18n.LazyText` (:func:`phrase`): a key of :data:`SAYINGS`, said in the language current
when the message is shown.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import cache
from typing import Any

from microgradnorm.i18n import N_, LazyText, _
from microgradnorm.i18n.text import separated as listed  # "dx, dgamma" (Chinese: "dx、dgamma")

__all__ = [
    "CHILD",
    "FINDINGS",
    "REVEALS",
    "SAYINGS",
    "child_message",
    "detail",
    "listed",
    "phrase",
    "recognise",
    "say",
    "title",
]

# Translators: the grader's diagnoses and messages. Code, formulas and names stay as they are (dx, xhat,
# gamma, keepdims=True, np.var(ddof=1), sum_j dxhat_j (x_j - mean)); so does every {placeholder} with its
# format ({factor:.6g}). A placeholder such as {path} or {wrong_what} holds a short phrase translated on its own.
_GAMMA_DY = N_("dxhat = gamma * dy: the upstream gradient passes through the scale first.")

# key: (title, detail)
FINDINGS: dict[str, tuple[str, str]] = {
    # ---- exercise 01: local derivatives
    "no_dout": (
        N_("the upstream gradient is missing"),
        N_(
            "You returned the local derivative alone. The chain rule multiplies it by dout, the gradient arriving "
            "from above."
        ),
    ),
    "mul_swapped_a": (N_("a and b swapped"), N_("d(a*b)/da is b, not a: the other factor.")),
    "mul_swapped_b": (N_("a and b swapped"), N_("d(a*b)/db is a, not b: the other factor.")),
    "pow_not_lowered": (N_("the exponent was not lowered"), N_("d(a**p)/da = p * a**(p-1): the power drops by one.")),
    "pow_no_p": (N_("the factor p is missing"), N_("d(a**p)/da = p * a**(p-1): p comes down in front.")),
    "sqrt_no_half": (
        N_("the factor 1/2 is missing"),
        N_("sqrt(a) = a**(1/2), so its derivative is (1/2) a**(-1/2) = 1 / (2 sqrt(a))."),
    ),
    "div_da_is_db": (N_("the derivative of b instead"), N_("d(a/b)/da = 1/b; -a/b**2 is d(a/b)/db.")),
    "div_b_not_squared": (
        N_("b is not squared"),
        N_("a/b = a * b**-1, and d(b**-1)/db = -b**-2, so d(a/b)/db = -a / b**2."),
    ),
    "div_no_a": (N_("a is missing"), N_("d(a/b)/db = -a / b**2: a stays as a factor.")),
    # ---- exercise 02: mean and variance
    "var_x_not_xshift": (
        N_("x instead of x - mean"),
        N_(
            "d var / d x_i = (2/n) (x_i - mean): the deviation from the mean, not x_i itself. (The route through "
            "the mean adds nothing, since the deviations sum to 0.)"
        ),
    ),
    "var_mean_wrong_axis": (
        N_("the mean over the wrong axis"),
        N_(
            "Your x - mean subtracts the mean of each column (axis 0). The variance of a row is about that row's "
            "own mean: x.mean(axis=1, keepdims=True), one per row."
        ),
    ),
    # ---- normalizations: the forward pass
    "unbiased_variance": (
        N_("unbiased variance"),
        N_(
            "The variance was divided by n - 1 = {n_minus_1} (unbiased, as np.var(ddof=1) or torch.var do by "
            "default). Normalization layers divide by n = {n}: xhat comes out sqrt(n/(n-1)) = {factor:.6g} times "
            "too small."
        ),
    ),
    "eps_left_out": (N_("eps left out"), N_("std = sqrt(var + eps) with eps = {eps:g}: eps is missing.")),
    "eps_outside_sqrt": (
        N_("eps outside the square root"),
        N_("eps goes inside: sqrt(var + eps), not sqrt(var) + eps."),
    ),
    "xshift_reversed": (
        N_("mean - x where x - mean belongs"),
        N_("Your y is gamma * (-xhat) + beta: every normalized value has the wrong sign. xhat = (x - mean) * rstd."),
    ),
    "gamma_beta_swapped": (N_("gamma and beta swapped"), N_("y = gamma * xhat + beta.")),
    "beta_left_out": (N_("beta left out"), N_("y = gamma * xhat + beta: add beta.")),
    "gamma_left_out": (N_("gamma left out"), N_("y = gamma * xhat + beta: scale by gamma.")),
    "wrong_axis": (
        N_("normalized over the wrong axis"),
        N_("You reduced over axis {wrong}; this norm takes its statistics over axis {right}."),
    ),
    "wrong_count": (
        N_("divided by {wrong_what} instead of {right_what}"),
        N_(
            "Your statistics divide by {wrong} ({wrong_what}) where they should divide by {right} ({right_what}): "
            "a mean over a group of {right} values divides their sum by {right}."
        ),
    ),
    # ---- normalizations: dx
    "mean_path_missing": (
        N_("the path through the mean is missing"),
        N_(
            "x_i also moves the mean, and the mean moves every xhat_j: add dmean / n to every dx_i "
            "(dmean = -rstd * sum_j dxhat_j)."
        ),
    ),
    "variance_path_missing": (
        N_("the path through the variance is missing"),
        N_(
            "x_i also moves the variance: add dvar * 2 (x_i - mean) / n "
            "(dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j (x_j - mean))."
        ),
    ),
    "direct_path_only": (
        N_("only the direct path"),
        N_("dx_i = dxhat_i * rstd is only the direct path: the mean and the variance depend on x_i too."),
    ),
    "variance_path_slip": (
        N_("the variance path carries a factor (m-1)/m"),
        N_(
            "Your variance path is (m-1)/m = {factor:.6g} times the right one (m = {m}). A derivation that "
            "circulates widely adds a second route from x to the variance, through the mean, worth "
            "-(2/m)(x_i - mean)/m. That route is 0: dvar/dmean = -(2/m) sum_j (x_j - mean), and the deviations "
            "sum to 0."
        ),
    ),
    "gamma_left_out_dx": (N_("gamma left out of dx"), _GAMMA_DY),
    "wrong_axis_backward": (
        N_("reduced over the wrong axis in the backward pass"),
        N_(
            "You reduced over axis {wrong}; this norm takes its statistics over axis {right}. The forward pass is "
            "right; the means in dx are taken over the wrong axis."
        ),
    ),
    # ---- normalizations: parameters and stages
    "x_not_xhat": (N_("x instead of xhat"), N_("dgamma = sum of dy * xhat: the normalized input.")),
    "xshift_not_xhat": (
        N_("x - mean instead of xhat"),
        N_("dgamma = sum of dy * xhat; x - mean is not yet divided by the std."),
    ),
    "extra_gamma_dgamma": (
        N_("an extra factor gamma"),
        N_("y depends on gamma through gamma * xhat, so dy/dgamma = xhat: gamma itself does not appear in dgamma."),
    ),
    "extra_gamma_dbeta": (N_("an extra factor gamma"), N_("dy/dbeta = 1: dbeta is the plain sum of dy.")),
    "param_mean_not_sum": (
        N_("a mean where a sum is needed"),
        N_(
            "The same {param} is used at each of the {count} positions it is shared by ({where}), so its gradient "
            "adds up a contribution from every one of them. Yours is that sum divided by {count}: a mean."
        ),
    ),
    "gamma_left_out_dxhat": (N_("gamma left out"), N_("dxhat = gamma * dy.")),
    "xhat_not_gamma": (N_("xhat instead of gamma"), N_("dxhat = dy * dy/dxhat = dy * gamma.")),
    "dvar_power": (
        N_("the power of (var + eps) was not lowered"),
        N_("xhat = xshift * (var + eps)^(-1/2), so dxhat/dvar = -1/2 xshift (var + eps)^(-3/2)."),
    ),
    "dvar_xhat": (
        N_("xhat instead of x - mean"),
        N_("dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j (x_j - mean): the deviations, not xhat."),
    ),
    # ---- exercise 08: RMSNorm
    "rms_centered": (N_("the mean was subtracted"), N_("RMSNorm divides x itself by its rms; it does not center x.")),
    "rms_gamma_left_out": (N_("gamma left out"), N_("y = gamma * x / rms.")),
    "rms_sum_not_mean": (
        N_("sum instead of mean"),
        N_("rms = sqrt(mean(x**2) + eps): the mean of the squares, not their sum."),
    ),
    "rms_eps_left_out": (N_("eps left out"), N_("rms = sqrt(mean(x**2) + eps), eps = {eps:g}.")),
    "rms_eps_outside_sqrt": (
        N_("eps outside the square root"),
        N_("eps goes inside: sqrt(mean(x**2) + eps), not sqrt(mean(x**2)) + eps."),
    ),
    "rms_layernorm_formula": (
        N_("the LayerNorm formula"),
        N_(
            "You subtracted mean(dxhat), the LayerNorm term for the path through the mean. RMSNorm has no mean, "
            "so dx = rrms * (dxhat - xhat * mean(dxhat * xhat))."
        ),
    ),
    "rms_path_missing": (
        N_("the path through the rms is missing"),
        N_("x_i also changes the rms that divides every x_j: subtract xhat_i * mean_j(dxhat_j xhat_j), times rrms."),
    ),
    "rms_gamma_left_out_dx": (N_("gamma left out of dx"), _GAMMA_DY),
    "rms_x_not_xhat": (N_("x instead of xhat"), N_("dgamma = sum of dy * xhat, xhat = x / rms.")),
    # ---- exercise 09: the Jacobian
    "p_no_1_over_d": (N_("the 1/d is missing"), N_("P = (1/d) (1 1^T + xhat xhat^T).")),
    "p_no_radial": (N_("the xhat xhat^T term is missing"), N_("P projects on both 1 and xhat: add xhat xhat^T / d.")),
    "p_no_ones": (N_("the 1 1^T term is missing"), N_("P projects on both 1 and xhat: add 1 1^T / d.")),
    "j_p_not_of_xhat": (
        N_("P built from {what} instead of xhat"),
        N_("The P inside J is built from the normalized vector xhat = (x - mean) * rstd, not from {what}."),
    ),
    "p_complement": (
        N_("I - P where P belongs"),
        N_(
            "Your P is the identity minus the right one: the part of a vector that J keeps. P is the part J "
            "removes: it sends the ones vector and xhat to themselves."
        ),
    ),
    "j_transposed": (
        N_("transposed"),
        N_("J[i, j] = dy_i / dx_j: row i belongs to output y_i, so gamma_i scales row i (diag(gamma) on the left)."),
    ),
    "j_gamma_left_out": (N_("gamma left out"), N_("dy/dx = (1/std) diag(gamma) (I - P).")),
    "j_no_sigma": (N_("the 1/std is missing"), N_("dy/dx = (1/std) diag(gamma) (I - P).")),
    "j_variance_path_missing": (
        N_("the path through the variance is missing"),
        N_("I - P must remove xhat xhat^T / d too: that is the path through the variance."),
    ),
    "j_mean_path_missing": (
        N_("the path through the mean is missing"),
        N_("I - P must remove 1 1^T / d too: that is the path through the mean."),
    ),
    "j_eps_left_out": (
        N_("eps left out"),
        N_(
            "std = sqrt(var + eps) with eps = {eps:g}: your Jacobian uses sqrt(var), as if eps were 0. Compute "
            "xhat and 1/std from x with eps, as the forward pass does."
        ),
    ),
    # ---- exercise 10: Welford
    "welford_delta_squared": (
        N_("delta squared"),
        N_(
            "m2 grew by delta**2 = (value - old mean)**2. The right increment is (value - old mean) * (value - new "
            "mean): the second factor uses the mean after the update, which is what makes the sum of squared "
            "deviations come out exact."
        ),
    ),
    "welford_new_delta_squared": (
        N_("the new deviation squared"),
        N_(
            "m2 grew by (value - new mean)**2. The right increment is (value - old mean) * (value - new mean): one "
            "factor of each."
        ),
    ),
    "welford_old_count": (
        N_("divided by the old count"),
        N_(
            "Your mean moves by (value - mean) / count with the count before this value. It is the mean of count + 1 "
            "values now: mean_new = mean + (value - mean) / (count + 1)."
        ),
    ),
    "welford_mean_not_updated": (
        N_("the mean is not updated"),
        N_(
            "Your mean stays where the state started: the new mean is computed but the old one is returned. "
            "Return the updated mean, so that the next value's deviation is measured from it."
        ),
    ),
    "welford_m2_divided": (
        N_("m2 divided by the count at every step"),
        N_(
            "m2 is the running sum of squared deviations: it is divided by the count once, at the end, to give "
            "the variance. Returning m2 / count as the new m2 shrinks the sum at every value."
        ),
    ),
    "welford_ignores_state": (
        N_("the starting state was ignored"),
        N_(
            "Your results are those of the values your function saw, as if the count, mean and m2 it was given were "
            "(0, 0, 0). The grader starts each row mid-stream, from the state of {count} values it never shows: "
            "update the state you are given, do not keep the values yourself."
        ),
    ),
    "cancellation": (
        N_("cancellation"),
        N_(
            "On this input every value is about {offset:.0e} and the spread only about 1: your variance is off by "
            "{rel:.2g} relative. Each x**2 is then about 1e16, where neighbouring doubles are 2 apart, so a sum of "
            "squares is rounded by more than the variance itself, and subtracting mean**2 cancels everything that "
            "mattered. Update m2 with deviations from the running mean instead: m2 += (x - old mean) * (x - new "
            "mean)."
        ),
    ),
    # ---- exercise 11: the pre-LN block
    "residual_missing": (N_("the residual is missing"), N_("out = x + LN(x) @ W: add x back.")),
    "w_transposed_forward": (N_("W transposed"), N_("out = x + LN(x) @ W, with h [N, D] times W [D, D].")),
    "identity_path_missing": (
        N_("the identity path is missing"),
        N_("out = x + f(x): the residual connection hands dy straight to dx. dx = dy + (the LN path)."),
    ),
    "identity_path_only": (
        N_("only the identity path"),
        N_("dx = dy + (the gradient through LN and W): the second part is missing."),
    ),
    "w_not_transposed": (
        N_("W instead of W.T"),
        N_("h @ W sends dy back to h as dh = dy @ W.T (the transpose), not dy @ W."),
    ),
    "dw_transposed": (N_("transposed"), N_("dW[i, j] = sum_n h[n, i] dy[n, j], i.e. h.T @ dy.")),
    "dw_x_not_h": (N_("x instead of LN(x)"), N_("W multiplies h = LN(x), so dW = h.T @ dy, not x.T @ dy.")),
    "dy_not_dh": (
        N_("dy instead of dh"),
        N_("gamma and beta sit inside the block: the gradient reaching them is dh = dy @ W.T, not dy."),
    ),
    # ---- the geometry of a normalization's dx
    "not_paths_alone": (
        N_("not one path alone"),
        N_(
            "The error of your dx is not only along 1 and xhat ({share}), so no single path through the mean or "
            "through the variance, left out or scaled, explains it. Check each term of your dx: dxhat (gamma and "
            "dy), the axis of each sum or mean, and which factor multiplies which term."
        ),
    ),
    "not_paths_alone_rms": (
        N_("not the path through the rms alone"),
        N_(
            "The error of your dx is not only along 1 and xhat ({share}), so neither the path through the rms, left "
            "out or scaled, nor a term along 1 explains it. Check each term of your dx: dxhat (gamma and dy), the "
            "axis of each sum or mean, its sign, and which factor multiplies which term."
        ),
    ),
    "not_paths_alone_values": (
        N_("not one value left out of the graph"),
        N_(
            "Your dx is not what leaving the mean or the variance out of the graph gives, so the formula itself "
            "differs: compare your mean, var and y with the formulas above, and check that every y is built from "
            "Values all the way from x."
        ),
    ),
    "graph_cut_mean": (
        N_("the mean is not in the graph"),
        N_(
            "Your dx is what backward() gives when x reaches the loss through x - mean but not through the mean "
            "itself: your mean was made from plain numbers (.data, float(), or a new Value(...)), which backward() "
            "cannot go through. The mean depends on every x_j: build it from the Values x."
        ),
    ),
    "graph_cut_variance": (
        N_("the variance is not in the graph"),
        N_(
            "Your dx is what backward() gives when the variance (or the std) is a plain number: it was made with "
            ".data, float() or a new Value(...), which backward() cannot go through. The variance depends on every "
            "x_j: build it from Values."
        ),
    ),
    "graph_cut_statistics": (
        N_("the mean and the variance are not in the graph"),
        N_(
            "Your dx is what backward() gives when both the mean and the variance are plain numbers (.data, float() "
            "or a new Value(...)): x then reaches y only directly. Both depend on every x_j: build them from Values."
        ),
    ),
    "all_zero": (
        N_("{name} is 0 everywhere"),
        N_(
            "Your {name} is 0 in every entry, where the right one is not: a result that was never filled in "
            "(np.zeros_like), or, with Values, an input that left the graph (.data, float()) before it was used."
        ),
    ),
    "axis_mean_term": (
        N_("the mean of dxhat over the wrong axis"),
        N_(
            "In your dx one term, the mean of dxhat, is taken over axis {wrong}. Every mean in dx is over the "
            "group each x_i was normalized with: axis {right}."
        ),
    ),
    "axis_variance_term": (
        N_("the mean of dxhat * xhat over the wrong axis"),
        N_(
            "In your dx one term, the mean of dxhat * xhat, is taken over axis {wrong}. Every mean in dx is over "
            "the group each x_i was normalized with: axis {right}."
        ),
    ),
    "product_of_sums": (
        N_("a product of sums"),
        N_(
            "Your dgamma is (the sum of dy) times (the sum of xhat): each summed on its own, then multiplied. Each "
            "position where gamma is used contributes its own dy times its own xhat."
        ),
    ),
    "p_inner_product": (
        N_("an inner product where an outer one belongs"),
        N_(
            "In your P, {what} is a single number added to every entry: u @ v of two vectors (or u.T @ v: "
            "transposing a 1-D array changes nothing) is their inner product, a number. A D x D matrix made from "
            "two vectors is their outer product."
        ),
    ),
    "number_for_matrix": (
        N_("a number where a matrix belongs"),
        N_(
            "{name} is a single number, where a matrix of shape {expected} is expected. u @ v of two vectors "
            "(or u.T @ v: transposing a 1-D array changes nothing) is their inner product, a number; the matrix "
            "made from two vectors is their outer product."
        ),
    ),
    "p_elementwise": (
        N_("an elementwise product where an outer one belongs"),
        N_(
            "Your xhat xhat^T term holds xhat_i^2 on the diagonal and nothing else: xhat * xhat is D numbers, one "
            "per entry. The term needs every pair (i, j): a D x D matrix."
        ),
    ),
    "factor_extra": (
        N_("an extra factor {q}"),
        N_("Your {name} is the right one times {q}, entry by entry: {q} multiplies it where it does not belong."),
    ),
    "factor_missing": (
        N_("a factor {q} is missing"),
        N_("Your {name} is the right one divided by {q}, entry by entry: where {q} belongs, it is not there."),
    ),
    "factor_per_axis": (
        N_("off by a factor that changes {where}"),
        N_(
            "Your {name} is the right one times a factor that is the same within each slice and changes {where} "
            "(from {low} to {high}): a quantity of that row or column (a statistic such as its std, or a "
            "parameter) multiplies it where it should not, or is missing."
        ),
    ),
    "two_mistakes": (
        N_("two mistakes at once"),
        N_("Your {name} is exactly what these two mistakes together give: {first}; {second}."),
    ),
    "follows": (
        N_("{name} follows from your {inputs}"),
        N_(
            "Your {name} is right for the {inputs} your own code computes: the mistake is in {inputs}. Fix that, "
            "and {name} comes out right with it."
        ),
    ),
    "several_wrong": (N_("several outputs are wrong"), N_("{outputs}.")),
    "forward_first": (
        N_("the forward pass is wrong too"),
        N_(
            "y is wrong as well as the gradients. The gradients are compared with those of the right forward pass, "
            "so a wrong y carries its error into every one of them: fix y first."
        ),
    ),
    "dh_wrong": (
        N_("the gradient arriving at the LayerNorm is wrong"),
        N_(
            "{names} wrong as well as dx, while the forward pass is right. gamma and beta see only the gradient "
            "arriving at the LayerNorm's output h (dh) and xhat, so dh itself is wrong: the mistake is upstream of "
            "the LayerNorm, in how dy comes back through h @ W, not in the LayerNorm's own dx."
        ),
    ),
    "geometry_mean_missing": (
        N_("the path through the mean is missing"),
        N_(
            "Your dx is off along the ones vector ({share}), by exactly minus the mean path's contribution. Over each "
            "group the true dx sums to 0; yours sums to up to {sum_got:.6g}. The mean feeds every xhat_j, so each "
            "x_i gets -mean_j(dxhat_j) * rstd from it."
        ),
    ),
    "geometry_mean_scaled": (
        N_("the path through the mean is scaled wrongly"),
        N_(
            "Your dx is off along the ones vector ({share}), by {ratio:.6g} times the mean path's contribution: "
            "your mean path is {yours:.6g} times the right one. Over each group the true dx sums to 0; yours sums "
            "to up to {sum_got:.6g}."
        ),
    ),
    "geometry_mean_wrong": (
        N_("the path through the mean is wrong"),
        N_(
            "Your dx is off along the ones vector ({share}), by an amount that is not a fixed multiple of the mean "
            "path's contribution. Over each group the true dx sums to 0; yours sums to up to {sum_got:.6g}. The "
            "mean feeds every xhat_j, so each x_i gets -mean_j(dxhat_j) * rstd from it."
        ),
    ),
    "geometry_rms_mean_term": (
        N_("a mean term in RMSNorm"),
        N_(
            "Your dx is off along the ones vector ({share}) (it sums to up to {sum_got:.6g} per row). RMSNorm "
            "subtracts no mean, so no term of its dx is constant over the row: drop the -mean(dxhat) term of the "
            "LayerNorm formula."
        ),
    ),
    "geometry_radial_missing": (
        N_("the path through the {path} is missing"),
        N_("Your dx is off along xhat ({share}), by exactly minus that path's contribution.{at_zero}"),
    ),
    "geometry_radial_slip": (
        N_("the path through the {path} carries a factor (m-1)/m"),
        N_(
            "Your dx is off along xhat ({share}), by that path times -1/m (m = {m}): your variance path is (m-1)/m "
            "of the right one. The route from the mean into the variance contributes nothing: dvar/dmean = 0.{at_zero}"
        ),
    ),
    "geometry_radial_scaled": (
        N_("the path through the {path} is scaled wrongly"),
        N_(
            "Your dx is off along xhat ({share}), by that path times {ratio:.6g}: yours is {yours:.6g} times "
            "it.{at_zero}"
        ),
    ),
    "geometry_count": (
        N_("the means in dx divided by {k} instead of {n}"),
        N_(
            "Your dx is off along the ones vector and along xhat ({share}): the path through the mean and the path "
            "through the {path} are both {yours:.6g} = {n}/{k} times the right ones, as if the two means over each "
            "group of {n} values, mean(dxhat) and mean(dxhat * xhat), had divided their sums by {k}. A mean over "
            "{n} values divides by {n}."
        ),
    ),
    "geometry_count_sum": (
        N_("sums in dx where means belong"),
        N_(
            "Your dx is off along the ones vector and along xhat ({share}): the path through the mean and the path "
            "through the {path} are both {n} times the right ones, as if mean(dxhat) and mean(dxhat * xhat) had "
            "been sums over the group of {n} values. Divide each sum by {n}."
        ),
    ),
    "geometry_count_unbiased": (
        N_("the means in dx divided by n - 1"),
        N_(
            "Your dx is off along the ones vector and along xhat ({share}): the path through the mean and the path "
            "through the {path} are both {yours:.6g} = {n}/{k} times the right ones, as if the two means over each "
            "group of n = {n} values, mean(dxhat) and mean(dxhat * xhat), had divided their sums by n - 1 = {k}, "
            "as an unbiased variance does. These are plain means: divide by n."
        ),
    ),
    "geometry_radial_wrong": (
        N_("the path through the {path} is wrong"),
        N_(
            "Your dx is off along xhat ({share}), by a multiple of xhat that is not a fixed multiple of that "
            "path.{at_zero}"
        ),
    ),
    # ---- a constant factor
    "sign_flipped": (N_("sign flipped"), N_("your answer is the right one times -1.")),
    "scale_unbiased": (
        N_("unbiased variance"),
        N_(
            "your answer is the right one times n/(n-1) = {factor:.6g} (n = {n}): the variance was divided by n-1 "
            "(unbiased). Normalization layers use the biased variance: divide by n."
        ),
    ),
    "scale_unbiased_inverse": (
        N_("unbiased variance"),
        N_(
            "your answer is the right one times (n-1)/n = {factor:.6g} (n = {n}): a variance divided by n-1 "
            "somewhere, or an extra factor (n-1)/n. Normalization layers divide by n."
        ),
    ),
    "scale_unbiased_std": (
        N_("unbiased variance"),
        N_(
            "your output is off by {factor:.6g} = sqrt(n/(n-1)) or its inverse (n = {n}): the standard deviation "
            "used the unbiased variance (divided by n-1). Use the biased one: divide by n."
        ),
    ),
    "scale_missing_1_over_n": (
        N_("missing 1/n"),
        N_("your answer is n = {n} times the right one: a sum where a mean belongs."),
    ),
    "scale_extra_1_over_n": (
        N_("extra 1/n"),
        N_("your answer is 1/n = 1/{n} of the right one: a mean where a sum belongs."),
    ),
    "scale_count": (
        N_("divided by {wrong_what} instead of {right_what}"),
        N_(
            "your answer is {factor:.6g} = {right}/{wrong} times the right one: you divided by {wrong} ({wrong_what}) "
            "where the formula divides by {right} ({right_what})."
        ),
    ),
    "scale_extra_count": (
        N_("divided by {n}"),
        N_("your answer is 1/{n} of the right one, and {n} is {what} here: nothing divides this sum."),
    ),
    "scale_two": (N_("factor 2"), N_("your answer is twice the right one.")),
    "scale_half": (
        N_("factor 1/2"),
        N_("your answer is half the right one: a factor 2 (from a square) or 1/2 is missing."),
    ),
    "scale_other": (N_("off by a constant factor"), N_("your answer is the right one times {factor:.6g} everywhere.")),
    # ---- shapes
    "keepdims": (
        N_("keepdims shape mistake"),
        N_("{name} has shape {got}, expected {expected}: {how}; use keepdims= to match, or reshape.{extra}"),
    ),
    "not_broadcast": (
        N_("one number per group where one per entry belongs"),
        N_(
            "{name} has shape {got}, expected {expected}: a gradient has the shape of what it is the gradient of, "
            "and every entry of x gets its own share. Broadcast it to {expected} (np.broadcast_to, or multiply by "
            "np.ones_like(x))."
        ),
    ),
    "wrong_axis_shape": (
        N_("reduced over the wrong axis"),
        N_(
            "{name} has shape {got}, which is what reducing {x_name} {x_shape} over axis {got_axes} gives; {name} "
            "should be reduced over axis {want_axes}, giving {expected}."
        ),
    ),
    "transposed_shape": (N_("transposed"), N_("{name} has shape {got}, expected {expected}: it is transposed.")),
    "wrong_shape": (N_("wrong shape"), N_("{name} has shape {got}, expected {expected}.")),
    # ---- exceptions
    "keepdims_broadcast": (
        N_("a statistic lost its axis (keepdims)"),
        N_(
            "NumPy could not line up two arrays. A mean or sum over the last axis of an [N, D] array has shape [N]; "
            "to subtract it from each row it must be [N, 1]: pass keepdims=True."
        ),
    ),
    "matmul_shapes": (
        N_("matrix shapes"),
        N_("A matrix product got operands whose inner sizes differ: check transposes."),
    ),
    # ---- the grader's own
    "estimate": (
        N_("this looks like a finite-difference estimate"),
        N_(
            "Your {name} agrees with the exact answer to about {digits} significant digits, where an exact formula "
            "agrees to about 15: {name}{index} is off by {diff:.1e}, where float64 rounding allows {allowed:.1e}. "
            "That is what a numerical estimate (finite differences) gives, or a step done in lower precision "
            "(float32 keeps about 7 digits). Derive the exact expression."
        ),
    ),
    "estimate_value": (
        N_("close, but not to float64 rounding"),
        N_(
            "Your {name} agrees with the exact answer to about {digits} significant digits, where an exact formula "
            "agrees to about 15: {name}{index} is off by {diff:.1e}, where float64 rounding allows {allowed:.1e}. "
            "A step done in lower precision (float32 keeps about 7 digits), or a constant slightly changed, gives "
            "that."
        ),
    ),
    "eps_zero_changed": (
        N_("changed where eps = 0"),
        N_(
            "On this input eps = 0, and your {name} agrees with the exact answer to only about {digits} significant "
            "digits ({name}{index} is off by {diff:.1e}, where float64 rounding allows {allowed:.1e}): as if a small "
            "number had been put where eps is 0. No group of these inputs has a variance of 0, so eps = 0 needs no "
            "guard here: use eps as it is given."
        ),
    ),
    "right_first_wrong_second": (
        N_("right on the first input, wrong on the second"),
        N_("The second input is {second}.{guess}"),
    ),
    "no_match": (N_("{name} is wrong"), N_("No common mistake matches it exactly. {advice}")),
    "no_match_several": (N_("{names} are wrong"), N_("No common mistake matches them exactly. {advice}")),
    "not_finite": (N_("not finite"), N_("{detail}{eps0}.")),
    "second_run_differs": (
        N_("a different answer on a second run"),
        N_(
            "Called twice on the same input, {name}{index} was {first:.6g} the first time and {second:.6g} the second. "
            "Does your code use randomness, or keep state between calls (a global list or counter)?"
        ),
    ),
    "input_modified": (
        N_("an input was modified"),
        N_(
            "After your code ran, input {name}{index} was {now:.6g} instead of {was:.6g}. Work on new arrays "
            "(x = x - mean), never on the ones you are given: anything computed from the changed input afterwards "
            "is off too."
        ),
    ),
    "swapped_outputs": (
        N_("{first} and {second} swapped"),
        N_(
            "Your `{name}` is the right `{other}`. Return them in the order of the docstring ({first} is the sum of "
            "dy * xhat, {second} the sum of dy)."
        ),
    ),
}

# The findings whose explanation states the fix (the corrected formula): the first time one is found in an
# exercise its title names the slip and the explanation is held back; it is shown when the same mistake is
# found again (or the hints give it). Every other finding describes what is off and is shown at once.
REVEALS = frozenset(
    {
        "mul_swapped_a",
        "mul_swapped_b",
        "pow_not_lowered",
        "pow_no_p",
        "sqrt_no_half",
        "div_da_is_db",
        "div_b_not_squared",
        "div_no_a",
        "var_x_not_xshift",
        "var_mean_wrong_axis",
        "unbiased_variance",
        "eps_left_out",
        "eps_outside_sqrt",
        "rms_eps_outside_sqrt",
        "xshift_reversed",
        "gamma_beta_swapped",
        "beta_left_out",
        "gamma_left_out",
        "mean_path_missing",
        "variance_path_missing",
        "direct_path_only",
        "variance_path_slip",
        "gamma_left_out_dx",
        "x_not_xhat",
        "xshift_not_xhat",
        "extra_gamma_dgamma",
        "extra_gamma_dbeta",
        "gamma_left_out_dxhat",
        "xhat_not_gamma",
        "dvar_power",
        "dvar_xhat",
        "rms_centered",
        "rms_gamma_left_out",
        "rms_sum_not_mean",
        "rms_eps_left_out",
        "rms_layernorm_formula",
        "rms_path_missing",
        "rms_gamma_left_out_dx",
        "rms_x_not_xhat",
        "p_no_1_over_d",
        "p_no_radial",
        "p_no_ones",
        "j_transposed",
        "j_gamma_left_out",
        "j_no_sigma",
        "j_variance_path_missing",
        "j_mean_path_missing",
        "j_eps_left_out",
        "welford_delta_squared",
        "welford_new_delta_squared",
        "welford_old_count",
        "welford_ignores_state",
        "cancellation",
        "residual_missing",
        "w_transposed_forward",
        "identity_path_missing",
        "identity_path_only",
        "w_not_transposed",
        "dw_transposed",
        "dw_x_not_h",
        "dy_not_dh",
        "geometry_mean_missing",
        "geometry_mean_wrong",
        "geometry_rms_mean_term",
        "geometry_radial_slip",
        "graph_cut_mean",
        "graph_cut_variance",
        "graph_cut_statistics",
        "product_of_sums",
        "p_inner_product",
        "p_elementwise",
        "scale_unbiased",
        "scale_unbiased_inverse",
        "scale_unbiased_std",
        "swapped_outputs",
    }
)

# key: one line (summaries of a check, rows of its table, the reasons a check could not run)
SAYINGS: dict[str, str] = {
    "passed": N_("Every check passed."),
    "not_yet": N_("Not yet: {failed}."),
    "not_written": N_("Not written yet: {name} still raises NotImplementedError. Replace that line with your code."),
    "syntax": N_("Python cannot read your file: {message}."),
    "import_failed": N_("Importing your file failed: {type}: {message}"),
    "exit_at_import": (
        N_(
            "Your file called sys.exit({code!r}) while it was being imported, at its top level (outside any "
            "function). Code that should run only when you run the file yourself goes under "
            '`if __name__ == "__main__":`.'
        )
    ),
    "exit_in_call": (
        N_("Your code called sys.exit({code!r}){on}: a graded function must return its result, not end the program.")
    ),
    "memory": N_("Your code ran out of memory{on} (the limit is {memory_mb} MiB): {message}"),
    "mutates_input": (
        N_(
            "Your code tried to change one of its inputs in place{on}. Inputs are read-only while grading: compute "
            "new arrays (x - mean), do not overwrite them (x -= mean)."
        )
    ),
    "forbidden": N_("{message}."),
    "bad_return": N_("{message}."),
    "kernel_refused": (
        N_(
            "The operating system refused something your code tried{on} ({message}): while it is graded, code may "
            "not start processes, signal other processes, raise its limits, change files, or read files beyond "
            "the standard library and NumPy."
        )
    ),
    "raised": N_("Your code raised {type}{on}: {message}"),
    "timeout": N_("Your code did not finish within {timeout:g} s (wall clock) and was stopped: an endless loop?"),
    "killed": N_("The process running your code was killed by {signal}{extra} before it returned a result."),
    "killed_memory": N_(" (the memory limit of {memory_mb} MiB, or the system running out of memory)"),
    "killed_cpu": N_(" (its CPU-time limit)"),
    "ended": (
        N_(
            "The process running your code ended (exit code {code}) before it returned a result: os._exit(), "
            "or a crash inside a compiled library?"
        )
    ),
    "too_large": N_("Your code sent back more than {limit} MiB; no answer of this exercise needs that much."),
    "unreadable_result": N_("What came back from your code could not be read ({why}); nothing of it was graded."),
    "missing_file": N_("{path} does not exist: `microgradnorm exercise reset {number}` brings the scaffold back."),
    "directory": (
        N_(
            "{path} is a directory, not your exercise file: `microgradnorm exercise reset {number}` brings the "
            "scaffold back."
        )
    ),
    "not_regular": N_(
        "{path} is not a regular file ({kind}), so it was not read: your exercise file is a plain .py file."
    ),
    "file_too_large": N_("{path} is larger than {limit} KiB; an exercise file is a few KiB."),
    "not_text": N_("{path} is not text Python can read: {why}."),
    "unreadable_file": N_("{path} could not be read: {why}."),
    "posix_only": N_("The grader runs learner code in a sandbox that needs a POSIX system (Linux or macOS)."),
    "seed_not_recorded": (
        N_(
            "Graded on the inputs of --seed {seed}, which are known in advance (and so could their answers be): "
            "this check is not recorded. `microgradnorm exercise check {number}` without --seed records a pass."
        )
    ),
    "progress_tampered": (
        N_(
            "Your progress file changed while your code ran; the change was discarded and nothing was recorded "
            "for this check."
        )
    ),
    # rows of the table
    "row_ran": N_("no errors in three calls (the first input, the second, the first again)"),
    "row_types_ok": N_("float64 arrays of the right shapes"),
    "row_finite_none": N_("nothing to check: no output came back as numbers"),
    "row_nonfinite": N_("`{name}` has {nan} NaN and {inf} Inf entries on {call}"),
    "row_finite_ok": N_("no NaN or Inf{among}"),
    "finite_eps0": N_(" (eps = 0 there: a division by a std of zero, or by zero itself?)"),
    "guess_eps0": N_(" A size written into the code, or a formula that breaks at eps = 0?"),
    "guess_size": N_(" A size written into the code?"),
    "row_finite_among": N_(" among the {count} outputs that came back as numbers"),
    "row_not_compared": N_("not compared (wrong type or shape)"),
    "row_value": N_("relative error {rel:.1e}"),
    # Translators: {times} is how many float64 rounding units (2.2e-16) the tolerance is, e.g. 120
    "row_value_bad": N_(
        "relative error {rel:.1e}; tolerance {allowed:.1e}, about {times:.0f} times float64 rounding for this size"
    ),
    "row_not_finite": N_("not finite"),
    "row_second_wrong": N_("{second}; wrong: {names}"),
    "row_second_partly": N_("{second}; not compared (wrong type or shape): {names}"),
    "row_repeat_ok": N_("deterministic"),
    "row_repeat_bad": N_("{names} changed between two calls on the same input"),
    "row_inputs_ok": N_("every input as it was given"),
    "row_inputs_bad": N_("`{name}` was modified"),
    "row_stopped": N_("stopped after {timeout:g} s"),
    "row_no_result": N_("no result came back"),
    # where a value is wrong
    "call_a": N_("the first input"),
    "call_b": N_("the second input"),
    "call_a2": N_("the first input, called again"),
    # the types and shapes of a returned value
    "type_missing": N_("`{name}` did not come back from your code. Expected {want}."),
    "type_none": N_("`{name}` is None: a `return` is missing? Expected {want}."),
    "type_list": (
        N_(
            "`{name}` is a Python {type}, not an array: build it with NumPy operations, or wrap it in "
            "np.asarray(...). Expected {want}."
        )
    ),
    "type_scalar": N_("`{name}` is a single number ({type}), expected {want}."),
    "type_other": N_("`{name}` is a {type}, expected {want}."),
    "type_shape": N_("`{name}` has shape {got}, expected {expected}."),
    "type_dtype": (
        N_(
            "`{name}` has dtype {dtype}, expected float64 (the inputs are float64; a float32 or int conversion "
            "somewhere loses precision)."
        )
    ),
    "type_too_large": N_("`{name}` has {size} entries, expected {want}."),
    "type_want": N_("a float64 array of shape {shape}"),
    "exercise_number": N_("exercise {number}"),
    # the checks, as the rows of the report name them
    "check_ran": N_("ran"),
    "check_types": N_("types and shapes"),
    "check_finite": N_("finite"),
    "check_second": N_("second input"),
    "check_repeat": N_("same answer twice"),
    "check_inputs": N_("inputs untouched"),
    # what stopped the code (the "ran" row of a check that did not get to the values)
    "kind_not_written": N_("not written"),
    "kind_sys_exit": N_("sys exit"),
    "kind_syntax": N_("syntax"),
    "kind_memory": N_("memory"),
    "kind_mutates_input": N_("mutates input"),
    "kind_forbidden": N_("forbidden"),
    "kind_bad_return": N_("bad return"),
    "kind_kernel_refused": N_("kernel refused"),
    "kind_import": N_("import"),
    "kind_exception": N_("exception"),
    "kind_error": N_("error"),
    # Translators: the {on} of the messages above ("Your code raised ValueError{on}: ..."), with its leading space
    "on_a": N_(" on the first input"),
    "on_b": N_(" on the second input"),
    "on_a2": N_(" on the first input, called again"),
    # Translators: the {name} of "Not written yet: {name} still raises NotImplementedError"
    "your_file": N_("your file"),
    # Translators: the {kind} of "{path} is not a regular file ({kind})"
    "fifo": N_("a FIFO"),
    "device": N_("a device or socket"),
    "signal_number": N_("signal {number}"),
    # where an error happened in the learner's file
    "where_frame": N_("line {line} in {function}: {code}"),
    "where_line": N_("line {line}: {code}"),
    # the inputs a check calls the code on, and what each is
    "case_first": N_("first input: {about}"),
    "case_second": N_("second input: {about}"),
    "about_values": N_("{size} values, p = {p:g}"),
    "about_x_eps": N_("x {shape}, eps = {eps:g}"),
    "about_dy_xhat": N_("dy and xhat {shape}"),
    "about_welford": N_("{rows} rows of {streamed} ordinary values, each started after {seen} values you do not see"),
    "about_welford_large": N_(
        "{rows} rows of {streamed} values near {offset:.0e} (spread about 1), each started after {seen} values "
        "you do not see"
    ),
    # Translators: the counts a formula divides by, as {right_what} and {wrong_what} ("divided by {wrong_what}")
    "count_row_length": N_("the row length"),
    "count_row_length_d": N_("the row length D"),
    "count_rows": N_("the number of rows"),
    "count_batch": N_("the batch size"),
    "count_features": N_("the number of features"),
    # Translators: where gamma or beta is shared: "used at each of the 6 positions it is shared by ({where})"
    "shared_every_row": N_("every row"),
    "shared_axes": N_("axes {axes}"),
    # {number} is the exercise's; the note under a report whose mistakes are named without their explanation
    "held_back": N_(
        "A mistake named without its explanation is held back on purpose (exercise {number}): find the fix, "
        "change your code and check again; if the same mistake comes back, the check explains it."
    ),
    # Translators: the title of a finding about one of several wrong outputs: "div_backward: db: sign flipped"
    "about_output": N_("{name}: {title}"),
    # Translators: "{name} (relative error 3.1e-01)": one wrong output and how far off it is
    "output_off": N_("{name} (relative error {rel:.1e})"),
    # Translators: the {name} of "Your {name} is the right one divided by rstd": exercise 11's dx minus dy
    "ln_part": N_("dx - dy (the LayerNorm part of dx)"),
    # Translators: the {where} of "off by a factor that changes {where}"
    "per_row": N_("from row to row"),
    "per_column": N_("from column to column"),
    "per_axis": N_("along axis {axis}"),
    # what to check when no common mistake matches (the {advice} of "{name} is wrong")
    "advice_selfcheck": N_(
        "Run your file on its own (python FILE): its self-check compares each gradient of your backward pass with "
        "finite differences of your own forward pass, so it shows which one is off (it cannot see a mistake your "
        "forward pass makes too)."
    ),
    "advice_values": N_(
        "Run your file on its own (python FILE): its self-check compares the gradients backward() leaves on your "
        "Values with finite differences of your own forward pass. Then check each y against the formulas above."
    ),
    "advice_forward": N_(
        "Check y group by group: (y - beta) / gamma should have mean 0 and a variance of var / (var + eps), just "
        "under 1, over each group the norm normalizes."
    ),
    "advice_forward_preln": N_(
        "Check the forward pass in two steps: h = LN(x) should have, row by row, (h - beta) / gamma of mean 0 and "
        "a variance just under 1; then out = x + h @ W."
    ),
    "advice_forward_rms": N_(
        "Check y row by row: y / gamma should have a mean square of mean(x**2) / (mean(x**2) + eps), just under 1."
    ),
    "advice_projection": N_(
        "P is not a gradient, so no finite difference checks it. Check what P must be instead, with xhat at eps = 0 "
        "(its squares sum to D): is P symmetric, is P @ P equal to P, is its rank 2 (np.linalg.matrix_rank), and "
        "does P send the ones vector and xhat to themselves? Running your file prints these."
    ),
    "advice_jacobian": N_(
        "Run your file on its own (python FILE): its self-check compares your J, row by row, with finite "
        "differences of LayerNorm (row i is the gradient of y_i), at the grader's eps."
    ),
    "advice_welford": N_(
        "Run your file on its own (python FILE): its self-check feeds values to your update, from the start and "
        "from a given state, and compares the mean and m2 / count with np.mean and np.var of every value seen."
    ),
    # Translators: the {path} of "the path through the {path} is missing"
    "path_variance": N_("variance"),
    "path_rms": N_("rms"),
    # Translators: the {share} of the geometry messages: how the error splits; {xhat} and the others are "37%"
    "share": N_("{xhat} of it along xhat, {ones} along the ones vector (1, ..., 1), {rest} elsewhere"),
    # Translators: the {at_zero} of the geometry messages, with its leading space
    "at_zero": N_(" At eps = 0 the true dx is orthogonal to xhat; yours has dx . xhat up to {dot_got:.6g}."),
    # Translators: the {how} of the keepdims message
    "keepdims_kept": N_("a reduction kept its axis (keepdims=True) where the result should drop it"),
    "keepdims_dropped": N_("a reduction dropped an axis (keepdims=False) that the result should keep with size 1"),
    # Translators: the {extra} of the keepdims message, with its leading space
    "keepdims_values_ok": N_(" The values themselves are right: only the shape is off."),
    "keepdims_values_differ": N_(" (The values differ too: check again once the shape is fixed to see how.)"),
}


# What the child process (the sandbox's audit hook, the drivers) writes in English, exactly as it writes it.
# The child cannot load a catalog, so the grading process recognises each message by its template and says it
# again: a placeholder here matches any text. Order matters where one template matches more than another.
CHILD: dict[str, str] = {
    "import_package": N_(
        "`{name}` cannot be imported while an exercise is graded: the package's own code (its closed forms and "
        "solutions) is out of reach; {exercise} may use {uses}"
    ),
    "import_autograd": N_(
        "`{name}` cannot be imported while an exercise is graded: the point is to write the gradient yourself, "
        "not to have a library derive it"
    ),
    "import_other": N_("`{name}` cannot be imported while an exercise is graded: {exercise} may use {uses}"),
    "engine_only": N_("`microgradnorm.{name}` cannot be used while an exercise is graded: only Value can"),
    "import_not_text": N_("an import by a name that is not a plain string is refused while grading"),
    "processes": N_("your code may not start processes while it is graded"),
    "signals": N_("your code may not send signals while it is graded"),
    "limits": N_("your code may not change its resource limits while it is graded"),
    "file_change": N_("your code may not change files while it is graded"),
    "introspection": N_("your code may not look through the interpreter's objects while it is graded"),
    "mmap": N_("your code may not map files into memory while it is graded"),
    # Translators: {path} is the file, quoted as Python writes it: '/etc/passwd'
    "write": N_("your code may not write files while it is graded (it tried to open {path} to write)"),
    "open": N_("your code may not open {path} while it is graded: it needs no file, only its arguments"),
    "list": N_("your code may not list {path} while it is graded"),
    # Translators: {name} is __defaults__, __kwdefaults__ or __code__
    "attribute": N_("your code may not touch {name} while it is graded"),
    # Translators: {event} is the name of a Python audit event, e.g. ctypes.dlopen
    "event": N_("your code may not use {event} while it is graded"),
    "no_function": N_("your file has no function named `{name}`: keep the name and signature from the scaffold"),
    # Translators: {names} lists them (dx, dgamma, dbeta); {got} says what came back instead, e.g. "a tuple of 2"
    "return_count": N_("`{fn}` must return {n} values ({names}), got {got}"),
    "number_count": N_("the count `welford_update` returns must be a number, got {got}"),
    "number_mean": N_("the mean `welford_update` returns must be a number, got {got}"),
    "number_m2": N_("the m2 `welford_update` returns must be a number, got {got}"),
    # Translators: {got} is a number type other than float and int, e.g. "a Fraction"
    "real_count": N_(
        "the count `welford_update` returns must be a float or an int, got {got}: convert it with float()"
    ),
    "real_mean": N_("the mean `welford_update` returns must be a float or an int, got {got}: convert it with float()"),
    "real_m2": N_("the m2 `welford_update` returns must be a float or an int, got {got}: convert it with float()"),
    "values_strays": N_(
        "`layer_norm` must return a list of {d} Values; {k} of yours are {stray}, not Value: build every y from "
        "Value operations (.data or float() leaves the graph, so backward() cannot reach x)"
    ),
    "values_list": N_("`layer_norm` must return a list of {d} Values (one per input), got {got}"),
    "staged_dict": N_("`batchnorm_backward_staged` must return a dict with keys {keys}, got {got}"),
    "staged_missing": N_("the dict `batchnorm_backward_staged` returns has no {missing}"),
    "welford_count": N_("`welford_update` returned count {got} after count {count} and one more value"),
}

# what came back instead, as the drivers describe it (the {got} of the messages above); the longer form first
CHILD_TYPES: dict[str, str] = {
    # Translators: {type} is a Python type name (tuple, list, float); {n} how many items it holds
    "type_of": N_("a {type} of {n}"),
    "type": N_("a {type}"),
}


def phrase(key: str, **params: Any) -> LazyText:
    """A key of :data:`SAYINGS` and its parameters, said in the language current when it is shown."""
    return LazyText(SAYINGS[key], **params)  # an unknown key is a KeyError here, not when shown


def title(key: str, params: Mapping[str, Any]) -> str:
    """The short title of a finding."""
    return _(FINDINGS[key][0]).format(**params)


def detail(key: str, params: Mapping[str, Any]) -> str:
    """The explanation of a finding, with its numbers."""
    return _(FINDINGS[key][1]).format(**params)


def say(key: str, **params: Any) -> str:
    """One line of a check's report."""
    return _(SAYINGS[key]).format(**params)


@cache
def _pattern(template: str) -> re.Pattern[str]:
    """A template as a regular expression: its text literally, each placeholder any text (as little as may be)."""
    parts = []
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(f"(?P<{name}>.+?)")
    return re.compile("".join(parts), re.DOTALL)


def recognise(text: str, templates: Mapping[str, str] = CHILD) -> tuple[str, dict[str, str]] | None:
    """(key, parameters) of the first template ``text`` is, word for word; None if it is none of them."""
    for key, template in templates.items():
        found = _pattern(template).fullmatch(text)
        if found:
            return key, found.groupdict()
    return None


def child_message(text: str, **known: Any) -> str:
    """A message of the child process (English) in the current language; ``text`` as it is if unknown.

    ``known`` replaces parameters the grading process knows better than the child said them (the
    exercise, what it may use: sent to the child in English, said here in the learner's language).
    """
    found = recognise(text)
    if found is None:
        return text
    key, params = found
    got = recognise(params["got"], CHILD_TYPES) if "got" in params else None
    if got is not None:
        params["got"] = _(CHILD_TYPES[got[0]]).format(**got[1])
    for name in _CHILD_LISTS.intersection(params):
        params[name] = listed(params[name].split(", "))
    params.update((k, v) for k, v in known.items() if k in params)
    return _(CHILD[key]).format(**params)


_CHILD_LISTS = frozenset({"names", "keys", "missing"})  # parameters the child writes as "a, b, c"
