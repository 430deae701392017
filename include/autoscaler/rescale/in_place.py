"""Rescale in place (adaptive scheduler only): ``PUT /jobs/:id/resource-requirements`` plus a
manual checkpoint so the change applies at once. Same job id; on failure the previous
requirements are put back."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from autoscaler.config.options import IN_PLACE, START_TIMEOUT
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.models import ENDED_STATES
from autoscaler.rescale.checks import (
    CheckpointNudge,
    Wait,
    await_requirements,
    changed_since_measured,
    check_target,
    check_timeout,
    job_summary,
    require_adaptive,
    validate_against_job,
)
from autoscaler.rescale.journal import JOURNAL_VERSION, Journal, open_journal, seconds_since, time_mark, utcnow
from autoscaler.rescale.result import RescaleResult
from autoscaler.store.schemas import FAILED, NOOP, SUCCEEDED


def rescale_in_place(
    client: FlinkRestClient,
    job_name: str,
    target_by_name: Mapping[str, int],
    action_id: str,
    journal_dir: str | Path,
    timeout_s: float = START_TIMEOUT.default.total_seconds(),
    poll_s: float = 0.1,
    measured: Mapping[str, int] | None = None,
) -> RescaleResult:
    """Rescale the running job ``job_name`` without a restart from a savepoint (adaptive scheduler).

    ``measured``: the parallelism the decision's epoch was measured at (see :func:`.checks.changed_since_measured`).

    Sets the resource requirements of ALL vertices (upper bound = target for the named
    operators, the current parallelism for the others; lower bound 1) and triggers a
    checkpoint so the adaptive scheduler applies them at once instead of after its own delays.
    Succeeds when the same job id runs all tasks at the target; ``downtime_s`` counts from the
    PUT. If the target does not take effect within ``timeout_s`` (e.g. not enough slots: the
    scheduler then runs at what fits), the previous requirements are restored and the outcome is
    "failed". A job on the default scheduler raises :class:`InputError` before anything changes.
    """
    target = check_target(target_by_name)
    timeout_s = check_timeout("timeout_s", timeout_s, 0.1)
    poll_s = check_timeout("poll_s", poll_s, 0.01)
    if not isinstance(job_name, str) or not job_name.strip():
        raise InputError("job name", "must be a non-empty string (the Flink job name)")
    with open_journal(journal_dir, action_id) as journal:
        run = _InPlaceRescale(client, job_name, journal, timeout_s, poll_s)
        if journal.data is None:
            return run.begin(action_id, target, measured)
        journal.expect(IN_PLACE, job_name, target)
        return run.resume()


class _InPlaceRescale:
    """The in-place procedure; journal keys: job_id, vertex_ids, previous_requirements, put, phase."""

    def __init__(self, client: FlinkRestClient, job_name: str, journal: Journal, timeout_s: float, poll_s: float) -> None:
        self.client = client
        self.job_name = job_name
        self.journal = journal
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    @property
    def state(self) -> dict[str, Any]:
        """The journaled state of the action (see the class docstring for its keys)."""
        assert self.journal.data is not None
        return self.journal.data

    def begin(self, action_id: str, target: dict[str, int], measured: Mapping[str, int] | None = None) -> RescaleResult:
        job = self.client.running_job(self.job_name)
        details = self.client.job(job.id)
        validate_against_job(details, target, None)
        if changed := changed_since_measured(details, measured):
            return RescaleResult.not_acted(action_id, IN_PLACE, changed, details)
        previous = require_adaptive(self.client, job.id, self.job_name, "in-place rescaling", "use savepoint-restart instead")
        old = details.parallelism
        self.journal.data = {
            "version": JOURNAL_VERSION,
            "action_id": action_id,
            "mechanism": IN_PLACE,
            "job_name": self.job_name,
            "target": target,
            "started_at": utcnow().isoformat(),
            "job_id": job.id,
            "old_parallelism": old,
            "expected": {**old, **target},
            "vertex_ids": {v.name: v.id for v in details.vertices},
            "previous_requirements": previous,
            "put": None,
            "phase": "apply",
            "failure": None,
            "result": None,
        }
        if self.state["expected"] == old:
            return self._finish(NOOP, f"{self.job_name} already runs at {target}: nothing to do")
        return self._apply()

    def resume(self) -> RescaleResult:
        if self.state.get("result"):
            return RescaleResult.from_dict(self.state["result"])
        summary = job_summary(self.client, self.state["job_id"])
        if summary is None or summary.state in ENDED_STATES:
            return self._finish(
                FAILED,
                f"job {self.state['job_id']} of {self.job_name} is {summary.state if summary else 'gone'}: the in-place "
                f"rescale could not be resumed; nothing was changed by this retry.",
            )
        if self.state["phase"] == "restore":
            return self._restore(self.state["failure"])
        return self._apply()

    def _requirements(self, parallelism: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        return {self.state["vertex_ids"][name]: (1, p) for name, p in parallelism.items()}

    def _wait_at(self, parallelism: Mapping[str, int]) -> tuple[Wait, CheckpointNudge]:
        deadline = time.monotonic() + self.timeout_s
        return await_requirements(self.client, self.state["job_id"], parallelism, self.job_name, deadline, self.poll_s)

    def _apply(self) -> RescaleResult:
        if self.state["put"] is None:
            self.state["put"] = time_mark()  # the first PUT: what the downtime counts from, also after a retry
            self.journal.save()
        job_id = self.state["job_id"]
        # Idempotent: a retry sends the same requirements again.
        self.client.set_resource_requirements(job_id, self._requirements(self.state["expected"]))
        wait, checkpoint = self._wait_at(self.state["expected"])
        if wait.reason is None:
            downtime = seconds_since(self.state["put"], wait.running_at)
            note = f" ({checkpoint.problem})" if checkpoint.problem else ""
            return self._finish(
                SUCCEEDED,
                f"{self.job_name} runs at {self.state['target']} in place (same job {job_id}; {downtime:.2f} s from the "
                f"resource-requirements change to all tasks running){note}.",
                downtime_s=downtime,
            )
        self.state["phase"] = "restore"
        self.state["failure"] = f"the new parallelism did not take effect within {self.timeout_s:g} s: {wait.reason}"
        self.journal.save()
        return self._restore(self.state["failure"])

    def _restore(self, failure: str) -> RescaleResult:
        """Put the previous requirements back, so the job does not stay at whatever partly fitted."""
        job_id = self.state["job_id"]
        previous = {vid: (int(r["lowerBound"]), int(r["upperBound"])) for vid, r in self.state["previous_requirements"].items()}
        try:
            self.client.set_resource_requirements(job_id, previous)
        except FlinkError as exc:
            return self._finish(
                FAILED,
                f"{failure}. Restoring the previous resource requirements failed too ({exc}): the job may run at a "
                f"parallelism nobody asked for; set them back by hand: {self.state['previous_requirements']}.",
            )
        wait, _ = self._wait_at(self.state["old_parallelism"])
        if wait.reason is None:
            now = "it runs at its previous parallelism again"
        else:
            summary = job_summary(self.client, job_id)
            try:
                current = self.client.job(job_id).parallelism
            except FlinkError:
                current = "unknown"
            now = f"it is {summary.state if summary else 'gone'} at {current} (not yet back at {self.state['old_parallelism']})"
        return self._finish(FAILED, f"{failure}. Restored the previous resource requirements: {now} (job {job_id}).")

    def _finish(self, outcome: str, message: str, downtime_s: float | None = None) -> RescaleResult:
        result = RescaleResult(
            action_id=self.state["action_id"],
            mechanism=IN_PLACE,
            outcome=outcome,
            old_flink_job_id=self.state["job_id"],
            new_flink_job_id=self.state["job_id"],
            old_parallelism=dict(self.state["old_parallelism"]),
            new_parallelism=dict(self.state["target"]),
            savepoint_path=None,
            downtime_s=None if downtime_s is None else round(downtime_s, 3),
            message=message,
            started_at=datetime.fromisoformat(self.state["started_at"]),
            finished_at=utcnow(),
        )
        self.state["result"] = result.to_dict()
        self.journal.save()
        return result
