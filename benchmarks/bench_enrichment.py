"""Benchmark: async enrichment vs a synchronous per-record loop, against the real service.

Why: the point of the async operator is throughput close to ``capacity / latency`` while one
event loop does all the work. This prints, for each capacity, the throughput, its share of
that ideal, and call-latency percentiles (the service's latency plus client overhead), next to
a plain loop that calls the same service one record at a time over one kept-alive
``http.client`` connection (ideal: ``1 / latency``).

The service runs in a separate process (``python -m services.enrichment_service``) so client
and server do not share a GIL, as in production. Not a test: nothing is asserted; the target is
>= 80 % of ideal at capacity 100 with 20 ms latency.

    .venv/bin/python benchmarks/bench_enrichment.py            # about a minute
    .venv/bin/python benchmarks/bench_enrichment.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from operators.async_io import (  # noqa: E402
    AsyncEnrichConfig,
    OutputMode,
    enrich_batch,
    new_event_loop,
)
from services.enrichment_client import user_lookup  # noqa: E402


@dataclass
class Row:
    name: str
    capacity: int
    records: int
    seconds: float
    ideal_per_s: float
    latencies_ms: list[float]
    server_max_in_flight: int
    dead_letters: int = 0

    @property
    def per_s(self) -> float:
        return self.records / self.seconds

    def percentile(self, q: float) -> float:
        if len(self.latencies_ms) < 2:
            return self.latencies_ms[0] if self.latencies_ms else float("nan")
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[int(q) - 1]


@contextmanager
def service_process(latency_ms: float) -> Iterator[str]:
    """Start the service in its own process on a free port; yield its base URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.enrichment_service",
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        if not base_url.startswith("http://"):
            raise RuntimeError(f"service did not start (printed {base_url!r})")
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _http(base_url: str, method: str, path: str) -> dict[str, Any]:
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, path)
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def _records(n: int, tick_every: int = 1_000) -> list[dict[str, Any]]:
    """Records in arrival order; the watermark ticks every ``tick_every`` records."""
    return [
        {
            "arrival_seq": i,
            "watermark_ms": (i // tick_every) * 1_000,
            "key": f"user-{i % 10_000:04d}",
        }
        for i in range(n)
    ]


def bench_async(
    base_url: str, capacity: int, n: int, latency_ms: float, output: str, tick_every: int
) -> Row:
    lookup = user_lookup(base_url)
    latencies: list[float] = []

    async def timed_call(record: dict[str, Any], session: Any) -> Any:
        started = time.perf_counter()
        try:
            return await lookup(record, session)
        finally:
            latencies.append((time.perf_counter() - started) * 1000)

    config = AsyncEnrichConfig(
        capacity=capacity, timeout_ms=5_000, output=OutputMode(output), record=True
    )
    enrich_batch(_records(min(capacity, n)), timed_call, config)  # warm-up: open connections
    latencies.clear()
    _http(base_url, "POST", "/stats/reset")
    started = time.perf_counter()
    result = enrich_batch(_records(n, tick_every), timed_call, config)
    seconds = time.perf_counter() - started
    stats = _http(base_url, "GET", "/stats")
    return Row(
        name=f"async {output}",
        capacity=capacity,
        records=n,
        seconds=seconds,
        ideal_per_s=capacity * 1000 / latency_ms,
        latencies_ms=latencies,
        server_max_in_flight=stats["max_in_flight"],
        dead_letters=len(result.dead_letters),
    )


def bench_raw_aiohttp(base_url: str, capacity: int, n: int, latency_ms: float) -> Row:
    """Reference ceiling: ``capacity`` bare aiohttp workers, no operator at all.

    The gap between this row and the operator's row is the operator's own cost; the gap
    between this row and the ideal is the HTTP client's and the machine's.
    """
    import aiohttp

    latencies: list[float] = []

    async def run(count: int) -> None:
        connector = aiohttp.TCPConnector(limit=capacity)
        async with aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar()
        ) as session:
            indices = iter(range(count))

            async def worker() -> None:
                for i in indices:
                    started = time.perf_counter()
                    async with session.get(f"{base_url}/users/user-{i % 10_000:04d}") as resp:
                        json.loads(await resp.read())
                    latencies.append((time.perf_counter() - started) * 1000)

            await asyncio.gather(*(worker() for _ in range(capacity)))

    # the operator's own event loop (uvloop when installed), so the gap to the operator's row
    # is the operator's cost alone
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(run(capacity))  # warm-up
    latencies.clear()
    _http(base_url, "POST", "/stats/reset")
    started = time.perf_counter()
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(run(n))
    seconds = time.perf_counter() - started
    stats = _http(base_url, "GET", "/stats")
    return Row(
        "raw aiohttp",
        capacity,
        n,
        seconds,
        capacity * 1000 / latency_ms,
        latencies,
        stats["max_in_flight"],
    )


