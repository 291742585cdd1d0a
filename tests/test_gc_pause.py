"""The cycle collector paused around ingest's allocations (jobs.streams.landing.gc_pause) comes
back on when the last block ends, and stays off when someone else had turned it off."""

from __future__ import annotations

import gc
import threading

from jobs.streams.landing.gc_pause import cycle_collector_paused


def test_paused_inside_and_on_again_after_nested_and_concurrent_blocks():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other_thread() -> None:
        with cycle_collector_paused():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=other_thread)
    with cycle_collector_paused():
        assert not gc.isenabled()
        worker.start()
        assert inside.wait(10)
        with cycle_collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled(), "the other thread's block is still running"
    release.set()
    worker.join(10)
    assert gc.isenabled()


def test_an_error_inside_still_turns_it_back_on():
    try:
        with cycle_collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_left_off_when_it_was_off_before():
    gc.disable()
    try:
        with cycle_collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
