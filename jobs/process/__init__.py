"""A user's process function as a pipeline on Spark (operators.process_pipeline runs it per
key): its tables (``tables``), its rows from the runner's output (``rows``), its backfill
(``backfill``) and its live engine per bucket of keys (``live``). The replay command runs the
same per-key runner, so all three give the same rows.
"""
