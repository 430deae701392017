"""Any policy kind's pure function over every (job, epoch) of a metrics DataFrame, on Spark.

DS2 has a column-expression plan of its own (:mod:`autoscaler.policy.spark.plan`). Every kind
runs through this one instead: Spark sums each epoch's instance rows into one row per operator
(the policy's :class:`~autoscaler.policy.base.OperatorWindow`), groups them by job, and runs the
kind's function in a Python worker for each decided epoch, oldest first, with the epochs before
it as its history. The decision rows have the decisions table's schema, as DS2's do.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.base import EpochWindows, OperatorWindow, history_epochs, policy_for
from autoscaler.policy.spark.plan import RunInfo
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE
from autoscaler.store.schemas import DECISIONS
from autoscaler.topology import Topology

WINDOW_FIELDS = list(OperatorWindow.__dataclass_fields__)


def operator_windows(metrics: DataFrame) -> DataFrame:
    """One row per (job, epoch, operator): the instance rows summed as the policies read them."""
    window = F.col("busy_ms") + F.col("idle_ms") + F.col("backpressured_ms")

    def ratio(part: str) -> F.Column:
        return F.max(F.when(window > 0, F.col(part) / window))

    return metrics.groupBy("job", "epoch", "operator_id").agg(
        F.max("parallelism").alias("parallelism"),
        F.countDistinct("instance").cast("int").alias("instances_observed"),
        F.sum("true_processing_rate").alias("true_processing_rate"),
        F.sum("true_output_rate").alias("true_output_rate"),
        F.sum("observed_output_rate").alias("observed_output_rate"),
        F.max("max_parallelism").alias("max_parallelism"),
        F.count_if(F.col("warmup")).cast("int").alias("warmup_instances"),
        F.sum("observed_processing_rate").alias("observed_processing_rate"),
        F.coalesce(ratio("busy_ms"), F.lit(0.0)).alias("busy_ratio_max"),
        F.coalesce(ratio("backpressured_ms"), F.lit(0.0)).alias("backpressure_ratio_max"),
        F.sum("pending_records").alias("pending_records"),
    )


def _windows_by_epoch(rows: pd.DataFrame) -> dict[int, dict[str, OperatorWindow]]:
    out: dict[int, dict[str, OperatorWindow]] = {}
    for rec in rows.to_dict("records"):
        values = {k: rec[k] for k in WINDOW_FIELDS}
        values["max_parallelism"] = None if pd.isna(values["max_parallelism"]) else int(values["max_parallelism"])
        values["pending_records"] = None if pd.isna(values["pending_records"]) else float(values["pending_records"])
        for key in ("parallelism", "instances_observed", "warmup_instances"):
            values[key] = int(values[key])
        out.setdefault(int(rec["epoch"]), {})[rec["operator_id"]] = OperatorWindow(**values)
    return out


def decide_job(
    rows: pd.DataFrame,
    topology: Topology,
    options: PolicyOptions,
    run: RunInfo,
    source_rates: Mapping[str, float],
    decide_from: int | None,
) -> pd.DataFrame:
    """Decision rows of one job's epochs from ``decide_from`` on (earlier ones are only history)."""
    policy = policy_for(options.kind)
    depth = history_epochs(options)
    by_epoch = _windows_by_epoch(rows)
    job = str(rows["job"].iloc[0])
    order = {op: k for k, op in enumerate(topology.order)}
    options_json = options.to_json()
    out: list[dict] = []
    for epoch in sorted(by_epoch):
        if decide_from is not None and epoch < decide_from:
            continue
        history = [EpochWindows(e, by_epoch[e]) for e in range(epoch - depth, epoch) if e in by_epoch]
        for d in policy(topology, by_epoch[epoch], options, source_rates, history):
            row = {name: getattr(d, name) for name in d.__dataclass_fields__}
            row.update(job=job, epoch=epoch, epoch_block=epoch // EPOCH_BLOCK_SIZE, options=options_json, run_id=run.run_id,
                       run_type=run.run_type, decided_at=run.decided_at, op_index=order[d.operator_id])  # fmt: skip
            out.append(row)
    columns = [*DECISIONS.names, "op_index"]
    frame = pd.DataFrame(out, columns=columns)
    frame["decided_at"] = pd.to_datetime(frame["decided_at"], utc=True)
    return frame


def kind_decisions(
    metrics: DataFrame,
    topology: Topology,
    options: PolicyOptions,
    run: RunInfo,
    source_rates: Mapping[str, float] | None = None,
    decide_from: int | None = None,
) -> DataFrame:
    """Decision rows (the decisions table schema, plus ``op_index``) of ``options.kind`` for ``metrics``."""
    options = options.resolved(topology)
    rates = dict(source_rates or {})

    def per_job(rows: pd.DataFrame) -> pd.DataFrame:
        return decide_job(rows, topology, options, run, rates, decide_from)

    schema = DECISIONS.spark_ddl() + ", `op_index` INT"
    return operator_windows(metrics).groupBy("job").applyInPandas(per_job, schema=schema)
