"""Every sentence the grader says, in English, keyed: the one place its words live.

A diagnosis is data, a key and its parameters (:class:`.diagnose.Finding`), and
becomes text only here: :func:`title` and :func:`detail` for findings (the
known mistakes among them), :func:`say` for the one-line messages of a check
(its summary, the rows of its table). A translation replaces the templates of
this module and nothing else. Templates are ``str.format`` strings; numbers
come in raw and are formatted here (``{n}``, ``{factor:.6g}``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["FINDINGS", "SAYINGS", "detail", "say", "title"]

_GAMMA_DY = "dxhat = gamma * dy: the upstream gradient passes through the scale first."
_Y = "y = gamma * xhat + beta"

# key: (title, detail)
FINDINGS: dict[str, tuple[str, str]] = {
    # ---- exercise 01: local derivatives
    "no_dout": (
        "the upstream gradient is missing",
        "You returned the local derivative alone. The chain rule multiplies it by dout, the gradient arriving "
        "from above.",
    ),
    "mul_swapped_a": ("a and b swapped", "d(a*b)/da is b, not a: the other factor."),
    "mul_swapped_b": ("a and b swapped", "d(a*b)/db is a, not b: the other factor."),
    "pow_not_lowered": ("the exponent was not lowered", "d(a**p)/da = p * a**(p-1): the power drops by one."),
    "pow_no_p": ("the factor p is missing", "d(a**p)/da = p * a**(p-1): p comes down in front."),
    "sqrt_no_half": (
        "the factor 1/2 is missing",
        "sqrt(a) = a**(1/2), so its derivative is (1/2) a**(-1/2) = 1 / (2 sqrt(a)).",
    ),
    "div_da_is_db": ("the derivative of b instead", "d(a/b)/da = 1/b; -a/b**2 is d(a/b)/db."),
    "div_b_not_squared": (
        "b is not squared",
        "a/b = a * b**-1, and d(b**-1)/db = -b**-2, so d(a/b)/db = -a / b**2.",
    ),
    "div_no_a": ("a is missing", "d(a/b)/db = -a / b**2: a stays as a factor."),
    # ---- exercise 02: mean and variance
    "var_x_not_xshift": (
        "x instead of x - mean",
        "d var / d x_i = (2/n) (x_i - mean): the deviation from the mean, not x_i itself. (The route through "
        "the mean adds nothing, since the deviations sum to 0.)",
    ),
    "var_mean_wrong_axis": (
        "the mean over the wrong axis",
        "Your x - mean subtracts the mean of each column (axis 0). The variance of a row is about that row's "
        "own mean: x.mean(axis=1, keepdims=True), one per row.",
    ),
    # ---- normalizations: the forward pass
    "unbiased_variance": (
        "unbiased variance",
        "The variance was divided by n - 1 = {n_minus_1} (unbiased, as np.var(ddof=1) or torch.var do by "
        "default). Normalization layers divide by n = {n}: xhat comes out sqrt(n/(n-1)) = {factor:.6g} times "
        "too small.",
    ),
    "eps_left_out": ("eps left out", "std = sqrt(var + eps) with eps = {eps:g}: eps is missing."),
    "eps_outside_sqrt": ("eps outside the square root", "eps goes inside: sqrt(var + eps), not sqrt(var) + eps."),
    "gamma_beta_swapped": ("gamma and beta swapped", f"{_Y}."),
    "beta_left_out": ("beta left out", f"{_Y}: add beta."),
    "gamma_left_out": ("gamma left out", f"{_Y}: scale by gamma."),
    "wrong_axis": (
        "normalized over the wrong axis",
        "You reduced over axis {wrong}; this norm takes its statistics over axis {right}.",
    ),
    "wrong_count": (
        "divided by {wrong_what} instead of {right_what}",
        "Your statistics divide by {wrong} ({wrong_what}) where they should divide by {right} ({right_what}): "
        "a mean over a group of {right} values divides their sum by {right}.",
    ),
    # ---- normalizations: dx
    "mean_path_missing": (
        "the path through the mean is missing",
        "x_i also moves the mean, and the mean moves every xhat_j: add dmean / n to every dx_i "
        "(dmean = -rstd * sum_j dxhat_j).",
    ),
    "variance_path_missing": (
        "the path through the variance is missing",
        "x_i also moves the variance: add dvar * 2 (x_i - mean) / n "
        "(dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j (x_j - mean)).",
    ),
    "direct_path_only": (
        "only the direct path",
        "dx_i = dxhat_i * rstd is only the direct path: the mean and the variance depend on x_i too.",
    ),
    "variance_path_slip": (
        "the variance path carries a factor (m-1)/m",
        "Your variance path is (m-1)/m = {factor:.6g} times the right one (m = {m}). A derivation that "
        "circulates widely adds a second route from x to the variance, through the mean, worth "
        "-(2/m)(x_i - mean)/m. That route is 0: dvar/dmean = -(2/m) sum_j (x_j - mean), and the deviations "
        "sum to 0.",
    ),
    "gamma_left_out_dx": ("gamma left out of dx", _GAMMA_DY),
    "wrong_axis_backward": (
        "reduced over the wrong axis in the backward pass",
        "You reduced over axis {wrong}; this norm takes its statistics over axis {right}. The forward pass is "
        "right; the means in dx are taken over the wrong axis.",
    ),
    # ---- normalizations: parameters and stages
    "x_not_xhat": ("x instead of xhat", "dgamma = sum of dy * xhat: the normalized input."),
    "xshift_not_xhat": (
        "x - mean instead of xhat",
        "dgamma = sum of dy * xhat; x - mean is not yet divided by the std.",
    ),
    "extra_gamma_dgamma": (
        "an extra factor gamma",
        "y depends on gamma through gamma * xhat, so dy/dgamma = xhat: gamma itself does not appear in dgamma.",
    ),
    "extra_gamma_dbeta": ("an extra factor gamma", "dy/dbeta = 1: dbeta is the plain sum of dy."),
    "param_mean_not_sum": (
        "a mean where a sum is needed",
        "The same {param} is used at each of the {count} positions it is shared by ({where}), so its gradient "
        "adds up a contribution from every one of them. Yours is that sum divided by {count}: a mean.",
    ),
    "gamma_left_out_dxhat": ("gamma left out", "dxhat = gamma * dy."),
    "xhat_not_gamma": ("xhat instead of gamma", "dxhat = dy * dy/dxhat = dy * gamma."),
    "dvar_power": (
        "the power -1/2 instead of -3/2",
        "xhat = xshift * (var + eps)^(-1/2), so dxhat/dvar = -1/2 xshift (var + eps)^(-3/2).",
    ),
    "dvar_xhat": (
        "xhat instead of x - mean",
        "dvar = -1/2 (var + eps)^(-3/2) sum_j dxhat_j (x_j - mean): the deviations, not xhat.",
    ),
    # ---- exercise 08: RMSNorm
    "rms_centered": ("the mean was subtracted", "RMSNorm divides x itself by its rms; it does not center x."),
    "rms_gamma_left_out": ("gamma left out", "y = gamma * x / rms."),
    "rms_sum_not_mean": (
        "sum instead of mean",
        "rms = sqrt(mean(x**2) + eps): the mean of the squares, not their sum.",
    ),
    "rms_eps_left_out": ("eps left out", "rms = sqrt(mean(x**2) + eps), eps = {eps:g}."),
    "rms_layernorm_formula": (
        "the LayerNorm formula",
        "You subtracted mean(dxhat), the LayerNorm term for the path through the mean. RMSNorm has no mean, "
        "so dx = rrms * (dxhat - xhat * mean(dxhat * xhat)).",
    ),
    "rms_path_missing": (
        "the path through the rms is missing",
        "x_i also changes the rms that divides every x_j: subtract xhat_i * mean_j(dxhat_j xhat_j), times rrms.",
    ),
    "rms_gamma_left_out_dx": ("gamma left out of dx", _GAMMA_DY),
    "rms_x_not_xhat": ("x instead of xhat", "dgamma = sum of dy * xhat, xhat = x / rms."),
    # ---- exercise 09: the Jacobian
    "p_no_1_over_d": ("the 1/d is missing", "P = (1/d) (1 1^T + xhat xhat^T)."),
    "p_no_radial": ("the xhat xhat^T term is missing", "P projects on both 1 and xhat: add xhat xhat^T / d."),
    "p_no_ones": ("the 1 1^T term is missing", "P projects on both 1 and xhat: add 1 1^T / d."),
    "j_transposed": (
        "transposed",
        "J[i, j] = dy_i / dx_j: row i belongs to output y_i, so gamma_i scales row i (diag(gamma) on the left).",
    ),
    "j_gamma_left_out": ("gamma left out", "dy/dx = (1/sigma) diag(gamma) (I - P)."),
    "j_no_sigma": ("the 1/sigma is missing", "dy/dx = (1/sigma) diag(gamma) (I - P)."),
    "j_variance_path_missing": (
        "the path through the variance is missing",
        "I - P must remove xhat xhat^T / d too: that is the path through the variance.",
    ),
    "j_mean_path_missing": (
        "the path through the mean is missing",
        "I - P must remove 1 1^T / d too: that is the path through the mean.",
    ),
    "j_eps_left_out": (
        "eps left out",
        "sigma = sqrt(var + eps) with eps = {eps:g}: your Jacobian uses sqrt(var), as if eps were 0. Compute "
        "xhat and 1/sigma from x with eps, as the forward pass does.",
    ),
    # ---- exercise 10: Welford
    "welford_delta_squared": (
        "delta squared",
        "m2 grew by delta**2 = (value - old mean)**2. The right increment is (value - old mean) * (value - new "
        "mean): the second factor uses the mean after the update, which is what makes the sum of squared "
        "deviations come out exact.",
    ),
    "welford_new_delta_squared": (
        "the new deviation squared",
        "m2 grew by (value - new mean)**2. The right increment is (value - old mean) * (value - new mean): one "
        "factor of each.",
    ),
    "welford_old_count": (
        "divided by the old count",
        "Your mean moves by (value - mean) / count with the count before this value. It is the mean of count + 1 "
        "values now: mean_new = mean + (value - mean) / (count + 1).",
    ),
    "welford_ignores_state": (
        "the starting state was ignored",
        "Your results are those of the values your function saw, as if the count, mean and m2 it was given were "
        "(0, 0, 0). The grader starts each row mid-stream, from the state of {count} values it never shows: "
        "update the state you are given, do not keep the values yourself.",
    ),
    "cancellation": (
        "cancellation",
        "On this input every value is about {offset:.0e} and the spread only about 1: your variance is off by "
        "{rel:.2g} relative. Each x**2 is then about 1e16, where neighbouring doubles are 2 apart, so a sum of "
        "squares is rounded by more than the variance itself, and subtracting mean**2 cancels everything that "
        "mattered. Update m2 with deviations from the running mean instead: m2 += (x - old mean) * (x - new "
        "mean).",
    ),
    # ---- exercise 11: the pre-LN block
    "residual_missing": ("the residual is missing", "out = x + LN(x) @ W: add x back."),
    "w_transposed_forward": ("W transposed", "out = x + LN(x) @ W, with h [N, D] times W [D, D]."),
    "identity_path_missing": (
        "the identity path is missing",
        "out = x + f(x): the residual connection hands dy straight to dx. dx = dy + (the LN path).",
    ),
    "identity_path_only": (
        "only the identity path",
        "dx = dy + (the gradient through LN and W): the second part is missing.",
    ),
    "w_not_transposed": (
        "W instead of W.T",
        "h @ W sends dy back to h as dh = dy @ W.T (the transpose), not dy @ W.",
    ),
    "dw_transposed": ("transposed", "dW[i, j] = sum_n h[n, i] dy[n, j], i.e. h.T @ dy."),
    "dw_x_not_h": ("x instead of LN(x)", "W multiplies h = LN(x), so dW = h.T @ dy, not x.T @ dy."),
    "dy_not_dh": (
        "dy instead of dh",
        "gamma and beta sit inside the block: the gradient reaching them is dh = dy @ W.T, not dy.",
    ),
    # ---- the geometry of a normalization's dx
    "direct_path_wrong": (
        "the direct path is wrong",
        "The error is not only along 1 and xhat ({share}), so it is not just a missing mean or variance path: "
        "check the per-element term dxhat * rstd (gamma included, the right axis).",
    ),
    "geometry_mean_missing": (
        "the path through the mean is missing",
        "Your dx is off along the ones vector ({share}), by exactly minus the mean path's contribution. Over each "
        "group the true dx sums to 0; yours sums to up to {sum_got:.6g}. The mean feeds every xhat_j, so each "
        "x_i gets -mean_j(dxhat_j) * rstd from it.",
    ),
    "geometry_mean_scaled": (
        "the path through the mean is scaled wrongly",
        "Your dx is off along the ones vector ({share}), by {ratio:.6g} times the mean path's contribution: "
        "your mean path is {yours:.6g} times the right one. Over each group the true dx sums to 0; yours sums "
        "to up to {sum_got:.6g}.",
    ),
    "geometry_mean_wrong": (
        "the path through the mean is wrong",
        "Your dx is off along the ones vector ({share}), by an amount that is not a fixed multiple of the mean "
        "path's contribution. Over each group the true dx sums to 0; yours sums to up to {sum_got:.6g}. The "
        "mean feeds every xhat_j, so each x_i gets -mean_j(dxhat_j) * rstd from it.",
    ),
    "geometry_rms_mean_term": (
        "a mean term in RMSNorm",
        "Your dx is off along the ones vector ({share}) (it sums to up to {sum_got:.6g} per row). RMSNorm "
        "subtracts no mean, so no term of its dx is constant over the row: drop the -mean(dxhat) term of the "
        "LayerNorm formula.",
    ),
    "geometry_radial_missing": (
        "the path through the {path} is missing",
        "Your dx is off along xhat ({share}), by exactly minus that path's contribution.{at_zero}",
    ),
    "geometry_radial_slip": (
        "the path through the {path} carries a factor (m-1)/m",
        "Your dx is off along xhat ({share}), by that path times -1/m (m = {m}): your variance path is (m-1)/m "
        "of the right one. The route from the mean into the variance contributes nothing: dvar/dmean = 0.{at_zero}",
    ),
    "geometry_radial_scaled": (
        "the path through the {path} is scaled wrongly",
        "Your dx is off along xhat ({share}), by that path times {ratio:.6g}: yours is {yours:.6g} times it.{at_zero}",
    ),
    "geometry_count": (
        "the means in dx divided by {k} instead of {n}",
        "Your dx is off along the ones vector and along xhat ({share}): the path through the mean and the path "
        "through the {path} are both {yours:.6g} = {n}/{k} times the right ones, as if the two means over each "
        "group of {n} values, mean(dxhat) and mean(dxhat * xhat), had divided their sums by {k}. A mean over "
        "{n} values divides by {n}.",
    ),
    "geometry_count_sum": (
        "sums in dx where means belong",
        "Your dx is off along the ones vector and along xhat ({share}): the path through the mean and the path "
        "through the {path} are both {n} times the right ones, as if mean(dxhat) and mean(dxhat * xhat) had "
        "been sums over the group of {n} values. Divide each sum by {n}.",
    ),
    "geometry_count_unbiased": (
        "the means in dx divided by n - 1",
        "Your dx is off along the ones vector and along xhat ({share}): the path through the mean and the path "
        "through the {path} are both {yours:.6g} = {n}/{k} times the right ones, as if the two means over each "
        "group of n = {n} values, mean(dxhat) and mean(dxhat * xhat), had divided their sums by n - 1 = {k}, "
        "as an unbiased variance does. These are plain means: divide by n.",
    ),
    "geometry_radial_wrong": (
        "the path through the {path} is wrong",
        "Your dx is off along xhat ({share}), by a multiple of xhat that is not a fixed multiple of that "
        "path.{at_zero}",
    ),
    # ---- a constant factor
    "sign_flipped": ("sign flipped", "your answer is the right one times -1."),
    "scale_unbiased": (
        "unbiased variance",
        "your answer is the right one times n/(n-1) = {factor:.6g} (n = {n}): the variance was divided by n-1 "
        "(unbiased). Normalization layers use the biased variance: divide by n.",
    ),
    "scale_unbiased_inverse": (
        "unbiased variance",
        "your answer is the right one times (n-1)/n = {factor:.6g} (n = {n}): a variance divided by n-1 "
        "somewhere, or an extra factor (n-1)/n. Normalization layers divide by n.",
    ),
    "scale_unbiased_std": (
        "unbiased variance",
        "your output is off by {factor:.6g} = sqrt(n/(n-1)) or its inverse (n = {n}): the standard deviation "
        "used the unbiased variance (divided by n-1). Use the biased one: divide by n.",
    ),
    "scale_missing_1_over_n": (
        "missing 1/n",
        "your answer is n = {n} times the right one: a sum where a mean belongs.",
    ),
    "scale_extra_1_over_n": ("extra 1/n", "your answer is 1/n = 1/{n} of the right one: a mean where a sum belongs."),
    "scale_count": (
        "divided by {wrong_what} instead of {right_what}",
        "your answer is {factor:.6g} = {right}/{wrong} times the right one: you divided by {wrong} ({wrong_what}) "
        "where the formula divides by {right} ({right_what}).",
    ),
    "scale_extra_count": (
        "divided by {n}",
        "your answer is 1/{n} of the right one, and {n} is {what} here: nothing divides this sum.",
    ),
    "scale_two": ("factor 2", "your answer is twice the right one."),
    "scale_half": ("factor 1/2", "your answer is half the right one: a factor 2 (from a square) or 1/2 is missing."),
    "scale_other": ("off by a constant factor", "your answer is the right one times {factor:.6g} everywhere."),
    # ---- shapes
    "keepdims": (
        "keepdims shape mistake",
        "{name} has shape {got}, expected {expected}: {how}; use keepdims= to match, or reshape.{extra}",
    ),
    "wrong_axis_shape": (
        "reduced over the wrong axis",
        "{name} has shape {got}, which is what reducing {x_name} {x_shape} over axis {got_axes} gives; {name} is "
        "reduced over axis {want_axes}, giving {expected}.",
    ),
    "transposed_shape": ("transposed", "{name} has shape {got}, expected {expected}: it is transposed."),
    "wrong_shape": ("wrong shape", "{name} has shape {got}, expected {expected}."),
    # ---- exceptions
    "keepdims_broadcast": (
        "a statistic lost its axis (keepdims)",
        "NumPy could not line up two arrays. A mean or sum over the last axis of an [N, D] array has shape [N]; "
        "to subtract it from each row it must be [N, 1]: pass keepdims=True.",
    ),
    "matmul_shapes": ("matrix shapes", "A matrix product got operands whose inner sizes differ: check transposes."),
    # ---- the grader's own
    "estimate": (
        "this looks like a finite-difference estimate",
        "Your {name} agrees with the exact answer to about {digits} significant digits, where an exact formula "
        "agrees to about 15: {name}{index} is off by {diff:.1e}, where float64 rounding allows {allowed:.1e}. "
        "That is what a numerical estimate (finite differences) gives, or a step done in lower precision "
        "(float32 keeps about 7 digits). Derive the exact expression.",
    ),
    "estimate_value": (
        "close, but not to float64 rounding",
        "Your {name} agrees with the exact answer to about {digits} significant digits, where an exact formula "
        "agrees to about 15: {name}{index} is off by {diff:.1e}, where float64 rounding allows {allowed:.1e}. "
        "A step done in lower precision (float32 keeps about 7 digits), or a constant slightly changed, gives "
        "that.",
    ),
    "eps_zero_changed": (
        "changed where eps = 0",
        "On this input eps = 0, and your {name} agrees with the exact answer to only about {digits} significant "
        "digits ({name}{index} is off by {diff:.1e}, where float64 rounding allows {allowed:.1e}): as if a small "
        "number had been put where eps is 0. No group of these inputs has a variance of 0, so eps = 0 needs no "
        "guard here: use eps as it is given.",
    ),
    "right_first_wrong_second": (
        "right on the first input, wrong on the second",
        "The second input is {second}.{guess}",
    ),
    "no_match": (
        "{name} is wrong",
        "No common mistake matches this one. Compare the worst entry below with a finite difference: run your "
        "file on its own (python FILE) to see one.",
    ),
    "not_finite": ("not finite", "{detail}{eps0}."),
    "second_run_differs": (
        "a different answer on a second run",
        "Called twice on the same input, {name}{index} was {first:.6g} the first time and {second:.6g} the second. "
        "Does your code use randomness, or keep state between calls (a global list or counter)?",
    ),
    "input_modified": (
        "an input was modified",
        "After your code ran, input {name}{index} was {now:.6g} instead of {was:.6g}. Work on new arrays "
        "(x = x - mean), never on the ones you are given: anything computed from the changed input afterwards "
        "is off too.",
    ),
    "swapped_outputs": (
        "{first} and {second} swapped",
        "Your `{name}` is the right `{other}`. Return them in the order of the docstring ({first} is the sum of "
        "dy * xhat, {second} the sum of dy).",
    ),
}

# key: one line (summaries of a check, rows of its table, the reasons a check could not run)
SAYINGS: dict[str, str] = {
    "passed": "Every check passed.",
    "not_yet": "Not yet: {failed}.",
    "not_written": "Not written yet: {name} still raises NotImplementedError. Replace that line with your code.",
    "syntax": "Python cannot read your file: {message}.",
    "import_failed": "Importing your file failed: {type}: {message}",
    "exit_at_import": (
        "Your file called sys.exit({code!r}) while it was being imported, at its top level (outside any "
        "function). Code that should run only when you run the file yourself goes under "
        '`if __name__ == "__main__":`.'
    ),
    "exit_in_call": (
        "Your code called sys.exit({code!r}){on}: a graded function must return its result, not end the program."
    ),
    "memory": "Your code ran out of memory{on} (the limit is {memory_mb} MiB): {message}",
    "mutates_input": (
        "Your code tried to change one of its inputs in place{on}. Inputs are read-only while grading: compute "
        "new arrays (x - mean), do not overwrite them (x -= mean)."
    ),
    "forbidden": "{message}.",
    "bad_return": "{message}.",
    "kernel_refused": (
        "The operating system refused something your code tried{on} ({message}): while it is graded, code may "
        "not start processes, signal other processes, raise its limits, change files, or read files beyond "
        "the standard library and NumPy."
    ),
    "raised": "Your code raised {type}{on}: {message}",
    "timeout": "Your code did not finish within {timeout:g} s (wall clock) and was stopped: an endless loop?",
    "killed": "The process running your code was killed by {signal}{extra} before it returned a result.",
    "killed_memory": " (the memory limit of {memory_mb} MiB, or the system running out of memory)",
    "killed_cpu": " (its CPU-time limit)",
    "ended": (
        "The process running your code ended (exit code {code}) before it returned a result: os._exit(), "
        "or a crash inside a compiled library?"
    ),
    "too_large": "Your code sent back more than {limit} MiB; no answer of this exercise needs that much.",
    "unreadable_result": "What came back from your code could not be read ({why}); nothing of it was graded.",
    "missing_file": "{path} does not exist: `microgradnorm exercise reset {number}` brings the scaffold back.",
    "directory": (
        "{path} is a directory, not your exercise file: `microgradnorm exercise reset {number}` brings the "
        "scaffold back."
    ),
    "not_regular": "{path} is not a regular file ({kind}), so it was not read: your exercise file is a plain .py file.",
    "file_too_large": "{path} is larger than {limit} KiB; an exercise file is a few KiB.",
    "not_text": "{path} is not text Python can read: {why}.",
    "unreadable_file": "{path} could not be read: {why}.",
    "posix_only": "The grader runs learner code in a sandbox that needs a POSIX system (Linux or macOS).",
    "seed_not_recorded": (
        "Graded on the inputs of --seed {seed}, which are known in advance (and so could their answers be): "
        "this check is not recorded. `microgradnorm exercise check {number}` without --seed records a pass."
    ),
    "progress_tampered": (
        "Your progress file changed while your code ran; the change was discarded and nothing was recorded "
        "for this check."
    ),
    # rows of the table
    "row_ran": "no errors, three calls",
    "row_types_ok": "float64 arrays of the right shapes",
    "row_finite_none": "nothing to check: no output came back as numbers",
    "row_nonfinite": "`{name}` has {nan} NaN and {inf} Inf entries on {call}",
    "row_finite_ok": "no NaN or Inf{among}",
    "finite_eps0": " (eps = 0 there: a division by a std of zero, or by zero itself?)",
    "guess_eps0": " A size written into the code, or a formula that breaks at eps = 0?",
    "guess_size": " A size written into the code?",
    "row_finite_among": " among the {count} outputs that came back as numbers",
    "row_not_compared": "not compared (wrong type or shape)",
    "row_value": "relative error {rel:.1e}",
    "row_value_bad": "relative error {rel:.1e}; rounding allows {allowed:.1e}",
    "row_not_finite": "not finite",
    "row_second_wrong": "{second}; wrong: {names}",
    "row_repeat_ok": "deterministic",
    "row_repeat_bad": "{names} changed between two calls on the same input",
    "row_inputs_ok": "every input as it was given",
    "row_inputs_bad": "`{name}` was modified",
    "row_stopped": "stopped after {timeout:g} s",
    "row_no_result": "no result came back",
    # where a value is wrong
    "call_a": "the first input",
    "call_b": "the second input",
    "call_a2": "the first input, called again",
    # the types and shapes of a returned value
    "type_missing": "`{name}` did not come back from your code. Expected {want}.",
    "type_none": "`{name}` is None: a `return` is missing? Expected {want}.",
    "type_list": (
        "`{name}` is a Python {type}, not an array: build it with NumPy operations, or wrap it in "
        "np.asarray(...). Expected {want}."
    ),
    "type_scalar": "`{name}` is a single number ({type}), expected {want}.",
    "type_other": "`{name}` is a {type}, expected {want}.",
    "type_shape": "`{name}` has shape {got}, expected {expected}.",
    "type_dtype": (
        "`{name}` has dtype {dtype}, expected float64 (the inputs are float64; a float32 or int conversion "
        "somewhere loses precision)."
    ),
    "type_too_large": "`{name}` has {size} entries, expected {want}.",
    "type_want": "a float64 array of shape {shape}",
}


def title(key: str, params: dict[str, Any]) -> str:
    """The short title of a finding."""
    return FINDINGS[key][0].format(**params)


def detail(key: str, params: dict[str, Any]) -> str:
    """The explanation of a finding, with its numbers."""
    return FINDINGS[key][1].format(**params)


def say(key: str, **params: Any) -> str:
    """One line of a check's report."""
    return SAYINGS[key].format(**params)
