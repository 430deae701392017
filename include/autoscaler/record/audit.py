"""The audit trail: one ACTIONS row per live epoch, and the history the decide rules read from it.

Every live epoch gets a row -- a rescale's outcome (succeeded, failed, rolled-back), or why
nothing was done (noop, skipped, rejected) -- so "what did the autoscaler do at 14:05 and why"
has an answer for every interval. Rows are written per (job, epoch): re-running an epoch
replaces its row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.decide.rules import LastRescale
from autoscaler.record.outcomes import RESTARTED
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, VALIDATIONS


def record_action(store_root: str | Path, row: Mapping[str, Any]) -> None:
    """Write (or replace) the epoch's ACTIONS row."""
    table = pa.Table.from_pylist([dict(row)], schema=ACTIONS.arrow_schema())
    write_epochs(store_root, ACTIONS, row["job"], table)


def last_rescale(store_root: str | Path, job: str, before_epoch: int) -> LastRescale | None:
    """The newest action before ``before_epoch`` after which the job restarted (None: never)."""
    actions = read_epochs(store_root, ACTIONS, job)
    if actions.num_rows == 0:
        return None
    restarted = pc.is_in(actions.column("outcome"), pa.array(RESTARTED))
    mask = pc.and_(restarted, pc.less(actions.column("epoch"), before_epoch))
    restarts = actions.filter(mask)
    if restarts.num_rows == 0:
        return None
    newest = restarts.sort_by([("epoch", "descending")]).slice(0, 1).to_pylist()[0]
    return LastRescale(int(newest["epoch"]), newest["finished_at"])


def decided_epochs(store_root: str | Path, job: str, after_epoch: int, up_to_epoch: int, enough: int) -> int:
    """Epochs in (after_epoch, up_to_epoch] whose every decision row is complete (status ok).

    Only the last ``enough`` epochs are read: the activation rule needs to know no more.
    """
    first = max(after_epoch + 1, up_to_epoch - enough + 1)
    if first > up_to_epoch:
        return 0
    rows = read_epochs(store_root, DECISIONS, job, range(first, up_to_epoch + 1)).select(["epoch", "status"]).to_pylist()
    status: dict[int, bool] = {}
    for row in rows:
        status[row["epoch"]] = status.get(row["epoch"], True) and row["status"] == "ok"
    return sum(status.values())


@dataclass(frozen=True)
class EpochHistory:
    """What the decide rules read about an epoch: its DS2 decisions and the job's rescale history."""

    decisions: list[dict[str, Any]]  # the epoch's DECISIONS rows
    last_rescale: LastRescale | None  # the newest rescale before the epoch after which the job restarted
    decided_epochs: int  # complete decisions since that rescale (at most ``enough``)


def epoch_history(store_root: str | Path, job: str, epoch: int, enough: int) -> EpochHistory:
    """The decisions of ``epoch`` and the history the stability rules need, in one call."""
    last = last_rescale(store_root, job, epoch)
    decided = decided_epochs(store_root, job, last.epoch if last else -1, epoch, enough)
    return EpochHistory(read_epochs(store_root, DECISIONS, job, [epoch]).to_pylist(), last, decided)


def validation_summary(store_root: str | Path, job: str, epoch: int) -> str | None:
    """The recorded validation verdict of an epoch, in words (None when it was never validated)."""
    rows = read_epochs(store_root, VALIDATIONS, job, [epoch]).to_pylist()
    return rows[-1]["summary"] if rows else None


def actions_log(store_root: str | Path, job: str) -> list[dict[str, Any]]:
    """Every ACTIONS row of a job, oldest first."""
    return read_epochs(store_root, ACTIONS, job).sort_by([("epoch", "ascending")]).to_pylist()
