"""The Parquet store: one folder per table, partitioned by job and block of epochs.

Layout: ``<root>/<table>/job=<job>/epoch_block=<epoch // EPOCH_BLOCK_SIZE>/*.parquet``.

Why blocks and not one folder per epoch: a live job produces one epoch per policy interval
(half a million a year at one minute) and a backfill or benchmark millions; one folder per
epoch would mean millions of tiny files that no engine lists or reads quickly. A block holds
``EPOCH_BLOCK_SIZE`` consecutive epochs in one file.

Idempotence per (job, epoch): writing epochs replaces exactly those epochs. The writer reads
the touched blocks, drops the epochs being written, adds the new rows, writes the merged
block to a staging folder and swaps it in with renames, under a per-(table, job) lock. The
same contract is implemented for Spark in :mod:`autoscaler.store.spark`.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from autoscaler.errors import InputError
from autoscaler.store.schemas import Table

EPOCH_BLOCK_SIZE = 1024
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # used with fullmatch


def validate_job_name(job: str) -> str:
    """Job names become folder names and URL parts: letters, digits, ``_ . -`` only."""
    if not isinstance(job, str) or not _JOB_NAME.fullmatch(job):
        raise InputError(
            "job", f"invalid job name {job!r}: use 1-128 letters, digits, '_', '.', '-' (not starting with '.', '_' or '-')"
        )
    return job


def epoch_block(epoch: int) -> int:
    return epoch // EPOCH_BLOCK_SIZE


def table_dir(root: str | Path, table: Table) -> Path:
    return Path(root) / table.name


def block_dir(root: str | Path, table: Table, job: str, block: int) -> Path:
    return table_dir(root, table) / f"job={validate_job_name(job)}" / f"epoch_block={block}"


@contextmanager
def store_lock(root: str | Path, table: Table, job: str) -> Iterator[None]:
    """Serialise writers of one (table, job); readers never see a half-written block."""
    folder = table_dir(root, table)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".lock-{validate_job_name(job)}", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def swap_in(staged: Path, final: Path) -> None:
    """Replace ``final`` by ``staged`` with two renames (readers see old or new, never a mix)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    trash = final.with_name(f".trash-{final.name}-{uuid.uuid4().hex}")
    if final.exists():
        os.rename(final, trash)
    os.rename(staged, final)
    shutil.rmtree(trash, ignore_errors=True)


def conform(table: Table, data: pa.Table, source: str) -> pa.Table:
    """Cast ``data`` to the table's file schema (partition columns dropped), naming what is missing."""
    missing = [c.name for c in table.data_columns if c.name not in data.column_names]
    if missing:
        raise InputError(source, f"{table.name} rows lack columns {missing}")
    arrays = []
    for field in table.arrow_schema(with_partitions=False):
        column = data.column(field.name)
        if not field.nullable and column.null_count:
            raise InputError(source, f"{table.name} column {field.name!r} has {column.null_count} null values")
        arrays.append(column.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=table.arrow_schema(with_partitions=False))


def write_epochs(root: str | Path, table: Table, job: str, data: pa.Table) -> list[int]:
    """Write rows of one job, replacing every epoch they contain. Returns the epochs written."""
    validate_job_name(job)
    if "job" in data.column_names:
        jobs = set(pc.unique(data.column("job")).to_pylist())
        if jobs - {job}:
            raise InputError(table.name, f"rows for job {job!r} contain other jobs {sorted(jobs - {job})}")
    rows = conform(table, data, source=f"{table.name} rows for job {job!r}")
    epochs = sorted(set(rows.column("epoch").to_pylist()))
    blocks: dict[int, list[int]] = {}
    for epoch in epochs:
        blocks.setdefault(epoch_block(epoch), []).append(epoch)
    with store_lock(root, table, job):
        for block, block_epochs in blocks.items():
            new_rows = rows.filter(pc.is_in(rows.column("epoch"), pa.array(block_epochs, pa.int64())))
            final = block_dir(root, table, job, block)
            merged = [new_rows]
            if final.exists():
                old = _read_files(table, final.glob("*.parquet"))
                keep = pc.invert(pc.is_in(old.column("epoch"), pa.array(block_epochs, pa.int64())))
                merged.insert(0, old.filter(keep))
            staged = final.with_name(f".staging-{final.name}-{uuid.uuid4().hex}")
            staged.mkdir(parents=True)
            block_rows = pa.concat_tables(merged).sort_by([("epoch", "ascending")])
            pq.write_table(block_rows, staged / "part-0.parquet")
            swap_in(staged, final)
    return epochs


def _read_block(table: Table, path: Path) -> pa.Table:
    try:
        return pq.read_table(path, schema=table.arrow_schema(with_partitions=False))
    except (pa.ArrowInvalid, OSError) as exc:
        # A torn or foreign file: say which, instead of Arrow's "Parquet magic bytes not found".
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(str(path), f"a {table.name} block of the store cannot be read ({first}): move it aside") from None


def _read_files(table: Table, files: Iterable[Path]) -> pa.Table:
    parts = [_read_block(table, f) for f in sorted(files)]
    if not parts:
        return table.arrow_schema(with_partitions=False).empty_table()
    return pa.concat_tables(parts)


def read_epochs(root: str | Path, table: Table, job: str, epochs: Iterable[int] | None = None) -> pa.Table:
    """Rows of one job (all epochs, or the given ones), with the partition columns filled in."""
    job_dir = table_dir(root, table) / f"job={validate_job_name(job)}"
    schema = table.arrow_schema()
    if not job_dir.exists():
        return schema.empty_table()
    wanted = None if epochs is None else sorted(set(epochs))
    if wanted is None:
        dirs = sorted(d for d in job_dir.glob("epoch_block=*") if d.is_dir())
    else:
        dirs = [job_dir / f"epoch_block={b}" for b in sorted({epoch_block(e) for e in wanted})]
        dirs = [d for d in dirs if d.exists()]
    files = [f for d in dirs for f in d.glob("*.parquet")]
    data = _read_files(table, files)
    if wanted is not None:
        data = data.filter(pc.is_in(data.column("epoch"), pa.array(wanted, pa.int64())))
    data = data.append_column("job", pa.array([job] * data.num_rows, pa.string()))
    data = data.append_column("epoch_block", pc.divide(data.column("epoch"), EPOCH_BLOCK_SIZE).cast(pa.int64()))
    return data.select(schema.names).cast(schema)


def dataset(root: str | Path, table: Table) -> ds.Dataset:
    """All jobs of a table as a pyarrow dataset (hive partitioning)."""
    return ds.dataset(table_dir(root, table), format="parquet", partitioning="hive", schema=table.arrow_schema())
