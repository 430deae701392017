"""The restart half of a savepoint-restart: run the jar from the savepoint at the target (or, to
roll back or restore, at the previous parallelism), wait for it, and build the result.

A job with ``parallelism_args`` is run with the target in its arguments. A job without them (any
job as it is, a SQL job) is run unchanged, and once all its tasks run the adaptive scheduler takes
each vertex to its parallelism (per-vertex resource requirements, nudged by a checkpoint), since
Flink 2.3 ignores ``pipeline.jobvertex-parallelism-overrides``.

:class:`SavepointSteps` holds the procedure's settings and journal; :mod:`.savepoint` adds the
stop-with-savepoint half and the entry points.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from autoscaler.config.options import SAVEPOINT_RESTART
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.deployment import JobDeployment, program_args, resolve_jar
from autoscaler.flink.models import ACTIVE_STATES, JobDetails
from autoscaler.rescale.checks import Wait, await_requirements, cancel_quietly, wait_running
from autoscaler.rescale.journal import Journal, seconds_since, utcnow
from autoscaler.rescale.recovery import latest_checkpoint, savepoint_written
from autoscaler.rescale.result import RescaleResult
from autoscaler.store.schemas import FAILED, ROLLED_BACK, SUCCEEDED


class SavepointSteps:
    """The savepoint-restart procedure as resumable steps; the journal holds all its state.

    Journal keys: ``stop`` {at, request_id}; ``savepoint`` {location, failure, timed_out,
    duration_s, checkpoint: true when the location is a retained checkpoint}; ``submissions``
    [{purpose: rescale|rollback|restore|recover, job_id, error}];
    ``result`` (final).
    """

    def __init__(
        self,
        client: FlinkRestClient,
        deployment: JobDeployment,
        savepoint_timeout_s: float,
        start_timeout_s: float,
        poll_s: float,
        grace_s: float,
        verify_window_s: float,
    ) -> None:
        self.client = client
        self.deployment = deployment
        self.savepoint_timeout_s = savepoint_timeout_s
        self.start_timeout_s = start_timeout_s
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.verify_window_s = verify_window_s
        self.measured: dict[str, int] = {}  # the parallelism the decision's epoch was measured at
        self.wait_for_savepoint = True
        self.job_settings: tuple[dict[str, str], dict[str, str]] = ({}, {})  # (new, old): see rescale_with_savepoint
        self.before_restart: Callable[[], str] | None = None
        self.journal: Journal = Journal(Path())

    @property
    def state(self) -> dict[str, Any]:
        """The journaled state of the action (see the class docstring for its keys)."""
        assert self.journal.data is not None
        return self.journal.data

    # -- restart --------------------------------------------------------------------------
    def _savepoint_completed(self, location: str | None, failure: str | None, request_id: str | None) -> RescaleResult:
        raise NotImplementedError  # the stop half (.savepoint) decides what a completed savepoint leads to

    def _submit(self, purpose: str) -> RescaleResult:
        """Run the jar from the savepoint: at the target ("rescale") or unchanged ("rollback", "restore")."""
        mapped = self.state["mapped_new"] if purpose == "rescale" else self.state["mapped_old"]
        submission: dict[str, Any] = {"purpose": purpose, "job_id": None, "error": None}
        self.state["submissions"].append(submission)
        self.journal.save()  # before: a crash from here on looks for a submitted job by name first
        if purpose == "rescale" and self.before_restart is not None and "before_restart" not in self.state:
            try:
                self.state["before_restart"] = self.before_restart()
            except Exception as exc:  # whatever it raised, the job must not stay stopped
                submission["error"] = f"the step before the restart failed: {exc}"
                self.journal.save()
                return self._start_failed(purpose, submission["error"])
            self.journal.save()
        settings = (self.state.get("job_settings") or {}).get("new" if purpose == "rescale" else "old") or {}
        try:
            job_id = self._run_jar(mapped, settings)
        except (FlinkError, InputError) as exc:
            adopted = self._find_new_job()  # the POST may have got through before the error
            if adopted is None:
                submission["error"] = f"the job could not be submitted: {exc}"
                self.journal.save()
                return self._start_failed(purpose, submission["error"])
            job_id = adopted
        submission["job_id"] = job_id
        self.journal.save()
        return self._await_start(purpose)

    def _run_jar(self, mapped: Mapping[str, int], settings: Mapping[str, str]) -> str:
        jar = self.state.get("jar_id") or resolve_jar(self.client, self.deployment)
        for attempt in (1, 2):
            try:
                return self.client.run_jar(
                    jar,
                    self.deployment.entry_class,
                    program_args(self.deployment, mapped),
                    savepoint_path=self.state["savepoint"]["location"],
                    allow_non_restored_state=self.deployment.allow_non_restored_state,
                    claim_mode="NO_CLAIM",  # the savepoint stays ours: a rollback needs it again
                    flink_configuration=settings or None,
                )
            except FlinkError as exc:
                if exc.status != 404 or attempt == 2 or self.deployment.jar_id is not None:
                    raise
                jar = resolve_jar(self.client, self.deployment)  # the upload vanished since it was looked up: upload again
                self.state["jar_id"] = jar
                self.journal.save()
        raise AssertionError("unreachable")

    def _find_new_job(self) -> str | None:
        """A live job of our name started after the stop (a submission whose answer was lost)."""
        known = {self.state["old_job_id"]} | {s["job_id"] for s in self.state["submissions"] if s.get("job_id")}
        stopped_ms = float(self.state["stop"]["at"]["wall"]) * 1000 - 2000
        candidates = [
            j
            for j in self.client.jobs()
            if j.name == self.deployment.job_name
            and j.state in ACTIVE_STATES
            and j.id not in known
            and j.start_time_ms >= stopped_ms
        ]
        return max(candidates, key=lambda j: j.start_time_ms).id if candidates else None

    def _await_start(self, purpose: str) -> RescaleResult:
        submission = self.state["submissions"][-1]
        job_id = submission["job_id"]
        expected = self.state["expected"] if purpose == "rescale" else self.state["old_parallelism"]
        # A rollback that runs is better than a stopped job, whatever base_args named it.
        name = self.deployment.job_name if purpose == "rescale" else None
        deadline = time.monotonic() + self.start_timeout_s
        if self.deployment.parallelism_args:
            wait = wait_running(self.client, job_id, expected, name, deadline, self.poll_s, self.verify_window_s)
        else:
            wait = self._set_parallelism(job_id, expected, name, deadline)
        if wait.reason is not None:
            problem = cancel_quietly(self.client, job_id)
            submission["error"] = wait.reason + (f"; {problem}" if problem else f"; job {job_id} was cancelled")
            self.journal.save()
            return self._start_failed(purpose, submission["error"])
        downtime = seconds_since(self.state["stop"]["at"], wait.running_at)
        savepoint = self.state["savepoint"]
        if purpose == "rescale":
            settings = (self.state.get("job_settings") or {}).get("new")
            also = "".join([f", with {settings}" if settings else "",
                            f"; {self.state['before_restart']}" if self.state.get("before_restart") else ""])  # fmt: skip
            return self._finish(
                SUCCEEDED,
                f"{self.deployment.job_name} runs at {self.state['target']}{also} (job {job_id}, "
                f"from savepoint {savepoint['location']}; "
                f"{downtime:.2f} s from the stop request to all tasks running).",
                new_job_id=job_id,
                downtime_s=downtime,
            )
        if purpose == "rollback":
            first = next((s["error"] for s in self.state["submissions"] if s["purpose"] == "rescale" and s.get("error")), "?")
            return self._finish(
                ROLLED_BACK,
                f"restarting {self.deployment.job_name} at {self.state['target']} failed: {first}. "
                f"Rolled back: the job runs again "
                f"at its previous parallelism from the same savepoint {savepoint['location']} (job {job_id}).",
                new_job_id=job_id,
                downtime_s=downtime,
            )
        if purpose == "recover":
            return self._finish(
                ROLLED_BACK,
                f"the cluster lost job {self.state['old_job_id']} of {self.deployment.job_name} during the rescale (its "
                f"JobManager restarted) before a savepoint was written; the job was restarted unchanged from its latest "
                f"retained checkpoint {savepoint['location']} (job {job_id}): records since that checkpoint are replayed. "
                f"Not rescaled.",
                new_job_id=job_id,
                downtime_s=downtime,
            )
        return self._finish(
            FAILED,
            f"the savepoint of {self.deployment.job_name} did not complete within {self.savepoint_timeout_s:g} s; it completed "
            f"later (after {savepoint['duration_s']} s) and stopped the job, which was restarted unchanged from it "
            f"(job {job_id}). Not rescaled.",
            new_job_id=job_id,
            downtime_s=downtime,
        )

    def _set_parallelism(self, job_id: str, expected: Mapping[str, int], name: str | None, deadline: float) -> Wait:
        """Take a job that restarted unchanged to ``expected``, vertex by vertex (adaptive scheduler).

        Idempotent: a resumed attempt puts the same requirements again.
        """
        try:
            self.client.wait_all_running(job_id, timeout_s=max(deadline - time.monotonic(), 0.1), poll_s=self.poll_s)
            details = self.client.job(job_id)
        except FlinkError as exc:
            return Wait(reason=str(exc))
        vertex_ids = {v.name: v.id for v in details.vertices}
        if set(vertex_ids) != set(expected):
            return Wait(reason=f"job {job_id} has operators {sorted(vertex_ids)}, not {sorted(expected)}: its program changed")
        try:
            self.client.set_resource_requirements(job_id, {vertex_ids[n]: (1, p) for n, p in expected.items()})
        except FlinkError as exc:
            return Wait(reason=f"its parallelism could not be set through the adaptive scheduler: {exc}")
        return await_requirements(self.client, job_id, expected, name, deadline, self.poll_s)[0]

    def _start_failed(self, purpose: str, reason: str) -> RescaleResult:
        last = self.state["submissions"][-1] if self.state["submissions"] else None
        if last is not None and last["purpose"] == purpose and not last.get("error"):
            last["error"] = reason
            self.journal.save()
        if purpose == "rescale":
            return self._submit("rollback")
        location = self.state["savepoint"]["location"]
        if purpose == "rollback":
            first = next((s["error"] for s in self.state["submissions"] if s["purpose"] == "rescale" and s.get("error")), "?")
            how = "the same way" if reason == first else f"too: {reason.rstrip('.')}"
            what = (
                f"restarting {self.deployment.job_name} at {self.state['target']} failed: {first.rstrip('.')}. "
                f"The rollback to the previous parallelism failed {how}"
            )
        elif purpose == "recover":
            what = (
                f"the cluster lost job {self.state['old_job_id']} of {self.deployment.job_name} during the rescale; "
                f"restarting it unchanged from its latest retained checkpoint failed: {reason.rstrip('.')}"
            )
        else:
            what = (
                f"the savepoint of {self.deployment.job_name} did not complete within {self.savepoint_timeout_s:g} s but later "
                f"stopped the job; restarting it unchanged from that savepoint failed: {reason.rstrip('.')}"
            )
        return self._finish(
            FAILED,
            f"{what}. The job {self.deployment.job_name} is STOPPED (no job of that name is running): savepoint {location} "
            f"restores it at its previous parallelism {self.state['mapped_old']}.",
        )

    def _recover_lost_job(self, why: str) -> RescaleResult:
        """The old job is unknown to the cluster: restart it from what it left on disk (see :mod:`.recovery`), the
        stop's savepoint (at the target) or its latest retained checkpoint (unchanged), rather than leave it stopped."""
        old, stopped = self.state["old_job_id"], float(self.state["stop"]["at"]["wall"])
        location = savepoint_written(self.deployment.savepoint_uri, old, stopped)
        if location:
            return self._savepoint_completed(location, None, None)
        checkpoint = latest_checkpoint(self.client, old)
        if checkpoint:
            self.state["savepoint"] = {"location": checkpoint, "failure": None, "timed_out": False, "duration_s": None,
                                       "checkpoint": True}  # fmt: skip
            self.journal.save()
            return self._submit("recover")
        return self._finish(
            FAILED,
            f"job {old} of {self.deployment.job_name} is unknown to the cluster{why} (did its JobManager restart?), and "
            f"neither a savepoint of it since the stop ({self.deployment.savepoint_uri}) nor a retained checkpoint was "
            f"found: nothing was restarted; restart it by hand.",
        )

    # -- results --------------------------------------------------------------------------
    def _finish(
        self, outcome: str, message: str, new_job_id: str | None = None, downtime_s: float | None = None
    ) -> RescaleResult:
        return self._result(outcome, message, new_job_id=new_job_id, downtime_s=downtime_s, final=True)

    def _result(
        self,
        outcome: str,
        message: str,
        new_job_id: str | None = None,
        downtime_s: float | None = None,
        final: bool = True,
    ) -> RescaleResult:
        """Build the result; a final one is journaled so a retry returns it untouched."""
        savepoint = self.state.get("savepoint") or {}
        result = RescaleResult(
            action_id=self.state["action_id"],
            mechanism=SAVEPOINT_RESTART,
            outcome=outcome,
            old_flink_job_id=self.state["old_job_id"],
            new_flink_job_id=new_job_id,
            old_parallelism=dict(self.state["old_parallelism"]),
            new_parallelism=dict(self.state["target"]),
            savepoint_path=savepoint.get("location"),
            downtime_s=None if downtime_s is None else round(downtime_s, 3),
            message=message,
            started_at=datetime.fromisoformat(self.state["started_at"]),
            finished_at=utcnow(),
            savepoint_duration_s=savepoint.get("duration_s"),
        )
        if final:
            self.state["result"] = result.to_dict()
            self.journal.save()
        return result


