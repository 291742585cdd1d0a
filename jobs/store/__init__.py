"""Where the tables live and how they are written: locations (local folders or Hadoop URIs),
idempotent Delta writes by Spark, the driver's own Delta writes without Spark, and what Delta's
file statistics say without reading the data."""
