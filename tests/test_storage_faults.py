"""Which errors are a full disk, and the one line that names the fullest location (the
end-to-end run on a real full filesystem: tests/faults/test_disk_full.py)."""

from __future__ import annotations

import errno
import os

from jobs.console.storage_faults import fullest, is_out_of_space, out_of_space_line


class DeltaError(Exception):
    """The Rust Delta writer's error type: only its text says what happened."""


def test_a_full_disk_is_recognised_however_deep_in_the_chain():
    assert is_out_of_space(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    rust = DeltaError("Generic LocalFileSystem error: Unable to copy data to file: "
                      "No space left on device (os error 28)")
    assert is_out_of_space(rust)
    try:
        try:
            raise rust
        except DeltaError as error:
            raise RuntimeError("writing the late-data metrics of p@v failed") from error
    except RuntimeError as wrapped:
        assert is_out_of_space(wrapped)
    java = Exception("An error occurred while calling o52.save.\n: org.apache.spark."
                     "SparkException: Job aborted.\nCaused by: java.io.IOException: No space "
                     "left on device\n\tat java.base/java.io.FileOutputStream.writeBytes")
    assert is_out_of_space(java)


def test_other_errors_are_not_a_full_disk():
    assert not is_out_of_space(OSError(errno.EACCES, "Permission denied"))
    assert not is_out_of_space(ValueError("no space between words"))
    looping = RuntimeError("a")
    looping.__context__ = RuntimeError("b")
    looping.__context__.__context__ = looping  # a cycle ends the walk
    assert not is_out_of_space(looping)


def test_the_line_names_the_location_with_least_space(tmp_path):
    locations = {"PLATFORM_WAREHOUSE": str(tmp_path / "not" / "made" / "yet"),
                 "an object store": "s3a://bucket/warehouse"}
    space = fullest(locations)
    assert space is not None and space.setting == "PLATFORM_WAREHOUSE"
    assert 0 < space.free_bytes <= space.total_bytes  # of tmp_path's filesystem
    line = out_of_space_line("backfill", locations)
    assert line.startswith(f"backfill: error: no space left on the filesystem of "
                           f"PLATFORM_WAREHOUSE {tmp_path}/not/made/yet (")
    assert "\n" not in line
    assert "a location the command writes" in out_of_space_line(
        "live", {"an object store": "s3a://bucket/warehouse"})
