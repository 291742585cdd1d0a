"""Every setting is documented from the model itself, and a ``PLATFORM_*`` variable that no
setting reads is refused or warned about, never ignored without a word (issue 33)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.config.errors import SettingsError
from jobs.config.settings import PlatformSettings
from jobs.config.settings_reference import render_markdown, stray_variables

REPO = Path(__file__).resolve().parents[1]


def test_the_settings_page_is_what_the_model_renders():
    page = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert page == render_markdown(), (
        "docs/settings.md is out of date: python -m jobs settings --markdown > docs/settings.md")


def test_every_setting_says_what_it_does_and_is_on_the_page():
    page = render_markdown()
    for name, field in PlatformSettings.model_fields.items():
        assert field.description, f"setting {name} has no description"
    for variable in PlatformSettings.variable_names():
        assert f"`PLATFORM_{variable}`" in page


@pytest.mark.parametrize(("variable", "fatal", "suggestion"), [
    ("platform_warehouse", True, "PLATFORM_WAREHOUSE"),
    ("Platform_Home", True, "PLATFORM_HOME"),
    ("PLATFORM_WAREHOUS", True, "PLATFORM_WAREHOUSE"),
    ("PLATFORM_LANDING_GRACE", True, "PLATFORM_LANDING_GRACE_SECONDS"),
    ("PLATFORM_TIMEZONE", True, "PLATFORM_TIME_ZONE"),
    ("PLATFORM_SHUFLE", False, "PLATFORM_SHUFFLE_PARTITIONS"),
    ("PLATFORM_COLOUR", False, None),
])
def test_a_variable_no_setting_reads_is_named(variable, fatal, suggestion):
    (stray,) = stray_variables({variable: "1", "PLATFORM_HOME": "/x", "HOME": "/root"})
    assert (stray.variable, stray.fatal, stray.suggestion) == (variable, fatal, suggestion)
    assert stray.message().startswith(f"{variable} is not a setting")


def test_settings_and_the_tools_variables_are_not_stray():
    env = {f"PLATFORM_{name}": "1" for name in PlatformSettings.variable_names()}
    assert stray_variables({**env, "PLATFORM_REQUIRE_BROWSER": "1", "PATH": "/bin"}) == []


def test_a_comma_inside_a_spark_setting_points_at_the_json_form():
    with pytest.raises(SettingsError, match="JSON object"):
        PlatformSettings.from_env({"PLATFORM_SPARK_CONF": "spark.jars.packages=a:b:1,c:d:2"},
                                  check=False)
    settings = PlatformSettings.from_env(
        {"PLATFORM_SPARK_CONF": '{"spark.jars.packages": "a:b:1,c:d:2"}'}, check=False)
    assert settings.spark_conf == {"spark.jars.packages": "a:b:1,c:d:2"}


def test_every_duration_unit_the_page_names_is_accepted():
    page = render_markdown()
    for written, ms in (("250ms", 250), ("90s", 90_000), ("5m", 300_000), ("1min", 60_000),
                        ("2h", 7_200_000), ("1d", 86_400_000)):
        unit = written.lstrip("0123456789")
        assert f"`{unit}`" in page
        settings = PlatformSettings.from_env({"PLATFORM_LANDING_SETTLE": written}, check=False)
        assert settings.landing_settle_ms == ms


@pytest.mark.cli
def test_the_settings_command_shows_each_value_and_where_it_came_from(tmp_path):
    environment = {k: v for k, v in os.environ.items() if not k.upper().startswith("PLATFORM_")}
    environment.update({"PLATFORM_HOME": str(tmp_path), "PLATFORM_SHUFFLE_PARTITIONS": "8",
                        "PLATFORM_LANDING_SETTLE": "90000", "PLATFORM_COLOUR": "blue"})
    result = subprocess.run([sys.executable, "-m", "jobs", "settings"], cwd=REPO,
                            env=environment, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "PLATFORM_SHUFFLE_PARTITIONS = 8    [environment]" in result.stdout
    assert "PLATFORM_LANDING_SETTLE = 90s    [environment]" in result.stdout
    assert f"PLATFORM_WAREHOUSE = {tmp_path}/warehouse    [default, from PLATFORM_HOME]" \
        in result.stdout
    assert "PLATFORM_TIME_ZONE = UTC    [default]" in result.stdout
    assert result.stderr.strip() == ("warning: PLATFORM_COLOUR is not a setting and is "
                                     "ignored (python -m jobs settings lists them)")

    environment["platform_warehouse"] = str(tmp_path / "elsewhere")
    refused = subprocess.run([sys.executable, "-m", "jobs", "settings"], cwd=REPO,
                             env=environment, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "configuration error: platform_warehouse is not a setting; did you mean "
        "PLATFORM_WAREHOUSE? (python -m jobs settings lists them)")
