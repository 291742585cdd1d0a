"""A landing folder's ingest: JSON-lines files under ``<landing>/<stream>/<partition>/``
appended to the arrival log, bad lines to the quarantine (:mod:`jobs.streams.landing.ingestor`
drives it)."""
