"""Exact arithmetic for aggregates, so that the order of additions never changes a result.

Floating-point addition is not associative: a live stream adding values in arrival order and a
Spark backfill adding them per shuffle partition would differ in the last bits, and so would two
backfills with different partition counts. Values are therefore exact decimals with
``SCALE`` fractional digits (``DECIMAL(38, 9)`` in Spark), rounded once (half up, as Spark's
cast rounds) when they enter, and sums, minima and maxima are exact. Only ``mean`` is a double:
the exact sum converted to the nearest double, divided by the count, which IEEE division makes
the same everywhere.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

__all__ = [
    "MAX_ABS",
    "QUANTUM",
    "SCALE",
    "SPARK_TYPE",
    "add_exact",
    "to_double",
    "to_exact",
]


SCALE = 9
QUANTUM = Decimal(1).scaleb(-SCALE)
MAX_ABS = Decimal(10) ** (38 - SCALE)
"""``DECIMAL(38, 9)`` holds 29 integer digits."""
_CONTEXT = Context(prec=80, rounding=ROUND_HALF_UP)
SPARK_TYPE = f"decimal(38,{SCALE})"


def to_exact(value: object) -> Decimal | None:
    """A numeric value as an exact ``DECIMAL(38, 9)``; ``None`` for missing, non-numeric or
    out-of-range values (Spark's ``try_cast`` gives null for those too)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, Decimal):
            number = value
        elif isinstance(value, int):
            number = Decimal(value)
        elif isinstance(value, float):
            number = Decimal(repr(value))
        elif isinstance(value, str):
            number = Decimal(value.strip())
        else:
            return None
        if not number.is_finite():
            return None
        number = number.quantize(QUANTUM, context=_CONTEXT)
    except (InvalidOperation, ValueError):
        return None
    # compared, not abs(): abs() rounds to the default context's 28 digits, and would refuse
    # the largest values DECIMAL(38, 9) holds (99999999999999999999999999999.5 and up)
    return number if -MAX_ABS < number < MAX_ABS else None


def add_exact(a: Decimal, b: Decimal) -> Decimal:
    return _CONTEXT.add(a, b)


def to_double(value: Decimal) -> float:
    """The nearest double (Python and the JVM both round correctly)."""
    return float(value)
