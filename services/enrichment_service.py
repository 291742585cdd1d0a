"""A real HTTP enrichment service (aiohttp) with a deterministic catalogue and injectable faults.

Why a real server rather than a mock: what async enrichment must get right (concurrency limits,
timeouts, retries, connection reuse) only shows over real sockets. The server counts what it
sees, including the highest number of requests it served at once, so tests assert on
server-side facts instead of wall-clock guesses.

Endpoints:
- ``GET /users/{key}``: the user's profile (JSON), or 404 with a JSON error for unknown keys;
- ``GET /stats``: request counters, current and maximum concurrency, counts by status and key;
- ``POST /stats/reset``: zero the counters (requests still running stay counted in flight);
- ``GET /health``: liveness, never authenticated, never counted.

Faults, all drawn from one RNG seeded by ``seed`` so a run is reproducible for the same
request order: fixed latency plus uniform jitter, an error rate answered with 500/503, a slow
rate answered after ``slow_ms`` (to trip client timeouts), a garbage rate answered 200 with a
body that is not a profile (cut-off JSON, HTML from a proxy, a JSON list or number), and
``fail_first`` (a key's first N requests answer 503, for retry tests). With a bearer token
configured (read from an environment variable, never logged or echoed) every endpoint but
``/health`` requires it.

Run: ``python -m services.enrichment_service --port 8765 --latency-ms 20``; from tests:
``with running_service(latency_ms=5) as svc: svc.base_url``.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
import random
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from services.catalogue import user_profile

DEFAULT_TOKEN_ENV = "ENRICHMENT_SERVICE_TOKEN"


@dataclass(frozen=True)
class ServiceConfig:
    """How the service behaves. Rates are probabilities in [0, 1]; times are milliseconds."""

    host: str = "127.0.0.1"
    port: int = 0
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    error_rate: float = 0.0
    error_statuses: tuple[int, ...] = (500, 503)
    slow_rate: float = 0.0
    slow_ms: float = 2_000.0
    garbage_rate: float = 0.0
    seed: int = 0
    users: int = 10_000
    catalogue_version: int = 1
    fail_first: Mapping[str, int] = field(default_factory=dict)
    token_env: str = DEFAULT_TOKEN_ENV
    token: str | None = field(default=None, repr=False)
    """Explicit token (tests); when ``None`` it is read from ``token_env`` at start-up."""

    def __post_init__(self) -> None:
        for name in ("error_rate", "slow_rate", "garbage_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.latency_ms < 0 or self.jitter_ms < 0 or self.slow_ms < 0:
            raise ValueError("latencies must be >= 0 ms")

    def resolved_token(self) -> str | None:
        return self.token if self.token is not None else (os.environ.get(self.token_env) or None)


class ServiceStats:
    """Server-side counters; only touched from the server's event loop."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.max_in_flight = self.in_flight
        self.slow_responses = 0
        self.injected_errors = 0
        self.garbage_responses = 0
        self.unauthorized = 0
        self.by_status: Counter[int] = Counter()
        self.by_key: Counter[str] = Counter()

    def begin(self, key: str) -> int:
        """Count a request; return how many requests this key has had (this one included)."""
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.by_key[key] += 1
        return self.by_key[key]

    def end(self, status: int) -> None:
        self.in_flight -= 1
        self.by_status[status] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "slow_responses": self.slow_responses,
            "injected_errors": self.injected_errors,
            "garbage_responses": self.garbage_responses,
            "unauthorized": self.unauthorized,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "by_key": dict(sorted(self.by_key.items())),
        }


