"""How hard the property tests search: ``TEST_DEPTH`` scales every ``max_examples``.

The everyday suite keeps the pure-Python part under a minute (depth 1); a deeper run before a
release, or after touching the operators, is ``TEST_DEPTH=10 ./platform test -m "not spark"``
(ten times the examples, same properties).
"""

from __future__ import annotations

import os


def examples(count: int) -> int:
    """``count`` examples at depth 1, scaled by ``TEST_DEPTH``."""
    return max(1, round(count * float(os.environ.get("TEST_DEPTH", "1"))))
