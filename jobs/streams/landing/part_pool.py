"""A batch's landing parts read and parsed in parallel: by threads of the ingest process where
the native scanner parses them, by worker processes off its interpreter lock otherwise.

In the live job ingest is a thread of the driver's Python process, the process that also plans
the stream's micro-batches: profiled at 120,000 events/s offered, ingest was the limit while a
quarter of the machine sat idle, its parse taking 5.2–5.7 s per 836,000 lines against 2.8 s
alone (benchmarks/history.md). :func:`~jobs.streams.landing.batch.read_part` is a pure function
of the part's bytes, the plan and the rules, so parts can be read anywhere: here each part goes
to a worker process and comes back as columns (its bytes, numpy arrays, Arrow arrays), and the
ingest process only orders and walks them (:func:`~jobs.streams.landing.batch.arrival_rows`).
The rows are the very ones an in-process read gives (tests/test_part_pool.py).

Where the native scanner is built (jobs.streams.landing.native_scan) a part's parse is
mostly native code that runs without the interpreter lock (the scan through ctypes, Arrow's
casts), so threads parse parts side by side in the ingest process and nothing travels:
offline, 800,000 of the benchmark's lines took 0.87-1.1 µs of CPU a line and 0.20 s of parse
against 1.29-1.87 µs and 0.37 s in two worker processes, whose pickling of every part's bytes
and columns cost what the parallel parse saved (benchmarks/history.md).
PLATFORM_INGEST_PARSE_WORKERS chooses (``auto``: threads with the scanner, processes without).

Worker processes are started with ``spawn`` (the driver holds a JVM gateway and threads, which
``fork`` would copy half-way), once per process and worker count, and only for a batch of at
least ``PLATFORM_INGEST_PROCESSES_MIN_BYTES``: a small batch is parsed faster than its parts
travel. A worker that dies (killed, out of memory) costs nothing but time: that batch is read
in the ingest process and the next one starts new workers (after three such stops in a row
the ingest process parses every batch itself, and says so); workers end with the process that
started them, even one that is killed.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pyarrow as pa

from jobs.streams.landing import native_scan
from jobs.streams.landing.batch import IngestRules, PartRead, read_part, read_parts_here
from jobs.streams.landing.folder import LandingFolder
from jobs.streams.landing.log import Plan

_pools: dict[int, ProcessPoolExecutor] = {}
_thread_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()
GIVE_UP_AFTER = 3
"""Worker pools that stop in a row before this process parses every batch itself (workers
that cannot start, say, as under a script without the ``__main__`` guard, would cost every
batch a failed start)."""
_broken_in_a_row = 0


def default_processes() -> int:
    """Worker processes when the setting is left to ``auto``: one per core this process may
    run on, at most four (a batch has a file per source partition and second; more workers
    wait for the ingest process to order what they parsed)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    return min(cores, 4)


def in_threads(setting: str, rules: IngestRules) -> bool:
    """Whether parse workers are threads of this process (PLATFORM_INGEST_PARSE_WORKERS:
    ``auto`` picks them where the native scanner parses, outside the interpreter lock)."""
    if setting != "auto":
        return setting == "threads"
    return rules.native_scan and native_scan.available()


def read_parts(landing: LandingFolder | Path, plan: Plan, rules: IngestRules,
               processes: int, progress: Callable[[str], None] = print,
               threads: bool = False) -> list[PartRead]:
    """Every part of the plan read as :func:`read_part` reads it, in plan order, by
    ``processes`` workers: threads of this process with ``threads``, worker processes
    otherwise (in the calling thread when 0, when the plan has one part, or when worker
    processes stopped :data:`GIVE_UP_AFTER` times in a row)."""
    if processes <= 0 or len(plan.files) < 2:
        return read_parts_here(landing, plan, rules)
    if threads:  # a part's error is raised as reading it here raises it
        return list(_thread_pool(processes).map(
            lambda part: read_part(landing, plan, part, rules), plan.files))
    if _broken_in_a_row >= GIVE_UP_AFTER:
        return read_parts_here(landing, plan, rules)
    pool = _pool(processes)
    # what keeps workers from starting at all is raised by the submission (a process still
    # importing its main module, as a worker under an unguarded script is: it must stop
    # there, not ingest); only what the parts' results raise falls back below
    try:
        futures = [pool.submit(_read_for_shipping, landing, plan, part, rules)
                   for part in plan.files]
    except BrokenProcessPool as error:
        return _after_stop(processes, pool, plan, error, progress, landing, rules)
    try:
        reads = [future.result() for future in futures]
    except BrokenProcessPool as error:
        return _after_stop(processes, pool, plan, error, progress, landing, rules)
    except Exception:  # noqa: BLE001 - a part's error, or a result that could not travel back
        # read here: an error of the part itself is raised again, with its own traceback
        return read_parts_here(landing, plan, rules)
    _count_success()
    return reads


