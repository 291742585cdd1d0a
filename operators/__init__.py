"""Engine-independent event-time operators: watermarks, timers, windows, triggers, evictors.

Nothing in this package imports Spark, so the live stream, the backfill and the replay command
all run the very same decisions. Times are integers in epoch milliseconds (UTC); see
docs/semantics.md for every choice the contract leaves open.
"""

__all__: list[str] = []
"""The package re-exports nothing: each name lives in its module (``operators.timers``,
``operators.window_operator``, ...), which declares its own ``__all__``, so importing the
package costs nothing and every name has one place to be imported from."""
