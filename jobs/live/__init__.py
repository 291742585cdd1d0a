"""The live stream: ingest and the windowed tables, micro-batch by micro-batch, exactly once.

:func:`run_live` (everything new in the arrival log, then stop), :func:`start_live` (a running
query), :func:`run_stream` (the long-running job: ingest and stream in one process),
:func:`run_rollout` (a changed pipeline's new version, then the switch). Modules: ``queries``
(which pipeline versions run, and starting a cohort's query), ``catch_up`` and
``long_running`` (the two ways a stream's queries run), ``cohorts`` (which queries a stream
runs), ``fanout`` (every version of a cohort fed from one read), ``standard``, ``keyed``,
``session_growth`` and ``process`` (the engines per bucket of keys), ``log_source`` (the
arrival log read by position), ``sink`` (a micro-batch's Delta writes), ``late_metrics`` (the
late-data metrics written beside the stream), ``backpressure`` (when the long-running job's
ingest waits for its queries). The Dagster Pipes entry point that runs these is jobs.pipes.
"""

from jobs.live.catch_up import run_live, run_rollout
from jobs.live.long_running import run_stream
from jobs.live.queries import LiveReport, start_live

__all__ = ["LiveReport", "run_live", "run_rollout", "run_stream", "start_live"]
