"""Any policy kind over every (job, epoch) of a metrics DataFrame, on Spark: the kind's own function.

A policy is written once, as a pure Python function (:mod:`autoscaler.policy.base`), and Spark
runs that function unchanged: Spark sums each epoch's instance rows into one row per operator
(the policy's :class:`~autoscaler.policy.base.OperatorWindow`), groups them by job, and runs the
kind's function in a Python worker for each decided epoch, oldest first, with the epochs before
it as its history. The decision rows have the decisions table's schema.

A long range is decided in blocks of :data:`~autoscaler.store.parquet.EPOCH_BLOCK_SIZE` epochs, in
parallel, whatever the kind: each block's group also gets the epochs of its first epoch's history
(a row goes to its own block and to the blocks whose history it is in), so each epoch is decided
with the same history as in one pass over the whole range, and no Python worker holds more than a
block and its history (a backfill of a year is not one worker's sequential loop, nor one task result).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.policy.base import BASIS_WORDS, EpochWindows, OperatorWindow, columns_for, history_epochs, policy_for
from autoscaler.policy.columns import DECISION_FIELDS, INT_FIELDS, NUMERIC_FIELDS, DecisionColumns, WindowColumns
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE
from autoscaler.store.schemas import DECISIONS
from autoscaler.topology import Topology

WINDOW_FIELDS = list(OperatorWindow.__dataclass_fields__)
# Instance columns an operator's window sums.
_SUMMED = ("true_processing_rate", "true_output_rate", "observed_output_rate", "observed_processing_rate", "pending_records")


@dataclass(frozen=True)
class RunInfo:
    """What every decision row of one run records: its id, its type and when it decided."""

    run_id: str
    run_type: str
    decided_at: datetime


# One-pass windows mark each instance as a bit of a 64-bit mask: up to this many words (512 instances).
MASK_WORDS = 8


def operator_windows(metrics: DataFrame, max_parallelism: int | None = None) -> DataFrame:
    """One row per (job, epoch, operator): the instance rows summed as the policies read them.

    Every instance must be there once: ``instances_observed`` counts the distinct instances within
    1..parallelism, and ``duplicated_instances`` the rows beyond those (a second row of one instance,
    an instance out of range, a null one), which make the epoch incomplete.

    With ``max_parallelism``, a bound of every row's parallelism (e.g. the input's largest) of at most
    64 x :data:`MASK_WORDS`, one aggregation per operator counts the instances as the bits of a mask.
    Otherwise two, one per instance and then one per operator. At 10^7 rows the two took 21.8 s over
    the read and the one 6.2 s, its scan for the bound included (``benchmarks/results/policy.md``). Neither uses
    ``countDistinct`` or ``collect_set``: distinct counts make Spark expand every row once per
    distinct column, and a set is an object aggregate that falls back to sorting (14.4 s at 10^6 rows,
    ``benchmarks/results/profile-backfill-1e6.md``).
    """
    if max_parallelism is not None and max_parallelism <= 64 * MASK_WORDS:
        return _one_pass(metrics, max(1, math.ceil(max_parallelism / 64)))
    return _two_passes(metrics)


def largest_parallelism(metrics: DataFrame) -> int | None:
    """The largest parallelism of ``metrics``' rows (one scan of one column: 1.0 s at 10^7 stored rows),
    the bound that lets :func:`operator_windows` take one aggregation; None when there are no rows."""
    return metrics.agg(F.max("parallelism")).first()[0]


def topology_parallelism(topology: Topology) -> int:
    """The largest parallelism of ``topology``: a rates log keeps only rows at the topology's parallelism,
    so this bounds every row's (:func:`operator_windows`) without a scan."""
    return max(op.parallelism for op in topology.operators.values())


def _ratio(part: str) -> F.Column:
    window = F.col("busy_ms") + F.col("idle_ms") + F.col("backpressured_ms")
    return F.max(F.when(window > 0, F.col(part) / window))


def _valid() -> F.Column:
    return F.coalesce((F.col("instance") >= 1) & (F.col("instance") <= F.col("parallelism")), F.lit(False))


def _bases() -> tuple[list[str], F.Column]:
    basis = F.col("source_rate_basis")
    known = sorted(BASIS_WORDS)
    return known, F.when(~basis.isin(known), basis)


def _rate_basis(flags: list[F.Column], known: list[str], low: F.Column, high: F.Column) -> F.Column:
    """The rate bases seen, sorted and joined: the known ones by flag, others by their least and greatest
    (exact for up to two values no collector writes; array_join skips the nulls)."""
    seen = [F.when(flag == 1, F.lit(value)) for flag, value in zip(flags, known, strict=True)]
    return F.array_join(F.array_sort(F.array(*seen, low, F.when(high != low, high))), "/").alias("rate_basis")


