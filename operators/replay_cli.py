"""``eventtime-replay``: run a pipeline's window operator over a local arrival log.

The command line of :mod:`operators.replay` (which holds the library: reading the log, the
watermarks, running the operator, the JSON of panes and late records): it parses the options,
writes the output files and says what happened on stderr. Watermark lines
(``{"watermark": 5000}``) advance the watermark between records; ``--final-watermark`` fires
what the end of input makes due; every pane says what fired it; ``--transcript`` runs a test
transcript (:mod:`operators.transcript`) and names the first divergence. Formats and a worked
example: docs/replay.md.

The command lives apart from the library so that :mod:`operators.transcript` can use the
library (:class:`~operators.replay.FiredPane`, :func:`~operators.replay.json_text`) while the
command uses the transcripts, without an import circle.

Exit status: 0 on success, 1 when the pipeline or the events are wrong (the message names the
file and line) or a transcript diverges, 2 for bad command-line usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from operators.build import build_driver
from operators.pipeline import PipelineConfigError, PipelineSpec
from operators.process_pipeline import ProcessFunctionError, Record, run_keys
from operators.replay import (
    ReplayInputError,
    json_text,
    late_by_record,
    late_to_json,
    load_replay_pipeline,
    never_fired,
    pane_to_json,
    read_arrival_log,
    records_of,
    run,
    watermarks_for,
)
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK, parse_timestamp_ms
from operators.transcript import main_transcript

__all__ = [
    "build_parser",
    "main",
    "replay_process",
]


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    try:
        with path.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json_text(row) + "\n")
    except OSError as error:
        raise ReplayInputError(f"cannot write {path}: {error.strerror}") from None


def _final_watermark(text: str) -> int:
    if text == "max":
        return MAX_TIMESTAMP
    try:
        return parse_timestamp_ms(int(text) if text.lstrip("-").isdigit() else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected epoch ms, an ISO-8601 time or 'max', got "
                                         f"{text!r}") from None


def replay_process(spec: PipelineSpec, args: argparse.Namespace, recorded_only: bool,
                   say: Callable[[str], None]) -> int:
    """A process pipeline (:mod:`operators.process_pipeline`): each key's records through the
    function, its timers then fired at the last watermark (or ``--final-watermark``), as a
    backfill does; its output rows to ``--panes`` (or standard output), its late records to
    ``--late``."""
    try:
        lines = read_arrival_log(args.events, spec)
        records = records_of(lines)
        if len(records) != len(lines):
            raise ReplayInputError("watermark lines need a window operator's global clock; a "
                                   "process pipeline's keys run apart: give records "
                                   "watermark_ms instead")
        watermarks = watermarks_for(records, spec, say, recorded_only=recorded_only)
        histories: dict[str, list[Record]] = {}
        for record, watermark in zip(records, watermarks, strict=True):
            histories.setdefault(record.key, []).append(Record(
                record.arrival_seq, record.event_time, watermark, record.ingest_time,
                record.payload))
        final = args.final_watermark if args.final_watermark is not None else \
            max(watermarks, default=MIN_WATERMARK)
        emitted = run_keys(spec, histories, final, args.pipeline.stem)
    except ReplayInputError as error:
        say(f"eventtime-replay: {error}")
        return 1
    except ProcessFunctionError as error:
        say(f"eventtime-replay: {error}")
        return 1
    rows = [{"key": e.key, "emission": e.emission, **e.row} for e in emitted]
    late = [{"key": key, "arrival_seq": r.arrival_seq, "event_time_ms": r.event_time_ms,
             "watermark_ms": r.watermark_ms}
            for key, history in sorted(histories.items()) for r in history
            if r.event_time_ms <= r.watermark_ms]
    try:
        if args.panes is None:
            for row in rows:
                print(json_text(row))
        else:
            _write_jsonl(args.panes, rows)
        if args.late is not None:
            _write_jsonl(args.late, late)
    except ReplayInputError as error:
        say(f"eventtime-replay: {error}")
        return 1
    if not args.quiet:
        say(f"eventtime-replay: {len(records)} records, {len(histories)} keys, {len(rows)} "
            f"output rows, {len(late)} late records")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eventtime-replay",
        description="Replay an arrival log (JSON lines) through a pipeline's window operator "
                    "and write its panes and late records. See docs/replay.md.")
    parser.add_argument("--pipeline", type=Path,
                        help="pipeline description (.yaml/.yml or .json)")
    parser.add_argument("--stream", type=Path,
                        help="the description of the stream a platform pipeline reads "
                             "(streams/<source>.yaml): its watermark section computes the "
                             "records' watermarks")
    parser.add_argument("--events", type=Path,
                        help="events in arrival order, one JSON object per line; a line "
                             '{"watermark": W} advances the watermark')
    parser.add_argument("--panes", type=Path,
                        help="output: panes (JSON lines); default: standard output")
    parser.add_argument("--late", type=Path,
                        help="output: late records (JSON lines); omitted: only counted")
    parser.add_argument("--late-by", choices=("window", "record"), default="window",
                        help="one late row per missed window (as the late table), or per "
                             "record with its missed windows")
    parser.add_argument("--final-watermark", type=_final_watermark, metavar="MS|max",
                        help="advance the watermark to this after the last line (end of "
                             "input): fires what it makes due")
    parser.add_argument("--transcript", type=Path,
                        help="run a test transcript (docs/replay.md) and print its first "
                             "divergence; exit 1 if it diverges")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    if args.transcript is not None:
        if args.pipeline or args.events:
            parser.error("--transcript runs on its own (it holds the pipeline and the steps)")
        return main_transcript(args.transcript, say)
    if args.pipeline is None or args.events is None:
        parser.error("--pipeline and --events are required (or --transcript)")
    try:
        spec, recorded_only = load_replay_pipeline(args.pipeline, args.stream)
        if spec.is_process:
            return replay_process(spec, args, recorded_only, say)
        driver = build_driver(spec)  # combinations the operator refuses (say a delta trigger
    except (ValueError, PipelineConfigError) as error:  # on sessions) are pipeline errors too
        say(f"eventtime-replay: bad pipeline {args.pipeline}: {error}")
        return 1
    try:
        lines = read_arrival_log(args.events, spec)
        records = records_of(lines)
        watermarks = watermarks_for(records, spec, say, recorded_only=recorded_only)
        output = run(spec, lines, watermarks, driver, final_watermark=args.final_watermark)
        pane_rows = [pane_to_json(p.pane, p.fired_by) for p in output.panes]
        if args.panes is None:
            for row in pane_rows:
                print(json_text(row))
        else:
            _write_jsonl(args.panes, pane_rows)
        if args.late is not None:
            late_rows = (late_by_record(output.late) if args.late_by == "record"
                         else [late_to_json(r) for r in output.late])
            _write_jsonl(args.late, late_rows)
    except ReplayInputError as error:
        say(f"eventtime-replay: {error}")
        return 1
    if not args.quiet:
        metrics = output.driver.operator.metrics
        marks = len(lines) - len(records)
        say(f"eventtime-replay: {len(records)} records"
            f"{f', {marks} watermark lines' if marks else ''}, {len(output.panes)} panes, "
            f"{len(output.late)} late records (on_time={metrics['on_time']}, "
            f"late_within_lateness={metrics['late_within_lateness']}, "
            f"dropped_late={metrics['dropped_late']})")
        if args.final_watermark is None:
            note = never_fired(output.driver)
            if note:
                say(f"eventtime-replay: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
