"""Where the platform keeps its data and how ingest behaves, from environment variables.

One object, validated up front, so that a wrong path or bound fails with one message naming the
setting before any data is touched. Dagster resources build it from their own config; the CLI
and tests build it from the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from operators.pipeline import PipelineSpec, load_pipeline
from operators.time import parse_duration_ms

DEFAULT_PIPELINE = Path(__file__).parent / "pipelines" / "demo.yaml"


def _path(value: str | Path) -> Path:
    return Path(value).expanduser().absolute()


class SettingsError(ValueError):
    """A platform setting is wrong; the message names the setting."""


def _check_folder(setting: str, path: Path) -> None:
    """The folder exists or can be created: not a file, and its nearest existing ancestor is
    a writable folder."""
    if path.exists():
        if not path.is_dir():
            raise SettingsError(f"{setting} ({path}) is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise SettingsError(f"{setting} ({path}) is not writable")
        return
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SettingsError(f"{setting} ({path}) cannot be created: {ancestor} is a file")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise SettingsError(f"{setting} ({path}) cannot be created: {ancestor} is not "
                            "writable")


@dataclass(frozen=True)
class PlatformSettings:
    home: Path
    """Root of everything the platform writes locally (``PLATFORM_HOME``)."""
    warehouse: Path
    """Delta tables live below this folder (``PLATFORM_WAREHOUSE``)."""
    landing: Path
    """Landing folder: ``<landing>/<source_partition>/*.jsonl`` (``PLATFORM_LANDING``)."""
    pipeline_path: Path = DEFAULT_PIPELINE
    ingest_clock: str = "field:received_at"
    """``wall`` or ``field:<name>``; see docs/semantics.md ("Arrival log and ingest clock")."""
    max_future_ms: int = 86_400_000
    """Events more than this after their ingest time are quarantined (``too_far_in_future``)."""
    max_past_ms: int = 3_650 * 86_400_000
    """Events more than this before their ingest time are quarantined (``too_far_in_past``)."""
    max_line_bytes: int = 1_000_000
    landing_settle_ms: int = 60_000
    """A landing file without a final newline that changed more recently than this may still
    be being written: ingest leaves it for later (``PLATFORM_LANDING_SETTLE``)."""
    time_zone: str = "UTC"
    pipeline: PipelineSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for setting, path in (("PLATFORM_HOME", self.home), ("PLATFORM_WAREHOUSE", self.warehouse),
                              ("PLATFORM_LANDING", self.landing)):
            _check_folder(setting, path)
        if self.landing.resolve() == self.warehouse.resolve() or \
                self.warehouse.resolve() in self.landing.resolve().parents:
            raise SettingsError(f"PLATFORM_LANDING ({self.landing}) must not be inside "
                                f"PLATFORM_WAREHOUSE ({self.warehouse}): ingest would read the "
                                "tables' own files as landing files")
        if not (self.ingest_clock == "wall" or self.ingest_clock.startswith("field:")):
            raise SettingsError(
                f"PLATFORM_INGEST_CLOCK must be 'wall' or 'field:<name>', got {self.ingest_clock!r}"
            )
        for name in ("max_future_ms", "max_past_ms", "max_line_bytes", "landing_settle_ms"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{name} must be positive, got {getattr(self, name)}")
        try:
            from zoneinfo import ZoneInfo

            ZoneInfo(self.time_zone)
        except Exception:
            raise SettingsError(
                f"PLATFORM_TIME_ZONE {self.time_zone!r} is not a time zone") from None
        try:
            object.__setattr__(self, "pipeline", load_pipeline(self.pipeline_path))
        except ValueError as error:
            raise SettingsError(f"PLATFORM_PIPELINE ({self.pipeline_path}): {error}") from None

    def table_path(self, name: str) -> str:
        """Path of a Delta table; names are ours, never user input, but check anyway."""
        return str(self.inside_warehouse(self.warehouse / name, f"table {name!r}"))

    def inside_warehouse(self, path: str | Path, setting: str) -> Path:
        """``path`` resolved, or a :class:`SettingsError` naming ``setting`` if it lies outside
        the warehouse (a configured path must never reach other files)."""
        resolved = Path(path).expanduser().resolve()
        if self.warehouse.resolve() not in resolved.parents:
            raise SettingsError(f"{setting} ({path}) would escape the warehouse "
                                f"{self.warehouse}; give a path inside it")
        return resolved

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> PlatformSettings:
        env = dict(os.environ if env is None else env)
        home = Path(env.get("PLATFORM_HOME", ".platform")).expanduser().absolute()

        def duration(name: str, default: int) -> int:
            if name not in env:
                return default
            try:
                return parse_duration_ms(env[name], setting=name)
            except ValueError as error:
                raise SettingsError(str(error)) from None

        return cls(
            home=home,
            warehouse=_path(env.get("PLATFORM_WAREHOUSE", home / "warehouse")),
            landing=_path(env.get("PLATFORM_LANDING", home / "landing")),
            pipeline_path=Path(env.get("PLATFORM_PIPELINE", DEFAULT_PIPELINE)).expanduser(),
            ingest_clock=env.get("PLATFORM_INGEST_CLOCK", "field:received_at"),
            max_future_ms=duration("PLATFORM_MAX_FUTURE", 86_400_000),
            max_past_ms=duration("PLATFORM_MAX_PAST", 3_650 * 86_400_000),
            landing_settle_ms=duration("PLATFORM_LANDING_SETTLE", 60_000),
            time_zone=env.get("PLATFORM_TIME_ZONE", "UTC"),
        )