def _after_stop(processes: int, pool: ProcessPoolExecutor, plan: Plan, error: Exception,
                progress: Callable[[str], None], landing: LandingFolder | Path,
                rules: IngestRules) -> list[PartRead]:
    """The batch read here after a worker stopped, and said so."""
    stops = _count_stop(processes, pool)
    progress(f"ingest: a worker process parsing landing files stopped ({error}); batch "
             f"{plan.batch_id} is parsed in the ingest process"
             + (f"; after {GIVE_UP_AFTER} such stops in a row every later batch is too "
                "(a script that starts ingest needs the `if __name__ == \"__main__\":` "
                "guard for worker processes; PLATFORM_INGEST_PROCESSES=0 parses in the "
                "ingest process without trying)" if stops >= GIVE_UP_AFTER else ""))
    return read_parts_here(landing, plan, rules)


def _read_for_shipping(landing: LandingFolder | Path, plan: Plan, part, rules: IngestRules
                       ) -> PartRead:
    """:func:`read_part` in a worker, its keys and values made Arrow columns there and the
    fields the ingest process does not read left out: a list costs it a Python object per
    line to unpickle (what the workers are there to take off it)."""
    read = read_part(landing, plan, part, rules)
    parsed = read.parsed
    if isinstance(parsed.keys, list):
        parsed.keys = pa.array(parsed.keys, pa.string())
    parsed.values = parsed.value_column()
    # the ingest clock's stamps were read here; the driver reads only a punctuation
    parsed.extras = {name: column for name, column in parsed.extras.items()
                     if name == rules.punctuation_field}
    return read


def _pool(processes: int) -> ProcessPoolExecutor:
    with _lock:
        pool = _pools.get(processes)
        if pool is None:
            pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_end_with_parent)
            _pools[processes] = pool
        return pool


def _thread_pool(threads: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _thread_pools.get(threads)
        if pool is None:
            pool = ThreadPoolExecutor(threads, thread_name_prefix="ingest-parse")
            _thread_pools[threads] = pool
        return pool


def _end_with_parent() -> None:
    """A worker ends when the process that started it ends: one that is SIGKILLed cannot
    stop its workers, and no end of file would tell them (each worker holds the task queue's
    write end too), so they would wait for tasks for ever."""
    # a terminal's Ctrl-C reaches the whole process group: the ingest process decides when
    # to stop, and its workers end with it (SIGTERM stays: the pool stops workers with it)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait_for_parent() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=wait_for_parent, name="end-with-parent", daemon=True).start()


def _count_stop(processes: int, pool: ProcessPoolExecutor) -> int:
    """Drop a pool whose worker stopped; the stops in a row so far (a pool that fails the
    batches of several streams at once counts once)."""
    global _broken_in_a_row
    with _lock:
        if _pools.get(processes) is pool:
            del _pools[processes]
            _broken_in_a_row += 1
        stops = _broken_in_a_row
    pool.shutdown(wait=False, cancel_futures=True)
    return stops


def _count_success() -> None:
    global _broken_in_a_row
    with _lock:
        _broken_in_a_row = 0


@atexit.register
def shutdown() -> None:
    """Stop every worker, process or thread (at exit, and for tests that count processes)."""
    with _lock:
        pools: list[ProcessPoolExecutor | ThreadPoolExecutor] = [*_pools.values(),
                                                                 *_thread_pools.values()]
        _pools.clear()
        _thread_pools.clear()
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)
