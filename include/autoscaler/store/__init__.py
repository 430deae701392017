"""The metrics store: one schema per table (``schemas.py``), the Parquet store (``parquet.py``) and
its Spark writer (``spark.py``). Every write is per (job, epoch) and replaces what was there."""
