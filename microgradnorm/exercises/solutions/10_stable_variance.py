"""Exercise 10: a numerically stable variance, in one pass (Welford).

The textbook shortcut var = mean(x^2) - mean(x)^2 needs one pass over the data
but is a numerical trap: when the mean is large compared with the spread,
both terms are huge and nearly equal, and their difference is mostly rounding
error. With values near 1e8 and a spread of 1, x^2 is about 1e16, where a
float64 cannot even represent every integer; the answer can come out negative.

Welford's method keeps three numbers while it reads the values one at a time:

    count   how many values so far
    mean    their mean
    m2      the sum of squared deviations from that mean

and updates them with each new value using only deviations from the running
mean, which stay small. At the end, var = m2 / count (biased, as in the norms).
Write the update. The grader streams rows of values through it, including rows
whose values are all near 1e8, and it starts each row mid-stream: the first
call gets a state (count, mean, m2) that already sums up values your function
never sees. Update the state you are given; keeping the values yourself (and
calling np.var on them) cannot work.

While it is graded, your code may use NumPy and the Python standard library,
nothing else.

Try it:  python 10_stable_variance.py
Grade:   microgradnorm exercise check 10
Stuck?   microgradnorm lesson 12 teaches what this exercise needs
"""

import numpy as np


def welford_update(count: int, mean: float, m2: float, value: float) -> tuple[int, float, float]:
    """Add ``value`` to (count, mean, m2); return the new (count, mean, m2), count one larger.

    A stream of your own starts from (0, 0.0, 0.0); the grader starts from a state part way through.

    All four are scalars (shape []): count an int, mean, m2 and value floats.
    """
    # ---- write your code here ----
    count += 1
    delta = value - mean
    mean += delta / count
    m2 += delta * (value - mean)
    return count, mean, m2
    # ---- end of your code ----


if __name__ == "__main__":
    import microgradnorm.exercises.selfcheck  # noqa: F401  (a function still to write gets one line, not a traceback)

    rng = np.random.default_rng(0)
    values = 1e8 + rng.normal(0.0, 1.0, 1000)
    state = (0, 0.0, 0.0)
    for v in values:
        state = welford_update(*state, float(v))
    count, mean, m2 = state
    shifted = values - values.mean()
    reference = np.mean(shifted * shifted)
    yours, shortcut = m2 / count, np.mean(values * values) - np.mean(values) ** 2
    print(f"values near 1e8, spread 1, {len(values)} of them:          relative difference")
    print(f"  two passes (reference):   {reference:.12f}")
    print(f"  Welford (yours):          {yours:.12f}   {abs(yours - reference) / reference:.1e}")
    print(f"  mean(x^2) - mean(x)^2:    {shortcut:.12f}   {abs(shortcut - reference) / reference:.1e}")
    # near 1e8 a double is rounded to about 1e-8, and so is the running mean at each step
    close = abs(yours - reference) <= 1e-6 * reference
    half = values[:500]
    state = (500, float(half.mean()), float(((half - half.mean()) ** 2).sum()))
    for v in values[500:]:
        state = welford_update(*state, float(v))
    mid = abs(state[2] / state[0] - reference) <= 1e-6 * reference
    print("Started mid-stream from the state of the first 500 values:", "agrees." if mid else "DIFFERS.")
    print("Yours", "agrees with two passes to rounding." if close else "DIFFERS from two passes: check the update.")