def _one_pass(metrics: DataFrame, words: int) -> DataFrame:
    known, unknown = _bases()
    basis = F.col("source_rate_basis")
    valid = _valid() & (F.col("instance") <= 64 * words)
    bit = F.expr("shiftleft(cast(1 as bigint), cast((instance - 1) % 64 as int))")
    masks = [F.bit_or(F.when(valid & (F.floor((F.col("instance") - 1) / 64) == w), bit)) for w in range(words)]
    observed = sum((F.coalesce(F.bit_count(m), F.lit(0)) for m in masks), F.lit(0)).cast("int")
    flags = [F.max((basis == value).cast("int")) for value in known]
    return metrics.groupBy("job", "epoch", "operator_id").agg(
        F.max("parallelism").alias("parallelism"),
        observed.alias("instances_observed"),
        (F.count("*") - observed).cast("int").alias("duplicated_instances"),
        *(F.sum(c).alias(c) for c in _SUMMED),
        F.max("max_parallelism").alias("max_parallelism"),
        F.count_if(F.col("warmup")).cast("int").alias("warmup_instances"),
        F.max("observed_processing_rate").alias("observed_processing_rate_max"),
        F.coalesce(_ratio("busy_ms"), F.lit(0.0)).alias("busy_ratio_max"),
        F.coalesce(_ratio("backpressured_ms"), F.lit(0.0)).alias("backpressure_ratio_max"),
        _rate_basis(flags, known, F.min(unknown), F.max(unknown)),
    )


def _two_passes(metrics: DataFrame) -> DataFrame:
    known, unknown = _bases()
    basis = F.col("source_rate_basis")
    per_instance = metrics.groupBy("job", "epoch", "operator_id", "instance").agg(
        F.count("*").alias("rows"),
        F.max(_valid().cast("int")).alias("valid"),
        F.max("parallelism").alias("parallelism"),
        F.max("max_parallelism").alias("max_parallelism"),
        F.count_if(F.col("warmup")).alias("warmup"),
        *(F.sum(c).alias(c) for c in _SUMMED),
        F.max("observed_processing_rate").alias("observed_processing_rate_max"),
        _ratio("busy_ms").alias("busy_ratio_max"),
        _ratio("backpressured_ms").alias("backpressure_ratio_max"),
        *(F.max((basis == value).cast("int")).alias(f"basis_{k}") for k, value in enumerate(known)),
        F.min(unknown).alias("basis_unknown_min"),
        F.max(unknown).alias("basis_unknown_max"),
    )
    # A null instance is a group of its own here, with valid 0: its rows all count as beyond the instances.
    flags = [F.max(f"basis_{k}") for k in range(len(known))]
    return per_instance.groupBy("job", "epoch", "operator_id").agg(
        F.max("parallelism").alias("parallelism"),
        F.sum("valid").cast("int").alias("instances_observed"),
        (F.sum("rows") - F.sum("valid")).cast("int").alias("duplicated_instances"),
        F.sum("true_processing_rate").alias("true_processing_rate"),
        F.sum("true_output_rate").alias("true_output_rate"),
        F.sum("observed_output_rate").alias("observed_output_rate"),
        F.max("max_parallelism").alias("max_parallelism"),
        F.sum("warmup").cast("int").alias("warmup_instances"),
        F.sum("observed_processing_rate").alias("observed_processing_rate"),
        F.max("observed_processing_rate_max").alias("observed_processing_rate_max"),
        F.coalesce(F.max("busy_ratio_max"), F.lit(0.0)).alias("busy_ratio_max"),
        F.coalesce(F.max("backpressure_ratio_max"), F.lit(0.0)).alias("backpressure_ratio_max"),
        F.sum("pending_records").alias("pending_records"),
        _rate_basis(flags, known, F.min("basis_unknown_min"), F.max("basis_unknown_max")),
    )


def windows_by_epoch(rows: pa.Table) -> dict[int, dict[str, OperatorWindow]]:
    """The operator windows of ``rows`` (:func:`operator_windows`' rows), by epoch and operator id."""
    # Column by column, not row dicts: a run decides each epoch with its whole history (an hour of epochs),
    # and building a dict per row was a quarter of a simulated epoch's time.
    cols = rows.select(["epoch", "operator_id", *WINDOW_FIELDS]).to_pydict()
    cols["rate_basis"] = [v or None for v in cols["rate_basis"]]
    for key in ("busy_ratio_max", "backpressure_ratio_max", "observed_processing_rate", "observed_processing_rate_max"):
        cols[key] = [v or 0.0 for v in cols[key]]
    out: dict[int, dict[str, OperatorWindow]] = {}
    for epoch, op, *values in zip(cols["epoch"], cols["operator_id"], *(cols[k] for k in WINDOW_FIELDS)):
        out.setdefault(epoch, {})[op] = OperatorWindow(*values)
    return out


