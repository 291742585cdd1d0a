"""The settings reference, generated from the settings model itself.

One source for three readers: ``python -m jobs settings`` (every setting with its default, its
current value and where that came from), docs/settings.md (the same table without the current
values, checked by a test to be what this module renders) and the check that warns about a
``PLATFORM_*`` variable that is no setting. A setting added to :class:`PlatformSettings` is
documented by adding it there, and a variable nobody reads is never silently ignored.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from jobs.config.errors import SettingsError
from jobs.config.settings import PROJECT, PlatformSettings, is_duration, variable_of

TOOL_VARIABLES = {
    "PLATFORM_REQUIRE_BROWSER": "the test suite: the Dagster UI's browser test fails, rather "
                                "than skips, without Chromium (CI sets it)",
}
"""``PLATFORM_*`` variables that are not settings of the platform but of its own tools."""

DERIVED = {"warehouse": "<home>/warehouse", "landing": "<home>/landing"}
"""Settings whose default is computed from ``PLATFORM_HOME``."""

_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


@dataclass(frozen=True)
class SettingRow:
    """One setting as a reader sees it: its variable, default, meaning, and (for a run) the
    value in force and where it came from."""

    variable: str
    default: str
    meaning: str
    value: str = ""
    origin: str = ""


@dataclass(frozen=True)
class StrayVariable:
    """A ``PLATFORM_*`` variable (any case) that no setting reads. ``fatal`` when it is so close
    to a setting that the user surely meant that one (a run against the default would be
    wrong), a warning otherwise."""

    variable: str
    suggestion: str | None
    fatal: bool

    def message(self) -> str:
        hint = f"; did you mean {self.suggestion}?" if self.suggestion else ""
        ignored = "" if self.fatal else " and is ignored"
        return (f"{self.variable} is not a setting{ignored}{hint} "
                "(python -m jobs settings lists them)")


def format_duration(ms: int) -> str:
    """Milliseconds in the largest unit that divides them: ``86400000`` -> ``1d``."""
    for unit, size in _UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _shown(name: str, value: Any) -> str:
    """A value as a user would write it in the variable."""
    if is_duration(name) and isinstance(value, int):
        return format_duration(value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True) if value else ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _default(name: str) -> str:
    if name in DERIVED:
        return DERIVED[name]
    field = PlatformSettings.model_fields[name]
    value = field.get_default(call_default_factory=True)
    text = _shown(name, value)
    project = str(PROJECT)
    return text.replace(project, "<project>") if text.startswith(project) else text


def reference_rows(settings: PlatformSettings | None = None,
                   env: Mapping[str, str] | None = None) -> list[SettingRow]:
    """Every setting in the model's order; with ``settings`` and the ``env`` they were read
    from, also the value in force and its origin."""
    rows = []
    for name, field in PlatformSettings.model_fields.items():
        variable = f"PLATFORM_{variable_of(name)}"
        row = SettingRow(variable, _default(name), field.description or "")
        if settings is not None:
            given = (env or {}).get(variable) not in (None, "")
            origin = ("environment" if given
                      else "default, from PLATFORM_HOME" if name in DERIVED else "default")
            row = SettingRow(row.variable, row.default, row.meaning,
                             _shown(name, getattr(settings, name)), origin)
        rows.append(row)
    return rows


def render_text(rows: list[SettingRow]) -> str:
    """What ``python -m jobs settings`` prints: a block per setting."""
    lines = []
    for row in rows:
        value = row.value if row.value else "(none)"
        lines.append(f"{row.variable} = {value}    [{row.origin}]")
        lines.append(f"    {row.meaning}")
        lines.append(f"    default: {row.default or '(none)'}")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown() -> str:
    """docs/settings.md: every setting's variable, default and meaning, then the variables
    of the project's tools."""
    lines = [
        "# Settings",
        "",
        "Generated from the settings model (`jobs.config.settings`) by "
        "`python -m jobs settings --markdown`; a test keeps this page equal to it. "
        "`python -m jobs settings` prints the same list with the value in force and where it "
        "came from (the environment, or the default).",
        "",
        "Every setting is a `PLATFORM_*` environment variable (upper case). Durations are "
        "written with a unit, `ms`, `s`, `m` or `min`, `h`, `d` (`90s`, `5m`, `1d`), or as "
        "a number of milliseconds. A wrong value is refused before any data is touched, with "
        "one line naming the variable (exit status 2). A `PLATFORM_*` variable in any case "
        "that is no setting is refused when it is close to one (`PLATFORM_WAREHOUS`, "
        "`platform_warehouse`, `PLATFORM_LANDING_GRACE`: did you mean ...?) and warned about "
        "otherwise, so it is never ignored silently.",
        "",
        "| variable | default | meaning |",
        "| --- | --- | --- |",
    ]
    for row in reference_rows():
        default = f"`{row.default}`" if row.default else ""
        lines.append(f"| `{row.variable}` | {_cell(default)} | {_cell(row.meaning)} |")
    lines += ["", "Variables of the project's tools, not settings of the platform:", "",
              "| variable | read by |", "| --- | --- |"]
    for variable, meaning in TOOL_VARIABLES.items():
        lines.append(f"| `{variable}` | {_cell(meaning)} |")
    lines += ["| `DAGSTER_HOME` | Dagster: its run and event storage (`./platform` sets "
              "`$PLATFORM_HOME/dagster_home`) |", ""]
    return "\n".join(lines)


def stray_variables(env: Mapping[str, str]) -> list[StrayVariable]:
    """Every ``PLATFORM_*`` variable of ``env`` (any case) that is no setting and no tool's."""
    known = sorted(f"PLATFORM_{name}" for name in PlatformSettings.variable_names())
    stray = []
    for variable in sorted(env):
        upper = variable.upper()
        if not upper.startswith("PLATFORM_") or variable in known or variable in TOOL_VARIABLES:
            continue
        if upper in known:  # platform_warehouse: the right name in the wrong case
            stray.append(StrayVariable(variable, upper, fatal=True))
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=0.85)
        longer = [name for name in known if name.startswith(upper + "_")]
        if close or len(longer) == 1:
            stray.append(StrayVariable(variable, close[0] if close else longer[0], fatal=True))
            continue
        stray.append(StrayVariable(variable, _resembling(upper, known), fatal=False))
    return stray


def _resembling(variable: str, known: list[str]) -> str | None:
    """The setting sharing a word, nearly, with ``variable`` (``PLATFORM_SHUFLE``: the shuffle
    partitions), compared without the ``PLATFORM_`` every name has."""
    words = variable.removeprefix("PLATFORM_").split("_")
    best, best_score = None, 0.0
    for name in known:
        for word in name.removeprefix("PLATFORM_").split("_"):
            for given in words:
                score = difflib.SequenceMatcher(None, given, word).ratio()
                if score > best_score and len(given) > 2:
                    best, best_score = name, score
    return best if best_score >= 0.8 else None


def check_variable_names(env: Mapping[str, str]) -> list[str]:
    """A misspelt variable (``PLATFORM_WAREHOUS``) would otherwise be ignored without a word,
    and the job run against the default location: refuse one close to a setting, and return
    a warning for every other ``PLATFORM_*`` variable that no setting reads."""
    warnings = []
    for stray in stray_variables(env):
        if stray.fatal:
            raise SettingsError(stray.message())
        warnings.append(f"warning: {stray.message()}")
    return warnings
