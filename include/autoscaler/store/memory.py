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
    """Committed rows per (table, job, epoch), as Arrow tables of the table's file schema."""

    def __init__(self) -> None:
        self._epochs: dict[tuple[str, str], dict[int, pa.Table]] = {}

    def write_epochs(self, table: Table, job: str, data: pa.Table) -> list[int]:
        """Replace the epochs ``data`` holds (idempotent per epoch, as the Parquet store)."""
        from autoscaler.store.parquet import conform, validate_job_name

        validate_job_name(job)
        rows = conform(table, data, source=f"{table.name} rows for job {job!r}")
        epochs = rows.column("epoch").to_pylist()
        stored = self._epochs.setdefault((table.name, job), {})
        if len(set(epochs)) == 1:
            stored[epochs[0]] = rows
            return epochs[:1]
        for epoch in sorted(set(epochs)):
            stored[epoch] = rows.filter(pc.equal(rows.column("epoch"), epoch))
        return sorted(set(epochs))

    def read_epochs(
        self, table: Table, job: str, epochs: Iterable[int] | None = None, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Rows of one job (all epochs, or the given ones), with ``job`` and ``epoch_block`` filled in."""
        from autoscaler.store.parquet import EPOCH_BLOCK_SIZE  # here: parquet.py imports this module

        stored = self._epochs.get((table.name, job), {})
        keys = sorted(stored) if epochs is None else sorted(e for e in set(epochs) if e in stored)
        names = table.names if columns is None else [n for n in table.names if n in columns or n == "epoch"]
        schema = pa.schema([table.arrow_schema().field(n) for n in names])
        if not keys:
            return schema.empty_table()
        data = pa.concat_tables([stored[e] for e in keys])
        data = data.append_column("job", pa.array([job] * data.num_rows, pa.string()))
        data = data.append_column("epoch_block", pc.divide(data.column("epoch"), EPOCH_BLOCK_SIZE).cast(pa.int64()))
        return data.select(names).cast(schema)

    def epochs(self, table: Table, job: str) -> list[int]:
        return sorted(self._epochs.get((table.name, job), {}))
