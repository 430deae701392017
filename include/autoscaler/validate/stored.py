"""Validate epochs in the store: read, validate, quarantine what fails, record every verdict.

This is what the Airflow task calls before any policy run. A failing epoch's rows leave the
metrics store (see :mod:`.quarantine`), so no policy run can read them; the verdict goes into
the ``validations`` table either way. A re-run of an epoch whose rows are in quarantine (and
not back in the store) validates the quarantined rows -- typically with corrected thresholds or
topology -- and moves them back if they now pass: that is how a fix makes the data usable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoscaler.config.paths import data_dir
from autoscaler.store.delta import is_store_url
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import METRICS
from autoscaler.validate.check import validate_dataframe, validate_rows
from autoscaler.validate.config import Interval, ValidationConfig
from autoscaler.validate.quarantine import (
    quarantine_dir,
    quarantine_epochs,
    quarantined_epochs,
    read_quarantine,
    release_quarantine,
)
from autoscaler.validate.records import record_validations
from autoscaler.validate.result import EpochValidation

DOCS_FOLDER = "validation-docs"
# Backfill ranges: measured by benchmarks/bench_validation.py (see benchmarks/results/validation.md).
RANGE_ENGINE = "pandas"


def default_docs_dir(store_root: str | Path) -> Path:
    """Data Docs go next to the store, in the project's data folder (``data/validation-docs``); beside a
    store on an object store, in the data folder (the api-server serves them from there)."""
    if is_store_url(store_root):
        return data_dir() / DOCS_FOLDER
    return Path(store_root).resolve().parent / DOCS_FOLDER


def validate_epoch(
    store_root: str | Path,
    job: str,
    epoch: int,
    config: ValidationConfig,
    docs_dir: Path | None = None,
    docs: bool = True,
    run_id: str | None = None,
) -> EpochValidation:
    """Validate one stored epoch before a decision; quarantine it on failure; record the verdict.

    The epoch before (if stored) is read too, to check that windows do not overlap across
    epochs. Data Docs go to ``docs_dir`` (default :func:`default_docs_dir`) unless ``docs`` is false.
    """
    rows = read_epochs(store_root, METRICS, job, [epoch])
    from_quarantine = False
    if rows.num_rows == 0 and (found := read_quarantine(store_root, job, epoch)) is not None:
        rows, from_quarantine = found[0], True
    previous = read_epochs(store_root, METRICS, job, [epoch - 1]) if epoch > 0 else None
    docs_at = (docs_dir or default_docs_dir(store_root)) if docs else None
    result = validate_rows(job, rows, config, epochs=[epoch], previous=previous, docs_dir=docs_at)[epoch]
    result = settle(store_root, job, result, from_quarantine)
    record_validations(store_root, job, [result], run_id)
    return result


def validate_range(
    store_root: str | Path,
    job: str,
    first: int,
    last: int,
    config: ValidationConfig,
    intervals: Mapping[int, Interval] | None = None,
    engine: str | None = None,
    spark: Any = None,
    docs_dir: Path | None = None,
    docs: bool = True,
    run_id: str | None = None,
) -> dict[int, EpochValidation]:
    """Validate the stored epochs in [first, last] (a backfill) in one pass; quarantine the failures.

    ``engine`` is ``pandas`` or ``spark`` (default :data:`RANGE_ENGINE`, the faster one measured);
    Spark needs ``spark`` (a session). Epochs without rows in the range are not validated:
    there is nothing to decide on.
    """
    engine = engine or RANGE_ENGINE
    docs_at = (docs_dir or default_docs_dir(store_root)) if docs else None
    previous_epoch = [first - 1] if first > 0 else []
    if engine == "spark":
        from autoscaler.store.spark import metrics_store

        if spark is None:
            raise ValueError("validate_range(engine='spark') needs a Spark session")
        df = metrics_store(spark, str(store_root), job, first, last)
        epochs = sorted(r["epoch"] for r in df.select("epoch").distinct().collect())
        if not epochs:
            return {}
        before = metrics_store(spark, str(store_root), job, first - 1, first - 1) if previous_epoch else None
        df = df.persist()
        try:
            results = validate_dataframe(job, df, config, epochs, before, intervals, docs_at)
        finally:
            df.unpersist()
    elif engine == "pandas":
        import pyarrow.compute as pc

        rows = read_epochs(store_root, METRICS, job, range(first, last + 1))
        epochs = sorted(pc.unique(rows.column("epoch")).to_pylist())
        if not epochs:
            return {}
        before = read_epochs(store_root, METRICS, job, previous_epoch) if previous_epoch else None
        results = validate_rows(job, rows, config, epochs=epochs, previous=before, intervals=intervals, docs_dir=docs_at)
    else:
        raise ValueError(f"unknown engine {engine!r}: use 'pandas' or 'spark'")
    failed = {e: _with_quarantine(store_root, r) for e, r in results.items() if not r.success}
    if failed:
        quarantine_epochs(store_root, job, {e: r.to_dict() for e, r in failed.items()})
    settled = {**results, **failed}
    record_validations(store_root, job, settled.values(), run_id)
    return dict(sorted(settled.items()))


def settle(store_root: str | Path, job: str, result: EpochValidation, from_quarantine: bool) -> EpochValidation:
    """Quarantine a failed epoch (result JSON next to the rows); release a re-validated one that passed."""
    if not result.success:
        result = _with_quarantine(store_root, result)
        quarantine_epochs(store_root, job, {result.epoch: result.to_dict()})
        return result
    if from_quarantine:
        release_quarantine(store_root, job, result.epoch)
    return result


def _with_quarantine(store_root: str | Path, result: EpochValidation) -> EpochValidation:
    return dataclasses.replace(result, quarantine=str(quarantine_dir(store_root, result.job, result.epoch)))


__all__ = ["default_docs_dir", "quarantined_epochs", "validate_epoch", "validate_range"]
