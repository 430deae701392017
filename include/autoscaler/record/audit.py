"""The audit trail: one ACTIONS row per live epoch (what the decide rules read of it: :mod:`autoscaler.decide.history`).

Every live epoch gets a row -- a rescale's outcome (succeeded, failed, rolled-back), or why
nothing was done (noop, skipped, rejected) -- so "what did the autoscaler do at 14:05 and why"
has an answer for every interval. Rows are written per (job, epoch): re-running an epoch
replaces its row.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import ACTIONS, VALIDATIONS


def record_action(store_root: str | Path, row: Mapping[str, Any]) -> None:
    """Write (or replace) the epoch's ACTIONS row."""
    table = pa.Table.from_pylist([dict(row)], schema=ACTIONS.arrow_schema())
    write_epochs(store_root, ACTIONS, row["job"], table)


def validation_summary(store_root: str | Path, job: str, epoch: int) -> str | None:
    """The recorded validation verdict of an epoch, in words (None when it was never validated)."""
    rows = read_epochs(store_root, VALIDATIONS, job, [epoch]).to_pylist()
    return rows[-1]["summary"] if rows else None


def actions_log(store_root: str | Path, job: str) -> list[dict[str, Any]]:
    """Every ACTIONS row of a job, oldest first."""
    return read_epochs(store_root, ACTIONS, job).sort_by([("epoch", "ascending")]).to_pylist()
