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
from autoscaler.store import delta
from autoscaler.store.commit import clean_leftovers, recover, staging_for, swap_in
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, store_lock, table_dir, table_location, validate_job_name
from autoscaler.store.s3a import s3a_settings, s3a_uri
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


def job_rows(spark: SparkSession, root: str, table: Table, job: str, first_epoch: int | None = None,
             last_epoch: int | None = None) -> DataFrame | None:  # fmt: skip
    """One job's rows of a table in the file schema plus ``epoch_block``, from its folder or its Delta table's
    latest version (files pruned to the epoch range's blocks); None when the job has none."""
    validate_job_name(job)
    schema = table.spark_ddl(with_partitions=False)
    if not delta.is_store_url(root):
        folder = table_dir(root, table) / f"job={job}"
        return spark.read.schema(schema + ", `epoch_block` BIGINT").parquet(str(folder)) if folder.is_dir() else None
    blocks = (
        None if first_epoch is None else first_epoch // EPOCH_BLOCK_SIZE,
        None if last_epoch is None else last_epoch // EPOCH_BLOCK_SIZE,
    )
    files = delta.file_uris(root, table, job, *blocks)
    if not files:
        return None
    # Spark needs S3A on its side (a Connect server's jars, not this process's): without it Spark says
    # "Class org.apache.hadoop.fs.s3a.S3AFileSystem not found" (docs/object-store.md, step 4).
    # Delta's data files hold no partition columns: epoch_block is derived again.
    df = spark.read.options(**s3a_settings()).schema(schema).parquet(*map(s3a_uri, files))
    return df.withColumn("epoch_block", F.floor(F.col("epoch") / EPOCH_BLOCK_SIZE).cast("bigint"))


def metrics_store(
    spark: SparkSession, root: str, job: str, first_epoch: int | None = None, last_epoch: int | None = None
) -> DataFrame:
    """One job's metrics from the store, optionally an inclusive epoch range (pruned by block)."""
    df = job_rows(spark, root, METRICS, job, first_epoch, last_epoch)
    if df is None:
        raise InputError(f"{table_location(root, METRICS)}/job={job}", f"no metrics stored for job {job!r}")
    if first_epoch is not None:
        df = df.filter((F.col("epoch_block") >= first_epoch // EPOCH_BLOCK_SIZE) & (F.col("epoch") >= first_epoch))
    if last_epoch is not None:
        df = df.filter((F.col("epoch_block") <= last_epoch // EPOCH_BLOCK_SIZE) & (F.col("epoch") <= last_epoch))
    return conform(df.withColumn("job", F.lit(job)))
