"""One policy run over a job's stored epochs: read the metrics, decide, commit the decisions.

The same function serves the three ways the policy reaches Spark: a cold ``spark-submit`` of
``spark_jobs/ds2_policy.py`` (a ``spark`` connection), an in-process client of a warm Spark
Connect server (a ``spark_connect`` connection: :class:`ds2_airflow.operators.policy`), and the
warm-up query of ``scripts/spark.sh``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.store.delta import is_store_url
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, epoch_span, write_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import Topology, read_topology_csv

# The most epochs whose decisions come back to the client (one action, the client's own writer);
# a longer range is written from Spark. A live epoch, a short backfill or a fleet interval collect.
COLLECT_EPOCHS = 2 * EPOCH_BLOCK_SIZE


@dataclass(frozen=True)
class StoreRun:
    """Which epochs of which job to decide, with what options, and where the decisions go."""

    store: str  # the store root the metrics are read from
    job: str
    from_epoch: int | None  # inclusive; None: from the first stored epoch
    to_epoch: int | None  # inclusive; None: to the last
    run_type: str  # live, backfill, what-if
    run_id: str
    topology_path: str
    options: PolicyOptions
    decisions_store: str | None = None  # default: ``store`` (what-if runs write elsewhere)

    @property
    def decisions_root(self) -> str:
        return self.decisions_store or self.store


def run_options(run: StoreRun, topology: Topology) -> PolicyOptions:
    """The run's options as its policy reads them: operator ids, and the restart time measured on the job."""
    from autoscaler.policy.base import sizes_for_measured_restarts
    from autoscaler.policy.restarts import measured_restart_time

    options = run.options.resolved(topology)
    if options.restart_time is None and sizes_for_measured_restarts(options.kind):
        measured = measured_restart_time(run.store, run.job, run.from_epoch if run.from_epoch is not None else run.to_epoch)
        options = replace(options, restart_time=measured) if measured is not None else options
    return options


def _fits_the_driver(run: StoreRun) -> bool:
    """Whether the run's decisions are few enough to collect: a range of at most COLLECT_EPOCHS epochs."""
    first, last = run.from_epoch, run.to_epoch
    if first is None or last is None:
        span = epoch_span(run.store, METRICS, run.job)
        if span is None:
            return True  # no metrics: the input check says so
        first = span[0] if first is None else first
        last = span[1] if last is None else last
    return last - first + 1 <= COLLECT_EPOCHS


def _decide_in_ranges(spark: SparkSession, run: StoreRun, topology: Topology, before_commit: Callable[[], None] | None,
                      source_rates: dict[str, float] | None) -> int:  # fmt: skip
    """A long range on an object store, as consecutive ranges of COLLECT_EPOCHS epochs, each collected and
    committed by the store's one writer. Spark tasks cannot commit blocks there (block-wise commits are
    the local store's folder exchange), and collecting the whole range would run the driver out of heap.
    A range whose inputs fail their checks stops the run; the ranges before it stay committed, each whole."""
    span = epoch_span(run.store, METRICS, run.job)
    if span is None:
        span = (run.from_epoch or 0, run.to_epoch or 0)  # no metrics: the first range's input check says so
    first = span[0] if run.from_epoch is None else run.from_epoch
    last = span[1] if run.to_epoch is None else run.to_epoch
    written = 0
    for start in range(first, last + 1, COLLECT_EPOCHS):
        part = replace(run, from_epoch=start, to_epoch=min(start + COLLECT_EPOCHS - 1, last))
        written += decide_stored_epochs(spark, part, topology, before_commit, source_rates)
    return written


def decide_stored_epochs(
    spark: SparkSession,
    run: StoreRun,
    topology: Topology | None = None,
    before_commit: Callable[[], None] | None = None,
    source_rates: dict[str, float] | None = None,
) -> int:
    """Decide every stored epoch of ``run`` and commit the decisions; the number of epochs written.

    Nothing is committed when the inputs fail their checks (unknown operators, no rows).
    """
    from autoscaler.engine.spark import blocks, decisions, inputs
    from autoscaler.policy.base import history_epochs

    topology = topology or read_topology_csv(run.topology_path)
    options = run_options(run, topology)
    info = decisions.RunInfo(run.run_id, run.run_type, datetime.now(UTC).replace(microsecond=0))
    if not _fits_the_driver(run) and (is_store_url(run.store) or is_store_url(run.decisions_root)):
        return _decide_in_ranges(spark, run, topology, before_commit, source_rates)
    if not _fits_the_driver(run):
        # A long range (a backfill, a what-if) is decided where its blocks are stored, one Spark task
        # per block, and committed after the checks (blocks.py). Collected, 25,000 epochs' decisions
        # ran the Connect server's 1-GB driver out of heap (benchmarks/results/cluster.md).
        by_block = blocks.BlockRun(run.store, run.decisions_root, run.job, topology, options, info, dict(source_rates or {}),
                                   run.from_epoch, run.to_epoch)  # fmt: skip
        return blocks.decide_stored_blocks(spark, by_block, before_commit)
    # A kind that looks back (rules, utilization) reads the epochs before the range as its history.
    depth = history_epochs(options)
    first = run.from_epoch - depth if run.from_epoch is not None else None
    metrics = inputs.metrics_store(spark, run.store, run.job, first, run.to_epoch)
    metrics, counts = inputs.guard_operators(metrics, topology)
    rows = decisions.policy_decisions(metrics, topology, options, info, source_rates, run.from_epoch)
    # One Spark action: the decisions (a few rows per epoch) come back to this process, which commits
    # them with the store's own writer. Writing them from Spark took four actions per run (staging,
    # the carried-over rows, their schema pass, the swap), 3-6 CPU-s of the server for one epoch.
    table = rows.drop("op_index").toArrow()
    inputs.raise_for_unknown_operators(counts, run.store, run.job, topology)
    if before_commit is not None:
        before_commit()
    return len(write_epochs(run.decisions_root, DECISIONS, run.job, table))
