"""The demo's Dagster instance settings (``$DAGSTER_HOME/dagster.yaml``): a quiet, friendly
first run.

- ``telemetry: enabled: false``: nothing leaves the machine.
- ``nux: enabled: false``: no "join the community" dialog over the asset graph on the first
  visit.
- ``freshness: enabled: true``: Dagster 1.13 evaluates the results' freshness policy only then.
- ``run_retries: enabled: true``: the finality schedule's runs carry ``dagster/max_retries``,
  so a failed finality run is retried by the daemon (Dagster's run retries).

Written by ``./platform demo`` and ``./platform ui`` (``python -m platform_defs.instance``); an
existing file keeps every setting it has and gains only the ones it lacks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

INSTANCE_SETTINGS: dict[str, dict] = {
    "telemetry": {"enabled": False},
    "nux": {"enabled": False},
    "freshness": {"enabled": True},
    "run_retries": {"enabled": True},
}


def ensure_instance_config(dagster_home: Path) -> Path:
    """Create or complete ``dagster.yaml`` in ``dagster_home``; return its path."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    path = dagster_home / "dagster.yaml"
    current = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}
    missing = {k: v for k, v in INSTANCE_SETTINGS.items() if k not in current}
    if missing or not path.exists():
        path.write_text(yaml.safe_dump({**current, **missing}, sort_keys=False),
                        encoding="utf-8")
    return path


def main() -> int:
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        print("instance: DAGSTER_HOME is not set", file=sys.stderr)
        return 2
    ensure_instance_config(Path(home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
