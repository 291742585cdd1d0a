"""The enrichment service's data: a seeded, deterministic user catalogue.

Profiles are derived from a hash of ``(seed, key)``, never stored, so any process (the service,
a test, a benchmark) computes the same profile for the same key without sharing state, and the
catalogue needs no memory however many users it has. Keys are the event generator's:
``user-0000`` .. ``user-9999`` (zero-padded to 4 digits).
"""

from __future__ import annotations

import hashlib
import re
from datetime import date, timedelta
from typing import Any

KEY_PATTERN = re.compile(r"^user-(\d{4})$")
SEGMENTS = ("consumer", "small_business", "mid_market", "enterprise", "education")
COUNTRIES = ("US", "DE", "FR", "GB", "IN", "BR", "JP", "CA", "AU", "NL", "ES", "MX")
TIERS = ("free", "basic", "pro", "premium")
_SIGNUP_START = date(2020, 1, 1)
_SIGNUP_DAYS = 5 * 365


def user_key(index: int) -> str:
    """The key of the ``index``-th user, as the event generator spells it."""
    return f"user-{index:04d}"


def _digest(*parts: object) -> bytes:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()


def user_profile(
    key: str, *, seed: int = 0, users: int = 10_000, version: int = 1
) -> dict[str, Any] | None:
    """The profile of ``key``, or ``None`` when the catalogue has no such user.

    ``version`` models the service's data changing over time: only the ``tier`` (a mutable
    attribute, like a subscription) depends on it, so a refresh sees upgrades while the
    immutable facts (segment, country, signup day) stay put.
    """
    match = KEY_PATTERN.match(key)
    if match is None or int(match.group(1)) >= users:
        return None
    fixed = _digest("user", seed, key)
    mutable = _digest("tier", seed, version, key)
    signup = _SIGNUP_START + timedelta(days=int.from_bytes(fixed[2:4], "big") % _SIGNUP_DAYS)
    return {
        "key": key,
        "segment": SEGMENTS[fixed[0] % len(SEGMENTS)],
        "country": COUNTRIES[fixed[1] % len(COUNTRIES)],
        "signup_day": signup.isoformat(),
        "tier": TIERS[mutable[0] % len(TIERS)],
        "catalogue_version": version,
    }
