"""User-defined aggregate functions named in a pipeline description.

A pipeline's ``aggregates`` may name, besides the built-in ``count``/``sum``/``min``/``max``/
``mean``, a class by import path (``fn: "mypackage.stats:Spread"``). It runs wherever the
pipeline runs (the replay command, the keyed backfill, the live stream) because those all run
the operator library per key: a user function never takes the vectorised path, which only
knows Spark's own aggregates.

The class is built with the aggregate's ``field`` (or ``None``) and must have Flink's
``AggregateFunction`` methods, ``create_accumulator``, ``add(element, accumulator)``,
``merge(a, b)`` and ``get_result(accumulator)``, and a ``result_type`` of ``long``,
``double`` or ``string`` (the results table's column type). Accumulators must survive a JSON
round trip (the live stream keeps them in Spark's state store as JSON), and the module must
be importable by Spark's Python workers (installed, or on ``PYTHONPATH``).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "METHODS",
    "RESULT_TYPES",
    "is_user_function",
    "load_user_aggregate",
    "result_type",
]


RESULT_TYPES = ("long", "double", "string")
METHODS = ("create_accumulator", "add", "merge", "get_result")


def is_user_function(fn: str) -> bool:
    return ":" in fn


def load_user_aggregate(path: str) -> type:
    """The class ``module:Class`` names; ``ValueError`` saying what is wrong with it."""
    module_name, _, class_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name!r} ({error})") from None
    factory: Any = getattr(module, class_name, None)
    if factory is None:
        raise ValueError(f"{module_name!r} has no {class_name!r}")
    missing = [name for name in METHODS if not callable(getattr(factory, name, None))]
    if missing:
        raise ValueError(f"{path} lacks the aggregate method(s) {', '.join(missing)}")
    if getattr(factory, "result_type", None) not in RESULT_TYPES:
        raise ValueError(f"{path}.result_type must be one of {', '.join(RESULT_TYPES)}, got "
                         f"{getattr(factory, 'result_type', None)!r}")
    return factory


def result_type(fn: str) -> str:
    return load_user_aggregate(fn).result_type
