"""What people read about the tables: row counts, day ranges, a day's late records with the
windows they missed. Read by the command line and the Dagster assets, so neither needs a Spark
query of its own."""
