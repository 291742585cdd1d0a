"""Every reason a line or record is quarantined with: the values of the quarantine table's
``reason`` column, in one place, so that what the docs name can be checked against what ingest
writes (tests/test_documented_names.py). Each reader defines the reasons it gives beside the
check that gives them; this module only gathers them, above the readers."""

from __future__ import annotations

from jobs.streams.kafka.ingest import OFFSETS_LOST
from jobs.streams.kafka.values import NULL_VALUE
from jobs.streams.landing.batch import BAD_INGEST_STAMP, DUPLICATE_FILE, FILE_CHANGED, INVALID_UTF8
from jobs.streams.landing.parsing import (
    BAD_KEY,
    BAD_VALUE,
    LINE_TOO_LONG,
    MALFORMED_JSON,
    MISSING_EVENT_TIME,
    MISSING_KEY,
    NOT_AN_OBJECT,
    TOO_FAR_IN_FUTURE,
    TOO_FAR_IN_PAST,
    UNPARSABLE_EVENT_TIME,
)

__all__ = ["QUARANTINE_REASONS"]

QUARANTINE_REASONS = (
    MALFORMED_JSON, NOT_AN_OBJECT, LINE_TOO_LONG, INVALID_UTF8, MISSING_KEY, BAD_KEY,
    MISSING_EVENT_TIME, UNPARSABLE_EVENT_TIME, TOO_FAR_IN_FUTURE, TOO_FAR_IN_PAST, BAD_VALUE,
    BAD_INGEST_STAMP, DUPLICATE_FILE, FILE_CHANGED, NULL_VALUE, OFFSETS_LOST,
)
"""In the order docs/streams-and-pipelines.md lists them ("Quarantine reasons")."""
