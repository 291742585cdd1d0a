"""Engine-independent event-time operators: watermarks, timers, windows, triggers, evictors.

Nothing in this package imports Spark, so the live stream, the backfill and the replay command
all run the very same decisions. Times are integers in epoch milliseconds (UTC); see
docs/semantics.md for every choice the contract leaves open.
"""
