"""The package's number formats: significant digits, scientific notation, byte counts; NaN and -0."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from microgradnorm.numfmt import err, fmt, nbytes_text, sci


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
