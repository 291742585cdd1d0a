"""The fault tests share one generated arrival log per module."""

from __future__ import annotations

import pytest

from jobs.config.settings import PlatformSettings
from tests.faults.helpers import make_source


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> PlatformSettings:
    return make_source(spark, tmp_path_factory.mktemp("faults") / "source")
