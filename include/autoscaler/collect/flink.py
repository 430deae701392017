"""Collect one epoch's metrics of a running Flink job into the metrics store.

The boundary snapshot of every epoch is kept (``snapshots/job=<job>/epoch=<n>.json``) so the
next epoch diffs against it, and a re-run of an epoch recomputes exactly the same rows from
the two stored snapshots (idempotent). The triggerer takes these boundaries on time
(:mod:`autoscaler.collect.boundaries`), so a run that starts late still measures its own epoch;
without them the collector reads the end boundary itself when it runs. With no usable previous
boundary (the first epoch, or one older than ``max_gap_s``) it measures a short window now,
stored as ``epoch=<n>.start.json`` and ``epoch=<n>.end.json`` beside the boundary.

An epoch's window always starts where the previous epoch's window ended, so windows never overlap.
When that end lies past this epoch's own boundary (the previous run measured late, past it), the
window ends now instead, stored as ``epoch=<n>.end.json``; runs that catch up return to the
boundaries taken on time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from autoscaler.collect.snapshot import (
    Snapshot,
    failovers_between,
    load_snapshot,
    restart_between,
    save_snapshot,
    take_snapshot,
    window_metrics,
)
from autoscaler.collect.state import collect_state
from autoscaler.flink.client import FlinkRestClient
from autoscaler.store.files import StorePath, store_path
from autoscaler.store.parquet import validate_job_name, write_epochs
from autoscaler.store.schemas import METRICS
from autoscaler.topology import write_topology_csv


@dataclass(frozen=True)
class CollectionResult:
    job: str
    epoch: int
    rows: pa.Table
    window_s: float
    measured_short_window: bool  # no usable previous boundary: measured a window now
    warmup_reason: str | None  # the window spans a restart: kept, never used for a decision
    flink_job_id: str
    failovers: int = 0  # times the job failed over in the window (its numRestarts grew, id and parallelism kept)
    state_bytes: int | None = None  # the job's state in its latest completed checkpoint (table STATE); None: none yet

    @property
    def failing_over(self) -> str | None:
        """The window's failovers in words (the epoch's outcome is then failing-over), or None."""
        return f"the job failed over {self.failovers} times in this epoch's window" if self.failovers else None

    def summary(self) -> str:
        how = "short window measured now" if self.measured_short_window else "since the previous epoch's window"
        warm = f"; warm-up: {self.warmup_reason}" if self.warmup_reason else ""
        return (
            f"job {self.job} epoch {self.epoch}: {self.rows.num_rows} instance rows over {self.window_s:.1f} s "
            f"({how}; Flink job {self.flink_job_id}){warm}"
        )


def snapshot_path(store_root: str | Path, job: str, epoch: int, start: bool = False, end: bool = False) -> StorePath:
    """The boundary snapshot at the end of ``epoch`` (or the start or end of a short window measured for it)."""
    name = f"epoch={epoch}.start.json" if start else f"epoch={epoch}.end.json" if end else f"epoch={epoch}.json"
    return store_path(store_root, "snapshots", f"job={validate_job_name(job)}", name)


def topology_path(store_root: str | Path, job: str) -> StorePath:
    return store_path(store_root, "topologies", f"{validate_job_name(job)}.csv")


def collect_epoch_metrics(
    client: FlinkRestClient,
    job_name: str,
    job: str,
    epoch: int,
    store_root: str | Path,
    short_window_s: float = 20.0,
    max_gap_s: float | None = None,
    source_rate_metric: str | None = None,
) -> CollectionResult:
    """Measure epoch ``epoch`` of the Flink job ``job_name`` and write it to the metrics store.

    ``job`` is the registered job (store partition); ``max_gap_s`` bounds how old the previous
    boundary may be to serve as this window's start (default: no bound); ``source_rate_metric``
    is the sources' target-rate gauge, if the job has one (see :mod:`autoscaler.collect.snapshot`).
    """
    boundary_path = snapshot_path(store_root, job, epoch)
    start_path = snapshot_path(store_root, job, epoch, start=True)
    end_path = snapshot_path(store_root, job, epoch, end=True)
    boundary = load_snapshot(boundary_path)
    previous = load_snapshot(start_path)
    short = previous is not None  # an earlier attempt measured a short window: recompute the same rows
    if not short:
        previous = _previous_window_end(store_root, job, epoch, job_name, boundary, max_gap_s)
    if previous is None:
        previous = take_snapshot(client, job_name, source_rate_metric)
        save_snapshot(previous, start_path)
        short = True
    # An earlier attempt's measured end, else the boundary taken on time. Neither serves when it leaves
    # a window shorter than a short window: the previous epoch's window ran up to or past this epoch's
    # boundary (its run was late: a 5-ms window once read as no processing and proposed Parse 1 -> 8),
    # or this epoch's short window started after its boundary.
    current = load_snapshot(end_path) or boundary
    if current is not None and (current.taken_at - previous.taken_at).total_seconds() < short_window_s:
        current = None
    if current is None:
        # Give the counters ``short_window_s`` from the window's start to move (no wait when the
        # start lies that far back already), then measure the end now.
        _wait(short_window_s - (datetime.now(UTC) - previous.taken_at).total_seconds())
        current = take_snapshot(client, job_name, source_rate_metric)
        # The epoch's boundary when it was never taken; a measured end otherwise (the boundary, taken
        # on time, stays unused: the next epoch starts where this window ends).
        save_snapshot(current, end_path if boundary is not None else boundary_path)
    rows = window_metrics(previous, current, job, epoch)
    write_epochs(store_root, METRICS, job, rows)
    state_bytes = collect_state(client, current.flink_job_id, job, epoch, store_root)
    write_topology_csv(current.topology(), topology_path(store_root, job), source="Flink job graph")
    return CollectionResult(
        job=job,
        epoch=epoch,
        rows=rows,
        window_s=(current.taken_at - previous.taken_at).total_seconds(),
        measured_short_window=short,
        warmup_reason=restart_between(previous, current),
        flink_job_id=current.flink_job_id,
        failovers=failovers_between(previous, current),
        state_bytes=state_bytes,
    )


def _previous_window_end(store_root: str | Path, job: str, epoch: int, job_name: str, boundary: Snapshot | None,
                         max_gap_s: float | None) -> Snapshot | None:  # fmt: skip
    """Where epoch ``epoch - 1``'s window ended, if this epoch's window can start there.

    That is its measured end when it measured one (a short window, or a late run's window), else its
    boundary: starting anywhere earlier would overlap it (validation's ``windows_ordered`` quarantines
    an overlap). None when that is another Flink job, or, with no boundary of this epoch to end at,
    older than ``max_gap_s``.
    """
    end = load_snapshot(snapshot_path(store_root, job, epoch - 1, end=True))
    previous = end or load_snapshot(snapshot_path(store_root, job, epoch - 1))
    if previous is None or previous.job_name != job_name:
        return None
    if boundary is None and max_gap_s is not None and (datetime.now(UTC) - previous.taken_at).total_seconds() > max_gap_s:
        return None  # too old to start this epoch's window
    return previous


def _wait(seconds: float) -> None:
    """The short measurement window: the counters need real time to move."""
    time.sleep(max(seconds, 0.0))
