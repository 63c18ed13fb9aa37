"""eps, num_groups and counts are checked once (microgradnorm.inputs), so the scalar builders, the vectorized path and
the lessons' parameters refuse the same values with the same words."""

from __future__ import annotations

import math

import numpy as np
import pytest

import microgradnorm as mgn
from microgradnorm import vectorized as V
from microgradnorm.bench import run_benchmark
from microgradnorm.errors import InputError, InputTypeError
from microgradnorm.inputs import check_eps, check_int, check_num_groups
from microgradnorm.lessons.demos import LessonParams
from tests.helpers import refuses

X = [[1.0, 2.0, 4.0, 7.0]]


@pytest.mark.parametrize("eps", [0, 0.0, 1e-5, np.float32(1e-3), np.float64(0.5), np.int64(1)])
def test_a_finite_eps_at_or_above_zero_is_taken_from_python_or_numpy(eps):
    assert check_eps(eps) == float(eps)
    scalar = [v.data for v in mgn.layer_norm(X, eps=eps).graph["y"]]
    vector = V.layer_norm_forward(np.array(X), eps=eps)[0]
    assert np.allclose(scalar, vector.ravel(), rtol=1e-12, atol=0.0)


@pytest.mark.parametrize(
    ("eps", "kind", "said"),
    [
        (-1e-5, InputError, "eps: expected a finite number >= 0, got -1e-05"),
        (math.inf, InputError, "eps: expected a finite number >= 0, got inf"),
        (math.nan, InputError, "eps: expected a finite number >= 0, got nan"),
        ("1e-5", InputTypeError, "eps: expected a number >= 0, got str ('1e-5')"),
        (True, InputTypeError, "eps: expected a number >= 0, got bool (True)"),
    ],
)
def test_a_bad_eps_is_refused_alike_everywhere(eps, kind, said):
    calls = [
        lambda: mgn.layer_norm(X, eps=eps),
        lambda: V.layer_norm_forward(np.array(X), eps=eps),
        lambda: V.BatchNorm(4, eps=eps),
        lambda: LessonParams(eps=eps),
    ]
    for call in calls:
        assert str(refuses(call, kind, ())) == said


def test_num_groups_is_a_whole_divisor_of_the_channels_from_python_or_numpy():
    check_num_groups(np.int64(2), 4)
    for bad, kind in [(0, InputTypeError), (1.0, InputTypeError), (True, InputTypeError), (3, InputError)]:
        with pytest.raises(kind, match="num_groups"):
            check_num_groups(bad, 4)
    with pytest.raises(InputError, match="divisor of the 4 channels"):
        V.group_norm_forward(np.ones((2, 4, 3)), np.int64(3))


def test_a_count_is_a_whole_number_from_python_or_numpy():
    assert check_int("repeats", np.int64(3)) == 3 and type(check_int("repeats", np.int64(3))) is int
    assert check_int("seed", 0, 0) == 0


@pytest.mark.parametrize(
    ("value", "kind", "said"),
    [
        (0, InputError, "{name}: expected a whole number >= 1, got 0"),
        (-2, InputError, "{name}: expected a whole number >= 1, got -2"),
        (2.0, InputTypeError, "{name}: expected a whole number >= 1, got float (2.0)"),
        (True, InputTypeError, "{name}: expected a whole number >= 1, got bool (True)"),
        ("3", InputTypeError, "{name}: expected a whole number >= 1, got str ('3')"),
    ],
)
def test_a_bad_count_is_refused_with_the_same_words_everywhere(value, kind, said):
    calls = {
        "dim": lambda: LessonParams(dim=value),
        "batch": lambda: LessonParams(batch=value),
        "num_features": lambda: V.BatchNorm(value),
        "repeats": lambda: run_benchmark((), repeats=value),
    }
    for name, call in calls.items():
        assert str(refuses(call, kind, ())) == said.format(name=name)
