"""The store on Spark: its metrics reader, and its write contract (:mod:`autoscaler.store.parquet`) for DataFrames.

New rows are written to a staging folder first; rows of other epochs in the touched blocks
are carried over; each touched block is then committed (:mod:`autoscaler.store.commit`). A failed check
(``before_commit``) or a failed job leaves the store as it was.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from autoscaler.errors import InputError
from autoscaler.store.commit import clean_leftovers, recover, staging_for, swap_in
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, store_lock, table_dir, validate_job_name
from autoscaler.store.schemas import METRICS, Table


def _blocks(folder: Path) -> list[Path]:
    return sorted(d for d in folder.glob("job=*/epoch_block=*") if d.is_dir())


def write_epochs(df: DataFrame, root: str, table: Table, job: str, before_commit: Callable[[], None] | None = None) -> int:
    """Write one job's rows, replacing every epoch they contain. Returns the blocks written."""
    validate_job_name(job)
    spark: SparkSession = df.sparkSession
    base = table_dir(root, table)
    staging = base / f".staging-{uuid.uuid4().hex}"
    try:
        with store_lock(root, table, job):
            columns = [c.name for c in table.columns]
            (
                df.select(*columns)
                .filter(F.col("job") == job)
                .repartition("job", "epoch_block")
                .sortWithinPartitions("epoch")
                .write.partitionBy(*table.partition_by)
                .parquet(str(staging / "new"))
            )
            if before_commit is not None:
                before_commit()
            touched = _blocks(staging / "new")
            old = [base / b.relative_to(staging / "new") for b in touched]
            old = [b for b in old if b.exists()]
            if old:
                schema = table.spark_ddl(with_partitions=False) + ", `epoch_block` BIGINT"
                previous = spark.read.schema(schema).option("basePath", str(base / f"job={job}")).parquet(*map(str, old))
                written = spark.read.parquet(str(staging / "new")).select("epoch").distinct()
                kept = previous.join(F.broadcast(written), "epoch", "left_anti").withColumn("job", F.lit(job))
                kept.select(*columns).write.partitionBy(*table.partition_by).parquet(str(staging / "kept"))
            for block in touched:
                relative = block.relative_to(staging / "new")
                carried = staging / "kept" / relative
                if carried.exists():
                    for part in carried.glob("*.parquet"):
                        part.rename(block / part.name)
                final = base / relative
                recover(final)
                clean_leftovers(final)
                swap_in(block, final)
                if block.exists():  # the old version: kept beside the block until its next commit
                    block.rename(staging_for(final))
            return len(touched)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def conform(df: DataFrame) -> DataFrame:
    """Select the metrics columns in order with their types (a nullable one the rows lack: null)."""
    present = set(df.columns)
    nullable = {c.name for c in METRICS.columns if c.nullable}
    return df.select([
        (F.col(name) if name in present or name not in nullable else F.lit(None)).cast(kind).alias(name)
        for name, kind in METRICS.spark_types()
    ])  # fmt: skip


def metrics_store(
    spark: SparkSession, root: str, job: str, first_epoch: int | None = None, last_epoch: int | None = None
) -> DataFrame:
    """One job's metrics from the store, optionally an inclusive epoch range (pruned by block)."""
    folder = table_dir(root, METRICS) / f"job={validate_job_name(job)}"
    if not folder.is_dir():
        raise InputError(str(folder), f"no metrics stored for job {job!r}")
    df = spark.read.schema(METRICS.spark_ddl(with_partitions=False) + ", `epoch_block` BIGINT").parquet(str(folder))
    if first_epoch is not None:
        df = df.filter((F.col("epoch_block") >= first_epoch // EPOCH_BLOCK_SIZE) & (F.col("epoch") >= first_epoch))
    if last_epoch is not None:
        df = df.filter((F.col("epoch_block") <= last_epoch // EPOCH_BLOCK_SIZE) & (F.col("epoch") <= last_epoch))
    return conform(df.withColumn("job", F.lit(job)))
