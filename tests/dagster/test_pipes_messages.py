"""The live process's Pipes messages reach Dagster whole, however the writer's lines are cut
by the moments the reader looks at the file."""

import json
import time
from threading import Event

from dagster import OpExecutionContext, PipesEnvContextInjector, job, op, open_pipes_session
from dagster_pipes import (
    PIPES_PROTOCOL_VERSION,
    PIPES_PROTOCOL_VERSION_FIELD,
    PipesDefaultMessageWriter,
    PipesMappingParamsLoader,
)

from platform_defs.pipes_messages import (
    PipesMessagesLost,
    WholeLineTempFileMessageReader,
    whole_lines,
)

# a stopped stream's report: long enough that a reader can catch it half written
REPORTS = [{"kind": "stopped", "batch": n, "days": {f"2026-01-{day:02d}": "x" * 200
                                                    for day in range(1, 29)}}
           for n in range(3)]
PAUSE_SECONDS = 0.3  # far longer than the reader's poll, so it sees each part line


def _line(payload: dict) -> str:
    return json.dumps({PIPES_PROTOCOL_VERSION_FIELD: PIPES_PROTOCOL_VERSION,
                       "method": "report_custom_message",
                       "params": {"payload": payload}}) + "\n"


def _write_in_pieces(context: OpExecutionContext, lines: list[str], cut: int,
                     keep_going: bool = False) -> dict:
    """What a writer in another process does when its lines reach the file in two writes:
    the reader polls while only the first part is there. The messages handled, and what was
    lost when ``keep_going`` (as ``live_stream_pipes`` does; else the step fails)."""
    lost = None
    try:
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
    except PipesMessagesLost as failure:
        if not keep_going:
            raise
        lost = str(failure)
    return {"messages": list(session.get_custom_messages()), "lost": lost}


@op
def messages_written_in_halves(context: OpExecutionContext) -> dict:
    return _write_in_pieces(context, [_line(report) for report in REPORTS], cut=1881)


@op
def a_line_that_is_no_message(context: OpExecutionContext) -> dict:
    lines = [_line(REPORTS[0]), "this is no message\n", _line(REPORTS[1])]
    return _write_in_pieces(context, lines, cut=10, keep_going=True)


@op
def a_message_cut_off(context: OpExecutionContext) -> dict:
    return _write_in_pieces(context, [_line(REPORTS[0])[:1000]], cut=500)


@job
def halves_job():
    messages_written_in_halves()


@job
def no_message_job():
    a_line_that_is_no_message()


@job
def cut_off_job():
    a_message_cut_off()


def test_a_message_read_while_half_written_arrives_whole_and_so_do_the_later_ones():
    result = halves_job.execute_in_process()
    assert result.success
    assert result.output_for_node("messages_written_in_halves") == {"messages": REPORTS,
                                                                     "lost": None}


def test_a_line_that_is_no_message_loses_only_itself_and_is_named():
    read = no_message_job.execute_in_process().output_for_node("a_line_that_is_no_message")
    assert read["messages"] == REPORTS[:2]
    assert read["lost"].startswith("1 of the external process's Pipes messages could not be "
                                   "read: line 'this is no message\\n'")


def test_a_message_the_process_never_finished_fails_the_step_and_says_so():
    result = cut_off_job.execute_in_process(raise_on_error=False)
    assert not result.success
    failure = result.failure_data_for_node("a_message_cut_off").error
    text = str(failure.to_string())
    assert "PipesMessagesLost" in text
    assert "last Pipes message was cut off after 1000 characters" in text


class _ClosedWhileLooking(Event):
    """The session closing while the reader waits after reading to the end: the writer's
    last line lands, then ``closed`` is set, before the reader looks at ``closed``."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def is_set(self) -> bool:
        if not super().is_set():
            with open(self.path, "a", encoding="utf-8") as messages:
                messages.write(_line(REPORTS[2]))
            self.set()
        return True


def test_the_last_line_written_as_the_session_closes_is_read(tmp_path):
    path = tmp_path / "messages"
    path.write_text(_line(REPORTS[0]), encoding="utf-8")
    read = [json.loads(line)["params"]["payload"]
            for line in whole_lines(str(path), _ClosedWhileLooking(str(path)))]
    assert read == [REPORTS[0], REPORTS[2]]
