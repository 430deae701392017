"""What a rescale did: :class:`RescaleResult`, one row of the ACTIONS table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class RescaleResult:
    """What one rescale action did; one row of the ACTIONS table (see :meth:`to_row`).

    ``downtime_s``: stop request (savepoint-restart) or resource-requirements PUT (in-place) to
    all tasks RUNNING at the new parallelism (monotonic clock); for a rollback, to all tasks
    RUNNING again at the previous parallelism; None when the job never stopped or is left
    stopped. ``new_parallelism`` is the parallelism requested (operator name -> int),
    ``old_parallelism`` every operator's parallelism before the action. ``new_flink_job_id`` is
    the job running under the job's name when the action ended (the old id when nothing was
    restarted, None when no job runs).
    """

    action_id: str
    mechanism: str
    outcome: str
    old_flink_job_id: str | None
    new_flink_job_id: str | None
    old_parallelism: dict[str, int]
    new_parallelism: dict[str, int]
    savepoint_path: str | None
    downtime_s: float | None
    message: str
    started_at: datetime
    finished_at: datetime
    savepoint_duration_s: float | None = None  # stop request -> savepoint COMPLETED (not in ACTIONS)

    @classmethod
    def not_acted(cls, action_id: str, mechanism: str, message: str, details: Any = None) -> RescaleResult:
        """A rescale that did not touch the job ("noop"), and why: ``details`` is the job as found (JobDetails)."""
        from autoscaler.rescale.journal import utcnow

        now, job_id = utcnow(), getattr(details, "id", None)
        parallelism = dict(getattr(details, "parallelism", {}) or {})
        return cls(action_id, mechanism, "noop", job_id, job_id, parallelism, parallelism, None, None, message, now, now)

    def to_row(self, job: str, epoch: int, approved_by: str | None = None) -> dict[str, Any]:
        """The ACTIONS-table row (``autoscaler.store.schemas.ACTIONS``): dicts as JSON, times in UTC."""
        from autoscaler.store.parquet import epoch_block  # pyarrow is only needed by callers that store rows

        return {
            "job": job,
            "epoch": int(epoch),
            "epoch_block": epoch_block(int(epoch)),
            "action_id": self.action_id,
            "mechanism": self.mechanism,
            "approved_by": approved_by,
            "old_flink_job_id": self.old_flink_job_id,
            "new_flink_job_id": self.new_flink_job_id,
            "old_parallelism": json.dumps(self.old_parallelism, sort_keys=True),
            "new_parallelism": json.dumps(self.new_parallelism, sort_keys=True),
            "savepoint_path": self.savepoint_path,
            "downtime_s": self.downtime_s,
            "outcome": self.outcome,
            "message": self.message,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the journal stores it)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RescaleResult:
        values = dict(data)
        values["started_at"] = datetime.fromisoformat(values["started_at"])
        values["finished_at"] = datetime.fromisoformat(values["finished_at"])
        return cls(**{k: values.get(k) for k in cls.__dataclass_fields__})
