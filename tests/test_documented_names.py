"""What the docs name is what the code writes: the quarantine's reasons. The docs list every
reason ingest can write, and no name in them that looks like a reason is one ingest never
writes (docs/settings.md once named ``event_time_too_far_in_future``, which no row holds)."""

from __future__ import annotations

import re
from pathlib import Path

from jobs.streams.reasons import QUARANTINE_REASONS

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
REASON_LIKE = ("too_far", "malformed_", "invalid_utf", "missing_key", "missing_event",
               "unparsable", "not_an_object", "line_too", "bad_key", "bad_value", "bad_ingest",
               "duplicate_file", "file_changed", "offsets_lost", "null_value")
"""Parts of a word that make it read as a quarantine reason."""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+(?:_[a-z0-9]+)+", text))


def test_the_docs_list_every_reason_ingest_writes_in_order():
    page = (REPO / "docs" / "streams-and-pipelines.md").read_text(encoding="utf-8")
    table = page.split("### Quarantine reasons", 1)[1].split("\n\n", 2)[2]
    listed = re.findall(r"^\| `([a-z0-9_]+)` \|", table.split("\n\n", 1)[0], re.MULTILINE)
    assert listed == list(QUARANTINE_REASONS)


def test_no_page_names_a_reason_that_ingest_never_writes():
    wrong = {}
    for page in PAGES:
        for word in _words(page.read_text(encoding="utf-8")):
            if any(part in word for part in REASON_LIKE) and word not in QUARANTINE_REASONS:
                wrong.setdefault(page.name, set()).add(word)
    assert not wrong, wrong

