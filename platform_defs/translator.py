"""From a table of a stream or a pipeline to its Dagster asset: one translator.

:class:`PlatformTranslator` holds every rule of what the UI shows about a table, modelled on
dagster-dbt's ``DagsterDbtTranslator``: each ``get_*`` method takes the stream or pipeline the
table belongs to and the table's name, and returns one property of its asset.

- before anything runs: the key, group, description, owners, kinds, column schema, where the
  table lives and the pipeline version (:meth:`~PlatformTranslator.get_asset_spec` puts them
  together);
- what a materialisation records: the path the run wrote, what an ingest found (and, for a
  Kafka stream, each partition's offsets, lag, watermark and idleness), which versions of a
  pipeline wrote and serve its tables (and, on the results, the table of versions), whether a
  day is final yet;
- how a person reads late data: durations in human units, watermarks as instants, the
  lateness histogram and the sample of late records as Markdown (``platform_defs.monitoring``
  turns a day's late-data figures into metadata with them).

The asset builders (``platform_defs.stream_assets``, ``platform_defs.pipeline_assets``,
``platform_defs.process_assets``, ``platform_defs.enrichment_assets``), the jobs and the
schedule take a translator, :data:`DEFAULT_TRANSLATOR` unless told otherwise. To change what
the UI shows, subclass :class:`PlatformTranslator`, override the methods to change, and return
an instance from ``get_translator`` in a subclass of the component
(``platform_defs.components.EventTimePipelines``). The live jobs (``platform_defs.live_job``,
``platform_defs.live_pipes``) are defined once, outside the component, and record with
:data:`DEFAULT_TRANSLATOR`: a translator that changes asset keys leaves them recording under
the default keys.

Paths come from the ``PLATFORM_*`` environment at load time (the same defaults the
``platform`` resource uses); each materialisation records the path it actually wrote too, in
case the resource was configured differently for that run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import date

from dagster import AssetKey, AssetSpec, MetadataValue
from pyspark.sql.types import StructType

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.config.streams import Stream
from jobs.enrichment import DEAD_LETTERS, ENRICHED, RESPONSES
from jobs.lifecycle import versions
from jobs.lifecycle.status import pipeline_state
from jobs.process.tables import LATE_SCHEMA, output_schema
from jobs.streams.report import IngestReport
from jobs.tables.days import day_end_ms, final_flag
from jobs.views.late_detail import DayLateness
from operators.time import MIN_WATERMARK, human_duration, ms_to_datetime
from platform_defs import schemas

OWNERS = ["team:data-platform"]
DELTA_KINDS = {"spark", "delta"}

LANDING_FILES = "landing_files"
"""A landing stream's files: the upstream of its ingest."""
TOPICS = "topics"
"""A Kafka stream's topics: the upstream of its ingest, written by producers."""
ENRICHMENT_TABLES = (RESPONSES, ENRICHED, DEAD_LETTERS)
"""A stream's tables the enrichment writes (a group of their own)."""
WINDOWED_TABLES = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)
"""A windowed pipeline's tables its asset job computes, a day at a time."""
PROCESS_TABLES = (tables.OUTPUT, tables.LATE_RECORDS)
"""A process pipeline's tables its asset job computes, a day at a time."""

BAR_WIDTH = 30
"""Characters of the lateness histogram's longest bar."""

StreamOrPipeline = Stream | Pipeline
"""What a table belongs to: a stream or (one version of) a pipeline."""

_FIXED_SCHEMAS: dict[str, StructType] = {
    tables.ARRIVAL_LOG: tables.ARRIVAL_LOG_SCHEMA,
    tables.QUARANTINE: tables.QUARANTINE_SCHEMA,
    tables.LATE_RECORDS: tables.LATE_RECORDS_SCHEMA,
    tables.LATE_DATA_METRICS: schemas.METRICS_SCHEMA,
    tables.BATCH_METRICS: schemas.BATCH_METRICS_SCHEMA,
    tables.WINDOW_ASSIGNMENTS: tables.WINDOW_ASSIGNMENTS_SCHEMA,
    RESPONSES: schemas.RESPONSES_SCHEMA,
    ENRICHED: schemas.ENRICHED_SCHEMA,
    DEAD_LETTERS: schemas.DEAD_LETTERS_SCHEMA,
}
"""Tables whose columns are the same for every stream or pipeline."""


