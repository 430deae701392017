"""The policy on Spark: inputs as metrics-schema DataFrames (``inputs.py``), DS2 as column
expressions (``plan.py``), the session and the warm Connect engine, and one stored run (``run.py``).
Imported by ``spark_jobs/ds2_policy.py``, the policy task and the benchmarks; needs pyspark."""
