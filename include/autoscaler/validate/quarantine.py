"""Rejected epochs are moved out of the metrics store, never deleted, and can be moved back.

Layout: ``<store>/quarantine/metrics/job=<job>/epoch=<n>/part-0.parquet`` (the epoch's rows in
the metrics file schema) and ``validation.json`` (the result that rejected them) next to it.
The policy reads only ``<store>/metrics/``, so a quarantined epoch cannot be decided on.

The store keeps 1,024 epochs per file, so moving one epoch out rewrites its block without it.
Copy and removal happen under the store's (metrics, job) lock -- the same lock every writer
takes -- and each step is a rename of a fully written folder, so a crash leaves the rows in
the store, in quarantine, or in both (a re-run finishes the move); never in neither.
Idempotent per (job, epoch): quarantining the same rows again only rewrites the result; other
rows for the same epoch (collected again, rejected again) keep the earlier copy under ``superseded/``.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autoscaler.errors import InputError
from autoscaler.store.commit import swap_in
from autoscaler.store.delta import is_store_url
from autoscaler.store.parquet import block_dir, epoch_block, read_epochs, store_lock, validate_job_name, write_epochs
from autoscaler.store.schemas import METRICS, Table
from autoscaler.validate import quarantine_objects as objects

QUARANTINE = "quarantine"
RESULT_FILE = "validation.json"
SUPERSEDED = "superseded"


def quarantine_dir(root: str | Path, job: str, epoch: int) -> Path:
    return Path(root) / QUARANTINE / METRICS.name / f"job={validate_job_name(job)}" / f"epoch={epoch}"


def quarantined_epochs(root: str | Path, job: str) -> list[int]:
    if is_store_url(root):
        return objects.quarantined_epochs(str(root), job)
    folder = Path(root) / QUARANTINE / METRICS.name / f"job={validate_job_name(job)}"
    if not folder.is_dir():
        return []
    return sorted(int(d.name.split("=", 1)[1]) for d in folder.glob("epoch=*") if d.is_dir())


def quarantine_epoch(root: str | Path, job: str, epoch: int, result: dict[str, Any]) -> Path:
    """Move one epoch's metrics rows into quarantine with ``result`` next to them."""
    return quarantine_epochs(root, job, {epoch: result})[epoch]


def quarantine_epochs(root: str | Path, job: str, results: Mapping[int, dict[str, Any]]) -> dict[int, Path]:
    """Move several epochs into quarantine, rewriting each touched store block once (backfills).

    A copy already in quarantine that differs from the store's rows (the epoch was collected
    again and failed again) is kept under ``superseded/<UTC time>/`` of the new copy.
    """
    if is_store_url(root):
        return objects.quarantine_epochs(str(root), job, results, _same_rows)
    by_block: dict[int, list[int]] = {}
    for epoch in sorted(results):
        by_block.setdefault(epoch_block(epoch), []).append(epoch)
    out = {}
    with store_lock(root, METRICS, job):
        for block, epochs in by_block.items():
            stored = _block_rows(root, METRICS, job, block)
            moving = pc.is_in(stored.column("epoch"), pa.array(epochs, pa.int64()))
            for epoch in epochs:
                rows = stored.filter(pc.equal(stored.column("epoch"), pa.scalar(epoch, pa.int64())))
                out[epoch] = quarantine_dir(root, job, epoch)
                _keep_copy(out[epoch], rows, results[epoch])
            if pc.any(moving).as_py():
                _rewrite_block(root, METRICS, job, block, stored.filter(pc.invert(moving)))
    return out


def _keep_copy(final: Path, rows: pa.Table, result: dict[str, Any]) -> None:
    """Write the quarantine folder of one epoch (rows + result), never dropping an earlier copy."""
    old = final / "part-0.parquet"
    if old.exists() and rows.num_rows == 0:  # the store has none (re-validated in quarantine): keep the copy
        _write_result(final, result)
        return
    staged = final.with_name(f".staging-{final.name}-{uuid.uuid4().hex}")
    staged.mkdir(parents=True)
    pq.write_table(rows, staged / "part-0.parquet")
    (staged / RESULT_FILE).write_text(json.dumps(result, indent=2, default=str))
    if (final / SUPERSEDED).is_dir():
        shutil.copytree(final / SUPERSEDED, staged / SUPERSEDED)
    if old.exists() and not _same_rows(pq.read_table(old), rows):
        keep = staged / SUPERSEDED / datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        keep.mkdir(parents=True)
        for f in final.iterdir():
            if f.is_file():
                shutil.copy2(f, keep / f.name)
    swap_in(staged, final)


