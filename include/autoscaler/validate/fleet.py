"""One epoch of many jobs validated in one GX run: the fleet's validation, a verdict per job.

GX's cost is per expectation evaluated, not per row: a job's epoch is a few dozen rows, and running
its two suites took about a second per job. Here the jobs' batches (the same derived views as a
job's own run, :mod:`autoscaler.validate.view`) are concatenated and validated once per group of
jobs that share their thresholds. What differs per job travels in the rows: the topology
(``topology_parallelism``, ``topology_is_source``), the measured window (``expected_window_ms``)
and the job itself (the offending rows are named by job, epoch, operator and instance, so each
failure is charged to the job it concerns: :func:`autoscaler.validate.parse.failures_by_job`).

Then each job's verdict is settled as its own run settles it: a failed epoch is quarantined, a
re-validated one released, the verdict recorded (:mod:`autoscaler.validate.stored`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import METRICS
from autoscaler.validate import gxrun, view
from autoscaler.validate.check import epoch_validation
from autoscaler.validate.config import ValidationConfig
from autoscaler.validate.parse import failures_by_job, merge_charges
from autoscaler.validate.quarantine import read_quarantine
from autoscaler.validate.records import record_validations
from autoscaler.validate.result import EpochValidation
from autoscaler.validate.stored import settle
from autoscaler.validate.suite import build_suites

FLEET_SUITE = "fleet"  # the suites' and Data Docs pages' name for a fleet's batch


@dataclass
class _JobBatch:
    config: ValidationConfig
    rows: pa.Table
    previous: pa.Table | None
    from_quarantine: bool


def _read(store_root: str | Path, job: str, epoch: int, config: ValidationConfig) -> _JobBatch:
    rows = read_epochs(store_root, METRICS, job, [epoch])
    from_quarantine = False
    if rows.num_rows == 0 and (found := read_quarantine(store_root, job, epoch)) is not None:
        rows, from_quarantine = found[0], True
    previous = read_epochs(store_root, METRICS, job, [epoch - 1]) if epoch > 0 else None
    return _JobBatch(config, rows, previous, from_quarantine)


def _window_ms(config: ValidationConfig) -> float:
    return config.window_s * 1000.0 if config.window_s is not None else math.nan


def _job_frames(epoch: int, job: str, batch: _JobBatch) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One job's two batches, derived alone (the way its own run derives them)."""
    config = batch.config
    intervals = {epoch: config.data_interval} if config.data_interval is not None else None
    metrics = view.pandas_metrics(batch.rows, batch.previous, intervals, config.topology)
    metrics["expected_window_ms"] = _window_ms(config)
    slots = view.pandas_slots(metrics, [epoch], config.topology)
    slots["job"] = job
    return metrics, slots


def _frames(epoch: int, batches: dict[str, _JobBatch]) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """Every job's batches derived in one pass; the jobs whose batch could not be built, with why.

    Derived job by job, 100 jobs took 3.8 of the validation's 6.9 s (pandas' cost per call, not per
    row). If the one pass fails (rows of another schema, say), each job is derived alone, so that
    only the job at fault fails.
    """
    try:
        rows = pa.concat_tables([b.rows for b in batches.values()])
        earlier = [b.previous for b in batches.values() if b.previous is not None]
        previous = pa.concat_tables(earlier) if earlier else None
        topologies = {job: b.config.topology for job, b in batches.items()}
        intervals = {job: b.config.data_interval for job, b in batches.items()}
        metrics = view.pandas_fleet_metrics(rows, previous, intervals, topologies)
        metrics["expected_window_ms"] = (
            metrics["job"].map({job: _window_ms(b.config) for job, b in batches.items()}).astype(float)
        )
        return metrics, view.pandas_fleet_slots(metrics, epoch, topologies), {}
    except Exception:  # the per-job pass below names the job at fault and its error
        pass
    metrics_parts, slots_parts, errors = [], [], {}
    for job, batch in batches.items():
        try:
            m, sl = _job_frames(epoch, job, batch)
        except Exception as exc:  # one job's unreadable rows never stop the batch
            errors[job] = f"{type(exc).__name__}: {exc}"
            continue
        metrics_parts.append(m)
        slots_parts.append(sl)
    if not metrics_parts:
        return pd.DataFrame(), pd.DataFrame(), errors
    return pd.concat(metrics_parts, ignore_index=True), pd.concat(slots_parts, ignore_index=True), errors


def _group_key(config: ValidationConfig) -> str:
    """Jobs validated together share every threshold except what travels in their rows."""
    shared = {k: v for k, v in config.thresholds().items() if k not in ("topology", "window_s")}
    return json.dumps(shared, sort_keys=True, default=str)


def validate_fleet_epoch(
    store_root: str | Path,
    epoch: int,
    configs: Mapping[str, ValidationConfig],
    docs_dir: Path | None = None,
    run_id: str | None = None,
) -> tuple[dict[str, EpochValidation], dict[str, str]]:
    """Validate ``epoch`` of every job in ``configs``; quarantine and record each verdict.

    Returns the verdicts, and the jobs whose batch could not even be built with the reason (their
    own problem: the others are validated).
    """
    batches: dict[str, _JobBatch] = {}
    errors: dict[str, str] = {}
    for job, config in configs.items():
        try:
            batches[job] = _read(store_root, job, epoch, config)
        except Exception as exc:  # one job's unreadable rows never stop the batch
            errors[job] = f"{type(exc).__name__}: {exc}"
    groups: dict[str, list[str]] = {}
    for job, batch in batches.items():
        groups.setdefault(_group_key(batch.config), []).append(job)
    results: dict[str, EpochValidation] = {}
    with gxrun.one_docs_build(docs_dir):
        for jobs in groups.values():
            metrics, slots, failed = _frames(epoch, {j: batches[j] for j in jobs})
            errors.update(failed)
            built = {j: batches[j] for j in jobs if j not in failed}
            if built:
                results.update(_validate_group(store_root, epoch, built, metrics, slots, docs_dir, run_id))
    return results, errors


def _validate_group(
    store_root: str | Path,
    epoch: int,
    batches: dict[str, _JobBatch],
    metrics: pd.DataFrame,
    slots: pd.DataFrame,
    docs_dir: Path | None,
    run_id: str | None,
) -> dict[str, EpochValidation]:
    jobs = list(batches)
    first = batches[jobs[0]].config
    metrics_suite, slots_suite = build_suites(first, FLEET_SUITE, (epoch, epoch), fleet=jobs)
    index = ["job", *view.INDEX_COLUMNS]
    name = f"{FLEET_SUITE}-epoch-{epoch}"
    runs = [
        gxrun.run_suite(metrics_suite, "metrics", metrics, "pandas", index, name, docs_dir),
        gxrun.run_suite(slots_suite, "slots", slots, "pandas", index, name, docs_dir),
    ]
    names = {op.id: op.name for b in batches.values() for op in b.config.topology.operators.values()}
    found, evaluated = merge_charges((failures_by_job(r.result.results, jobs, names) for r in runs), jobs)
    pages = tuple(r.docs_page for r in runs if r.docs_page)
    now = datetime.now(UTC)
    out = {}
    for job, batch in batches.items():
        thresholds = batch.config.thresholds()
        result = epoch_validation(job, epoch, "pandas", batch.rows.num_rows, evaluated, found[job], now, pages, thresholds)
        result = settle(store_root, job, result, batch.from_quarantine)
        record_validations(store_root, job, [result], run_id)
        out[job] = result
    return out
