"""Process functions the tests name in pipelines (``tests.process_functions:FailsWhile``):
importable by Spark's Python workers, as the project's code is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from operators.process_function import KeyedProcessFunction, ProcessContext


class FailsWhile(KeyedProcessFunction):
    """Emits each record's position; raises on the record at ``at_seq`` while the file
    ``marker`` exists (the bug; deleting the file is the fix, the version unchanged)."""

    def __init__(self, marker: str, at_seq: int) -> None:
        self.marker = Path(marker)
        self.at_seq = at_seq

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        if ctx.arrival_seq == self.at_seq and self.marker.exists():
            raise ValueError("a bug in the user's code")
        out.append({"seq": ctx.arrival_seq, "at_ms": ctx.timestamp})
