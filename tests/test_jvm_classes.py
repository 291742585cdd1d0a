"""The Spark driver maps its classes from the installation's class archive
(jobs.session.classes), which ``./platform setup`` builds: the suite's own session is such a
driver, so it must show the archive's classes as shared."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from jobs.session import classes as jvm_classes

pytestmark = pytest.mark.spark


def test_the_drivers_classes_come_from_the_installations_archive(spark):
    archive = jvm_classes.archive_path()
    assert archive is not None and archive.is_file(), (
        f"no class archive at {archive}: ./platform setup builds it "
        "(or: python -m jobs.session)")
    jcmd = shutil.which("jcmd", path=str(jvm_classes.java_binary().parent))
    if jcmd is None:
        pytest.skip("this Java has no jcmd to ask the JVM")
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    report = subprocess.run([jcmd, str(pid), "VM.metaspace"], capture_output=True, text=True,
                            check=True).stdout
    loaded, shared = map(int, re.search(r"(\d+) classes \((\d+) shared\)", report).groups())
    # the JDK's own default archive holds about 1,300 classes (11 % of a fresh driver's); a
    # driver on this installation's archive finds most of Spark's in it (82 % at start)
    assert shared > 5_000 and shared > loaded // 3, report
