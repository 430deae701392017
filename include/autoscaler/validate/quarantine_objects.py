"""Quarantine on a store that is an object store (:mod:`autoscaler.store.delta`): the same contract as the
local store's (:mod:`autoscaler.validate.quarantine`), with objects instead of folders.

Layout: ``<store>/quarantine/metrics/job=<job>/epoch=<n>/part-0.parquet`` and ``validation.json`` beside it,
as locally. A move writes the copy first (each object is one PUT: whole or absent), then deletes the epoch's
rows from the metrics table in one Delta commit; a crash between the two leaves the rows in both places,
and the re-run finishes the move. Never in neither. A copy that differs from the store's rows is kept under
``superseded/<UTC time>/`` first.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autoscaler.store import delta
from autoscaler.store.files import StorePath, store_path
from autoscaler.store.parquet import read_epochs, validate_job_name
from autoscaler.store.schemas import METRICS

QUARANTINE, RESULT_FILE, SUPERSEDED, ROWS_FILE = "quarantine", "validation.json", "superseded", "part-0.parquet"


def quarantine_dir(url: str, job: str, epoch: int) -> StorePath:
    return store_path(url, QUARANTINE, METRICS.name, f"job={validate_job_name(job)}", f"epoch={epoch}")


def quarantined_epochs(url: str, job: str) -> list[int]:
    folder = store_path(url, QUARANTINE, METRICS.name, f"job={validate_job_name(job)}")
    if not folder.exists():
        return []
    names = (p.name for p in folder.iterdir() if p.name.startswith("epoch=") and (p / ROWS_FILE).exists())
    return sorted(int(n.split("=", 1)[1]) for n in names if n.split("=", 1)[1].isdigit())


def quarantine_epochs(url: str, job: str, results: Mapping[int, dict[str, Any]], same_rows: Any) -> dict[int, StorePath]:
    """Copy each epoch's rows out (with its result), then delete them from the metrics table in one commit."""
    stored = read_epochs(url, METRICS, job, list(results), columns=[c.name for c in METRICS.data_columns])
    stored = stored.select([c.name for c in METRICS.data_columns])
    out = {}
    for epoch, result in sorted(results.items()):
        rows = stored.filter(pc.equal(stored.column("epoch"), pa.scalar(epoch, pa.int64())))
        out[epoch] = quarantine_dir(url, job, epoch)
        _keep_copy(out[epoch], rows, result, same_rows)
    moving = sorted(set(stored.column("epoch").to_pylist()))
    if moving:
        delta.delete_epochs(url, METRICS, job, moving)
    return out


def _keep_copy(folder: StorePath, rows: pa.Table, result: dict[str, Any], same_rows: Any) -> None:
    old = folder / ROWS_FILE
    if old.exists():
        if rows.num_rows == 0:  # the store has none (re-validated in quarantine): keep the copy, new result
            (folder / RESULT_FILE).write_text(json.dumps(result, indent=2, default=str))
            return
        previous = _read_rows(old)
        if not same_rows(previous, rows):
            keep = folder / SUPERSEDED / datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            _write_rows(keep / ROWS_FILE, previous)
            if (folder / RESULT_FILE).exists():
                (keep / RESULT_FILE).write_text((folder / RESULT_FILE).read_text())
    _write_rows(old, rows)
    (folder / RESULT_FILE).write_text(json.dumps(result, indent=2, default=str))


def _write_rows(path: StorePath, rows: pa.Table) -> None:
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    path.write_bytes(buffer.getvalue())  # one PUT


def _read_rows(path: StorePath) -> pa.Table:
    return pq.read_table(io.BytesIO(path.read_bytes()), schema=METRICS.arrow_schema(with_partitions=False))


def read_quarantine(url: str, job: str, epoch: int) -> tuple[pa.Table, dict[str, Any]] | None:
    folder = quarantine_dir(url, job, epoch)
    if not (folder / ROWS_FILE).exists():
        return None
    data = _read_rows(folder / ROWS_FILE)
    result = json.loads((folder / RESULT_FILE).read_text()) if (folder / RESULT_FILE).exists() else {}
    return data, result


def remove(url: str, job: str, epoch: int) -> None:
    folder = quarantine_dir(url, job, epoch)
    if folder.exists():
        folder.fs.rm(folder.path, recursive=True)
