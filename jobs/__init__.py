"""PySpark jobs that run the event-time operators: ingest, windowed results, backfills."""
