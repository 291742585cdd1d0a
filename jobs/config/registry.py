"""The platform's pipelines and streams: two folders of descriptions, read and checked at once.

A pipeline is the unit a user adds: one file in ``PLATFORM_PIPELINES`` (default: the project's
``pipelines/`` folder), its name the file's stem. A stream is the unit that is ingested once:
one file in ``PLATFORM_STREAMS`` (default ``streams/``). Adding a file adds a pipeline; nothing
else is edited. Every pipeline names the stream it reads (``source: events``).

Everything that can be wrong with the folders is refused here, before Spark starts and before
anything is written, in one line naming the file: a name that is not a lowercase identifier,
two names that differ only in case, a description that does not parse (``file:line:col``) or
does not validate (the setting), a pipeline naming an unknown stream or declaring its own
watermark strategy, a pipeline the Spark runtimes cannot run, an empty or missing folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from jobs import tables
from jobs.config.errors import SettingsError
from jobs.config.streams import STREAM_TABLES, Stream, parse_stream
from jobs.runtime import UnsupportedPipeline, check_runnable
from jobs.store import storage
from operators.pipeline import PipelineConfigError, PipelineSpec, parse_pipeline, read_description

if TYPE_CHECKING:
    from jobs.config.settings import PlatformSettings

DESCRIPTION_SUFFIXES = (".yaml", ".yml", ".json")
NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
"""A pipeline's or stream's name: it names folders, Delta tables and Dagster asset keys."""
PIPELINE_TABLES = (tables.WINDOW_RESULTS, tables.OUTPUT, tables.LATE_RECORDS,
                   tables.LATE_DATA_METRICS,
                   tables.BATCH_METRICS, tables.WINDOW_ASSIGNMENTS)


def user_modules(spec: PipelineSpec) -> list[str]:
    """The modules of the user code a pipeline names (its aggregates' or its process
    function's ``module:Class``)."""
    modules = {a.fn.partition(":")[0] for a in spec.aggregates if a.is_user_defined}
    if spec.process is not None:
        modules.add(spec.process.partition(":")[0])
    return sorted(modules)


def code_fingerprints(spec: PipelineSpec, where: str = "pipeline") -> dict[str, str]:
    """Module -> digest of its source file, for the user code the pipeline names, unless the
    description declares a ``version`` label (which then stands for that code). A module that
    cannot be found is refused here, naming ``where``, before anything is written."""
    if spec.version is not None:
        return {}
    found = {}
    for module in user_modules(spec):
        try:
            origin = getattr(importlib.util.find_spec(module), "origin", None)
        except (ImportError, ValueError) as error:
            raise SettingsError(f"{where}: cannot import {module!r} ({error})") from None
        if not origin or not Path(origin).is_file():
            raise SettingsError(f"{where}: cannot import {module!r}: no such module on this "
                                "machine's Python path (install it, or put it on PYTHONPATH)")
        found[module] = hashlib.sha256(Path(origin).read_bytes()).hexdigest()[:16]
    return found


def version_of(spec: PipelineSpec, code: dict[str, str] | None = None) -> str:
    """A pipeline's version: a digest of what its rows depend on: its description without the
    words of ``description``, and the source of the user code it names (``code``, from
    :func:`code_fingerprints`); equal descriptions and code, equal versions."""
    text = repr(replace(spec, description=None))
    if code:
        text += "\n" + json.dumps(sorted(code.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Pipeline:
    """One version of one pipeline of the platform: its name, description, stream, version,
    and where its tables live (``<warehouse>/pipelines/<name>/versions/<version>/``; which
    version readers see is kept by jobs.lifecycle.versions)."""

    name: str
    spec: PipelineSpec
    stream: Stream
    path: str
    """The description file."""
    version: str
    """:func:`version_of` the description and the user code it names."""
    code: dict[str, str] = field(default_factory=dict)
    """The fingerprints the version covers (module -> digest of its source)."""
    recorded: bool = False
    """Rebuilt from its version record (jobs.lifecycle.versions), not read from its file now."""

    @property
    def settings(self) -> PlatformSettings:
        return self.stream.settings

    @property
    def time_zone(self) -> str:
        return self.settings.time_zone

    @property
    def root(self) -> str:
        """``<warehouse>/pipelines/<name>``: every version's tables and the version records."""
        return storage.join(self.settings.warehouse, "pipelines", self.name)

    @property
    def folder(self) -> str:
        """This version's tables: ``<root>/versions/<version>``."""
        return storage.join(self.root, "versions", self.version)

    def table_path(self, table: str) -> str:
        """A table this version reads or writes: its stream's arrival log and quarantine,
        or one of its own tables."""
        if table in STREAM_TABLES:
            return self.stream.table_path(table)
        if table not in PIPELINE_TABLES:
            raise ValueError(f"{table!r} is not a pipeline's table ({', '.join(PIPELINE_TABLES)})")
        return self.settings.table_path(storage.join("pipelines", self.name, "versions",
                                                     self.version, table))

    @property
    def main_table(self) -> str:
        """Its rows: ``window_results``, or a process pipeline's ``output``."""
        return tables.OUTPUT if self.spec.is_process else tables.WINDOW_RESULTS

    def tables(self) -> list[str]:
        """The tables this pipeline writes (the window assignments only for pipelines the
        operator library runs per key; a process pipeline's output and late records)."""
        if self.spec.is_process:
            return [tables.OUTPUT, tables.LATE_RECORDS, tables.BATCH_METRICS]
        names = [tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS,
                 tables.BATCH_METRICS]
        if not self.spec.is_standard_window:
            names.append(tables.WINDOW_ASSIGNMENTS)
        return names


@dataclass(frozen=True)
class Platform:
    """Every stream and pipeline, by name (each in name order)."""

    streams: dict[str, Stream]
    pipelines: dict[str, Pipeline]

    def pipelines_of(self, stream: str) -> list[Pipeline]:
        return [p for p in self.pipelines.values() if p.stream.name == stream]

    def select_pipelines(self, names: Sequence[str] | None, setting: str = "--pipeline"
                         ) -> list[Pipeline]:
        """The named pipelines (all when ``names`` is empty); an unknown one is refused with
        the names there are."""
        if not names:
            return list(self.pipelines.values())
        unknown = [n for n in names if n not in self.pipelines]
        if unknown:
            raise SettingsError(f"{setting} {unknown[0]}: no such pipeline in "
                                f"{self._pipelines_folder()}; there are: "
                                f"{', '.join(self.pipelines)}")
        return [self.pipelines[n] for n in dict.fromkeys(names)]

    def select_streams(self, names: Sequence[str] | None, setting: str = "--stream"
                       ) -> list[Stream]:
        if not names:
            return list(self.streams.values())
        unknown = [n for n in names if n not in self.streams]
        if unknown:
            raise SettingsError(f"{setting} {unknown[0]}: no such stream; there are: "
                                f"{', '.join(self.streams)}")
        return [self.streams[n] for n in dict.fromkeys(names)]

    def by_stream(self, pipelines: Iterable[Pipeline]) -> dict[Stream, list[Pipeline]]:
        """The pipelines grouped by the stream they read, streams in name order."""
        grouped: dict[str, list[Pipeline]] = {}
        for pipeline in pipelines:
            grouped.setdefault(pipeline.stream.name, []).append(pipeline)
        return {self.streams[name]: grouped[name] for name in sorted(grouped)}

    def _pipelines_folder(self) -> str:
        first = next(iter(self.pipelines.values()), None)
        return str(Path(first.path).parent) if first else "PLATFORM_PIPELINES"


def description_files(folder: str, setting: str, what: str) -> dict[str, Path]:
    """Name -> file of every description in ``folder``; the folder's problems and the files'
    names are refused here, naming ``setting`` or the file."""
    path = Path(folder)
    if not path.exists():
        raise SettingsError(f"{setting} ({folder}) does not exist: create it and put one "
                            f"{what} description (.yaml) in it per {what}")
    if not path.is_dir():
        raise SettingsError(f"{setting} ({folder}) is a file, not a folder of {what} "
                            "descriptions")
    files = sorted(f for f in path.iterdir()
                   if f.suffix in DESCRIPTION_SUFFIXES and not f.name.startswith("."))
    if not files:
        raise SettingsError(f"{setting} ({folder}) holds no {what} description (*.yaml, "
                            f"*.yml or *.json): add one per {what}")
    by_folded: dict[str, Path] = {}
    for file in files:
        other = by_folded.get(file.stem.lower())
        if other is not None:
            same = "the same name" if other.stem == file.stem else "names that differ only in case"
            raise SettingsError(f"{other} and {file}: two {what}s with {same}; a {what}'s "
                                "name is its file's name and names its tables, so it must be "
                                "unique (rename or remove one)")
        by_folded[file.stem.lower()] = file
    named: dict[str, Path] = {}
    for file in files:
        if not NAME.match(file.stem):
            raise SettingsError(
                f"{file}: {file.stem!r} is not a {what} name: the file's name is the {what}'s "
                "name and must be a lowercase identifier (a-z, 0-9 and _, not starting with a "
                f"digit), e.g. {_suggest(file.stem)}{file.suffix}")
        named[file.stem] = file
    return named


def _suggest(stem: str) -> str:
    name = re.sub(r"[^a-z0-9_]+", "_", stem.lower()).strip("_") or "pipeline"
    return f"_{name}" if name[0].isdigit() else name


def _read(file: Path):
    try:
        return read_description(file)
    except PipelineConfigError as error:
        message = str(error)
        raise SettingsError(message if str(file) in message else f"{file}: {message}") \
            from None


def load_streams(settings: PlatformSettings) -> dict[str, Stream]:
    streams = {}
    for name, file in description_files(settings.streams, "PLATFORM_STREAMS", "stream").items():
        try:
            spec = parse_stream(_read(file), str(file))
        except PipelineConfigError as error:
            raise SettingsError(str(error)) from None
        streams[name] = Stream(name, spec, str(file), settings)
    return streams


def load_pipeline_file(file: Path, streams: dict[str, Stream]) -> PipelineSpec:
    """One pipeline description, checked against the streams it may read."""
    return check_pipeline(_read(file), file, streams)


def pipeline_from_text(name: str, text: str, file: str, streams: dict[str, Stream],
                       version: str, code: dict[str, str]) -> Pipeline:
    """A version of a pipeline as recorded (jobs.lifecycle.versions): its description's text as it
    was when the version was first run, whatever the file says now."""
    import yaml

    spec = check_pipeline(yaml.safe_load(text), f"{file} (version {version})", streams)
    return Pipeline(name, spec, streams[spec.source], file, version, dict(code), recorded=True)


def check_pipeline(raw: object, file: Path | str, streams: dict[str, Stream]) -> PipelineSpec:
    """A pipeline description (parsed YAML), checked against the streams it may read; errors
    name ``file``."""
    if isinstance(raw, dict) and raw.get("watermark") is not None:
        source = raw.get("source")
        where = f" ({streams[source].path})" if source in streams else ""
        raise SettingsError(f"{file}: watermark: the watermark strategy belongs to the stream"
                            f"{where}, where ingest computes it once for every pipeline that "
                            "reads it; remove it from the pipeline")
    try:
        spec = parse_pipeline(raw)
    except PipelineConfigError as error:
        raise SettingsError(f"{file}: {error}") from None
    if spec.source is None:
        raise SettingsError(f"{file}: source is required: the stream this pipeline reads "
                            f"(one of: {', '.join(streams)})")
    if spec.source not in streams:
        raise SettingsError(f"{file}: source: no stream {spec.source!r} in PLATFORM_STREAMS "
                            f"({Path(next(iter(streams.values())).path).parent}); there are: "
                            f"{', '.join(streams)}")
    try:
        check_runnable(spec)
    except UnsupportedPipeline as error:
        raise SettingsError(f"{file}: {error}") from None
    return spec


def platform_of(settings: PlatformSettings) -> Platform:
    """Every stream and pipeline the settings' two folders describe, read and checked once for
    these settings (a changed folder is read again by :func:`load_platform`)."""
    return settings.derived("platform", lambda: load_platform(settings))


def load_platform(settings: PlatformSettings) -> Platform:
    """Read and check both folders; the first problem is one ``SettingsError`` naming it."""
    streams = load_streams(settings)
    pipelines = {}
    for name, file in description_files(settings.pipelines, "PLATFORM_PIPELINES",
                                        "pipeline").items():
        if name in streams:
            raise SettingsError(f"{file}: a pipeline may not have the name of a stream "
                                f"({streams[name].path}): Dagster groups both by name")
        spec = load_pipeline_file(file, streams)
        code = code_fingerprints(spec, str(file))
        pipelines[name] = Pipeline(name, spec, streams[spec.source], str(file),
                                   version_of(spec, code), code)
    return Platform(streams, pipelines)