def read_quarantine(root: str | Path, job: str, epoch: int) -> tuple[pa.Table, dict[str, Any]] | None:
    """The quarantined rows (metrics schema, partition columns filled in) and the result that rejected them."""
    if is_store_url(root):
        found = objects.read_quarantine(str(root), job, epoch)
        if found is None:
            return None
        data, result = found
        return _with_partitions(data, job, epoch), result
    folder = quarantine_dir(root, job, epoch)
    if not (folder / "part-0.parquet").exists():
        return None
    data = pq.read_table(folder / "part-0.parquet", schema=METRICS.arrow_schema(with_partitions=False))
    result_path = folder / RESULT_FILE
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    return _with_partitions(data, job, epoch), result


def _with_partitions(data: pa.Table, job: str, epoch: int) -> pa.Table:
    data = data.append_column("job", pa.array([job] * data.num_rows, pa.string()))
    data = data.append_column("epoch_block", pa.array([epoch_block(epoch)] * data.num_rows, pa.int64()))
    return data.select(METRICS.names).cast(METRICS.arrow_schema())


def release_quarantine(root: str | Path, job: str, epoch: int, replace: bool = False) -> int:
    """Move a quarantined epoch back into the metrics store; returns the rows restored.

    If the store already holds rows for the epoch (it was collected again), they are kept and
    this is an error unless ``replace`` -- or unless they are the quarantined rows themselves
    (an interrupted release), in which case only the quarantine copy is dropped.
    """
    found = read_quarantine(root, job, epoch)
    if found is None:
        raise InputError(str(quarantine_dir(root, job, epoch)), f"epoch {epoch} of job {job!r} is not in quarantine")
    rows, _ = found
    current = read_epochs(root, METRICS, job, [epoch])
    if current.num_rows and not replace and not _same_rows(current, rows):
        raise InputError(
            f"metrics of job {job} epoch {epoch}",
            f"the store already has {current.num_rows} rows for this epoch; release with replace=True to overwrite them",
        )
    if rows.num_rows:
        write_epochs(root, METRICS, job, rows)
    if is_store_url(root):
        objects.remove(str(root), job, epoch)
    else:
        _remove_folder(quarantine_dir(root, job, epoch))
    return rows.num_rows


def _same_rows(a: pa.Table, b: pa.Table) -> bool:
    order = [("operator_id", "ascending"), ("instance", "ascending"), ("window_start", "ascending")]
    return a.num_rows == b.num_rows and a.sort_by(order).to_pandas().equals(b.sort_by(order).to_pandas())  # NaN == NaN


def _block_rows(root: str | Path, table: Table, job: str, block: int) -> pa.Table:
    folder = block_dir(root, table, job, block)
    schema = table.arrow_schema(with_partitions=False)
    parts = [pq.read_table(f, schema=schema) for f in sorted(folder.glob("*.parquet"))] if folder.exists() else []
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _rewrite_block(root: str | Path, table: Table, job: str, block: int, keep: pa.Table) -> None:
    """Replace a block by ``keep`` (caller holds the store lock); an empty block is removed."""
    final = block_dir(root, table, job, block)
    if keep.num_rows == 0:
        _remove_folder(final)
        return
    staged = final.with_name(f".staging-{final.name}-{uuid.uuid4().hex}")
    staged.mkdir(parents=True)
    pq.write_table(keep.sort_by([("epoch", "ascending")]), staged / "part-0.parquet")
    swap_in(staged, final)


def _write_result(final: Path, result: dict[str, Any]) -> None:
    tmp = final / f".{RESULT_FILE}.tmp"
    tmp.write_text(json.dumps(result, indent=2, default=str))
    tmp.replace(final / RESULT_FILE)


def _remove_folder(folder: Path) -> None:
    if folder.exists():
        trash = folder.with_name(f".trash-{folder.name}-{uuid.uuid4().hex}")
        folder.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
