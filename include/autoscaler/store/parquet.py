"""The Parquet store: one folder per table, partitioned by job and block of epochs.

Layout: ``<root>/<table>/job=<job>/epoch_block=<epoch // EPOCH_BLOCK_SIZE>/*.parquet``.

Why blocks and not one folder per epoch: a live job produces one epoch per policy interval
(half a million a year at one minute) and a backfill or benchmark millions; one folder per
epoch would mean millions of tiny files that no engine lists or reads quickly. A block holds
``EPOCH_BLOCK_SIZE`` consecutive epochs in one file.

Idempotence per (job, epoch): writing epochs replaces exactly those epochs. The writer reads
the touched blocks, drops the epochs being written, adds the new rows, writes the merged
block to a staging folder and commits it (:mod:`autoscaler.store.commit`: fsynced, then one
atomic folder exchange), under a per-(table, job) lock. The same contract is implemented for
Spark in :mod:`autoscaler.store.spark`. A block that cannot be read (a torn file) is set aside
into ``.torn/`` with a warning, so the rest of the job's table stays readable and writable.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from autoscaler.errors import InputError, room_needed
from autoscaler.store import delta
from autoscaler.store.commit import clean_leftovers, recover, set_aside, staging_for, swap_in
from autoscaler.store.memory import MemoryStore
from autoscaler.store.schemas import Table

EPOCH_BLOCK_SIZE = 1024
FREE_TEXT = ("reason",)  # columns whose values nearly all differ (written without a dictionary)
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
    """A table's folder in a local store. A store on an object store has none: what needs one says so."""
    if delta.is_store_url(root):
        raise InputError("store", f"{root}: this step works on a local store's {table.name} folder, not on an object store")
    return Path(root) / table.name


def table_location(root: str | Path, table: Table) -> str:
    """Where a table is, for messages: its folder, or its Delta table's URL."""
    return delta.table_url(str(root), table) if delta.is_store_url(root) else str(Path(root) / table.name)


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


def conform(table: Table, data: pa.Table, source: str) -> pa.Table:
    """Cast ``data`` to the table's file schema (partition columns dropped), naming what is missing.

    A nullable column the rows lack is filled with nulls (a column added to the schema later).
    """
    target = table.arrow_schema(with_partitions=False)
    if data.schema.equals(target) and not any(data.column(f.name).null_count for f in target if not f.nullable):
        return data
    missing = [c.name for c in table.data_columns if c.name not in data.column_names and not c.nullable]
    if missing:
        raise InputError(source, f"{table.name} rows lack columns {missing}")
    arrays = []
    for field in table.arrow_schema(with_partitions=False):
        if field.name not in data.column_names:
            arrays.append(pa.nulls(data.num_rows, field.type))
            continue
        column = data.column(field.name)
        if not field.nullable and column.null_count:
            raise InputError(source, f"{table.name} column {field.name!r} has {column.null_count} null values")
        arrays.append(column.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=table.arrow_schema(with_partitions=False))


def write_epochs(root: str | Path | MemoryStore, table: Table, job: str, data: pa.Table) -> list[int]:
    """Write rows of one job, replacing every epoch they contain. Returns the epochs written.

    ``root``: the store's folder, its URL on an object store (:mod:`autoscaler.store.delta`), or a
    :class:`MemoryStore` (the lab's simulator), which takes the call.
    """
    if isinstance(root, MemoryStore):
        return root.write_epochs(table, job, data)
    validate_job_name(job)
    if "job" in data.column_names:
        jobs = set(pc.unique(data.column("job")).to_pylist())
        if jobs - {job}:
            raise InputError(table.name, f"rows for job {job!r} contain other jobs {sorted(jobs - {job})}")
    rows = conform(table, data, source=f"{table.name} rows for job {job!r}")
    if delta.is_store_url(root):
        return delta.write_epochs(str(root), table, job, with_partitions(table, job, rows))
    epochs = sorted(set(rows.column("epoch").to_pylist()))
    blocks: dict[int, list[int]] = {}
    for epoch in epochs:
        blocks.setdefault(epoch_block(epoch), []).append(epoch)
    written: list[int] = []
    with store_lock(root, table, job):
        for block, block_epochs in blocks.items():
            new_rows = rows.filter(pc.is_in(rows.column("epoch"), pa.array(block_epochs, pa.int64())))
            final = block_dir(root, table, job, block)
            recover(final)
            clean_leftovers(final)
            block_rows, torn = next_version(table, final, new_rows)
            if torn is not None:
                set_aside(final, torn)
            staged = staging_for(final)
            # Each block commits whole or not at all; the blocks before this one stay committed (a write is
            # idempotent per epoch, so its retry writes them again unchanged).
            done = f" (epochs {written[0]}..{written[-1]} were)" if written else ""
            with room_needed(str(root), f"the {table.name} of job {job!r}, epochs {block_epochs[0]}..{block_epochs[-1]}{done}"):
                try:
                    staged.mkdir(parents=True)
                    write_block_file(block_rows, staged / "part-0.parquet")
                except BaseException:
                    shutil.rmtree(staged, ignore_errors=True)  # a partial file holds the space it took
                    raise
                swap_in(staged, final)
            written += block_epochs
    return epochs


