"""The DS2 policy on Spark: inputs as metrics-schema DataFrames, the policy as column expressions,
and the store writer. Imported by ``spark_jobs/ds2_policy.py`` and the benchmarks; needs pyspark."""
