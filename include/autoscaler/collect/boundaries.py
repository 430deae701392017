"""Boundary snapshots taken on time, so that a late DAG run still measures its own epoch.

A scaling DAG run starts after its epoch ends, late by whatever delays it (the scheduler on a
loaded machine, a rescale or an approval of the run before it). If the run read Flink's counters
itself, its window would describe a later interval than its epoch. So something that is always
running (the triggerer: :mod:`ds2_airflow.triggers.boundaries`) takes the counter snapshot of
every job at every epoch boundary, into the file the collect task reads
(:func:`autoscaler.collect.flink.snapshot_path`): the epoch's window is then
``[boundary(epoch - 1), boundary(epoch)]`` whenever the run comes.

A boundary is only taken close to its time (``tolerance_s``): a snapshot taken late is not that
boundary, and the collect task measures a window itself instead (which validation judges).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from autoscaler.collect.flink import snapshot_path
from autoscaler.collect.snapshot import take_snapshot
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkConnection, FlinkRestClient

DEFAULT_TOLERANCE_S = 5.0


@dataclass(frozen=True)
class BoundaryJob:
    """What the snapshotter needs of a registered job (no Airflow types: it is serialized)."""

    job: str  # the registered job (store partition)
    flink_job_name: str
    interval_s: int
    connection: FlinkConnection
    source_rate_metric: str | None = None


def next_boundary(interval_s: int, now: float) -> float:
    """The first epoch boundary (Unix seconds) strictly after ``now``."""
    return (math.floor(now / interval_s) + 1) * interval_s


def epoch_ending_at(interval_s: int, boundary: float) -> int:
    """The epoch whose interval ends at ``boundary`` (epochs are numbered from 1970, as jobs.epoch_of)."""
    return round(boundary / interval_s) - 1


def save_first(text: str, path: Path) -> bool:
    """Write ``path`` atomically unless it exists (first writer wins); whether this call wrote it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    try:
        os.link(tmp, path)  # fails when the boundary is already there
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def take_boundary(job: BoundaryJob, boundary: float, store_root: str | Path, now: float,
                  tolerance_s: float = DEFAULT_TOLERANCE_S) -> str:  # fmt: skip
    """Snapshot ``job`` for the epoch ending at ``boundary``; a one-line outcome.

    Never raises for Flink being away or the job not running: the collect task then measures the
    window itself, and its validation says whether that is good enough.
    """
    epoch = epoch_ending_at(job.interval_s, boundary)
    path = snapshot_path(store_root, job.job, epoch)
    if path.exists():
        return f"{job.job} epoch {epoch}: boundary already taken"
    if now - boundary > tolerance_s:
        return f"{job.job} epoch {epoch}: skipped, {now - boundary:.1f} s after the boundary (tolerance {tolerance_s:g} s)"
    try:
        snapshot = take_snapshot(FlinkRestClient(job.connection), job.flink_job_name, job.source_rate_metric)
    except (InputError, OSError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{job.job} epoch {epoch}: not taken: {first}"
    late = snapshot.taken_at.timestamp() - boundary
    if late > tolerance_s:
        return f"{job.job} epoch {epoch}: not kept, read {late:.1f} s after the boundary (tolerance {tolerance_s:g} s)"
    if not save_first(snapshot.to_json(), path):
        return f"{job.job} epoch {epoch}: boundary already taken"
    return f"{job.job} epoch {epoch}: taken {late:+.1f} s from the boundary"