def with_partitions(table: Table, job: str, rows: pa.Table) -> pa.Table:
    """Rows in the table's file schema with the partition columns filled in, in the full schema's order."""
    rows = rows.append_column("job", pa.array([job] * rows.num_rows, pa.string()))
    rows = rows.append_column("epoch_block", pc.divide(rows.column("epoch"), EPOCH_BLOCK_SIZE).cast(pa.int64()))
    return rows.select(table.names).cast(table.arrow_schema())


def next_version(table: Table, final: Path, new_rows: pa.Table) -> tuple[pa.Table, str | None]:
    """The rows of block ``final``'s next version, by epoch: its committed rows of the epochs ``new_rows``
    lacks, then ``new_rows`` (in the table's file schema); and why the committed version could not be
    read (None: it could, or there is none), in which case the caller sets it aside.

    The caller holds the store lock, and has repaired an interrupted commit (:func:`recover`).
    """
    merged, torn = [new_rows], None
    if final.exists():
        try:
            old = _read_block_dir(table, final)
        except TornBlock as exc:
            torn = str(exc)
        else:
            keep = pc.invert(pc.is_in(old.column("epoch"), pc.unique(new_rows.column("epoch"))))
            merged.insert(0, old.filter(keep))
    rows = pa.concat_tables(merged) if len(merged) > 1 else new_rows
    epochs = rows.column("epoch").to_numpy()
    if len(epochs) > 1 and bool((epochs[1:] < epochs[:-1]).any()):
        rows = rows.sort_by([("epoch", "ascending")])  # stable: rows of one epoch keep their order
    return rows, torn


def write_block_file(rows: pa.Table, path: Path) -> None:
    """Write one block's file. Free text (a decision's reason) is not dictionary-encoded: nearly every
    value differs, so a dictionary only costs time (1.2 of 7.9 ms for a block of 10,240 decisions)."""
    pq.write_table(rows, path, use_dictionary=[f.name for f in rows.schema if f.name not in FREE_TEXT])


class TornBlock(InputError):
    """A block file that cannot be read (torn by a crash without fsync, or not Parquet at all)."""


def _read_block(table: Table, path: Path, dir_fd: int, columns: Sequence[str] | None = None) -> pa.Table:
    try:
        with os.fdopen(os.open(path.name, os.O_RDONLY, dir_fd=dir_fd), "rb") as handle:
            return pq.read_table(handle, schema=table.arrow_schema(with_partitions=False), columns=columns)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        # Say which file, instead of Arrow's "Parquet magic bytes not found".
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TornBlock(str(path), f"a {table.name} block of the store cannot be read ({first})") from None


READ_ATTEMPTS = 20


