"""The live stream: ingest and the windowed tables, micro-batch by micro-batch, exactly once.

:func:`run_live` (everything new in the arrival log, then stop), :func:`start_live` (a running
query), :func:`run_stream` (the long-running job: ingest and stream in one process). Modules:
``stream`` (the query), ``standard`` and ``keyed`` (the engines per bucket of keys), ``sink``
(the Delta writes and the late-data metrics), ``increment`` (one ingest-then-update step, as
Dagster's landing sensor runs it), ``pipes`` (the Dagster Pipes entry point).
"""

from jobs.live.stream import LiveReport, default_checkpoint, run_live, run_stream, start_live

__all__ = ["LiveReport", "default_checkpoint", "run_live", "run_stream", "start_live"]
