"""The live process's Pipes messages reach Dagster whole, however the writer's lines are cut
by the moments the reader looks at the file."""

import json
import time

from dagster import OpExecutionContext, PipesEnvContextInjector, job, op, open_pipes_session
from dagster_pipes import (
    PIPES_PROTOCOL_VERSION,
    PIPES_PROTOCOL_VERSION_FIELD,
    PipesDefaultMessageWriter,
    PipesMappingParamsLoader,
)

from platform_defs.pipes_messages import WholeLineTempFileMessageReader

# a stopped stream's report: long enough that a reader can catch it half written
REPORTS = [{"kind": "stopped", "batch": n, "days": {f"2026-01-{day:02d}": "x" * 200
                                                    for day in range(1, 29)}}
           for n in range(3)]
PAUSE_SECONDS = 0.3  # far longer than the reader's poll, so it sees each part line


def _line(payload: dict) -> str:
    return json.dumps({PIPES_PROTOCOL_VERSION_FIELD: PIPES_PROTOCOL_VERSION,
                       "method": "report_custom_message",
                       "params": {"payload": payload}}) + "\n"


def _write_in_pieces(context: OpExecutionContext, lines: list[str], cut: int) -> list:
    """What a writer in another process does when its lines reach the file in two writes:
    the reader polls while only the first part is there."""
    with open_pipes_session(context=context, context_injector=PipesEnvContextInjector(),
                            message_reader=WholeLineTempFileMessageReader()) as session:
        params = PipesMappingParamsLoader(session.get_bootstrap_env_vars())
        path = params.load_messages_params()[PipesDefaultMessageWriter.FILE_PATH_KEY]
        with open(path, "a", encoding="utf-8") as messages:
            for line in lines:
                for piece in (line[:cut], line[cut:]):
                    messages.write(piece)
                    messages.flush()
                    time.sleep(PAUSE_SECONDS)
    return list(session.get_custom_messages())


@op
def messages_written_in_halves(context: OpExecutionContext) -> list:
    return _write_in_pieces(context, [_line(report) for report in REPORTS], cut=1881)


@op
def a_message_cut_off(context: OpExecutionContext) -> list:
    return _write_in_pieces(context, [_line(REPORTS[0])[:1000]], cut=500)


@job
def halves_job():
    messages_written_in_halves()


@job
def cut_off_job():
    a_message_cut_off()


def test_a_message_read_while_half_written_arrives_whole_and_so_do_the_later_ones():
    result = halves_job.execute_in_process()
    assert result.success
    assert result.output_for_node("messages_written_in_halves") == REPORTS


def test_a_message_the_process_never_finished_fails_the_step_and_says_so():
    result = cut_off_job.execute_in_process(raise_on_error=False)
    assert not result.success
    failure = result.failure_data_for_node("a_message_cut_off").error
    text = str(failure.to_string())
    assert "could not all be read" in text
    assert "last Pipes message was cut off after 1000 characters" in text
