"""A seeded, realistic event generator that writes JSON-lines files into the landing folder.

It imitates what a collector in front of the platform sees: several producers, each flushing a
file of the events it received in a time slice, events that arrive out of order by a
configurable delay distribution, some far too late for any sensible watermark, and a share of
bad lines of every kind ingest must quarantine. The same seed and settings always write the
same files, so demos and tests are reproducible.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from operators.time import ms_to_datetime, parse_duration_ms, parse_timestamp_ms

BAD_KINDS = (
    "malformed_json",
    "missing_key",
    "missing_event_time",
    "unparsable_event_time",
    "too_far_in_future",
    "bad_value",
    "not_an_object",
)


@dataclass(frozen=True)
class GeneratorConfig:
    seed: int = 7
    start_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    duration_ms: int = 2 * 86_400_000
    events: int = 50_000
    keys: int = 50
    producers: int = 3
    flush_interval_ms: int = 900_000
    mean_delay_ms: float = 1_000.0
    """Every event is delayed by an exponential amount with this mean (network, batching)."""
    late_fraction: float = 0.05
    late_max_delay_ms: int = 60_000
    """Late events are delayed by up to this much more: some within allowed lateness."""
    very_late_fraction: float = 0.01
    very_late_delay_ms: tuple[int, int] = (600_000, 3 * 3_600_000)
    """Beyond any sensible watermark: a device that was offline for minutes to hours."""
    bad_fraction: float = 0.01

    def __post_init__(self) -> None:
        for name in ("events", "keys", "producers", "duration_ms", "flush_interval_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"generator {name} must be positive, got {getattr(self, name)}")
        for name in ("late_fraction", "very_late_fraction", "bad_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"generator {name} must be within [0, 1]")


def key_name(index: int) -> str:
    """Keys the enrichment service's catalogue knows: ``user-0000`` and so on."""
    return f"user-{index:04d}"


def _iso(ms: int) -> str:
    return ms_to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bad_line(kind: str, event: dict, rng: np.random.Generator) -> str:
    if kind == "malformed_json":
        text = json.dumps(event)
        return text[: int(rng.integers(1, len(text) - 1))]
    bad = dict(event)
    if kind == "missing_key":
        del bad["key"]
    elif kind == "missing_event_time":
        del bad["event_time"]
    elif kind == "unparsable_event_time":
        bad["event_time"] = "last tuesday"
    elif kind == "too_far_in_future":
        bad["event_time"] = "2100-01-01T00:00:00Z"
    elif kind == "bad_value":
        bad["value"] = "twelve"
    elif kind == "not_an_object":
        return json.dumps([bad["key"], bad["event_time"]])
    return json.dumps(bad)


def run_tag(config: GeneratorConfig) -> str:
    """A name part unique to the configuration: files of two different runs never share a
    name (landing files are immutable), and the same run writes the very same files again."""
    return hashlib.sha256(repr(config).encode()).hexdigest()[:8]


def generate(config: GeneratorConfig, landing: str | Path) -> dict[str, int]:
    """Write the landing files; return counts of what was written, by kind."""
    landing = Path(landing)
    tag = run_tag(config)
    rng = np.random.default_rng(config.seed)
    n = config.events
    event_times = config.start_ms + np.sort(rng.integers(0, config.duration_ms, n))
    # a few hot keys and a long tail, like real users
    key_index = np.minimum(rng.zipf(1.6, n) - 1, config.keys - 1)
    producer = rng.integers(0, config.producers, n)
    values = np.round(rng.gamma(2.0, 10.0, n), 2)
    delay = rng.exponential(config.mean_delay_ms, n)
    late = rng.random(n) < config.late_fraction
    delay += late * rng.uniform(0, config.late_max_delay_ms, n)
    very_late = rng.random(n) < config.very_late_fraction
    low, high = config.very_late_delay_ms
    delay += very_late * rng.uniform(low, high, n)
    received = event_times + delay.astype(np.int64)
    bad = rng.random(n) < config.bad_fraction
    bad_kind = rng.integers(0, len(BAD_KINDS), n)
    iso_time = rng.random(n) < 0.5

    order = np.lexsort((np.arange(n), received, producer))
    files: dict[Path, list[str]] = {}
    counts = {"events": 0, "late": int(late.sum()), "very_late": int(very_late.sum())}
    for i in order:
        event_time = int(event_times[i])
        event = {
            "key": key_name(int(key_index[i])),
            "event_time": _iso(event_time) if iso_time[i] else event_time,
            "value": float(values[i]),
            "received_at": int(received[i]),
        }
        if bad[i]:
            kind = BAD_KINDS[int(bad_kind[i])]
            line = _bad_line(kind, event, rng)
            counts[f"bad_{kind}"] = counts.get(f"bad_{kind}", 0) + 1
        else:
            line = json.dumps(event)
            counts["events"] += 1
        bucket = int(received[i]) // config.flush_interval_ms * config.flush_interval_ms
        path = landing / f"producer-{int(producer[i])}" / f"received-{bucket}-{tag}.jsonl"
        files.setdefault(path, []).append(line)
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(path)  # ingest never sees a half-written file
    counts["files"] = len(files)
    counts["lines"] = n
    return counts


LATENESS_OPTIONS = (  # (option, GeneratorConfig field, type, help)
    ("--mean-delay-ms", "mean_delay_ms", float, "mean of every event's exponential delay"),
    ("--late-fraction", "late_fraction", float, "share delayed by up to --late-max-delay-ms"),
    ("--late-max-delay-ms", "late_max_delay_ms", int, "extra delay of the late share"),
    ("--very-late-fraction", "very_late_fraction", float,
     "share delayed 10 min to 3 h, beyond any sensible watermark"),
    ("--bad-fraction", "bad_fraction", float, "share of bad lines, of every kind"),
)


def add_lateness_arguments(parser: argparse.ArgumentParser) -> None:
    """The lateness distribution and bad-line share as options (generator and demo)."""
    for option, name, kind, text in LATENESS_OPTIONS:
        default = getattr(GeneratorConfig, name)
        parser.add_argument(option, type=kind, default=default,
                            help=f"{text} (default {default})")


def lateness_options(args: argparse.Namespace) -> dict[str, float | int]:
    return {name: getattr(args, name) for _, name, _, _ in LATENESS_OPTIONS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write seeded demo events into a landing folder.")
    parser.add_argument("landing", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", default="2026-01-01T00:00:00Z")
    parser.add_argument("--duration", default="2d")
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--producers", type=int, default=3)
    add_lateness_arguments(parser)
    args = parser.parse_args(argv)
    config = GeneratorConfig(
        seed=args.seed, start_ms=parse_timestamp_ms(args.start),
        duration_ms=parse_duration_ms(args.duration, setting="--duration"), events=args.events,
        keys=args.keys, producers=args.producers, **lateness_options(args),
    )
    counts = generate(config, args.landing)
    print(json.dumps(counts, indent=2))


if __name__ == "__main__":
    main()
