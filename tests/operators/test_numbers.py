"""Values enter as exact ``DECIMAL(38, 9)``: rounded half up to nine places, kept when the
rounded value is one ``DECIMAL(38, 9)`` holds. Arrow's decimal type is the reference for what
it holds, so the bound cannot drift with Python's decimal context."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from operators.numbers import to_exact

DECIMAL = pa.decimal128(38, 9)
NEAR_THE_BOUND = st.builds(lambda digits, sign: sign * Decimal(digits).scaleb(-10),
                           st.integers(10**38 - 10**5, 10**39 + 10**5), st.sampled_from([1, -1]))


def _held(value: Decimal) -> Decimal | None:
    with localcontext(prec=80, rounding=ROUND_HALF_UP):
        rounded = value.quantize(Decimal("1e-9"))
    try:
        return pa.array([rounded], DECIMAL)[0].as_py()
    except pa.ArrowInvalid:
        return None


@given(st.one_of(NEAR_THE_BOUND, st.decimals(allow_nan=False, allow_infinity=False)))
@example(Decimal("99999999999999999999999999999.999999999"))
@example(Decimal("99999999999999999999999999999.9999999995"))
@example(Decimal("-99999999999999999999999999999.5"))
def test_a_value_is_kept_exactly_when_decimal_38_9_holds_it_rounded(value):
    assert to_exact(value) == _held(value)
