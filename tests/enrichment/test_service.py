"""The enrichment service itself: deterministic catalogue, 404s, auth, stats, CLI."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from services.catalogue import user_key, user_profile
from services.enrichment_service import config_from_args, running_service
from tests.enrichment.enrichment_helpers import fetch_stats


def _get(url: str, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_catalogue_is_deterministic_and_seeded() -> None:
    assert user_key(7) == "user-0007"
    profile = user_profile("user-0042")
    assert profile == user_profile("user-0042")
    assert set(profile) == {"key", "segment", "country", "signup_day", "tier", "catalogue_version"}
    assert [user_profile(user_key(i), seed=1) for i in range(20)] != [
        user_profile(user_key(i), seed=2) for i in range(20)
    ]
    assert user_profile("user-0042", users=10) is None
    assert user_profile("customer-1") is None


def test_version_changes_only_mutable_fields() -> None:
    v1 = [user_profile(user_key(i), version=1) for i in range(50)]
    v2 = [user_profile(user_key(i), version=2) for i in range(50)]
    assert [p["tier"] for p in v1] != [p["tier"] for p in v2]
    assert [(p["segment"], p["country"], p["signup_day"]) for p in v1] == [
        (p["segment"], p["country"], p["signup_day"]) for p in v2
    ]


def test_lookup_404_and_stats_over_http() -> None:
    with running_service(users=100) as svc:
        assert svc.base_url.startswith("http://127.0.0.1:")
        status, body = _get(f"{svc.base_url}/users/user-0003")
        assert status == 200 and body == user_profile("user-0003", users=100)
        status, body = _get(f"{svc.base_url}/users/user-0100")
        assert status == 404 and body["error"] == "unknown user"
        stats = fetch_stats(svc.base_url)
        assert stats["requests"] == 2
        assert stats["by_status"] == {"200": 1, "404": 1}
        assert stats["by_key"] == {"user-0003": 1, "user-0100": 1}
        assert stats["max_in_flight"] == 1 and stats["in_flight"] == 0
        request = urllib.request.Request(f"{svc.base_url}/stats/reset", method="POST")
        with urllib.request.urlopen(request, timeout=30):
            pass
        assert fetch_stats(svc.base_url)["requests"] == 0


def test_bearer_token_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENRICH_TEST_TOKEN", "s3cret-value")
    with running_service(token_env="ENRICH_TEST_TOKEN") as svc:
        assert "s3cret" not in repr(svc.config)
        status, body = _get(f"{svc.base_url}/users/user-0001")
        assert status == 401 and "s3cret" not in json.dumps(body)
        status, _ = _get(f"{svc.base_url}/users/user-0001", token="wrong")
        assert status == 401
        status, body = _get(f"{svc.base_url}/users/user-0001", token="s3cret-value")
        assert status == 200 and body["key"] == "user-0001"
        stats = fetch_stats(svc.base_url, token="s3cret-value")
        assert stats["unauthorized"] == 2 and "s3cret" not in json.dumps(stats)
        status, _ = _get(f"{svc.base_url}/health")
        assert status == 200


def test_injected_errors_and_fail_first() -> None:
    with running_service(error_rate=1.0, fail_first={"user-0001": 1}) as svc:
        status, _ = _get(f"{svc.base_url}/users/user-0002")
        assert status in (500, 503)
    with running_service(fail_first={"user-0001": 2}) as svc:
        statuses = [_get(f"{svc.base_url}/users/user-0001")[0] for _ in range(3)]
        assert statuses == [503, 503, 200]


def test_cli_arguments() -> None:
    config = config_from_args(
        [
            "--port",
            "0",
            "--latency-ms",
            "20",
            "--jitter-ms",
            "5",
            "--error-rate",
            "0.1",
            "--slow-rate",
            "0.01",
            "--slow-ms",
            "900",
            "--fail-first",
            "user-0001=2",
            "--seed",
            "7",
        ]
    )
    assert (config.port, config.latency_ms, config.jitter_ms) == (0, 20, 5)
    assert (config.error_rate, config.slow_rate, config.slow_ms, config.seed) == (0.1, 0.01, 900, 7)
    assert config.fail_first == {"user-0001": 2}
    assert config.host == "127.0.0.1"
