"""The package's number formats: significant digits, scientific notation, byte counts, table cells; NaN and -0."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from microgradnorm.numfmt import bracketed, count, err, fmt, ms, nbytes_text, plain, ratio, sci


def test_nan_is_a_dash_and_minus_zero_is_zero():
    assert fmt(math.nan) == sci(math.nan) == err(math.nan) == "—"
    assert fmt(-0.0) == "0" and sci(-0.0) == "0.00e+00"


@given(st.floats(-1e300, 1e300), st.integers(1, 12))  # (rounding 1.5e308 to one digit overflows)
def test_fmt_keeps_the_significant_digits_asked_for(v, digits):
    shown = fmt(v, digits)
    assert float(shown) == float(f"{v:.{digits}g}")  # the value Python's own 'g' keeps
    if v != 0:
        assert math.isclose(float(shown), v, rel_tol=10.0 ** (1 - digits))


@given(st.floats(min_value=1e-300, max_value=1e300), st.integers(0, 6))
def test_sci_has_the_decimals_asked_for_and_err_one(v, digits):
    mantissa, _exponent = sci(v, digits).split("e")
    assert len(mantissa.partition(".")[2]) == digits
    assert math.isclose(float(sci(v, digits)), v, rel_tol=10.0**-digits)
    assert err(v) == sci(v, 1)


def test_byte_counts_use_binary_prefixes():
    assert nbytes_text(512) == "512 B"
    assert nbytes_text(1536) == "1.5 KiB"
    assert nbytes_text(3 * 1024**2) == "3.0 MiB"
    assert nbytes_text(5 * 1024**3) == "5.0 GiB"


def test_plain_spells_out_what_fmt_leaves_blank():
    assert plain(math.nan) == "nan" and plain(math.inf, 3) == "inf" and plain(-math.inf) == "-inf"
    assert plain(-0.0) == "0" and plain(2.0 / 3.0, 3) == "0.667"


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_a_milliseconds_cell_has_three_digits_below_100_and_none_after_the_point_above(v):
    shown = ms(v)
    if abs(v) < 100:
        assert float(shown) == float(f"{v:.3g}")
    else:
        assert "." not in shown and "e" not in shown and abs(float(shown.replace(",", "")) - v) <= 0.5
    assert ms(None) == "-"


@given(st.floats(0, 1e4, allow_nan=False))
def test_a_ratio_cell_ends_in_x_and_is_at_most_five_characters_below_1000(v):
    shown = ratio(v)
    assert shown.endswith("x") and math.isclose(float(shown[:-1]), v, rel_tol=5e-3, abs_tol=5e-3)
    if v < 999:
        assert len(shown) <= 5
    assert ratio(None) == "-" and ratio(9.996) == "10x"


def test_a_count_is_whole_with_thousands_separators():
    assert count(1234) == "1,234" and count(2.6) == "3" and count(None) == "-"


@given(st.lists(st.integers(0, 10**6), max_size=6))
def test_a_shape_or_an_index_is_bracketed_as_a_python_list_of_its_numbers(values):
    assert bracketed(values) == bracketed(tuple(values)) == str(list(values))  # [2, 3, 4]; [] for none
    assert bracketed(iter(values)) == str(values)  # any iterable, read once
