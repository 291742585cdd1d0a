"""What the Spark runtimes share to run the operator library: one key's records through the
window operator as rows (:mod:`jobs.runtime.key_runner`), a Python call per partition cut at key
boundaries for histories (:mod:`jobs.runtime.key_partitions`), the bridge between operator
timers and Spark's state store (:mod:`jobs.runtime.buckets`), and what they cannot run
(:func:`check_runnable`)."""

from __future__ import annotations

from operators.pipeline import PipelineSpec

INPUT_COLUMNS = ("key", "arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value",
                 "payload")
"""The arrival log's columns a runtime feeds the window operator."""


class UnsupportedPipeline(ValueError):
    """The pipeline cannot run on the Spark runtimes; the message says why and what can."""


def check_runnable(spec: PipelineSpec) -> None:
    """Refuse, before any data is touched, what the Spark runtimes cannot run per key.

    A processing-time timer of a key with no records would have to fire at another key's ingest
    time, interleaved with event-time timers in one global order: only the single-threaded
    replay (``eventtime-replay``) can honour that. A global window has no end, hence no day
    partition for its results.
    """
    if spec.trigger is not None and spec.trigger.uses_processing_time:
        raise UnsupportedPipeline(
            f"trigger.type {spec.trigger.type!r}: processing-time triggers run in the "
            "eventtime-replay command only; the Spark runtimes (live and backfill) wake keys "
            "from the event-time watermark")
    if spec.is_process:
        return  # its own timers: event time only, checked as it runs (process_pipeline.py)
    if spec.window.type == "global":
        raise UnsupportedPipeline(
            "window.type 'global': results are partitioned by the day of the window's end, and "
            "a global window never ends; use the eventtime-replay command")
