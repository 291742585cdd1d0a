"""Every setting is checked where the settings are read, so every entry point refuses a bad
one with the same line (#72: a finality cron Dagster would refuse passed ``python -m jobs``;
the enrichment URL was not checked at all). The cron check agrees with what Dagster's own
schedules accept, on the schedules users write and on random ones."""

from __future__ import annotations

import dagster as dg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.config.errors import SettingsError
from jobs.config.settings import PlatformSettings

FIELD = st.one_of(st.just("*"), st.integers(0, 70).map(str),
                  st.tuples(st.integers(0, 40), st.integers(0, 40)).map(lambda r: f"{r[0]}-{r[1]}"),
                  st.integers(1, 20).map(lambda n: f"*/{n}"),
                  st.sampled_from(["mon-fri", "jan", "L", "?", "x", "", "1,15", "0/5", "#3"]))
CRON_LIKE = st.lists(FIELD, min_size=3, max_size=7).map(" ".join)


def _ours(cron: str, tmp_path) -> bool:
    try:
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                   "PLATFORM_FINALITY_CRON": cron})
    except SettingsError:
        return False
    return True


def _dagsters(cron: str) -> bool:
    try:
        dg.ScheduleDefinition(name="finality", cron_schedule=cron, job_name="finality")
    except dg.DagsterInvalidDefinitionError:
        return False
    return True


@pytest.mark.parametrize("cron", ["*/15 * * * *", "0 9 * * mon-fri", "@daily", "0 0 L * *",
                                  "not a cron", "* * * * * *", "0 0 30 2 *", "0 0 31 2 *",
                                  "0 0 29 2 *", "61 * * * *"])
def test_the_finality_cron_is_refused_where_dagster_would_refuse_it(cron, tmp_path):
    assert _ours(cron, tmp_path) == _dagsters(cron)


@settings(max_examples=150, deadline=None)
@given(CRON_LIKE)
def test_random_schedules_are_judged_as_dagster_judges_them(tmp_path_factory, cron):
    assert _ours(cron, tmp_path_factory.getbasetemp()) == _dagsters(cron)


def test_a_bad_cron_is_named_with_its_setting(tmp_path):
    with pytest.raises(SettingsError, match=r"PLATFORM_FINALITY_CRON.*'not a cron'.*five"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                   "PLATFORM_FINALITY_CRON": "not a cron"})


@pytest.mark.parametrize("url", ["not a url", "ftp://host/x", "http://", "http://host:port",
                                 "127.0.0.1:8765"])
def test_an_enrichment_url_that_is_not_one_is_refused(url, tmp_path):
    with pytest.raises(SettingsError, match=r"PLATFORM_ENRICHMENT_URL"):
        PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                   "PLATFORM_ENRICHMENT_URL": url})


@pytest.mark.parametrize("url", ["http://127.0.0.1:8765", "https://enrich.example.com/v1"])
def test_an_enrichment_url_is_kept_as_given(url, tmp_path):
    assert PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path),
                                      "PLATFORM_ENRICHMENT_URL": url}).enrichment_url == url
