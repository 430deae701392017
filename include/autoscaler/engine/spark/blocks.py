"""A long range of stored epochs decided where its blocks are: one Spark task per epoch block, no shuffle.

The store keeps a job's metrics in blocks of :data:`~autoscaler.store.parquet.EPOCH_BLOCK_SIZE`
epochs, and a block (with the epochs of its first epoch's history) is all its decisions need. So a
backfill or a what-if over many blocks runs one Spark task per block: the task reads its block's
metrics file, sums the instance rows into operator windows (:mod:`autoscaler.engine.windows`),
runs the job's policy kind over them (:func:`~autoscaler.engine.spark.decisions.decide_job`, the
function every path runs), and stages the block's next decisions file beside the store, merged with
the block's decisions of other epochs. The driver then checks the inputs and commits every staged
block (:mod:`autoscaler.store.commit`) under the store lock it held throughout: a failed check or a
failed task commits nothing.

Through Spark's reader, aggregation, shuffle and writer, 10^7 stored rows took 33 s on 2 cores: the
read 5 s, the windows 6 s, the policy's shuffle 7 s, the write 11 s (``benchmarks/results/policy.md``).
Here each block costs its own read, windows, policy and write, about 50 ms.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.decisions import RunInfo, decide_job
from autoscaler.engine.spark.inputs import unknown_operators_error
from autoscaler.engine.windows import operator_windows
from autoscaler.errors import InputError
from autoscaler.policy.base import history_epochs
from autoscaler.store.commit import clean_leftovers, recover, set_aside, staging_for, swap_in
from autoscaler.store.parquet import (
    EPOCH_BLOCK_SIZE,
    block_dir,
    conform,
    next_version,
    read_block,
    store_lock,
    stored_blocks,
    table_dir,
    validate_job_name,
    write_block_file,
)
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import Topology

# What each task reports to the driver about its block.
SUMMARY = pa.schema([
    ("block", pa.int64()), ("epochs", pa.int64()), ("rows", pa.int64()), ("unknown_rows", pa.int64()),
    ("unknown_operator", pa.string()), ("unknown_epoch", pa.int64()), ("torn", pa.string()),
])  # fmt: skip
# Tasks per run: each runs blocks one after the other. A task per block cost about 45 ms of Spark's own
# each (10^7 rows, 245 blocks, 2 cores: 13.6 s against 6.5 s of the blocks' work); more tasks than
# cores keeps them busy when blocks differ in size.
PARTITIONS = 8
SUMMARY_DDL = ("block BIGINT, epochs BIGINT, rows BIGINT, unknown_rows BIGINT, unknown_operator STRING, "
               "unknown_epoch BIGINT, torn STRING")  # fmt: skip


@dataclass(frozen=True)
class BlockRun:
    """Everything a block's task needs, sent to the Python workers once with the function."""

    metrics_root: str
    decisions_root: str
    job: str
    topology: Topology
    options: PolicyOptions  # resolved, the restart time measured
    info: RunInfo
    source_rates: Mapping[str, float]
    first: int | None  # the first epoch decided (inclusive); None: from the first stored
    last: int | None  # the last epoch decided (inclusive); None: to the last stored
    staging: str = ""  # where the tasks stage the blocks' next versions (set by decide_stored_blocks)

    def read(self, rows: pa.Table, depth: int) -> pa.Table:
        """The rows of ``rows`` the run reads: the decided range and the history before it."""
        if self.first is not None:
            rows = rows.filter(pc.greater_equal(rows.column("epoch"), self.first - depth))
        if self.last is not None:
            rows = rows.filter(pc.less_equal(rows.column("epoch"), self.last))
        return rows


