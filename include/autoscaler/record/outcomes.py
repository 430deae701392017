"""What an epoch ended as: the outcome words, and the choice of the epoch's ACTIONS row.

Every live epoch gets exactly one row. A rescale reports its own outcome
(:class:`autoscaler.rescale.result.RescaleResult`); otherwise the row says why nothing was
rescaled. The choice is made here, from what the run's tasks left behind
(:class:`EpochRun`), so the orchestrator only gathers those facts and writes the row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from autoscaler.decide.rules import RECOMMEND
from autoscaler.rescale.result import RescaleResult
from autoscaler.store.parquet import epoch_block

# The outcome words are the actions table's vocabulary, defined with it (store.schemas) so that the
# rescale stage reports them without importing the record stage.
from autoscaler.store.schemas import (  # noqa: F401 - re-exported: the words every stage uses
    ALL,
    FAILED,
    FAILING_OVER,
    NOOP,
    NOT_ACTED,
    RECOMMENDED,
    REJECTED,
    RESCALE_OUTCOMES,
    RESTARTED,
    ROLLED_BACK,
    RUN_FAILS,
    SKIPPED,
    SUCCEEDED,
)


def action_row(
    job: str,
    epoch: int,
    *,
    action_id: str,
    mechanism: str,
    outcome: str,
    message: str,
    parallelism: Mapping[str, int],
    flink_job_id: str | None = None,
    approved_by: str | None = None,
    started_at: datetime | None = None,
) -> dict[str, Any]:
    """The ACTIONS row of an epoch in which nothing was rescaled (noop, skipped, rejected, or a failed task)."""
    if outcome not in (*NOT_ACTED, FAILED):
        raise ValueError(f"outcome {outcome!r} is not one of {NOT_ACTED}: rescale outcomes come from RescaleResult.to_row")
    now = datetime.now(UTC)
    same = json.dumps(dict(parallelism), sort_keys=True)
    return {
        "job": job,
        "epoch": int(epoch),
        "epoch_block": epoch_block(int(epoch)),
        "action_id": action_id,
        "mechanism": mechanism,
        "approved_by": approved_by,
        "old_flink_job_id": flink_job_id,
        "new_flink_job_id": flink_job_id,
        "old_parallelism": same,
        "new_parallelism": same,
        "savepoint_path": None,
        "downtime_s": None,
        "outcome": outcome,
        "message": message,
        "started_at": started_at or now,
        "finished_at": now,
    }


@dataclass(frozen=True)
class EpochRun:
    """What one live run's tasks left behind; absent facts are None."""

    action_id: str
    mechanism: str
    parallelism: Mapping[str, int]  # the job's parallelism when the epoch was decided
    plan_summary: str | None = None  # the decide task's summary (None: nothing was decided)
    answer: Mapping[str, Any] | None = None  # the approval: chosen, by, timed_out
    rescaled: Mapping[str, Any] | None = None  # RescaleResult.to_dict() of the rescale task
    failed_tasks: Sequence[str] = field(default_factory=tuple)  # tasks that failed themselves
    validation_summary: str | None = None  # the validate task's summary when it passed
    flink_job_id: str | None = None  # the job the metrics were collected from
    # Last: callers pass the fields above by position.
    plan_action: str | None = None  # the decide task's action: rescale, noop or recommend
    failing_over: str | None = None  # how collection found the job failing over (JobNotRunning, or failovers in the window)


def epoch_row(job: str, epoch: int, run: EpochRun, stored_validation: Callable[[], str | None] = lambda: None) -> dict[str, Any]:
    """The epoch's ACTIONS row. ``stored_validation`` reads the recorded verdict of a failed validation."""
    approved_by = run.answer.get("by") if run.answer else None
    plan = run.plan_summary or ""
    common = {"action_id": run.action_id, "mechanism": run.mechanism, "parallelism": run.parallelism}
    failed = list(run.failed_tasks)
    if run.rescaled:
        row = RescaleResult.from_dict(run.rescaled).to_row(job, epoch, approved_by)
    elif run.answer and run.answer.get("chosen") != "Approve":
        how = "no answer in time, the configured default applied" if run.answer.get("timed_out") else f"by {approved_by}"
        row = action_row(job, epoch, outcome=REJECTED, message=f"rejected ({how}): {plan}", approved_by=approved_by, **common)
    elif "approve" in failed:
        message = f"the approval task failed (see its log); nothing was rescaled: {plan}"
        row = action_row(job, epoch, outcome=SKIPPED, message=message, **common)
    elif "rescale" in failed:
        message = f"the rescale task failed before reporting a result (see its log): {plan}"
        row = action_row(job, epoch, outcome=FAILED, message=message, approved_by=approved_by, **common)
    elif run.failing_over:
        message = f"{run.failing_over}: nothing is decided or rescaled while it fails over"
        row = action_row(job, epoch, outcome=FAILING_OVER, message=message, flink_job_id=run.flink_job_id, **common)
    elif failed:
        what = stored_validation() if "validate" in failed else None
        message = f"{', '.join(failed)} failed: {what or 'see the task logs'}"
        row = action_row(job, epoch, outcome=SKIPPED, message=message, **common)
    elif run.plan_summary is not None:
        outcome = RECOMMENDED if run.plan_action == RECOMMEND else NOOP
        row = action_row(job, epoch, outcome=outcome, message=run.plan_summary, flink_job_id=run.flink_job_id, **common)
    else:
        row = action_row(job, epoch, outcome=SKIPPED, message=run.validation_summary or "nothing was decided", **common)
    if row.get("old_flink_job_id") is None and run.flink_job_id:
        row["old_flink_job_id"] = run.flink_job_id
    return row


def run_fails(row: Mapping[str, Any], run: EpochRun) -> bool:
    """Whether the run must end failed: a task failed, or the rescale failed or was rolled back."""
    return bool(run.failed_tasks) or row["outcome"] in RUN_FAILS
