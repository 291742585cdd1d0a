"""The live stream: ingest and the windowed tables, micro-batch by micro-batch, exactly once.

:func:`run_live` (everything new in the arrival log, then stop), :func:`start_live` (a running
query), :func:`run_stream` (the long-running job: ingest and stream in one process),
:func:`run_rollout` (a changed pipeline's new version, then the switch). Modules: ``stream``
(the queries), ``cohorts`` (which queries a stream runs), ``standard`` and ``keyed`` (the
engines per bucket of keys), ``sink``
(the Delta writes and the late-data metrics), ``backpressure`` (when the long-running job's
ingest waits for its queries), ``increment`` (one ingest-then-update step, as
Dagster's landing sensor runs it), ``pipes`` (the Dagster Pipes entry point).
"""

from jobs.live.stream import LiveReport, run_live, run_rollout, run_stream, start_live

__all__ = ["LiveReport", "run_live", "run_rollout", "run_stream", "start_live"]
