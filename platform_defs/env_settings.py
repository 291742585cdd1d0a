"""Settings the code location reads from the environment when it loads.

A bad value there would otherwise surface as a bare ``ValueError`` from deep inside Dagster's
loading, without the variable's name; these readers name it, as every other setting does.
"""

from __future__ import annotations

import os
from datetime import date
from zoneinfo import ZoneInfo

from jobs.settings import SettingsError


def env_number(name: str, default: float, *, minimum: float = 0.0) -> float:
    """``name`` as a number of at least ``minimum``, ``default`` when unset or empty."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if value != value or value < minimum:  # NaN, or below the floor
        raise SettingsError(f"{name} must be at least {minimum}, got {raw!r}")
    return value


def env_whole_number(name: str, default: int, *, minimum: int = 0) -> int:
    value = env_number(name, default, minimum=minimum)
    if value != int(value):
        raise SettingsError(f"{name} must be a whole number, got {os.environ[name]!r}")
    return int(value)


def env_time_zone(name: str, default: str = "UTC") -> str:
    zone = os.environ.get(name) or default
    try:
        ZoneInfo(zone)
    except Exception:
        raise SettingsError(f"{name} {zone!r} is not a time zone") from None
    return zone


def env_date(name: str, default: str) -> str:
    raw = os.environ.get(name) or default
    try:
        date.fromisoformat(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a date like 2026-01-01, got {raw!r}") from None
    return raw