def bench_sync_loop(base_url: str, n: int, latency_ms: float) -> Row:
    """The baseline: one request after the other on one kept-alive connection."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    latencies: list[float] = []
    _http(base_url, "POST", "/stats/reset")
    started = time.perf_counter()
    dead = 0
    for record in _records(n):
        call_started = time.perf_counter()
        connection.request("GET", f"/users/{record['key']}")
        response = connection.getresponse()
        body = response.read()
        if response.status == 200:
            json.loads(body)
        else:
            dead += 1
        latencies.append((time.perf_counter() - call_started) * 1000)
    seconds = time.perf_counter() - started
    connection.close()
    stats = _http(base_url, "GET", "/stats")
    return Row(
        "sync loop", 1, n, seconds, 1000 / latency_ms, latencies, stats["max_in_flight"], dead
    )


def print_table(rows: list[Row], latency_ms: float) -> None:
    print(f"\nservice latency {latency_ms:g} ms; ideal = capacity / latency")
    header = (
        f"{'mode':<17}{'cap':>5}{'records':>9}{'secs':>8}{'rec/s':>10}{'ideal':>9}"
        f"{'%ideal':>8}{'p50ms':>8}{'p95ms':>8}{'p99ms':>8}{'srv max':>9}{'dead':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.name:<17}{r.capacity:>5}{r.records:>9}{r.seconds:>8.2f}{r.per_s:>10.1f}"
            f"{r.ideal_per_s:>9.0f}{100 * r.per_s / r.ideal_per_s:>7.1f}%"
            f"{r.percentile(50):>8.1f}{r.percentile(95):>8.1f}{r.percentile(99):>8.1f}"
            f"{r.server_max_in_flight:>9}{r.dead_letters:>6}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer records (a few seconds)")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--capacities", default="1,10,50,100")
    parser.add_argument(
        "--outputs", default="ordered,unordered", help="comma-separated output modes to run"
    )
    parser.add_argument(
        "--tick-every",
        type=int,
        default=1_000,
        help="records between watermark ticks (unordered cannot cross them)",
    )
    parser.add_argument(
        "--seconds-per-run",
        type=float,
        default=None,
        help="target duration of each run at ideal speed",
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    seconds = args.seconds_per_run or (0.5 if args.quick else 2.0)
    capacities = [int(c) for c in args.capacities.split(",")]
    outputs = [o.strip() for o in args.outputs.split(",") if o.strip()]
    rows: list[Row] = []
    with service_process(args.latency_ms) as base_url:
        sync_n = max(10, int(seconds * 1000 / args.latency_ms))
        rows.append(bench_sync_loop(base_url, sync_n, args.latency_ms))
        for capacity in capacities:
            n = max(capacity * 2, int(seconds * capacity * 1000 / args.latency_ms))
            for output in outputs:
                rows.append(
                    bench_async(base_url, capacity, n, args.latency_ms, output, args.tick_every)
                )
        top = max(capacities)
        rows.append(
            bench_raw_aiohttp(
                base_url,
                top,
                max(top * 2, int(seconds * top * 1000 / args.latency_ms)),
                args.latency_ms,
            )
        )
    print_table(rows, args.latency_ms)
    print(
        f"{os.cpu_count()} CPUs; 1-min load average before/after: {load_before:.2f} / "
        f"{os.getloadavg()[0]:.2f} (other processes compete with client and service)"
    )


if __name__ == "__main__":
    main()
