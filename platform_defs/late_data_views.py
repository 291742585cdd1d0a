"""Late data as a person reads it in the UI: durations in human units, the lateness histogram
and the sample of late records as Markdown.

Pure formatting of what ``jobs.views.late_detail`` computed; nothing here queries a table.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobs.views.late_detail import DayLateness
from operators.time import MIN_WATERMARK, human_duration, ms_to_datetime

BAR_WIDTH = 30


def watermark_text(ms: int | None) -> str:
    """A watermark as a person reads it: the instant, or that there is none yet."""
    if ms is None or ms == MIN_WATERMARK:
        return "none yet (no record has moved it)"
    return _time(ms)


def _time(ms: int) -> str:
    return ms_to_datetime(int(ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _clock(ms: int) -> str:
    return ms_to_datetime(int(ms)).strftime("%H:%M:%S")


def histogram_markdown(detail: DayLateness) -> str:
    """The day's late records per lateness bucket, late within lateness and dropped apart,
    with a bar scaled to the largest bucket."""
    largest = max((w + d for _, w, d in detail.histogram), default=0)
    lines = ["| lateness | late within lateness | dropped | |", "|---|---:|---:|---|"]
    for label, within, dropped in detail.histogram:
        bar = "█" * round(BAR_WIDTH * (within + dropped) / largest) if largest else ""
        lines.append(f"| {label} | {within} | {dropped} | {f'`{bar}`' if bar else ''} |")
    return "\n".join(lines)


def sample_markdown(detail: DayLateness) -> str:
    """The day's latest late records: what arrived, when, behind which watermark, and the
    window it was late for (dropped: the window it missed)."""
    lines = ["| key | event time | arrived | watermark | late by | window | fate |",
             "|---|---|---|---|---:|---|---|"]
    for r in detail.sample:
        window = f"{_clock(r['window_start_ms'])}-{_clock(r['window_end_ms'])}"
        fate = "dropped" if r["fate"] == "dropped_late" else "late within lateness"
        lines.append(
            f"| {r['key']} | {_time(r['event_time_ms'])} | {_time(r['ingest_time_ms'])} | "
            f"{_time(r['watermark_ms'])} | {human_duration(r['lateness_ms'])} | {window} | "
            f"{fate} |")
    return "\n".join(lines)


def duration_labels(values: Mapping[str, int | float]) -> dict[str, str]:
    """``<name>`` in human units for every ``<name>_ms`` number, placed beside it."""
    return {name[:-3]: human_duration(value) for name, value in values.items()
            if name.endswith("_ms")}


def finality_text(final: int, final_at_ms: int) -> str:
    """Whether the day's numbers can still change: a day is final once the watermark has
    passed its last window's end plus allowed lateness (then the finality schedule computes
    it once more, and never again)."""
    if final:
        return f"final: the watermark passed {_time(final_at_ms)} (last window + lateness)"
    return (f"provisional: late records may still change it until the watermark passes "
            f"{_time(final_at_ms)}")
