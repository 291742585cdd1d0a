"""``./platform <command> --help`` prints that command's help and exits 0, for every command
the script answers: ``ui --help`` used to start the Dagster webserver, ``setup --help`` to
install. A command that takes no arguments refuses one it does not know (exit 2) rather
than ignoring it. (The script's own ``--help`` and an unknown command:
tests/faults/test_misuse.py.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "platform"


def _commands() -> list[str]:
    """The commands of the script's header, which says what ``./platform`` does."""
    header = SCRIPT.read_text(encoding="utf-8").split("set -euo", 1)[0]
    return re.findall(r"^#\s+\./platform ([a-z]+)", header, flags=re.MULTILINE)


def _platform(*args: str) -> subprocess.CompletedProcess:
    # a started webserver would not return: the timeout fails the test instead of hanging
    return subprocess.run([str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=240)


def test_the_header_names_every_command():
    assert set(_commands()) >= {"demo", "test", "setup", "ui", "kafka"}


@pytest.mark.cli
@pytest.mark.parametrize("command", _commands())
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_prints_its_help_and_exits_0(command, flag):
    done = _platform(command, flag)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "usage:" in done.stdout.lower(), done.stdout
    assert "Serving dagster-webserver" not in done.stdout + done.stderr


@pytest.mark.cli
@pytest.mark.parametrize("command", ["setup", "ui"])
def test_a_command_without_options_refuses_one_naming_it(command):
    done = _platform(command, "--port", "4000")
    assert done.returncode == 2
    assert f"platform: {command} takes no arguments (got '--port')" in done.stderr
    assert "usage:" in done.stderr

