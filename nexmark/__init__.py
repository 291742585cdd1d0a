"""Nexmark on the platform: a seeded generator of the published Nexmark model, the windowed
queries Q5, Q7, Q8, Q11 and Q12 on the pure-Python operator library, and independent DuckDB
references for them. See docs/nexmark.md.

Nothing here imports Spark: the Spark runtime calls the same query definitions
(:mod:`nexmark.queries`) so that live, backfill and this library agree row for row.
"""
