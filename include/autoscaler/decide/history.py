"""What the decide rules read about an epoch: its decisions and the job's rescale history, from the store.

The decide stage's inputs, read here so that the rules (:mod:`autoscaler.decide.rules`) stay pure
and the record stage only writes: the epoch's DECISIONS rows, the newest rescale after which the
job restarted (ACTIONS), how many complete decisions came since, and the key groups each operator's
proposal was aligned to (METRICS), which a target cut down by the slot check must stay aligned to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.decide.rules import LastRescale, agreeing_epochs
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, FAILING_OVER, METRICS, RESTARTED


def last_rescale(store_root: str | Path, job: str, before_epoch: int) -> LastRescale | None:
    """The newest action before ``before_epoch`` after which the job restarted, a failover included (None: never)."""
    # Only the columns the answer needs: the rules read this every epoch, over all of the job's actions.
    actions = read_epochs(store_root, ACTIONS, job, columns=["outcome", "finished_at"])
    if actions.num_rows == 0:
        return None
    restarted = pc.is_in(actions.column("outcome"), pa.array(RESTARTED))
    mask = pc.and_(restarted, pc.less(actions.column("epoch"), before_epoch))
    restarts = actions.filter(mask)
    if restarts.num_rows == 0:
        return None
    newest = restarts.take([int(np.argmax(restarts.column("epoch").to_numpy()))]).to_pylist()[0]  # the first if tied
    what = "failover" if newest["outcome"] == FAILING_OVER else "rescale"
    return LastRescale(int(newest["epoch"]), newest["finished_at"], what)


def decided_epochs(store_root: str | Path, job: str, after_epoch: int, up_to_epoch: int, enough: int) -> int:
    """Decided epochs in (after_epoch, up_to_epoch] whose proposals agree with ``up_to_epoch``'s, newest first.

    An epoch counts when every decision row is complete (status ok) and it proposes the same
    direction for every operator (up, down or keep) as the decided epoch: activation counts a
    proposal that held, not merely epochs that passed. A decided epoch that disagrees ends the
    count; an epoch with no complete decision is skipped. Only the last ``enough`` epochs are read:
    the activation rule needs to know no more.
    """
    first = max(after_epoch + 1, up_to_epoch - enough + 1)
    if first > up_to_epoch:
        return 0
    columns = ["epoch", "status", "operator_id", "is_source", "current_parallelism", "target_parallelism"]
    rows = read_epochs(store_root, DECISIONS, job, range(first, up_to_epoch + 1)).select(columns).to_pylist()
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_epoch.setdefault(row["epoch"], []).append(row)
    if up_to_epoch not in by_epoch:
        return 0
    return agreeing_epochs([by_epoch[e] for e in sorted(by_epoch)])


def key_groups(store_root: str | Path, job: str, epoch: int) -> dict[str, int]:
    """Per operator id, the key groups (or splits) the policy aligned its proposal to: the largest
    ``max_parallelism`` over the epoch's instances, as the policy's window takes it (engine/windows.py)."""
    rows = read_epochs(store_root, METRICS, job, [epoch], columns=["operator_id", "max_parallelism"])
    out: dict[str, int] = {}
    for row in rows.to_pylist():
        if row["max_parallelism"]:
            out[row["operator_id"]] = max(out.get(row["operator_id"], 0), int(row["max_parallelism"]))
    return out


@dataclass(frozen=True)
class EpochHistory:
    """What the decide rules read about an epoch: its DS2 decisions, the job's rescale history and the
    key groups its proposals were aligned to."""

    decisions: list[dict[str, Any]]  # the epoch's DECISIONS rows
    last_rescale: LastRescale | None  # the newest rescale before the epoch after which the job restarted
    decided_epochs: int  # complete decisions since that rescale (at most ``enough``)
    key_groups: dict[str, int]  # operator id -> key groups (key_groups above)


def epoch_history(store_root: str | Path, job: str, epoch: int, enough: int) -> EpochHistory:
    """The decisions of ``epoch`` and the history the stability rules need, in one call."""
    last = last_rescale(store_root, job, epoch)
    decided = decided_epochs(store_root, job, last.epoch if last else -1, epoch, enough)
    decisions = read_epochs(store_root, DECISIONS, job, [epoch]).to_pylist()
    return EpochHistory(decisions, last, decided, key_groups(store_root, job, epoch))
