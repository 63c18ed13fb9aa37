"""Exercise 10 by a review: the running mean as (mean * count + value) / (count + 1)."""


def welford_update(count, mean, m2, value):
    n = count + 1
    new_mean = (mean * count + value) / n
    return n, new_mean, m2 + (value - mean) * (value - new_mean)
