"""The store on an object store: one Delta Lake table per table of the store, written with delta-rs.

The store is a URL (``s3://bucket/prefix``) when the workers of a deployment run on several hosts:
a local folder (:mod:`autoscaler.store.parquet`) is seen only by the host that has it. Each table of
:mod:`autoscaler.store.schemas` is the Delta table ``<url>/<table name>``, partitioned as the local
store is (``job``, ``epoch_block``), so a reader of one job's epochs opens only that job's files.

Why Delta Lake (delta-rs), not Apache Iceberg: a Delta table needs no catalog service, since its
transaction log lies beside its data, and delta-rs commits a version with the object store's
conditional PUT (``If-None-Match: *``), which S3 and S3-compatible stores have offered since 2024.
Two writers on two hosts therefore exclude each other through the store alone. pyiceberg needs a
catalog (REST, SQL or Glue) to commit: one more service to run and keep available.

The contract is the local store's: writing epochs replaces exactly those epochs of one job (a
predicate overwrite ``job = .. AND epoch_block IN .. AND epoch IN ..``, committed as one Delta
version: readers see all of it or none), so a retried or repeated write leaves one copy. When
another writer's commit touched the same files first, delta-rs raises a commit conflict; the write
is then made again from the start (it only states which epochs it replaces, so it is the same write),
up to :data:`COMMIT_ATTEMPTS` times.

Each write of new epochs adds one small file to its block; :func:`write_epochs` compacts a block once
it holds :data:`COMPACT_AT_FILES` files, so that a reader opens a bounded number of files per block, and
then vacuums the files the table stopped using longer ago than its retention (Delta's default: 7 days).
delta-rs writes a log checkpoint every 100 commits (seen: version 99's after 102 commits), so opening a
table reads one checkpoint and fewer than 100 commit entries, however long the job has run.
Credentials and the endpoint come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...:
what delta-rs and every AWS client read); the Airflow side puts them there from a connection.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from autoscaler.errors import InputError
from autoscaler.store.schemas import Table

log = logging.getLogger(__name__)

# scheme://bucket[/prefix]: the object stores delta-rs reaches. Matched in full; the bucket by S3's rule.
_STORE_URL = re.compile(r"(s3|s3a|gs|az|abfss)://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9_.=-]+)*/?")
# Why these many: each attempt fails only because another writer committed to the same block meanwhile;
# writers of one job are serialised by its DAG (max_active_runs=1), so more than a few in a row means
# something else is wrong, and the error says so.
COMMIT_ATTEMPTS = 8
# Files a block may gather before it is compacted: a reader of one epoch opens every file of its block
# (Parquet statistics then skip most row groups), so this bounds the requests per read. One file per
# epoch would be 1,024 requests per block.
COMPACT_AT_FILES = 32


def is_store_url(root: object) -> bool:
    """Whether ``root`` names a store on an object store (a URL), not a local folder."""
    return isinstance(root, str) and "://" in root


def check_store_url(url: str) -> str:
    if not _STORE_URL.fullmatch(url):
        raise InputError(
            "store",
            f"{url!r} is not a store URL: use s3://bucket/prefix (also s3a, gs, az, abfss); "
            "the prefix's parts of letters, digits, '_ . = -'",
        )
    return url.rstrip("/")


def table_url(url: str, table: Table) -> str:
    return f"{check_store_url(url)}/{table.name}"


def _epochs_predicate(job: str, epochs: Sequence[int]) -> str:
    """The rows of ``epochs`` of one job, naming their blocks so that only those partitions' files are read.
    ``job`` is a checked job name (letters, digits, ``_ . -``): it cannot end the quoted literal."""
    blocks = sorted({e // _block_size() for e in epochs})
    return f"job = '{job}' AND epoch_block IN ({_sql_list(blocks)}) AND epoch IN ({_sql_list(epochs)})"


def _sql_list(values: Iterable[int]) -> str:
    return ", ".join(str(int(v)) for v in values)


# Imported on use: the local store, the default, never loads delta-rs (nor its Tokio runtime).
def _deltalake() -> tuple[Any, type[Exception], type[Exception]]:
    import deltalake
    from deltalake.exceptions import CommitFailedError, TableNotFoundError

    return deltalake, CommitFailedError, TableNotFoundError


def _open(url: str, table: Table) -> Any:  # a deltalake.DeltaTable, or None before its first write
    deltalake, _, missing = _deltalake()
    try:
        return deltalake.DeltaTable(table_url(url, table))
    except missing:
        return None


def write_epochs(url: str, table: Table, job: str, rows: pa.Table) -> list[int]:
    """Write one job's rows (in the table's full schema), replacing every epoch they contain, as one commit."""
    deltalake = _deltalake()[0]
    epochs = sorted(set(rows.column("epoch").to_pylist()))
    if not epochs:
        return []
    blocks = sorted(set(rows.column("epoch_block").to_pylist()))
    predicate = _epochs_predicate(job, epochs)
    target = table_url(url, table)

    def commit() -> None:
        if _open(url, table) is None:
            deltalake.DeltaTable.create(target, schema=table.arrow_schema(), partition_by=list(table.partition_by), mode="ignore")
        deltalake.write_deltalake(target, rows, mode="overwrite", predicate=predicate)

    _retried(target, f"writes of job {job!r}", commit)
    for block in blocks:
        _compact_if_due(url, table, job, block)
    return epochs


def delete_epochs(url: str, table: Table, job: str, epochs: Sequence[int]) -> None:
    """Delete one job's rows of ``epochs`` in one commit (quarantine), retried as a write is."""
    predicate = _epochs_predicate(job, epochs)

    def commit() -> None:
        dt = _open(url, table)
        if dt is not None:
            dt.delete(predicate)

    _retried(table_url(url, table), f"deletes of job {job!r}", commit)


