"""The live stream as a job that ends: everything the arrival log gained since the last run, through
every cohort of a stream's pipelines, then stop (what Dagster launches after an ingest, and
``python -m jobs live``); and a changed pipeline's rollout without a long-running job.

A pending version whose cohort got through the log is caught up: readers switch to it at the
end of the run (jobs.lifecycle.rollout).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from jobs.config.registry import Pipeline, platform_of
from jobs.config.streams import Stream
from jobs.console.progress import heartbeat
from jobs.lifecycle import rollout, versions
from jobs.live import cohorts
from jobs.live.cohorts import member_of
from jobs.live.queries import (
    DEFAULT_BUCKETS,
    LiveReport,
    all_live,
    plan_runs,
    query_state,
    raise_failure,
    start_cohort,
)
from operators.process_pipeline import user_error_in


def run_live(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None, *,
             checkpoint: str | None = None, max_files_per_trigger: int | None = None,
             max_bytes_per_trigger: str | None = None,
             progress: Callable[[str], None] = print,
             buckets: int = DEFAULT_BUCKETS) -> LiveReport:
    """Process everything in the stream's arrival log not yet processed, for ``pipelines``
    (default: every pipeline of the stream), cohort after cohort, then stop. A pending
    version whose cohort got through the log is caught up: readers switch to it."""
    report = LiveReport(stream=stream.name)
    for run in plan_runs(stream, pipelines, buckets, checkpoint, progress):
        query, sink = start_cohort(spark, stream, run, trigger="available_now",
                                   max_files_per_trigger=max_files_per_trigger,
                                   max_bytes_per_trigger=max_bytes_per_trigger,
                                   progress=progress, metrics_interval_s=float("inf"),
                                   buckets=buckets)
        with heartbeat(progress, f"live {stream.name}",
                       detail=lambda q=query, s=sink: query_state(q, s)):
            _await(query)
        sink.close()
        report.add(sink)
        for pipeline in run.pipelines:  # the log as it was at the query's start, all of it
            done = rollout.switch_if_pending(pipeline, "caught up with the arrival log")
            if done is not None:
                report.note(done)
                progress(done.said())
    for pipeline in {p.name: p for p in (pipelines or
                                         platform_of(stream.settings).pipelines_of(stream.name))
                     }.values():
        rollout.prune(pipeline, progress)
    progress(report.summary())
    return report


def run_rollout(spark: SparkSession, pipeline: Pipeline, *,
                progress: Callable[[str], None] = print,
                max_files_per_trigger: int | None = None,
                buckets: int = DEFAULT_BUCKETS) -> LiveReport:
    """Roll a changed pipeline out without a long-running job (``python -m jobs rollout``):
    compute its pending version from the arrival log in the cohort that holds it (a new one
    at the beginning of the log, or the one a stopped job left), to the log's end, then switch
    readers to it. Nothing else is computed."""
    stream = pipeline.stream
    report = LiveReport(stream=stream.name)
    said = versions.reconcile(pipeline, first_serves_at_once=False).said(pipeline)
    if said:
        progress(said)
    if not versions.pending(pipeline):
        progress(f"rollout {pipeline.name}: nothing to roll out: version {pipeline.version}, "
                 "its file's, is the one readers see")
        return report
    mine = member_of(pipeline)
    others = [p for p in all_live(stream) if member_of(p) != mine]
    runs = [r for r in cohorts.plan(stream, [pipeline, *others], buckets, {pipeline.name})
            if mine in r.members()]
    for run in runs:
        run.pipelines = [p for p in run.pipelines if member_of(p) == mine] \
            if run.new else run.pipelines
        query, sink = start_cohort(spark, stream, run, trigger="available_now",
                                   max_files_per_trigger=max_files_per_trigger,
                                   progress=progress, metrics_interval_s=float("inf"),
                                   buckets=buckets)
        with heartbeat(progress, f"rollout {pipeline.name}",
                       detail=lambda q=query, s=sink: query_state(q, s)):
            _await(query, f"rollout of {pipeline.name}")
        sink.close()
        report.add(sink)
    done = rollout.switch_if_pending(pipeline, "caught up with the arrival log (rollout)")
    if done is not None:
        report.note(done)
        progress(done.said())
    rollout.prune(pipeline, progress)
    return report


def _await(query: StreamingQuery, what: str = "live stream") -> None:
    """Wait for an ``available now`` query to end; its failure as :func:`raise_failure`
    says it."""
    try:
        query.awaitTermination()
    except Exception as failure:
        user = user_error_in(str(failure))
        if user is not None:
            raise user from None
        raise
    raise_failure(query, what)
