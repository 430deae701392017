"""Policy inputs as DataFrames in the metrics schema: the store, a DS2 rates log, DS2 rate files.

The rates log is parsed by Spark (it can be gigabytes) when it cannot take the faster path by byte
ranges (:mod:`autoscaler.engine.spark.rates_log`: a log out of timestamp order, or with a bad line).
Bad lines are counted while the job runs (``DataFrame.observe``, no extra pass); when there are any,
the pure-Python reader finds the first one so the error names the file and line
(:func:`raise_for_bad_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F

from autoscaler.collect.ds2_files import read_rate_files, read_rates_log, records_to_metrics
from autoscaler.errors import InputError
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, table_location
from autoscaler.store.schemas import METRICS
from autoscaler.store.spark import conform, job_rows, metrics_store  # noqa: F401 - the store's readers, used here and by callers
from autoscaler.topology import Topology


class ObservedCounts:
    """Counts over an input, gathered while the main job runs (``DataFrame.observe``).

    When a query ends up with no rows, adaptive execution can prune the observed node and the
    counts never arrive; then they are computed with one extra pass, only in that case.
    """

    def __init__(self, df: DataFrame, name: str, *exprs: Column) -> None:
        self._observation = Observation(name)
        self._source = df
        self._exprs = exprs
        self.df = df.observe(self._observation, *exprs)

    def get(self) -> dict[str, object]:
        try:
            values = self._observation.get
        except Exception:
            values = {}
        if not values:
            values = self._source.agg(*self._exprs).first().asDict()
        return values


def _lookup(mapping: dict[str, object], key: Column) -> Column:
    """A literal map lookup (topology facts per operator id)."""
    pairs = [item for k, v in mapping.items() for item in (F.lit(k), F.lit(v))]
    return F.create_map(*pairs)[key]


def rates_log(spark: SparkSession, path: str, topology: Topology, job: str) -> tuple[DataFrame, ObservedCounts]:
    """A DS2 rates log as metrics rows, epochs numbered per instance by timestamp order.

    Returns the DataFrame and counts of ``rows`` and ``bad_rows``, filled once an action has
    run; pass them to :func:`raise_for_bad_lines` after it.
    """
    if not Path(path).is_file():
        raise InputError(path, "rates log does not exist or is not a file")
    text = spark.read.text(path).select(F.trim("value").alias("line"))
    text = text.filter((F.col("line") != "") & ~F.col("line").startswith("#"))
    # get() returns null past the end (a short line) instead of failing the whole job.
    text = text.select(F.split("line", ",").alias("parts"))
    field = [F.trim(F.get("parts", i)) for i in range(8)]
    parallelism = {k: o.parallelism for k, o in topology.operators.items()}
    parsed = text.select(
        F.size("parts").alias("n_fields"),
        field[0].alias("operator_id"),
        field[1].try_cast("int").alias("instance"),
        field[2].try_cast("int").alias("parallelism"),
        field[3].try_cast("bigint").alias("ts"),
        *[field[i].try_cast("double").alias(n) for i, n in zip(range(4, 8), ("tpr", "tor", "opr", "oor"))],
    )
    rate_ok = [
        (F.col(n).isNotNull() & ~F.isnan(n) & (F.col(n) >= 0) & (F.col(n) < float("inf"))) for n in ("tpr", "tor", "opr", "oor")
    ]
    good = (
        (F.col("n_fields") == 8)
        & F.col("operator_id").isin(list(parallelism))
        & F.col("instance").isNotNull()
        & F.col("ts").isNotNull()
        & (F.col("parallelism") == _lookup(parallelism, F.col("operator_id")))
        & F.col("instance").between(1, F.col("parallelism"))
    )
    for ok in rate_ok:
        good = good & ok
    counts = ObservedCounts(
        parsed.withColumn("good", F.coalesce(good, F.lit(False))),
        "rates_log",
        F.count(F.lit(1)).alias("rows"),
        F.count_if(~F.col("good")).alias("bad_rows"),
    )
    parsed = counts.df.filter("good")
    by_instance = Window.partitionBy("operator_id", "instance").orderBy("ts")
    epoch = (F.row_number().over(by_instance) - 1).cast("long")
    df = parsed.select(
        F.lit(job).alias("job"),
        epoch.alias("epoch"),
        F.floor(epoch / EPOCH_BLOCK_SIZE).alias("epoch_block"),
        "operator_id",
        _lookup({k: o.name for k, o in topology.operators.items()}, F.col("operator_id")).alias("operator_name"),
        "instance",
        "parallelism",
        F.lit(None).alias("max_parallelism"),
        _lookup({k: o.is_source for k, o in topology.operators.items()}, F.col("operator_id")).alias("is_source"),
        F.timestamp_micros(F.floor(F.col("ts") / 1000)).alias("window_start"),
        F.lit(None).alias("window_end"),
        F.lit(None).alias("records_in"),
        F.lit(None).alias("records_out"),
        F.lit(None).alias("busy_ms"),
        F.lit(None).alias("idle_ms"),
        F.lit(None).alias("backpressured_ms"),
        F.col("tpr").alias("true_processing_rate"),
        F.col("tor").alias("true_output_rate"),
        F.col("opr").alias("observed_processing_rate"),
        F.col("oor").alias("observed_output_rate"),
        F.lit(False).alias("warmup"),
        F.lit("ds2-rates-log").alias("source_format"),
    )
    return conform(df), counts


def raise_for_bad_lines(counts: ObservedCounts, path: str, topology: Topology) -> None:
    """After an action: if Spark saw bad lines, name the first one (file and line)."""
    metrics = counts.get()
    if metrics.get("rows", 0) == 0:
        raise InputError(path, "the rates log has no data lines")
    bad = metrics.get("bad_rows", 0)
    if bad:
        read_rates_log(path, topology)  # raises with the file and line of the first bad line
        raise InputError(path, f"{bad} lines could not be parsed as rates (8 columns, integers, finite rates >= 0)")


def rate_files(spark: SparkSession, folder: str, topology: Topology, job: str) -> tuple[DataFrame, list[int]]:
    """Online rate files (small, many): read and checked in Python, then handed to Spark."""
    records, skipped = read_rate_files(folder, topology)
    table = records_to_metrics(records, topology, job, "ds2-rate-files")
    return conform(spark.createDataFrame(table.to_pandas(), schema=METRICS.spark_ddl())), skipped


def guard_operators(metrics: DataFrame, topology: Topology) -> tuple[DataFrame, ObservedCounts]:
    """Count rows of operators the topology does not know, while the job runs."""
    known = F.col("operator_id").isin(list(topology.operators))
    counts = ObservedCounts(
        metrics,
        "operators",
        F.count(F.lit(1)).alias("rows"),
        F.count_if(~known).alias("unknown_rows"),
        F.min(F.when(~known, F.col("operator_id"))).alias("unknown_operator"),
        F.min(F.when(~known, F.col("epoch"))).alias("unknown_epoch"),
    )
    return counts.df, counts


def raise_for_unknown_operators(counts: ObservedCounts, root: str, job: str, topology: Topology) -> None:
    error = unknown_operators_error(counts.get(), root, job, topology)
    if error is not None:
        raise error


def unknown_operators_error(counts: Mapping[str, object], root: str, job: str, topology: Topology) -> InputError | None:
    """The error for metrics with no rows, or with rows of operators the topology does not know (None: neither).

    ``counts``: ``rows``, ``unknown_rows``, and the first unknown row's ``unknown_operator`` and ``unknown_epoch``.
    """
    where = f"{table_location(root, METRICS)}/job={job}"
    if not counts.get("rows"):
        return InputError(where, "no metrics rows in the requested epochs")
    if counts.get("unknown_rows"):
        return InputError(
            where,
            f"{counts['unknown_rows']} rows name operators not in the topology, first {counts['unknown_operator']!r} "
            f"in epoch {counts['unknown_epoch']} (known: {', '.join(topology.order)})",
        )
    return None


def stored_decisions(spark: SparkSession, root: str, job: str, run_id: str, topology: Topology) -> DataFrame:
    """The decisions one run wrote, in epoch and topological order."""
    from autoscaler.store.schemas import DECISIONS

    df = job_rows(spark, root, DECISIONS, job)
    if df is None:
        raise InputError(f"{table_location(root, DECISIONS)}/job={job}", f"no decisions stored for job {job!r}")
    order = {op: k for k, op in enumerate(topology.order)}
    df = df.filter(F.col("run_id") == run_id).withColumn("job", F.lit(job))
    return df.withColumn("op_index", _lookup(order, F.col("operator_id"))).orderBy("epoch", "op_index")