def _retried(target: str, what: str, commit: Any) -> None:
    """Run ``commit`` until no other writer's commit beats it, at most COMMIT_ATTEMPTS times."""
    _, conflict, _ = _deltalake()
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            commit()
            return
        except conflict as exc:
            if attempt == COMMIT_ATTEMPTS:
                raise InputError(target, f"{COMMIT_ATTEMPTS} {what} in a row lost to other writers: {exc}") from None
            time.sleep(random.uniform(0, 0.05 * 2**attempt))  # jittered: two losers do not collide again


def _compact_if_due(url: str, table: Table, job: str, block: int) -> None:
    """Compact one block when it holds COMPACT_AT_FILES files; a conflict leaves it to the next write."""
    _, conflict, _ = _deltalake()
    dt = _open(url, table)
    if dt is None:
        return
    where = [("job", "=", job), ("epoch_block", "=", str(block))]
    if len(dt.file_uris(file_pruning_predicate=where)) < COMPACT_AT_FILES:
        return
    try:
        dt.optimize.compact(partition_filters=where)
    except conflict as exc:  # a writer committed to the block meanwhile: nothing is lost, compaction waits
        log.info("store: compacting %s job %s block %s deferred (%s)", table.name, job, block, exc)
        return
    # The files compaction and overwrites removed from the table stay on the store until vacuumed; those
    # removed longer ago than the table's retention (Delta's default, 7 days: far beyond any reader) go now.
    _open(url, table).vacuum(dry_run=False)


def _filter(job: str, epochs: Sequence[int] | None) -> ds.Expression:
    where = ds.field("job") == job
    if epochs is not None:
        blocks = sorted({e // _block_size() for e in epochs})
        where = where & ds.field("epoch_block").isin(blocks) & ds.field("epoch").isin(list(epochs))
    return where


def _block_size() -> int:
    from autoscaler.store.parquet import EPOCH_BLOCK_SIZE  # one block size for both layouts

    return EPOCH_BLOCK_SIZE


def read_epochs(url: str, table: Table, job: str, epochs: Iterable[int] | None, names: Sequence[str]) -> pa.Table:
    """Rows of one job (all epochs, or the given ones), columns ``names`` of the full schema, in the latest version."""
    schema = pa.schema([table.arrow_schema().field(n) for n in names])
    dt = _open(url, table)
    if dt is None:
        return schema.empty_table()
    wanted = None if epochs is None else sorted(set(epochs))
    if wanted == []:
        return schema.empty_table()
    data = dt.to_pyarrow_dataset().to_table(columns=list(names), filter=_filter(job, wanted))
    return data.sort_by([("epoch", "ascending")]).cast(schema)  # stable: rows of one epoch keep their order


def stored_blocks(url: str, table: Table, job: str) -> list[int]:
    dt = _open(url, table)
    if dt is None:
        return []
    data = dt.to_pyarrow_dataset().to_table(columns=["epoch_block"], filter=ds.field("job") == job)
    return sorted(pc.unique(data.column("epoch_block")).to_pylist())


def epoch_span(url: str, table: Table, job: str) -> tuple[int, int] | None:
    dt = _open(url, table)
    if dt is None:
        return None
    epochs = dt.to_pyarrow_dataset().to_table(columns=["epoch"], filter=ds.field("job") == job).column("epoch")
    if not len(epochs):
        return None
    span = pc.min_max(epochs).as_py()
    return int(span["min"]), int(span["max"])


def file_uris(url: str, table: Table, job: str, first_block: int | None = None, last_block: int | None = None) -> list[str]:
    """The data files of one job's rows in the latest version, of blocks ``first_block``..``last_block``
    (inclusive; None: unbounded): what Spark reads, one consistent version."""
    dt = _open(url, table)
    if dt is None:
        return []
    where: list[tuple[str, str, Any]] = [("job", "=", job)]
    if first_block is not None:
        where.append(("epoch_block", ">=", first_block))
    if last_block is not None:
        where.append(("epoch_block", "<=", last_block))
    return dt.file_uris(file_pruning_predicate=where)
