"""Late-data metrics: the fate of every (record, window) and the distributions of lateness and
watermark lag, per micro-batch and per day, computed once here for the live stream and the
backfill alike."""