def _columns(rows: pa.Table, topology: Topology) -> tuple[np.ndarray, WindowColumns, np.ndarray]:
    """The epochs of ``rows`` (ascending), their operator windows as columns, and which epochs are usable:
    every operator of ``topology`` present, with every instance once and none in warm-up
    (:func:`autoscaler.policy.base.unusable_epoch`'s test, over all epochs at once)."""
    epochs, at_epoch = np.unique(rows.column("epoch").to_numpy(), return_inverse=True)
    op_index = pc.index_in(rows.column("operator_id"), value_set=pa.array(topology.order, pa.string()))
    ours = op_index.is_valid().to_numpy(zero_copy_only=False)
    at = (at_epoch.reshape(-1)[ours], op_index.fill_null(0).to_numpy()[ours])
    shape = (len(epochs), len(topology.order))

    def grid(name: str, dtype: type, fill: object) -> np.ndarray:
        out = np.full(shape, fill, dtype=dtype)
        out[at] = rows.column(name).fill_null(fill).to_numpy(zero_copy_only=False)[ours]
        return out

    present = np.zeros(shape, dtype=bool)
    present[at] = True
    grids = {name: grid(name, np.int64 if name in INT_FIELDS else np.float64, 0 if name in INT_FIELDS else np.nan)
             for name in NUMERIC_FIELDS}  # fmt: skip
    basis = grid("rate_basis", object, None)
    usable = present.all(axis=1) & (grids["instances_observed"] == grids["parallelism"]).all(axis=1)
    for name in ("duplicated_instances", "warmup_instances"):
        usable &= (grid(name, np.int64, 0) == 0).all(axis=1)
    fields = {op: {**{name: g[:, k] for name, g in grids.items()}, "rate_basis": basis[:, k]}
              for k, op in enumerate(topology.order)}  # fmt: skip
    return epochs, WindowColumns(len(epochs), fields), usable


