"""The store in memory: the Parquet store's contract, for the lab's simulator (and any test that wants it).

The simulated closed loop (:mod:`autoscaler.lab.sim`) runs the decide and record code that reads
the store -- the rules' history (:mod:`autoscaler.decide.history`), the measured restart time
(:mod:`autoscaler.policy.restarts`), the loop report (:mod:`autoscaler.record.loop_report`) --
thousands of epochs a second. A folder of Parquet files per run would make the disk its clock. So,
as the Flink autoscaler keeps its state store in memory or in JDBC behind one interface, a
:class:`MemoryStore` is passed wherever a store root goes: :func:`autoscaler.store.parquet.read_epochs`
and :func:`~autoscaler.store.parquet.write_epochs` hand it the call. The contract is the same: rows
are conformed to the table's schema (a missing required column is an error naming it), and a write
replaces exactly the epochs it holds, per (table, job).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.store.schemas import Table


class MemoryStore:
    """Committed rows per (table, job, epoch), as Arrow tables of the table's full schema (as they are read)."""

    def __init__(self) -> None:
        self._epochs: dict[tuple[str, str], dict[int, pa.Table]] = {}
        # Every epoch of a (table, job) in few chunks, extended by writes that append newer epochs and dropped
        # by any other: Arrow's compute functions pay per chunk, and the rules read a job's whole ACTIONS
        # at every epoch.
        self._whole: dict[tuple[str, str], pa.Table] = {}

    def write_epochs(self, table: Table, job: str, data: pa.Table) -> list[int]:
        """Replace the epochs ``data`` holds (idempotent per epoch, as the Parquet store)."""
        from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, conform, validate_job_name  # parquet.py imports this module

        validate_job_name(job)
        full = table.arrow_schema()
        if data.schema.equals(full) and pc.all(pc.equal(data.column("job"), job)).as_py():
            # Already the table's full schema (a collector's or a policy's rows): checked, then stored as they are.
            conform(table, data.drop_columns(["job", "epoch_block"]), source=f"{table.name} rows for job {job!r}")
            rows = data
        else:
            rows = conform(table, data, source=f"{table.name} rows for job {job!r}")
            rows = rows.append_column("job", pa.array([job] * rows.num_rows, pa.string()))
            rows = rows.append_column("epoch_block", pc.divide(rows.column("epoch"), EPOCH_BLOCK_SIZE).cast(pa.int64()))
            rows = rows.select(table.names).cast(full)  # stored as read: the table's full schema
        epochs = rows.column("epoch").to_pylist()
        stored = self._epochs.setdefault((table.name, job), {})
        self._extend_whole((table.name, job), rows, min(epochs) > max(stored, default=min(epochs) - 1))
        if len(set(epochs)) == 1:
            stored[epochs[0]] = rows
            return epochs[:1]
        for epoch in sorted(set(epochs)):
            stored[epoch] = rows.filter(pc.equal(rows.column("epoch"), epoch))
        return sorted(set(epochs))

    def _extend_whole(self, key: tuple[str, str], rows: pa.Table, appended: bool) -> None:
        """Keep the whole table of ``key`` when the write only appends newer epochs (the live case); drop it otherwise."""
        whole = self._whole.get(key)
        if whole is None or not appended:
            self._whole.pop(key, None)
            return
        whole = pa.concat_tables([whole, rows])
        self._whole[key] = whole.combine_chunks() if whole.column(0).num_chunks > 32 else whole

    def read_epochs(
        self, table: Table, job: str, epochs: Iterable[int] | None = None, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows of one job (all epochs, or the given ones), with ``job`` and ``epoch_block`` filled in."""
        stored = self._epochs.get((table.name, job), {})
        if epochs is None:
            data = self._whole.get((table.name, job))
            if data is None:
                parts = [stored[e] for e in sorted(stored)]
                data = pa.concat_tables(parts).combine_chunks() if parts else table.arrow_schema().empty_table()
                self._whole[(table.name, job)] = data
        else:
            keys = sorted(e for e in set(epochs) if e in stored)
            data = pa.concat_tables([stored[e] for e in keys]) if keys else table.arrow_schema().empty_table()
        if columns is None:
            return data
        return data.select([n for n in table.names if n in columns or n == "epoch"])