def decide_block(run: BlockRun, block: int) -> dict[str, object]:
    """Decide one block's epochs in the range and stage the block's next decisions file; what it saw."""
    depth = history_epochs(run.options)
    start = block * EPOCH_BLOCK_SIZE
    own = read_block(run.metrics_root, METRICS, run.job, block)
    own = run.read(own, depth)
    known = pc.is_in(own.column("operator_id"), value_set=pa.array(list(run.topology.operators), pa.string()))
    unknown = own.filter(pc.invert(known))
    summary: dict[str, object] = {
        "block": block, "epochs": 0, "rows": own.num_rows, "unknown_rows": unknown.num_rows,
        "unknown_operator": pc.min(unknown.column("operator_id")).as_py() if unknown.num_rows else None,
        "unknown_epoch": pc.min(unknown.column("epoch")).as_py() if unknown.num_rows else None, "torn": None,
    }  # fmt: skip
    decided_from = max(start, run.first) if run.first is not None else start
    if own.num_rows == 0 or pc.max(own.column("epoch")).as_py() < decided_from:
        return summary
    parts = [own]
    for earlier in range((start - depth) // EPOCH_BLOCK_SIZE, block) if depth else ():
        rows = read_block(run.metrics_root, METRICS, run.job, earlier)
        parts.insert(len(parts) - 1, rows.filter(pc.greater_equal(rows.column("epoch"), start - depth)))
    rows = run.read(pa.concat_tables(parts), depth)
    windows = operator_windows(rows.append_column("job", pa.repeat(pa.scalar(run.job), rows.num_rows)))
    decided = decide_job(windows, run.topology, run.options, run.info, run.source_rates, run.first, block=block)
    if decided.num_rows == 0:
        return summary
    new_rows = conform(DECISIONS, decided.drop_columns(["op_index"]), f"decisions of job {run.job!r}, block {block}")
    final = block_dir(run.decisions_root, DECISIONS, run.job, block)
    merged, torn = next_version(DECISIONS, final, new_rows)
    staged = Path(run.staging) / final.name
    staged.mkdir(parents=True)
    write_block_file(merged, staged / "part-0.parquet")
    return summary | {"epochs": len(pc.unique(new_rows.column("epoch"))), "torn": torn}


def _unknown_operators_error(seen: pa.Table, run: BlockRun) -> InputError | None:
    """The tasks' summaries checked as Spark's general path checks its input (the first unknown row by epoch)."""
    bad = seen.filter(pc.greater(seen.column("unknown_rows"), 0)).sort_by([("unknown_epoch", "ascending")])
    first = bad.slice(0, 1).to_pylist()[0] if bad.num_rows else {}
    counts = {"rows": pc.sum(seen.column("rows")).as_py(), "unknown_rows": pc.sum(bad.column("unknown_rows")).as_py(),
              "unknown_operator": first.get("unknown_operator"), "unknown_epoch": first.get("unknown_epoch")}  # fmt: skip
    return unknown_operators_error(counts, run.metrics_root, run.job, run.topology)


def per_task(spark: SparkSession, count: int, work: Callable[[int], pa.Table], ddl: str) -> pa.Table:
    """``work(0)`` .. ``work(count - 1)`` on Spark, their tables concatenated.

    Spark's range makes the partitions, so nothing is shuffled; a few tasks (:data:`PARTITIONS`) take
    their indices in turn, since each task costs about 45 ms of Spark's own.
    """

    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column("id").to_pylist():
                yield from work(index).combine_chunks().to_batches()

    return spark.range(0, count, 1, min(count, PARTITIONS)).mapInArrow(per_partition, ddl).toArrow()


def decide_stored_blocks(
    spark: SparkSession,
    run: BlockRun,
    before_commit: Callable[[], None] | None = None,
) -> int:
    """Decide ``run``'s range block by block on Spark and commit the decisions; the number of epochs written.

    Nothing is committed when the inputs fail their checks (no rows, unknown operators) or
    ``before_commit`` raises.
    """
    validate_job_name(run.job)
    low = run.first // EPOCH_BLOCK_SIZE if run.first is not None else None
    high = run.last // EPOCH_BLOCK_SIZE if run.last is not None else None
    blocks = [b for b in stored_blocks(run.metrics_root, METRICS, run.job)
              if (low is None or b >= low) and (high is None or b <= high)]  # fmt: skip
    if not blocks:
        raise InputError(f"{table_dir(run.metrics_root, METRICS)}/job={run.job}", "no metrics stored in the requested epochs")
    base = table_dir(run.decisions_root, DECISIONS)
    staging = base / f".staging-{uuid.uuid4().hex}" / f"job={run.job}"
    task = replace(run, staging=str(staging))
    try:
        with store_lock(run.decisions_root, DECISIONS, run.job):
            for block in blocks:  # the tasks read the committed versions without the lock this holds
                final = block_dir(run.decisions_root, DECISIONS, run.job, block)
                recover(final)
                clean_leftovers(final)
            staging.mkdir(parents=True)

            seen = per_task(spark, len(blocks), lambda i: pa.Table.from_pylist([decide_block(task, blocks[i])], schema=SUMMARY),
                            SUMMARY_DDL)  # fmt: skip
            error = _unknown_operators_error(seen, run)
            if error is not None:
                raise error
            if before_commit is not None:
                before_commit()
            torn = {r["block"]: r["torn"] for r in seen.filter(pc.is_valid(seen.column("torn"))).to_pylist()}
            for staged in sorted(staging.iterdir()):
                final = base / f"job={run.job}" / staged.name
                block = int(staged.name.split("=", 1)[1])
                if block in torn and final.exists():
                    set_aside(final, torn[block])
                swap_in(staged, final)
                if staged.exists():  # the old version: kept beside the block until its next commit
                    staged.rename(staging_for(final))
            return int(pc.sum(seen.column("epochs")).as_py() or 0)
    finally:
        shutil.rmtree(staging.parent, ignore_errors=True)
