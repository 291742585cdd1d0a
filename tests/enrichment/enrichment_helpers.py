"""Helpers shared by the enrichment tests: records in arrival order, and reading /stats."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def make_records(
    keys: list[str], *, tick_every: int | None = None, start_seq: int = 100
) -> list[dict[str, Any]]:
    """Records in arrival order; the watermark ticks every ``tick_every`` records (or never).

    ``arrival_seq`` has gaps on purpose: the contract allows them, and keys must not assume
    ``arrival_seq`` is a list index.
    """
    records = []
    for i, key in enumerate(keys):
        watermark = 1_000 * (i // tick_every) if tick_every else 0
        records.append({"arrival_seq": start_seq + 3 * i, "watermark_ms": watermark, "key": key})
    return records


def user_keys(n: int, offset: int = 0) -> list[str]:
    return [f"user-{(offset + i) % 10_000:04d}" for i in range(n)]


def fetch_stats(base_url: str, token: str | None = None) -> dict[str, Any]:
    """Read ``GET /stats`` over HTTP, as an operator of the service would."""
    request = urllib.request.Request(f"{base_url}/stats")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())
