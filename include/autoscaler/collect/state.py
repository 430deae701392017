"""The job's state size per operator, from Flink's checkpoint statistics, kept with each epoch (table STATE).

A rescale moves the job's state, and what that costs grows with its size
(:mod:`autoscaler.rescale.mechanism`). Flink reports it for every completed checkpoint, per job
vertex: ``state_size`` is the full size of the state the checkpoint holds, ``checkpointed_size``
what this checkpoint wrote (with incremental checkpoints only the new files). The latest completed
checkpoint at the epoch's end is recorded; a job that has none yet (checkpointing off, or just
started) has no STATE rows for the epoch, and its state counts as unmeasured.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from autoscaler.flink import ids
from autoscaler.flink.client import FlinkRestClient
from autoscaler.flink.errors import FlinkError
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import STATE


def backend_name(flink_name: str | None) -> str | None:
    """The state backend's short name from Flink's class name (EmbeddedRocksDBStateBackend -> rocksdb)."""
    lowered = (flink_name or "").lower()
    return next((short for short in ("rocksdb", "forst", "hashmap") if short in lowered), None)


def checkpoint_state(client: FlinkRestClient, job_id: str, names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per-vertex rows of the job's latest completed checkpoint (empty: none completed yet).

    ``names``: vertex id -> name. Raises :class:`FlinkError` when the REST API does not answer.
    """
    latest = (client.checkpoints(job_id).get("latest") or {}).get("completed") or {}
    if not latest or latest.get("id") is None:
        return []
    checkpoint = int(latest["id"])
    details = client.get(f"/jobs/{ids.job_id(job_id)}/checkpoints/details/{checkpoint}")
    at = datetime.fromtimestamp(int(details.get("latest_ack_timestamp") or latest.get("latest_ack_timestamp") or 0) / 1000, UTC)
    backend = backend_name(client.get(f"/jobs/{ids.job_id(job_id)}/checkpoints/config").get("state_backend"))
    rows = []
    for vertex_id, task in sorted((details.get("tasks") or {}).items()):
        rows.append(
            {
                "operator_id": vertex_id,
                "operator_name": names.get(vertex_id, vertex_id),
                "checkpoint_id": checkpoint,
                "checkpoint_at": at,
                "state_bytes": int(task.get("state_size") or 0),
                "checkpointed_bytes": None if task.get("checkpointed_size") is None else int(task["checkpointed_size"]),
                "state_backend": backend,
            }
        )
    return rows


def collect_state(client: FlinkRestClient, job_id: str, job: str, epoch: int, store_root: str | Path) -> int | None:
    """Record the epoch's state sizes; returns the job's total state in bytes (None: no checkpoint, or not answered).

    Informative: a REST failure here never fails the epoch's collection (its metrics are already
    written), it leaves the epoch's state unmeasured.
    """
    try:
        names = {v.id: v.name for v in client.job(job_id).vertices}
        rows = checkpoint_state(client, job_id, names)
    except FlinkError:
        return None
    if not rows:
        return None
    table = pa.Table.from_pylist([{"job": job, "epoch": epoch, **r} for r in rows], schema=STATE.arrow_schema())
    write_epochs(store_root, STATE, job, table.drop_columns(["epoch_block"]))
    return sum(r["state_bytes"] for r in rows)


def recorded_state(store_root: str | Path, job: str, before_epoch: int | None = None) -> dict[int, tuple[int, str | None]]:
    """Epoch -> (the job's total state in bytes, its state backend), for every recorded epoch up to ``before_epoch``."""
    table = read_epochs(store_root, STATE, job, columns=["state_bytes", "state_backend"])
    out: dict[int, tuple[int, str | None]] = {}
    for row in table.select(["epoch", "state_bytes", "state_backend"]).to_pylist():
        if before_epoch is not None and row["epoch"] > before_epoch:
            continue
        size, backend = out.get(row["epoch"], (0, None))
        out[row["epoch"]] = (size + int(row["state_bytes"]), row["state_backend"] or backend)
    return out
