"""Exercise 10, answered another way: m2 grows by delta**2 * (count - 1) / count (the same increment)."""


def welford_update(count, mean, m2, value):
    count = count + 1
    delta = value - mean
    return count, mean + delta / count, m2 + delta * delta * (count - 1) / count