def _read_block_dir(table: Table, block: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One consistent version of a block folder, even while a writer swaps it.

    The folder is opened once and its files are listed and opened through that handle, so all of
    them belong to one version. A version being deleted after a swap (the old one) can show an
    empty or shrinking listing, or a file gone: a committed block is never empty, so that reads
    again, from the path, which names the new version by then.
    """
    empty = _file_schema(table, columns).empty_table()
    for _ in range(READ_ATTEMPTS):
        try:
            dir_fd = os.open(block, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return empty
        try:
            names = sorted(n for n in os.listdir(dir_fd) if n.endswith(".parquet") and not n.startswith("."))
            if not names:
                continue
            parts = [_read_block(table, block / name, dir_fd, columns) for name in names]
            return pa.concat_tables(parts)
        except FileNotFoundError:
            continue
        finally:
            os.close(dir_fd)
    return empty


def _read_committed(root: str | Path, table: Table, job: str, block: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """The committed rows of one block; an interrupted commit is repaired and a torn block set
    aside (both under the store lock, so never while a writer works on it)."""
    empty = _file_schema(table, columns).empty_table()
    if not block.is_dir():
        if not any(block.parent.glob(f".trash-{block.name}-*")):
            return empty
        with store_lock(root, table, job):
            recover(block)
        if not block.is_dir():
            return empty
    try:
        return _read_block_dir(table, block, columns)
    except TornBlock as torn:
        with store_lock(root, table, job):
            try:
                return _read_block_dir(table, block, columns)  # a writer may have replaced it meanwhile
            except TornBlock:
                if block.is_dir():
                    set_aside(block, str(torn))
        return empty


def read_block(root: str | Path, table: Table, job: str, block: int) -> pa.Table:
    """The committed rows of one block of one job, in the table's file schema (no partition columns)."""
    if delta.is_store_url(root):
        epochs = range(block * EPOCH_BLOCK_SIZE, (block + 1) * EPOCH_BLOCK_SIZE)
        return delta.read_epochs(str(root), table, validate_job_name(job), epochs, [c.name for c in table.data_columns])
    return _read_committed(root, table, job, block_dir(root, table, job, block))


def stored_blocks(root: str | Path, table: Table, job: str) -> list[int]:
    """The blocks of one job in a table, committed or left by an interrupted commit, ascending."""
    if delta.is_store_url(root):
        return delta.stored_blocks(str(root), table, validate_job_name(job))
    job_dir = table_dir(root, table) / f"job={validate_job_name(job)}"
    names = {d.name for d in job_dir.glob("epoch_block=*")} | {
        t.name.split("-")[1] for t in job_dir.glob(".trash-epoch_block=*-*")
    }
    return sorted(int(n.split("=", 1)[1]) for n in names if n.split("=", 1)[1].isdigit())


def read_epochs(
    root: str | Path | MemoryStore,
    table: Table,
    job: str,
    epochs: Iterable[int] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Rows of one job (all epochs, or the given ones), with the partition columns filled in.

    ``columns``: only these (``epoch`` is always read), in the table's order; reading fewer columns is
    what makes a long range cheap (a decision's reason is most of its bytes). ``root`` may be a
    :class:`MemoryStore`, which takes the call.
    """
    if isinstance(root, MemoryStore):
        return root.read_epochs(table, job, epochs, columns)
    validate_job_name(job)
    if columns is not None:
        unknown = sorted(set(columns) - set(table.names))
        if unknown:
            raise InputError(table.name, f"no such columns: {', '.join(unknown)}")
        wanted_cols = [c.name for c in table.data_columns if c.name in columns or c.name == "epoch"]
        names_out = [n for n in table.names if n in columns or n == "epoch"]
    else:
        wanted_cols, names_out = None, table.names
    schema = pa.schema([table.arrow_schema().field(n) for n in names_out])
    if delta.is_store_url(root):
        return delta.read_epochs(str(root), table, job, epochs, names_out)
    job_dir = table_dir(root, table) / f"job={job}"
    if not job_dir.exists():
        return schema.empty_table()
    wanted = None if epochs is None else sorted(set(epochs))
    if wanted is None:
        names = {d.name for d in job_dir.glob("epoch_block=*")}
        names |= {t.name.split("-")[1] for t in job_dir.glob(".trash-epoch_block=*-*")}
    else:
        names = {f"epoch_block={b}" for b in {epoch_block(e) for e in wanted}}
    parts = [_read_committed(root, table, job, job_dir / name, wanted_cols) for name in sorted(names)]
    data = pa.concat_tables(parts) if parts else _file_schema(table, wanted_cols).empty_table()
    if wanted is not None:
        data = data.filter(pc.is_in(data.column("epoch"), pa.array(wanted, pa.int64())))
    data = data.append_column("job", pa.array([job] * data.num_rows, pa.string()))
    data = data.append_column("epoch_block", pc.divide(data.column("epoch"), EPOCH_BLOCK_SIZE).cast(pa.int64()))
    return data.select(schema.names).cast(schema)


def _file_schema(table: Table, columns: Sequence[str] | None) -> pa.Schema:
    full = table.arrow_schema(with_partitions=False)
    return full if columns is None else pa.schema([f for f in full if f.name in columns])


def epoch_span(root: str | Path, table: Table, job: str) -> tuple[int, int] | None:
    """The oldest and newest epoch of one job in a table (reads its oldest and newest blocks only); None: no rows."""
    if delta.is_store_url(root):
        return delta.epoch_span(str(root), table, validate_job_name(job))
    job_dir = table_dir(root, table) / f"job={validate_job_name(job)}"
    blocks = sorted(int(d.name.split("=", 1)[1]) for d in job_dir.glob("epoch_block=*") if d.name[12:].isdigit())
    ends: list[int] = []
    for order in (blocks, blocks[::-1]):
        for block in order:
            epochs = _read_committed(root, table, job, job_dir / f"epoch_block={block}").column("epoch")
            if len(epochs):
                ends.append(int((pc.min if order is blocks else pc.max)(epochs).as_py()))
                break
    return (ends[0], ends[1]) if len(ends) == 2 else None


def dataset(root: str | Path, table: Table) -> ds.Dataset:
    """All jobs of a table as a pyarrow dataset (hive partitioning)."""
    return ds.dataset(table_dir(root, table), format="parquet", partitioning="hive", schema=table.arrow_schema())