def _column_table(decided: DecisionColumns, topology: Topology, epochs: np.ndarray, keys: Mapping[str, object],
                  schema: pa.Schema) -> pa.Table:  # fmt: skip
    """Decision rows of column-wise decisions (operator after operator; the caller sorts them)."""
    n, ops = decided.size, len(topology.order)
    columns: dict[str, pa.Array] = {}
    for name in DECISION_FIELDS:
        kind = schema.field(name).type
        parts = []
        for op in topology.order:
            values, nulls = decided.column(op, name)
            parts.append(pa.array(values, type=kind, mask=nulls, from_pandas=False))
        columns[name] = pa.concat_arrays(parts)
    epoch = np.tile(epochs.astype(np.int64), ops)
    columns.update(epoch=pa.array(epoch), epoch_block=pa.array(epoch // EPOCH_BLOCK_SIZE),
                   op_index=pa.array(np.repeat(np.arange(ops, dtype=np.int32), n)))  # fmt: skip
    for name, value in keys.items():
        columns[name] = pa.repeat(pa.scalar(value, type=schema.field(name).type), n * ops)
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def decide_job(
    rows: pa.Table,
    topology: Topology,
    options: PolicyOptions,
    run: RunInfo,
    source_rates: Mapping[str, float],
    decide_from: int | None,
    block: int | None = None,
    history: Mapping[int, Mapping[str, OperatorWindow]] | None = None,
) -> pa.Table:
    """Decision rows of one job's epochs from ``decide_from`` on (earlier ones are only history).

    ``block``: decide only the epochs of this epoch block (the others in ``rows`` are its history).
    A kind with a column-wise model decides its usable epochs in one call; the rest, and every epoch
    of the other kinds, one at a time with their history.

    ``history``: earlier epochs' windows already built (:func:`windows_by_epoch`), read as the history of
    the epochs in ``rows`` beside those ``rows`` hold; a caller that decides epoch after epoch (the
    simulated loop) builds each epoch's windows once instead of an hour of them every epoch.

    Arrow in and out: NaN and infinite estimates stay what the policy computed (pandas would
    turn NaN into null on the way back).
    """
    depth = history_epochs(options)
    job = str(rows.column("job")[0])
    keys = {"job": job, "options": options.to_json(), "run_id": run.run_id, "run_type": run.run_type,
            "decided_at": run.decided_at}  # fmt: skip
    schema = DECISIONS.arrow_schema().append(pa.field("op_index", pa.int32()))

    def decided(epoch: np.ndarray) -> np.ndarray:
        wanted = np.ones(len(epoch), dtype=bool) if decide_from is None else epoch >= decide_from
        return wanted if block is None else wanted & (epoch // EPOCH_BLOCK_SIZE == block)

    tables = []
    # Columns pay off over many epochs (a backfill's block); one epoch, the live DAG's and the simulated loop's
    # case, costs less as one row of windows (the same decisions: tests/unit/test_policy_columns.py).
    many = pc.count_distinct(rows.column("epoch")).as_py() > 1
    evaluate = columns_for(options.kind) if depth == 0 and many else None
    if evaluate is not None:
        epochs, cols, usable = _columns(rows, topology)
        wanted = decided(epochs)
        take = np.nonzero(wanted & usable)[0]
        if len(take):
            columns = evaluate(topology, cols.take(take), options, source_rates)
            tables.append(_column_table(columns, topology, epochs[take], keys, schema))
        rest = epochs[wanted & ~usable]
        rows = rows.filter(pc.is_in(rows.column("epoch"), value_set=pa.array(rest, pa.int64())))
    policy = policy_for(options.kind)
    own = windows_by_epoch(rows)
    by_epoch = {**(history or {}), **own}
    order = {op: k for k, op in enumerate(topology.order)}
    out: list[dict] = []
    one_by_one = np.array(sorted(own), dtype=np.int64)
    for epoch in one_by_one[decided(one_by_one)].tolist():
        history = [EpochWindows(e, by_epoch[e]) for e in range(epoch - depth, epoch) if e in by_epoch]
        for d in policy(topology, by_epoch[epoch], options, source_rates, history, epoch):
            row = {name: getattr(d, name) for name in d.__dataclass_fields__}
            row.update(keys, epoch=epoch, epoch_block=epoch // EPOCH_BLOCK_SIZE, op_index=order[d.operator_id])
            out.append(row)
    tables.append(pa.Table.from_pylist(out, schema=schema))
    return pa.concat_tables(tables).sort_by([("epoch", "ascending"), ("op_index", "ascending")])


def policy_decisions(
    metrics: DataFrame,
    topology: Topology,
    options: PolicyOptions,
    run: RunInfo,
    source_rates: Mapping[str, float] | None = None,
    decide_from: int | None = None,
    max_parallelism: int | None = None,
) -> DataFrame:
    """Decision rows (the decisions table schema, plus ``op_index``) of ``options.kind`` for ``metrics``.

    ``decide_from``: the first epoch decided (earlier ones are read only as a kind's history).
    ``max_parallelism``: a bound of every row's parallelism, for one aggregation instead of two
    (:func:`operator_windows`).
    """
    options = options.resolved(topology)
    rates = dict(source_rates or {})
    # The run's own values, the same in every row, are added by Spark after the Python workers: sent
    # back with each row, the options alone (579 bytes of JSON) were 1.4 GB of Arrow at 10^7 rows.
    constants = {"options": options.to_json(), "run_id": run.run_id, "run_type": run.run_type, "decided_at": run.decided_at}
    types = dict(DECISIONS.spark_types())

    def per_block(key: tuple, rows: pa.Table) -> pa.Table:
        return decide_job(rows, topology, options, run, rates, decide_from, block=key[1].as_py()).drop_columns(list(constants))

    varying = [f"`{name}` {kind}" for name, kind in DECISIONS.spark_types() if name not in constants]
    schema = ", ".join(varying) + ", `op_index` INT"
    windows = operator_windows(metrics, max_parallelism)
    depth = history_epochs(options)
    own = F.floor(F.col("epoch") / EPOCH_BLOCK_SIZE).cast("long")
    # Each epoch's row goes to its own block and to the later blocks whose first epochs it is history for.
    last = F.floor((F.col("epoch") + depth) / EPOCH_BLOCK_SIZE).cast("long")
    windows = windows.withColumn("decided_block", own if depth == 0 else F.explode(F.sequence(own, last)))
    if decide_from is not None:
        windows = windows.filter(F.col("decided_block") >= decide_from // EPOCH_BLOCK_SIZE)
    decided = windows.groupBy("job", "decided_block").applyInArrow(per_block, schema=schema)
    columns = [F.lit(constants[n]).cast(types[n]).alias(n) if n in constants else F.col(n) for n in DECISIONS.names]
    return decided.select(*columns, "op_index")


def decision_json(row: dict) -> str:
    """One decision as a JSON line (non-finite numbers as null, the reference fields first)."""
    out = {
        "job": row["job"],
        "epoch": row["epoch"],
        "operator": row["operator_id"],
        "operator_name": row["operator_name"],
        "current_parallelism": row["current_parallelism"],
        "optimal_parallelism": row["optimal_parallelism"],
        "target_parallelism": row["target_parallelism"],
    }
    for key in ("is_source", "status", "target_input_rate", "capacity_per_instance", "source_rate_ratio", "reason"):
        out[key] = row[key]
    for key, value in out.items():
        if isinstance(value, float) and not math.isfinite(value):
            out[key] = None
    return json.dumps(out)
