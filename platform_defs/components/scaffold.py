"""``dg scaffold defs platform_defs.components.EventTimePipeline <name>``: a new pipeline.

Writes ``<PLATFORM_PIPELINES>/<name>.yaml`` from the options given (the stream it reads, the
window, the allowed lateness), after checking it exactly as every command checks a pipeline
(jobs.config.registry); nothing is written when the check fails. The pipeline is a file of the
pipelines folder, not a ``defs.yaml`` of its own (the one :class:`EventTimePipelines` instance
builds a group for every file), so the folder ``dg`` makes for the target is removed again.

    dg scaffold defs platform_defs.components.EventTimePipeline per_hour \
        --source events --window tumbling --size 1h --allowed-lateness 5m
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Literal

import dagster as dg
import yaml
from pydantic import BaseModel, Field

from jobs.config.errors import SettingsError
from jobs.config.registry import NAME, load_pipeline_file, platform_of
from platform_defs.resources import load_settings


class PipelineOptions(BaseModel):
    """What ``dg scaffold defs ... EventTimePipeline`` asks for (``--source``, ...)."""

    source: str = Field(default="", description="The stream it reads (default: the only one)")
    window: Literal["tumbling", "sliding", "session"] = "tumbling"
    size: str = Field(default="", description="Window size (tumbling, sliding; required)")
    slide: str = Field(default="", description="Slide (sliding; required)")
    gap: str = Field(default="", description="Inactivity gap (session; required)")
    allowed_lateness: str = Field(default="0", description="e.g. 30s")
    description: str = Field(default="", description="What the pipeline is for, in words")


WINDOW_OPTIONS = {"tumbling": ("size",), "sliding": ("size", "slide"), "session": ("gap",)}
"""The options each window kind takes, all of them required: nothing is guessed."""


def check_options(options: PipelineOptions) -> None:
    """Refuse, naming the option, one that does not belong to the window kind or one the kind
    needs and was not given (a scaffold never drops an option or fills one in silently)."""
    takes = WINDOW_OPTIONS[options.window]
    for name in ("size", "slide", "gap"):
        given = bool(getattr(options, name))
        if given and name not in takes:
            raise ValueError(f"--{name}: a {options.window} window has no {name} (its "
                             f"options: {', '.join('--' + t for t in takes)})")
        if not given and name in takes:
            raise ValueError(f"--{name}: a {options.window} window needs it (e.g. --{name} "
                             f"{'1m' if name != 'gap' else '5m'})")


def pipeline_text(options: PipelineOptions, source: str) -> str:
    """The description file: the window, the lateness and a count and sum of ``value``."""
    window: dict = {"type": options.window}
    if options.window in ("tumbling", "sliding"):
        window["size"] = options.size
    if options.window == "sliding":
        window["slide"] = options.slide
    if options.window == "session":
        window["gap"] = options.gap
    description = {"source": source}
    if options.description:
        description["description"] = options.description
    description.update({
        "window": window, "allowed_lateness": options.allowed_lateness,
        "aggregates": [{"name": "events", "fn": "count"},
                       {"name": "value_sum", "fn": "sum", "field": "value"}]})
    return ("# Scaffolded by `dg scaffold defs platform_defs.components.EventTimePipeline`; "
            "the format:\n# python -m operators.pipeline --json-schema, "
            "docs/streams-and-pipelines.md\n" + yaml.safe_dump(description, sort_keys=False))


class PipelineScaffolder(dg.Scaffolder[PipelineOptions]):
    @classmethod
    def get_scaffold_params(cls) -> type[PipelineOptions]:
        return PipelineOptions

    def scaffold(self, request: dg.ScaffoldRequest[PipelineOptions]) -> None:
        name = request.target_path.name
        if request.target_path.is_dir() and not any(request.target_path.iterdir()):
            request.target_path.rmdir()  # the file goes to the pipelines folder instead
        try:
            target, source = self._write(name, request.params)
        except (SettingsError, ValueError) as error:  # one line, as every command says it
            raise SystemExit(f"dg scaffold defs EventTimePipeline {name}: {error}; nothing "
                             "was written") from None
        print(f"Created pipeline {name}: {target} (stream {source}); it is in the definitions "
              "at their next load")

    @staticmethod
    def _write(name: str, options: PipelineOptions) -> tuple[Path, str]:
        if not NAME.match(name):
            raise ValueError(f"{name!r} is not a pipeline name: a lowercase identifier (a-z, "
                             "0-9 and _, not starting with a digit)")
        check_options(options)
        settings = load_settings()
        platform = platform_of(settings)
        source = options.source or (next(iter(platform.streams)) if len(platform.streams) == 1
                                    else "")
        if not source:
            raise ValueError(f"--source: give the stream it reads (one of "
                             f"{', '.join(platform.streams)})")
        target = Path(settings.pipelines) / f"{name}.yaml"
        if name in platform.pipelines or target.exists():
            raise ValueError(f"pipeline {name} exists already ({target})")
        with tempfile.TemporaryDirectory() as scratch:
            draft = Path(scratch) / target.name
            draft.write_text(pipeline_text(options, source), encoding="utf-8")
            try:
                load_pipeline_file(draft, platform.streams)  # the check every command makes
            except SettingsError as error:
                raise SettingsError(str(error).replace(str(draft), str(target))) from None
            shutil.copyfile(draft, target)
        return target, source


@dg.scaffold_with(PipelineScaffolder)
class EventTimePipeline:
    """A new pipeline of the pipelines folder (``dg scaffold defs`` target): a file named
    after it, reading a stream; every option can be edited in the file afterwards."""