GARBAGE: tuple[tuple[bytes, str], ...] = (
    (b'{"key": "user-0001", "segm', "application/json"),
    (b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    (b'["not", "a", "profile"]', "application/json"),
    (b"42", "application/json"),
)
"""Bodies a broken service or a proxy in front of it answers with status 200."""

STATS_KEY = web.AppKey("stats", ServiceStats)
CONFIG_KEY = web.AppKey("config", ServiceConfig)
RNG_KEY = web.AppKey("rng", random.Random)
TOKEN_KEY = web.AppKey("token", str)


def _authorized(request: web.Request) -> bool:
    token = request.app[TOKEN_KEY]
    if not token:
        return True
    supplied = request.headers.get("Authorization", "")
    return hmac.compare_digest(supplied.encode(), f"Bearer {token}".encode())


def _unauthorized() -> web.Response:
    return web.json_response(
        {"error": "unauthorized"}, status=401, headers={"WWW-Authenticate": "Bearer"}
    )


async def _get_user(request: web.Request) -> web.Response:
    stats = request.app[STATS_KEY]
    config = request.app[CONFIG_KEY]
    rng = request.app[RNG_KEY]
    key = request.match_info["key"]
    nth = stats.begin(key)
    status = 500
    try:
        if not _authorized(request):
            stats.unauthorized += 1
            status = 401
            return _unauthorized()
        # Draw all four numbers for every request, so one fault setting never shifts another.
        jitter, error_draw, slow_draw = rng.random(), rng.random(), rng.random()
        garbage_draw = rng.random()
        slow = slow_draw < config.slow_rate
        delay_ms = config.slow_ms if slow else config.latency_ms + jitter * config.jitter_ms
        if slow:
            stats.slow_responses += 1
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
        if nth <= config.fail_first.get(key, 0):
            stats.injected_errors += 1
            status = 503
            return web.json_response({"error": "injected failure", "key": key}, status=status)
        if error_draw < config.error_rate:
            stats.injected_errors += 1
            status = config.error_statuses[int(error_draw * 1e9) % len(config.error_statuses)]
            return web.json_response({"error": "injected failure", "key": key}, status=status)
        if garbage_draw < config.garbage_rate:
            stats.garbage_responses += 1
            status = 200
            body, kind = GARBAGE[int(garbage_draw * 1e9) % len(GARBAGE)]
            return web.Response(body=body, status=200, content_type=kind)
        profile = user_profile(
            key, seed=config.seed, users=config.users, version=config.catalogue_version
        )
        if profile is None:
            status = 404
            return web.json_response({"error": "unknown user", "key": key}, status=status)
        status = 200
        return web.json_response(profile)
    finally:
        stats.end(status)


async def _get_stats(request: web.Request) -> web.Response:
    if not _authorized(request):
        return _unauthorized()
    return web.json_response(request.app[STATS_KEY].as_dict())


async def _reset_stats(request: web.Request) -> web.Response:
    if not _authorized(request):
        return _unauthorized()
    request.app[STATS_KEY].reset()
    return web.json_response({"reset": True})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def make_app(config: ServiceConfig) -> web.Application:
    """The aiohttp application; stats live on it as ``app[STATS_KEY]``."""
    app = web.Application()
    app[CONFIG_KEY] = config
    app[STATS_KEY] = ServiceStats()
    app[RNG_KEY] = random.Random(config.seed)
    app[TOKEN_KEY] = config.resolved_token() or ""
    app.router.add_get("/users/{key}", _get_user)
    app.router.add_get("/stats", _get_stats)
    app.router.add_post("/stats/reset", _reset_stats)
    app.router.add_get("/health", _health)
    return app


@dataclass
class RunningService:
    """A started service: where it listens and its live counters."""

    base_url: str
    config: ServiceConfig
    app: web.Application

    @property
    def stats(self) -> ServiceStats:
        return self.app[STATS_KEY]


@asynccontextmanager
async def serve(
    config: ServiceConfig | None = None, **overrides: Any
) -> AsyncIterator[RunningService]:
    """Run the service on the current event loop for the ``async with`` block.

    ``port=0`` (the default) binds an ephemeral port; the base URL says which. No access log:
    it would be noise in benchmarks, and headers (the token) must never reach a log.
    """
    config = replace(config or ServiceConfig(), **overrides)
    app = make_app(config)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield RunningService(base_url=f"http://{host}:{port}", config=config, app=app)
    finally:
        await runner.cleanup()


@contextmanager
def running_service(
    config: ServiceConfig | None = None, **overrides: Any
) -> Iterator[RunningService]:
    """Run the service in a background thread with its own event loop (for sync tests).

    The thread keeps the server independent of whatever loop the caller runs, including a
    caller that runs none or runs ``asyncio.run`` repeatedly.
    """
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        stop = asyncio.Event()
        holder["loop"], holder["stop"] = asyncio.get_running_loop(), stop
        try:
            async with serve(config, **overrides) as svc:
                holder["service"] = svc
                started.set()
                await stop.wait()
        except BaseException as error:  # surface start-up failures to the caller
            holder["error"] = error
            started.set()

    # asyncio.run, not a bare loop: on exit it cancels handlers still sleeping (slow responses
    # whose client gave up) instead of leaving them pending in a closed loop.
    thread = threading.Thread(
        target=asyncio.run, args=(main(),), name="enrichment-service", daemon=True
    )
    thread.start()
    if not started.wait(timeout=30):
        raise RuntimeError("enrichment service did not start within 30 s")
    if "error" in holder:
        thread.join(timeout=5)
        raise RuntimeError("enrichment service failed to start") from holder["error"]
    try:
        yield holder["service"]
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        thread.join(timeout=30)


def _parse_fail_first(values: list[str]) -> dict[str, int]:
    result = {}
    for item in values:
        key, _, count = item.partition("=")
        if not key or not count.isdigit():
            raise argparse.ArgumentTypeError(f"--fail-first expects KEY=N, got {item!r}")
        result[key] = int(count)
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m services.enrichment_service",
        description="Deterministic user-catalogue HTTP service with injectable latency/faults.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--error-rate", type=float, default=0.0, help="fraction answered 500/503")
    parser.add_argument(
        "--slow-rate", type=float, default=0.0, help="fraction answered after --slow-ms"
    )
    parser.add_argument("--slow-ms", type=float, default=2_000.0)
    parser.add_argument("--garbage-rate", type=float, default=0.0,
                        help="fraction answered 200 with a body that is not a profile")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--users", type=int, default=10_000, help="catalogue size: user-0000 .. user-(N-1)"
    )
    parser.add_argument("--catalogue-version", type=int, default=1)
    parser.add_argument(
        "--fail-first",
        action="append",
        default=[],
        metavar="KEY=N",
        help="answer the first N requests for KEY with 503 (repeatable)",
    )
    parser.add_argument(
        "--token-env",
        default=DEFAULT_TOKEN_ENV,
        help="environment variable holding the bearer token (unset: no auth)",
    )
    return parser


def config_from_args(argv: list[str] | None = None) -> ServiceConfig:
    args = build_parser().parse_args(argv)
    return ServiceConfig(
        host=args.host,
        port=args.port,
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter_ms,
        error_rate=args.error_rate,
        slow_rate=args.slow_rate,
        slow_ms=args.slow_ms,
        garbage_rate=args.garbage_rate,
        seed=args.seed,
        users=args.users,
        catalogue_version=args.catalogue_version,
        fail_first=_parse_fail_first(args.fail_first),
        token_env=args.token_env,
    )


async def _serve_forever(config: ServiceConfig) -> None:
    async with serve(config) as svc:
        auth = "bearer token required" if svc.app[TOKEN_KEY] else "no auth"
        # The first stdout line is the URL: scripts (the benchmark) read it to find the port.
        print(svc.base_url, flush=True)
        print(f"enrichment service listening ({auth}); Ctrl-C stops", file=sys.stderr, flush=True)
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    config = config_from_args(argv)
    with suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(config))


if __name__ == "__main__":
    main()