def check_restartable_unchanged(client: FlinkRestClient, deployment: JobDeployment, jar_id: str, running: JobDetails) -> None:
    """Before a job without ``parallelism_args`` is stopped: its program must still build the running job.

    Such a job restarts from its own savepoint as it is (its SQL or arguments as configured now). When
    they changed so that the job graph has other vertices (another query, other keys), the savepoint
    would not restore it, and a rollback with the same program would fail the same way: refuse while
    the job still runs. Vertex ids are the planner's hashes of the graph, stable across restarts of
    the same program; Flink's plan endpoint builds the graph without running it.
    """
    try:
        planned = client.planned_vertex_ids(jar_id, deployment.entry_class, program_args(deployment, {}))
    except FlinkError as exc:
        raise InputError(
            f"job {deployment.job_name}", f"its program's job graph could not be built to check it before the restart: {exc}"
        ) from None
    have = {v.id: v.name for v in running.vertices}
    if planned != set(have):
        gone = sorted(name for vid, name in have.items() if vid not in planned)
        raise InputError(
            f"job {deployment.job_name}",
            f"its program (jar, arguments or SQL as configured now) no longer builds the running job: operator(s) "
            f"{gone} would not be restored from its savepoint, so it was not stopped. Restart it yourself from a "
            f"savepoint (allowing non-restored state if that is intended); the autoscaler then takes over the new job.",
        )
