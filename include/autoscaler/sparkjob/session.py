"""A Spark session configured for the policy job: quiet, small shuffles, UTC."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession


def policy_session(app_name: str = "ds2-policy", master: str | None = None) -> SparkSession:
    """The session spark-submit gave us, or a local one (tests, benchmarks)."""
    builder = SparkSession.builder.appName(app_name)
    if master:  # under spark-submit the master comes from its --master; plain Python defaults to local[*]
        builder = builder.master(master)
    spark = (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("DS2_SHUFFLE_PARTITIONS", "8"))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.parquet.compression.codec", "snappy")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(os.environ.get("DS2_SPARK_LOG_LEVEL", "ERROR"))
    return spark
