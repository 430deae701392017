"""DS2 over every (job, epoch) of a metrics DataFrame, as Spark column expressions.

One aggregation turns an epoch's instance rows into one wide row (per operator: instances
seen, parallelism, summed rates), the model runs on that row as column expressions built
from the topology in topological order (no Python per row), and the per-operator results are
unpivoted into decision rows. The same plan serves one live epoch and millions of backfilled
ones. :mod:`autoscaler.policy.ds2` is the plain-Python reference it is tested against.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.rounding import SATURATED
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE
from autoscaler.store.schemas import DECISIONS
from autoscaler.topology import Topology


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    run_type: str
    decided_at: datetime


def _c(name: str, k: int) -> Column:
    return F.col(f"{name}{k}")


def _round_up(optimal: Column, factor: float) -> Column:
    scaled = optimal * F.lit(1.0 + factor)
    return (
        F.when(F.isnan(optimal), F.lit(0))
        .when(scaled >= SATURATED, F.lit(SATURATED))
        .otherwise(F.greatest(F.ceil(scaled), F.lit(0)).cast("int"))
    )


def _least(*cols: Column) -> Column:
    return cols[0] if len(cols) == 1 else F.least(*cols)


def _aggregate(metrics: DataFrame, topology: Topology) -> DataFrame:
    aggs: list[Column] = []
    for k, op in enumerate(topology.order):
        is_op = F.col("operator_id") == F.lit(op)
        aggs += [
            F.count_if(is_op).cast("int").alias(f"instances_{k}"),
            F.max(F.when(is_op, F.col("parallelism"))).alias(f"parallelism_{k}"),
            F.sum(F.when(is_op, F.col("instance").cast("long"))).alias(f"instance_sum_{k}"),
            F.max(F.when(is_op, F.col("max_parallelism"))).alias(f"max_parallelism_{k}"),
            F.count_if(is_op & F.col("warmup")).alias(f"warmup_instances_{k}"),
            F.sum(F.when(is_op, F.col("true_processing_rate"))).alias(f"true_processing_{k}"),
            F.sum(F.when(is_op, F.col("true_output_rate"))).alias(f"true_output_{k}"),
            F.sum(F.when(is_op, F.col("observed_output_rate"))).alias(f"observed_output_{k}"),
        ]
    return metrics.groupBy("job", "epoch").agg(*aggs)


def ds2_decisions(
    metrics: DataFrame,
    topology: Topology,
    options: PolicyOptions,
    run: RunInfo,
    source_rates: dict[str, float] | None = None,
) -> DataFrame:
    """Decision rows (the decisions table schema) for every (job, epoch) in ``metrics``."""
    options = options.resolved(topology)
    source_rates = source_rates or {}
    order = topology.order
    ops = topology.operators
    wide = _aggregate(metrics, topology)

    # Completeness and warm-up, per epoch.
    missing = {}
    for k in range(len(order)):
        p = _c("parallelism_", k)
        missing[k] = p.isNull() | (_c("instances_", k) != p) | (_c("instance_sum_", k) != p.cast("long") * (p + 1) / 2)
    incomplete = reduce(lambda a, b: a | b, missing.values())
    warm = reduce(lambda a, b: a | b, [_c("warmup_instances_", k) > 0 for k in range(len(order))])
    wide = wide.withColumn("status", F.when(incomplete, F.lit("incomplete")).when(warm, F.lit("warmup")).otherwise(F.lit("ok")))
    incomplete_why = F.concat_ws(
        "; ",
        *[
            F.when(
                missing[k],
                F.when(
                    _c("instances_", k) != F.coalesce(_c("parallelism_", k), F.lit(ops[op].parallelism)),
                    F.format_string(
                        "%s has %d of %d instances",
                        F.lit(ops[op].name),
                        _c("instances_", k),
                        F.coalesce(_c("parallelism_", k), F.lit(ops[op].parallelism)),
                    ),
                ).otherwise(F.lit(f"{ops[op].name} has duplicated instances")),
            )
            for k, op in enumerate(order)
        ],
    )
    warm_why = F.concat_ws(", ", *[F.when(_c("warmup_instances_", k) > 0, F.lit(ops[op].name)) for k, op in enumerate(order)])
    wide = wide.withColumn(
        "status_reason",
        F.when(F.col("status") == "incomplete", F.concat(F.lit("incomplete metrics, no change: "), incomplete_why)).when(
            F.col("status") == "warmup", F.concat(F.lit("warm-up window (the job restarted), no change: "), warm_why)
        ),
    )

    # The model, in topological order: outputs at optimal parallelism flow downstream.
    index = {op: k for k, op in enumerate(order)}
    ratios = []
    for k, op in enumerate(order):
        p, tp, to, oo = _c("parallelism_", k), _c("true_processing_", k), _c("true_output_", k), _c("observed_output_", k)
        if ops[op].is_source:
            override = source_rates.get(op)
            if override is None:
                out = to
            elif override == -1:
                out = oo
            else:
                out = F.lit(float(override)) * p
            wide = wide.withColumn(f"target_output_{k}", out)
            ratios.append(F.when(oo > 0, _c("target_output_", k) / oo))
            continue
        target_input = reduce(lambda a, b: a + b, [_c("target_output_", index[up]) for up in topology.upstream(op)])
        wide = wide.withColumn(f"target_input_{k}", target_input).withColumn(f"capacity_{k}", F.when(p > 0, tp / p))
        inp, cap = _c("target_input_", k), _c("capacity_", k)
        optimal = F.when(cap > 0, inp / cap).when(inp > 0, F.lit(math.inf)).otherwise(F.lit(math.nan))
        wide = (
            wide.withColumn(f"optimal_{k}", optimal)
            .withColumn(f"target_output_{k}", F.when(tp > 0, to / tp * inp).otherwise(F.lit(0.0)))
            .withColumn(f"rounded_{k}", _round_up(_c("optimal_", k), options.factor))
        )
    non_sources = [k for k, op in enumerate(order) if not ops[op].is_source]
    wide = wide.withColumn("ratio", ratios[0] if len(ratios) == 1 else F.greatest(*ratios))
    no_scale_up = reduce(lambda a, b: a & b, [_c("rounded_", k) <= _c("parallelism_", k) for k in non_sources], F.lit(True))
    if options.threshold is None:
        wide = wide.withColumn("apply_threshold", F.lit(False))
    else:
        wide = wide.withColumn("apply_threshold", F.coalesce((F.col("ratio") > options.threshold) & no_scale_up, F.lit(False)))

    structs = []
    for k, op in enumerate(order):
        meta = ops[op]
        current = F.coalesce(_c("parallelism_", k), F.lit(meta.parallelism))
        ok = F.col("status") == "ok"
        if meta.is_source:
            target = current
            why = F.format_string("source: never rescaled; emits %.1f r/s", _c("target_output_", k))
            fields = {
                "true_processing_rate": _c("true_processing_", k),
                "true_output_rate": _c("target_output_", k),
                "capacity_per_instance": F.lit(None).cast("double"),
                "target_input_rate": F.lit(None).cast("double"),
                "target_output_rate": _c("target_output_", k),
                "optimal_parallelism": F.lit(None).cast("double"),
            }
        else:
            target, why = _proposal(wide, k, op, options)
            fields = {
                "true_processing_rate": _c("true_processing_", k),
                "true_output_rate": _c("true_output_", k),
                "capacity_per_instance": _c("capacity_", k),
                "target_input_rate": _c("target_input_", k),
                "target_output_rate": _c("target_output_", k),
                "optimal_parallelism": _c("optimal_", k),
            }
        structs.append(
            F.struct(
                F.lit(op).alias("operator_id"),
                F.lit(meta.name).alias("operator_name"),
                F.lit(meta.is_source).alias("is_source"),
                F.col("status").alias("status"),
                current.alias("current_parallelism"),
                _c("instances_", k).alias("instances_observed"),
                *[F.when(ok, v).cast("double").alias(n) for n, v in fields.items()],
                F.when(ok, target).otherwise(current).cast("int").alias("target_parallelism"),
                F.when(ok, F.col("ratio")).alias("source_rate_ratio"),
                F.when(ok, why).otherwise(F.col("status_reason")).alias("reason"),
                F.lit(k).alias("op_index"),
            )
        )
    rows = wide.select("job", "epoch", F.inline(F.array(*structs)))
    rows = rows.select(
        "*",
        F.floor(F.col("epoch") / EPOCH_BLOCK_SIZE).alias("epoch_block"),
        F.lit(options.to_json()).alias("options"),
        F.lit(run.run_id).alias("run_id"),
        F.lit(run.run_type).alias("run_type"),
        F.lit(run.decided_at).alias("decided_at"),
    )
    return rows.select(*[F.col(n).cast(t).alias(n) for n, t in DECISIONS.spark_types()], "op_index")


def _proposal(wide: DataFrame, k: int, op: str, options: PolicyOptions) -> tuple[Column, Column]:
    """The proposal for non-source operator ``k`` and the words that explain it."""
    p, raw, opt, inp, cap = (
        _c("parallelism_", k),
        _c("rounded_", k),
        _c("optimal_", k),
        _c("target_input_", k),
        _c("capacity_", k),
    )
    ratio, apply = F.col("ratio"), F.col("apply_threshold")
    adjusted = F.when(ratio * raw >= SATURATED, F.lit(SATURATED)).otherwise(F.ceil(ratio * raw).cast("int"))
    proposal = F.when(apply, adjusted).otherwise(raw)
    low = F.lit(options.min_parallelism.get(op, 1))
    caps = [F.lit(c) for c in (options.max_parallelism.get(op), options.job_max_parallelism) if c] + [_c("max_parallelism_", k)]
    high = F.coalesce(_least(*caps), F.lit(SATURATED))
    bounded = F.least(F.greatest(proposal, low), high)
    target = bounded
    key_groups = F.coalesce(_c("max_parallelism_", k), F.lit(options.job_max_parallelism).cast("int"))
    if options.align_to_key_groups:
        top = F.least(high, key_groups)
        divisors = F.filter(F.sequence(bounded, top), lambda x: key_groups % x == 0)
        target = F.when(key_groups.isNotNull() & (bounded <= top), F.coalesce(F.array_min(divisors), bounded)).otherwise(bounded)
    why = F.concat(
        F.when(F.isnan(opt), F.lit("no input and no processing observed: optimal 0"))
        .when(
            opt == math.inf,
            F.format_string("input %.1f r/s but no processing observed: capacity unknown, estimate saturates", inp),
        )
        .otherwise(F.format_string("input %.1f r/s / capacity %.1f r/s per instance = %.4f", inp, cap, opt)),
        F.format_string("; x(1+%s) rounded up = %d", F.lit(f"{options.factor:g}"), raw),
        F.when(
            apply,
            F.format_string(
                "; no scale-up and source ratio %.4f > threshold %s: x%.4f = %d",
                ratio,
                F.lit(f"{options.threshold:g}" if options.threshold else ""),
                ratio,
                proposal,
            ),
        ).otherwise(F.lit("")),
        F.when(bounded > proposal, F.format_string("; raised to min %d", low))
        .when(bounded < proposal, F.format_string("; capped at max %d", high))
        .otherwise(F.lit("")),
        F.when(target != bounded, F.format_string("; aligned to %d (divides %d key groups)", target, key_groups)).otherwise(
            F.lit("")
        ),
        F.when(target > p, F.format_string(" -> scale up %d -> %d", p, target))
        .when(target < p, F.format_string(" -> scale down %d -> %d", p, target))
        .otherwise(F.format_string(" -> keep %d", p)),
    )
    return target, why


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