def computed_tables(pipeline: Pipeline) -> tuple[str, ...]:
    """The tables a pipeline's asset job computes (the others are written by the live job)."""
    return PROCESS_TABLES if pipeline.spec.is_process else WINDOWED_TABLES


def _time(ms: int) -> str:
    return ms_to_datetime(int(ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _clock(ms: int) -> str:
    return ms_to_datetime(int(ms)).strftime("%H:%M:%S")


def _path_metadata(path: str) -> dict:
    """``dagster/uri`` (the UI links it) and a plain ``table_path`` for the Delta folder."""
    return {"dagster/uri": MetadataValue.path(path), "table_path": MetadataValue.path(path)}


class PlatformTranslator:
    """What the UI shows about each table of the platform; override a method to change it.

    ``of`` is the stream or pipeline a table belongs to and ``table`` its name
    (``jobs.tables``' names, :data:`LANDING_FILES`, :data:`TOPICS`, the enrichment's)."""

    def __init__(self, owners: Sequence[str] = OWNERS) -> None:
        self.owners = list(owners)

    # -- the asset: what the UI shows before anything runs ------------------------------------

    def get_asset_key(self, of: StreamOrPipeline | str, table: str) -> AssetKey:
        """``<stream>/<table>`` or ``<pipeline>/<table>``: a table under the name of what it
        belongs to (``of`` may be that name, as a live process reports it)."""
        return AssetKey([of if isinstance(of, str) else of.name, table])

    def get_group_name(self, of: StreamOrPipeline, table: str) -> str:
        """A group per stream and per pipeline, named after it; a stream's enrichment tables
        in ``enrichment``."""
        if isinstance(of, Stream) and table in ENRICHMENT_TABLES:
            return "enrichment"
        return of.name

    def get_owners(self, of: StreamOrPipeline, table: str) -> list[str]:
        """The translator's owners (the component's ``owners``), for every table."""
        return list(self.owners)

    def get_kinds(self, of: StreamOrPipeline, table: str) -> set[str]:
        """``spark`` and ``delta`` for the Delta tables; the landing files and topics for
        what they are."""
        if table == LANDING_FILES:
            return {"python", "json"}
        if table == TOPICS:
            return {"kafka"}
        return set(DELTA_KINDS)

    def get_description(self, of: StreamOrPipeline, table: str) -> str:
        """What the table holds, in words, with the stream's or pipeline's own description."""
        if isinstance(of, Pipeline):
            if of.spec.is_process:
                return self._process_descriptions(of)[table]
            return self._windowed_descriptions(of)[table]
        return self._stream_descriptions(of)[table]

    def get_table_schema(self, of: StreamOrPipeline, table: str) -> StructType | None:
        """The table's columns as the jobs write them (``None``: not a table, the landing
        files or the topics)."""
        if table in (LANDING_FILES, TOPICS):
            return None
        if isinstance(of, Pipeline):
            if of.spec.is_process and table == tables.OUTPUT:
                return output_schema(of.spec)
            if of.spec.is_process and table == tables.LATE_RECORDS:
                return LATE_SCHEMA
            if table == tables.WINDOW_RESULTS:
                return schemas.results_schema(of.spec)
        return _FIXED_SCHEMAS[table]

    def get_table_path(self, of: StreamOrPipeline, table: str) -> str | None:
        """Where the table the UI describes lives: a pipeline's is the version readers see
        (the file's, before anything was computed)."""
        if table in (LANDING_FILES, TOPICS):
            return None
        if isinstance(of, Pipeline):
            return versions.serving_pipeline(of).table_path(table)
        return of.table_path(table)

    def get_metadata(self, of: StreamOrPipeline, table: str) -> dict:
        """Definition-time metadata: column schema, table name and path; a pipeline's version
        and file (and a process pipeline's function)."""
        schema = self.get_table_schema(of, table)
        if schema is None:
            return {}
        metadata = {"dagster/column_schema": schemas.table_schema(schema),
                    "dagster/table_name": table,
                    **_path_metadata(self.get_table_path(of, table))}
        if isinstance(of, Pipeline):
            metadata.update(pipeline_version=of.version, pipeline_file=of.path)
            if of.spec.is_process:
                metadata["process"] = of.spec.process
        return metadata

    def get_code_version(self, of: StreamOrPipeline, table: str) -> str | None:
        """A pipeline's version, on the tables its asset job computes."""
        if isinstance(of, Pipeline) and table in computed_tables(of):
            return of.version
        return None

    def get_asset_spec(self, of: StreamOrPipeline, table: str, **fields) -> AssetSpec:
        """The table's asset from the methods above; ``fields`` are what the builder adds
        (its deps, a freshness policy, an automation condition)."""
        return AssetSpec(self.get_asset_key(of, table),
                         group_name=self.get_group_name(of, table),
                         owners=self.get_owners(of, table), kinds=self.get_kinds(of, table),
                         metadata=self.get_metadata(of, table),
                         code_version=self.get_code_version(of, table),
                         description=self.get_description(of, table), **fields)

    # -- what a materialisation records ------------------------------------------------------

    def get_path_metadata(self, of: StreamOrPipeline, table: str) -> dict:
        """Where the run wrote the table (``of`` as the run's settings describe it)."""
        return _path_metadata(of.table_path(table))

    def get_ingest_metadata(self, stream: Stream, report: IngestReport) -> dict[str, dict]:
        """Per table (the arrival log, the quarantine), the metadata of one ingest, whichever
        runs it (the asset, the live job): the ``batch_*`` counts are of every batch it ran
        (a backlog beyond the stream's batch size takes several), ``first_batch_id`` to
        ``batch_id`` (-1: none)."""
        first, last = report.batch_ids or (-1, -1)
        return {
            tables.ARRIVAL_LOG: {
                **self.get_path_metadata(stream, tables.ARRIVAL_LOG),
                "first_batch_id": first, "batch_id": last,
                "batch_records": report.records, "batch_files": report.files,
                "watermark_ms": report.watermark_ms,
                "watermark": self.watermark_text(report.watermark_ms),
                **self.get_kafka_metadata(stream)},
            tables.QUARANTINE: {
                **self.get_path_metadata(stream, tables.QUARANTINE),
                "batch_quarantined": report.quarantined,
                "reasons": MetadataValue.json(report.reasons)},
        }

    def get_kafka_metadata(self, stream: Stream) -> dict:
        """A Kafka stream's status per partition: the offsets ingest has committed, the
        broker's latest, the lag between them, the partition's watermark and idleness (the
        partition holding the stream's watermark back is the one to look at); empty for a
        landing stream. A broker that does not answer is said instead of failing the run
        that already ingested."""
        from jobs.streams.kafka.admin import BrokerUnreachable
        from jobs.streams.kafka.status import partition_status

        if stream.spec.kind != "kafka":
            return {}
        try:
            found = partition_status(stream)
        except BrokerUnreachable as error:
            return {"kafka_broker": str(error)}
        rows = ["| partition | committed offset | latest offset | lag | watermark | idle |",
                "| --- | ---: | ---: | ---: | --- | --- |"]
        rows += [f"| {s.partition} | {s.committed:,} | {s.latest:,} | {s.lag:,} | "
                 f"{self.watermark_text(s.watermark_ms)} | "
                 f"{'idle' if s.idle else 'active'} |" for s in found]
        return {
            "kafka_partitions": MetadataValue.md("\n".join(rows)),
            "kafka_lag_records": sum(s.lag for s in found),
            "kafka_idle_partitions": sum(s.idle for s in found),
            **{f"kafka_lag_{s.partition}": s.lag for s in found},
        }

    def get_version_metadata(self, pipeline: Pipeline) -> dict:
        """What a materialisation of ``pipeline``'s tables says about versions
        (jobs.lifecycle.versions): the version that wrote it, the one readers see, its
        state, and a pending version's progress while a changed description rolls out."""
        current = versions.serving(pipeline)
        serving = current.version if current else ""
        state = versions.SERVING if serving == pipeline.version else versions.PENDING
        metadata = {"pipeline_version": pipeline.version, "serving_version": serving or "-",
                    "version_state": state}
        if state == versions.PENDING:
            rollout = pipeline_state(pipeline).describe_rollout()
            if rollout:
                metadata["rollout"] = rollout
        return metadata

    def versions_table(self, pipeline: Pipeline, now_ms: int | None = None) -> str:
        """Markdown: every recorded version, newest first, with its state, since when, and
        the rows of its results table."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        lines = ["| version | state | since | result rows | tables |",
                 "| --- | --- | --- | ---: | --- |"]
        for state in versions.version_states(pipeline):
            since = f"{self.duration_text(now - state.since_ms)} ago" if state.since_ms else "-"
            rows = f"{state.rows:,}" if state.rows is not None else "-"
            kept = "kept" if state.has_tables else "deleted"
            lines.append(f"| {state.version} | {state.state} | {since} | {rows} | {kept} |")
        return "\n".join(lines)

    def get_versions_metadata(self, pipeline: Pipeline) -> dict:
        """The results asset's table of versions (serving, pending, retired, with their row
        counts)."""
        return {"versions": MetadataValue.md(self.versions_table(pipeline))}

    def get_switch_metadata(self, switched: Mapping, pipeline: Pipeline | None,
                            table: str) -> dict:
        """A switch of readers (``Switched.as_metadata()``) as an observation of one windowed
        table records it: the old and new versions, and the results' table of versions."""
        metadata = {**switched, "switched": f"{switched['from_version'] or '-'} -> "
                                            f"{switched['to_version']}"}
        if pipeline is not None and table == tables.WINDOW_RESULTS:
            metadata.update(self.get_versions_metadata(pipeline))
        return metadata

    def get_finality_metadata(self, pipeline: Pipeline, day: str,
                              watermark: int | None) -> dict:
        """Whether a day is final yet (``final``, what the finality schedule reads), in
        words too."""
        lateness = pipeline.spec.allowed_lateness_ms
        final = final_flag(day, watermark, lateness, pipeline.time_zone)
        final_at = day_end_ms(date.fromisoformat(day), pipeline.time_zone) - 1 + lateness
        return {"final": final, "finality": self.finality_text(final, final_at)}

    # -- late data as a person reads it ------------------------------------------------------

    def duration_text(self, ms: int | float | None) -> str:
        """A duration in human units (``1 min 23 s``)."""
        return human_duration(ms)

    def with_human_units(self, values: Mapping[str, object]) -> dict[str, object]:
        """``values`` with each ``<name>_ms`` number followed by ``<name>`` in human units."""
        labelled: dict[str, object] = {}
        for name, value in values.items():
            labelled[name] = value
            if name.endswith("_ms"):
                labelled[name[:-3]] = self.duration_text(value)
        return labelled

    def watermark_text(self, ms: int | None) -> str:
        """A watermark as a person reads it: the instant, or that there is none yet."""
        if ms is None or ms == MIN_WATERMARK:
            return "none yet (no record has moved it)"
        return _time(ms)

    def histogram_markdown(self, detail: DayLateness) -> str:
        """The day's late records per lateness bucket, late within lateness and dropped
        apart, with a bar scaled to the largest bucket."""
        largest = max((w + d for _, w, d in detail.histogram), default=0)
        lines = ["| lateness | late within lateness | dropped | |", "|---|---:|---:|---|"]
        for label, within, dropped in detail.histogram:
            bar = "█" * round(BAR_WIDTH * (within + dropped) / largest) if largest else ""
            lines.append(f"| {label} | {within} | {dropped} | {f'`{bar}`' if bar else ''} |")
        return "\n".join(lines)

    def sample_markdown(self, detail: DayLateness) -> str:
        """The day's latest late records: what arrived, when, behind which watermark, and the
        window it was late for (dropped: the window it missed)."""
        lines = ["| key | event time | arrived | watermark | late by | window | fate |",
                 "|---|---|---|---|---:|---|---|"]
        for r in detail.sample:
            window = f"{_clock(r['window_start_ms'])}-{_clock(r['window_end_ms'])}"
            fate = "dropped" if r["fate"] == "dropped_late" else "late within lateness"
            lines.append(
                f"| {r['key']} | {_time(r['event_time_ms'])} | {_time(r['ingest_time_ms'])} | "
                f"{_time(r['watermark_ms'])} | {self.duration_text(r['lateness_ms'])} | "
                f"{window} | {fate} |")
        return "\n".join(lines)

    def finality_text(self, final: int, final_at_ms: int) -> str:
        """Whether the day's numbers can still change: a day is final once the watermark has
        passed its last window's end plus allowed lateness (then the finality schedule
        computes it once more, and never again)."""
        if final:
            return f"final: the watermark passed {_time(final_at_ms)} (last window + lateness)"
        return (f"provisional: late records may still change it until the watermark passes "
                f"{_time(final_at_ms)}")

    # -- descriptions ------------------------------------------------------------------------

    def _stream_descriptions(self, stream: Stream) -> dict[str, str]:
        name = stream.name
        described = f" ({stream.spec.description})" if stream.spec.description else ""
        return {
            LANDING_FILES: f"JSON-lines files of stream {name}{described} below "
                           "<landing>/<producer>/, as collectors write them. Materialising it "
                           "runs the seeded demo generator; in production the landing sensor "
                           "notices new files instead.",
            TOPICS: f"Kafka {stream.origin}{described}: written by producers; the landing "
                    "sensor starts an ingest when their latest offsets are ahead of what the "
                    "arrival log holds.",
            tables.ARRIVAL_LOG: f"Bronze of stream {name}: every good record with its "
                                "ingest_time, arrival_seq and the watermark in force at its "
                                "arrival. Append only; every pipeline reading the stream is a "
                                "pure function of it.",
            tables.QUARANTINE: f"Bad lines of stream {name} with the reason they never reached "
                               "an operator.",
            RESPONSES: "Every service answer (or final error) per arrival_seq, recorded so a "
                       "replay backfill reproduces the live run without the service.",
            ENRICHED: "Arrivals the service enriched: the record plus the profile it returned.",
            DEAD_LETTERS: "Arrivals whose calls all failed, with the error and attempt count; "
                          "they never stop the job.",
        }

    def _windowed_descriptions(self, pipeline: Pipeline) -> dict[str, str]:
        about = f"{pipeline.spec.description} " if pipeline.spec.description else ""
        return {
            tables.WINDOW_RESULTS: f"{about}Latest pane per key and window: window, pane index, "
                                   "timing, last-pane flag and the pipeline's aggregates. "
                                   "Partitioned by day of window end.",
            tables.LATE_RECORDS: "Records that missed a window past allowed lateness: one row "
                                 "per (record, window), with the watermark that made them "
                                 "late.",
            tables.LATE_DATA_METRICS: "Per day: on-time, late within lateness, dropped, "
                                      "quarantined, lateness percentiles (over the late "
                                      "records) and watermark lag. Each day's materialisation "
                                      "carries these as numbers the UI plots, a lateness "
                                      "histogram and a sample of the day's late records; the "
                                      "partitioned dropped_late_rate, quarantine_rate and "
                                      "watermark_lag checks judge each day.",
            tables.BATCH_METRICS: "One row per live micro-batch: its arrival range, panes, late "
                                  "rows and the late-data figures of the records it consumed. "
                                  "Written by the stream's live job (live_job, "
                                  "live_stream_job), which Dagster runs but does not "
                                  "materialise as an asset; live_stream_job records each batch "
                                  "as an observation of late_data_metrics as it is written.",
            tables.WINDOW_ASSIGNMENTS: "Every (record, window) with its fate (on time, late "
                                       "within lateness, dropped): the pipeline's windows are "
                                       "assigned per key by the operator library, and its "
                                       "late-data metrics are computed from it. Written with "
                                       "the windowed tables by backfills and the live job.",
        }

    def _process_descriptions(self, pipeline: Pipeline) -> dict[str, str]:
        spec = pipeline.spec
        about = f"{spec.description} " if spec.description else ""
        return {
            tables.OUTPUT: f"{about}The rows {spec.process} emits, with the key it ran for and "
                           "the row's number among that key's rows (emission). Partitioned by "
                           f"the day of {spec.day_column}.",
            tables.LATE_RECORDS: "Records that arrived at or behind the watermark (they reached "
                                 "the process function too, which saw ctx.is_late). "
                                 "Partitioned by the day of their event time.",
        }


DEFAULT_TRANSLATOR = PlatformTranslator()
"""The translator of every builder, job and schedule not given one."""
