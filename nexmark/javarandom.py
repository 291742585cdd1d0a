"""``java.util.Random`` in Python, bit for bit.

Beam's and Flink's Nexmark generators seed one ``java.util.Random`` per event with the event id
and draw every attribute from it. Reproducing that generator exactly (same 48-bit linear
congruential generator, same ``nextInt`` rejection loop) means our events are the published
model's events, and a generated event depends only on its id, never on how many events other
splits produced before it.
"""

from __future__ import annotations

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK = (1 << 48) - 1
_INT_LIMIT = 1 << 31


class JavaRandom:
    """The subset of ``java.util.Random`` the Nexmark generator uses."""

    __slots__ = ("_seed",)

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ _MULTIPLIER) & _MASK

    def _next(self, bits: int) -> int:
        """``next(bits)``: the top ``bits`` of the new state, as Java's signed int."""
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        value = self._seed >> (48 - bits)
        if bits == 32 and value >= _INT_LIMIT:
            value -= 1 << 32
        return value

    def next_int(self, bound: int) -> int:
        """``nextInt(bound)``: uniform in ``[0, bound)``, with Java's rejection loop."""
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:  # a power of two
            return (bound * r) >> 31
        u = r
        r = u % bound
        while u - r + m >= _INT_LIMIT:  # Java's int overflow: reject and draw again
            u = self._next(31)
            r = u % bound
        return r

    def next_long(self) -> int:
        """``nextLong()``: a signed 64-bit value."""
        value = (self._next(32) << 32) + self._next(32)
        value &= (1 << 64) - 1
        return value - (1 << 64) if value >= 1 << 63 else value

    def next_double(self) -> float:
        """``nextDouble()``: uniform in ``[0, 1)`` with 53 random bits."""
        return ((self._next(26) << 27) + self._next(27)) * (1.0 / (1 << 53))

    def next_int32(self) -> int:
        """``nextInt()``: a signed 32-bit value (used by tests against Java's known outputs)."""
        return self._next(32)
