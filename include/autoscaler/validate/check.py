"""Validate metrics rows (no store side effects): build the batches, run both suites, charge failures to epochs.

pandas validates rows in memory (one epoch, or a range that fits); Spark validates a DataFrame
(a backfill range read from the store). Both run the same suites built by
:func:`autoscaler.validate.suite.build_suites` over the same derived columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.store.parquet import validate_job_name
from autoscaler.validate import gxrun, view
from autoscaler.validate.config import Interval, ValidationConfig
from autoscaler.validate.parse import failures_by_epoch, merge_charges
from autoscaler.validate.result import EpochValidation, Failure
from autoscaler.validate.suite import RULES, build_suites

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def validate_rows(
    job: str,
    rows: pa.Table,
    config: ValidationConfig,
    epochs: Sequence[int] | None = None,
    previous: pa.Table | None = None,
    intervals: Mapping[int, Interval] | None = None,
    docs_dir: Path | None = None,
    run_name: str | None = None,
) -> dict[int, EpochValidation]:
    """Validate metrics rows with the pandas engine; one result per epoch.

    ``epochs`` are the epochs being validated (default: those in ``rows``; give them to
    validate an epoch that has no rows). ``previous`` holds the rows of the epoch before the
    first one (window ordering across epochs). ``intervals`` maps epochs to their data
    interval; by default the config's interval applies to a single epoch.
    """
    epochs = _epochs(rows.column("epoch").to_pylist() if "epoch" in rows.column_names else [], epochs)
    intervals = _intervals(config, epochs, intervals)
    metrics = view.pandas_metrics(rows, previous, intervals, config.topology)
    slots = view.pandas_slots(metrics, epochs, config.topology)
    counts = _row_counts(rows)
    return _run(job, epochs, metrics, slots, "pandas", config, intervals, counts, docs_dir, run_name)


def validate_dataframe(
    job: str,
    df: DataFrame,
    config: ValidationConfig,
    epochs: Sequence[int],
    previous: DataFrame | None = None,
    intervals: Mapping[int, Interval] | None = None,
    docs_dir: Path | None = None,
    run_name: str | None = None,
) -> dict[int, EpochValidation]:
    """Validate a Spark DataFrame of metrics rows with the Spark engine; one result per epoch."""
    from pyspark.sql import functions as F

    epochs = _epochs([], epochs)
    intervals = _intervals(config, epochs, intervals)
    # Persisted: GX runs one Spark job per metric over the batch; the derived view is computed once.
    metrics = view.spark_metrics(df, previous, intervals, config.topology).persist()
    slots = view.spark_slots(df, epochs, config.topology).persist()
    try:
        counts = {int(r["epoch"]): int(r["n"]) for r in df.groupBy("epoch").agg(F.count(F.lit(1)).alias("n")).collect()}
        return _run(job, epochs, metrics, slots, "spark", config, intervals, counts, docs_dir, run_name)
    finally:
        metrics.unpersist()
        slots.unpersist()


def _run(
    job: str,
    epochs: list[int],
    metrics: Any,
    slots: Any,
    engine: str,
    config: ValidationConfig,
    intervals: dict[int, Interval] | None,
    counts: dict[int, int],
    docs_dir: Path | None,
    run_name: str | None,
) -> dict[int, EpochValidation]:
    validate_job_name(job)
    metrics_suite, slots_suite = build_suites(config, job, (epochs[0], epochs[-1]))
    name = run_name or (f"{job}-epoch-{epochs[0]}" if len(epochs) == 1 else f"{job}-epochs-{epochs[0]}-{epochs[-1]}")
    present = [c for c in view.INDEX_COLUMNS if c in metrics.columns]
    runs = [
        gxrun.run_suite(metrics_suite, "metrics", metrics, engine, present, name, docs_dir),
        gxrun.run_suite(slots_suite, "slots", slots, engine, view.INDEX_COLUMNS, name, docs_dir),
    ]
    names = {op.id: op.name for op in config.topology.operators.values()}
    single = len(epochs) == 1
    per_epoch, evaluated = merge_charges((failures_by_epoch(r.result.results, epochs, names, single) for r in runs), epochs)
    pages = tuple(r.docs_page for r in runs if r.docs_page)
    now = datetime.now(UTC)
    out = {}
    for epoch in epochs:
        thresholds = config.for_epoch((intervals or {}).get(epoch)).thresholds()
        out[epoch] = epoch_validation(
            job, epoch, engine, counts.get(epoch, 0), evaluated, per_epoch[epoch], now, pages, thresholds
        )
    return out


def epoch_validation(
    job: str,
    epoch: int,
    engine: str,
    rows: int,
    evaluated: int,
    failures: Sequence[Failure],
    validated_at: datetime,
    pages: tuple[str, ...],
    thresholds: dict[str, Any],
) -> EpochValidation:
    """One epoch's verdict from the failures charged to it: critical ones fail it, the others warn."""
    rank = {rule: i for i, rule in enumerate(RULES)}
    found = sorted(failures, key=lambda f: rank.get(f.rule, len(rank)))  # stable: suite order within a rule
    return EpochValidation(
        job=job,
        epoch=epoch,
        engine=engine,
        rows=rows,
        evaluated=evaluated,
        failures=tuple(f for f in found if f.severity == "critical"),
        warnings=tuple(f for f in found if f.severity != "critical"),
        validated_at=validated_at,
        docs_pages=pages,
        thresholds=thresholds,
    )


def _epochs(found: Sequence[Any], given: Sequence[int] | None) -> list[int]:
    epochs = sorted({int(e) for e in (given if given is not None else found) if e is not None})
    if not epochs:
        raise ValueError("no epochs to validate: pass the epoch numbers when there are no rows")
    return epochs


def _intervals(config: ValidationConfig, epochs: list[int], given: Mapping[int, Interval] | None) -> dict[int, Interval] | None:
    if given is not None:
        return dict(given)
    if config.data_interval is not None and len(epochs) == 1:
        return {epochs[0]: config.data_interval}
    return None


def _row_counts(rows: pa.Table) -> dict[int, int]:
    if "epoch" not in rows.column_names or rows.num_rows == 0:
        return {}
    counts = pc.value_counts(rows.column("epoch")).to_pylist()
    return {int(c["values"]): int(c["counts"]) for c in counts if c["values"] is not None}
