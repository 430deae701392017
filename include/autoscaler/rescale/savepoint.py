"""Rescale by stop-with-savepoint and restart (any scheduler): the entry points and the stop half.

The job's jar is run from the savepoint with the new per-operator parallelism in its program arguments (Flink 2.3
ignores ``pipeline.jobvertex-parallelism-overrides``); the job gets a new job id. A failed or late savepoint leaves
the job running (or restarts it unchanged from the late savepoint); a failed restart is rolled back from the same
savepoint (:mod:`.restart`). The savepoint's format is the job's ``savepoint_format`` (ForSt writes only native).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, overload

from autoscaler.config.options import SAVEPOINT_RESTART, SAVEPOINT_TIMEOUT, START_TIMEOUT
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.deployment import JobDeployment, resolve_jar
from autoscaler.flink.models import ACTIVE_STATES
from autoscaler.rescale.checks import (
    VERIFY_WINDOW_S,
    changed_since_measured,
    check_target,
    check_timeout,
    job_summary,
    require_adaptive,
    savepoint_failure_cause,
    validate_against_job,
)
from autoscaler.rescale.journal import (  # noqa: F401 - pending_savepoint: the deferrable task's half, named here
    JOURNAL_VERSION,
    open_journal,
    pending_savepoint,
    seconds_since,
    time_mark,
    utcnow,
)
from autoscaler.rescale.recovery import savepoint_from_history, savepoint_in_progress
from autoscaler.rescale.restart import SavepointSteps, check_restartable_unchanged
from autoscaler.rescale.result import RescaleResult
from autoscaler.store.schemas import FAILED, NOOP


class _SavepointPending(Exception):
    """Raised inside the procedure to stop at "savepoint requested" (``wait_for_savepoint=False``)."""


@overload
def rescale_with_savepoint(
    client: FlinkRestClient,
    deployment: JobDeployment,
    target: Mapping[str, int],
    action_id: str,
    journal_dir: str | Path,
    savepoint_timeout_s: float = ...,
    start_timeout_s: float = ...,
    poll_s: float = ...,
    late_savepoint_grace_s: float = ...,
    verify_window_s: float = ...,
    wait_for_savepoint: Literal[True] = ...,
    measured: Mapping[str, int] | None = ...,
    job_settings: tuple[Mapping[str, str], Mapping[str, str]] | None = ...,
    before_restart: Callable[[], str] | None = ...,
) -> RescaleResult: ...


@overload
def rescale_with_savepoint(
    client: FlinkRestClient,
    deployment: JobDeployment,
    target: Mapping[str, int],
    action_id: str,
    journal_dir: str | Path,
    savepoint_timeout_s: float = ...,
    start_timeout_s: float = ...,
    poll_s: float = ...,
    late_savepoint_grace_s: float = ...,
    verify_window_s: float = ...,
    wait_for_savepoint: bool = ...,
    measured: Mapping[str, int] | None = ...,
    job_settings: tuple[Mapping[str, str], Mapping[str, str]] | None = ...,
    before_restart: Callable[[], str] | None = ...,
) -> RescaleResult | None: ...


def rescale_with_savepoint(
    client: FlinkRestClient,
    deployment: JobDeployment,
    target: Mapping[str, int],
    action_id: str,
    journal_dir: str | Path,
    savepoint_timeout_s: float = SAVEPOINT_TIMEOUT.default.total_seconds(),
    start_timeout_s: float = START_TIMEOUT.default.total_seconds(),
    poll_s: float = 0.1,
    late_savepoint_grace_s: float = 30.0,
    verify_window_s: float = VERIFY_WINDOW_S,
    wait_for_savepoint: bool = True,
    measured: Mapping[str, int] | None = None,
    job_settings: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
    before_restart: Callable[[], str] | None = None,
) -> RescaleResult | None:
    """Rescale the running job named ``deployment.job_name`` by stop-with-savepoint and restart.

    ``target`` maps operator names to the wanted parallelism; operators not named keep theirs.
    Outcomes: "noop" (already at the target), "succeeded" (new job id running at the target),
    "rolled-back" (the restart at the target failed; the job runs again at the previous
    parallelism from the same savepoint), "failed" (the job runs unchanged, or -- said plainly in
    the message -- is stopped and restorable from the named savepoint).

    ``late_savepoint_grace_s``: after ``savepoint_timeout_s`` the savepoint cannot be cancelled;
    it is watched this much longer so that, if it completes and so stops the job, the job is
    restarted unchanged. Bad input raises :class:`InputError` before anything is touched; a
    cluster that cannot be reached raises :class:`FlinkError` (retry with the same action id).

    ``measured``: the parallelism the decision's epoch was measured at; a job found at another one was
    rescaled by someone else since, and is left alone ("noop", :func:`.checks.changed_since_measured`).

    ``wait_for_savepoint=False`` (a deferrable orchestrator task): return None as soon as the
    stop-with-savepoint is requested and journaled, instead of waiting for it; wait elsewhere
    (:func:`pending_savepoint` names the operation), then call again with the same action id,
    which carries on from the savepoint.

    ``job_settings``: (new, old) Flink configuration of the job (e.g. ``execution.checkpointing.interval``): the
    restart at the target runs with the new, a rollback or unchanged restart with the old; a change of settings
    alone is a restart too. ``before_restart``: called once, after the stop and before the restart at the target
    (a tuning round's TaskManager swap, :mod:`autoscaler.tuning.apply`); it returns what it did, in words, for the
    result's message, and an exception from it rolls the job back unchanged; given one, the job is restarted even at its
    parallelism and settings (the step is the change).
    """
    target = check_target(target)
    rescale = _SavepointRescale(
        client,
        deployment,
        savepoint_timeout_s=check_timeout("savepoint_timeout_s", savepoint_timeout_s),
        start_timeout_s=check_timeout("start_timeout_s", start_timeout_s, 0.1),
        poll_s=check_timeout("poll_s", poll_s, 0.01),
        grace_s=check_timeout("late_savepoint_grace_s", late_savepoint_grace_s),
        verify_window_s=check_timeout("verify_window_s", verify_window_s),
    )
    rescale.wait_for_savepoint = bool(wait_for_savepoint)
    rescale.measured = dict(measured or {})
    rescale.job_settings = (dict(job_settings[0]), dict(job_settings[1])) if job_settings else ({}, {})
    rescale.before_restart = before_restart
    with open_journal(journal_dir, action_id) as journal:
        rescale.journal = journal
        try:
            if journal.data is None:
                return rescale.begin(action_id, target)
            journal.expect(SAVEPOINT_RESTART, deployment.job_name, target)
            return rescale.resume()
        except _SavepointPending:
            return None


class _SavepointRescale(SavepointSteps):
    """The stop half: begin, resume from the journal, stop with a savepoint and wait for it."""

    # -- start ----------------------------------------------------------------------------
    def begin(self, action_id: str, target: dict[str, int]) -> RescaleResult:
        job = self.client.running_job(self.deployment.job_name)
        details = self.client.job(job.id)
        flags = self.deployment.parallelism_args
        validate_against_job(details, target, flags or None)
        if changed := changed_since_measured(details, self.measured):
            return RescaleResult.not_acted(action_id, SAVEPOINT_RESTART, changed, details)
        old = details.parallelism
        mapped_old = {name: old[name] for name in flags}
        # Before the stop: a missing jar must not be found out while the job is down.
        new_settings, old_settings = self.job_settings
        changes = {**old, **target} != old or new_settings != old_settings or self.before_restart is not None
        jar_id = resolve_jar(self.client, self.deployment) if changes else None
        if jar_id is not None and not flags:
            require_adaptive(
                self.client, job.id, self.deployment.job_name, "a savepoint-restart of a job without parallelism_args",
                "give the job parallelism_args (program flags that set each operator's parallelism), or rescale in place "
                "on an adaptive cluster",
            )  # fmt: skip
            check_restartable_unchanged(self.client, self.deployment, jar_id, details)
        self.journal.data = {
            "version": JOURNAL_VERSION,
            "action_id": action_id,
            "mechanism": SAVEPOINT_RESTART,
            "job_name": self.deployment.job_name,
            "target": target,
            "started_at": utcnow().isoformat(),
            "old_job_id": job.id,
            "old_parallelism": old,
            "expected": {**old, **target},
            "mapped_old": mapped_old,
            "mapped_new": {**mapped_old, **target} if flags else {},
            "jar_id": jar_id,
            "job_settings": {"new": new_settings, "old": old_settings},
            "stop": None,
            "savepoint": None,
            "submissions": [],
            "result": None,
        }
        if not changes:
            return self._finish(NOOP, f"{self.deployment.job_name} already runs at {target}: nothing to do", new_job_id=job.id)
        return self._stop(may_retry_stop=False)

    def resume(self) -> RescaleResult:
        """Continue a journaled attempt from its last recorded step."""
        state = self.state
        if state.get("result"):
            return RescaleResult.from_dict(state["result"])
        savepoint = state.get("savepoint") or {}
        if state.get("stop") is None:
            return self._stop(may_retry_stop=False)
        if not savepoint.get("location"):
            if savepoint.get("failure"):
                return self._savepoint_failed(savepoint["failure"])
            if state["stop"].get("request_id") is None:
                # The stop was about to be sent, or sent without its answer being recorded.
                return self._stop_outcome_unknown(error=None, may_retry_stop=True)
            if not self.wait_for_savepoint:
                return self._check_pending()
            return self._await_savepoint(deadline=time.monotonic() + self.savepoint_timeout_s)
        subs = state["submissions"]
        if not subs:
            first = "recover" if savepoint.get("checkpoint") else "restore" if savepoint.get("timed_out") else "rescale"
            return self._submit(first)
        last = subs[-1]
        if last.get("job_id") is None:
            adopted = self._find_new_job()
            if adopted is not None:  # submitted, but the job id never reached the journal
                last["job_id"] = adopted
                self.journal.save()
                return self._await_start(last["purpose"])
            if last.get("error"):
                return self._start_failed(last["purpose"], last["error"])
            subs.pop()  # the submission never happened
            return self._submit(last["purpose"])
        summary = job_summary(self.client, last["job_id"])
        if summary is not None and summary.state in ACTIVE_STATES:
            return self._await_start(last["purpose"])
        reason = last.get("error") or f"job {last['job_id']} is {summary.state if summary else 'gone'}"
        return self._start_failed(last["purpose"], reason)

    def _check_pending(self) -> RescaleResult:
        """A deferred attempt resumes: ask Flink once instead of assuming the savepoint is still pending.

        Flink forgets an operation after a JobManager restart or ~5 minutes: a 404 is decided by
        what the old job does now, so a late retry never defers forever on an unknown id.
        """
        old, request_id = self.state["old_job_id"], self.state["stop"]["request_id"]
        try:
            status = self.client.savepoint_status(old, request_id)
        except FlinkError as exc:
            if exc.status == 404:
                return self._stop_outcome_unknown(error=None, may_retry_stop=False)
            raise
        if status.completed:
            return self._savepoint_completed(status.location, status.failure, request_id)
        raise _SavepointPending

    # -- stop with savepoint --------------------------------------------------------------
    def _stop(self, may_retry_stop: bool) -> RescaleResult:
        self.state["stop"] = {"at": time_mark(), "request_id": None}
        self.journal.save()  # before the side effect: a crash from here on resumes with "stop unknown"
        try:
            stop, at = self.client.stop_with_savepoint, self.deployment.savepoint_uri
            request_id = stop(self.state["old_job_id"], at, format_type=self.deployment.savepoint_format)
        except FlinkError as exc:
            return self._stop_outcome_unknown(error=exc, may_retry_stop=may_retry_stop)
        self.state["stop"]["request_id"] = request_id
        self.journal.save()
        if not self.wait_for_savepoint:
            raise _SavepointPending
        return self._await_savepoint(deadline=time.monotonic() + self.savepoint_timeout_s)

    def _await_savepoint(self, deadline: float) -> RescaleResult:
        old, request_id = self.state["old_job_id"], self.state["stop"]["request_id"]
        for phase_end in (deadline, None):
            if phase_end is None:
                if not (self.state.get("savepoint") or {}).get("timed_out"):
                    self.state["savepoint"] = {"location": None, "failure": None, "timed_out": True, "duration_s": None}
                    self.journal.save()
                # A savepoint cannot be cancelled: watch it, so that if it completes (which stops
                # the job) the job is restarted unchanged rather than left stopped.
                phase_end = time.monotonic() + self.grace_s
            first = phase_end is not deadline  # the grace phase looks at least once, even when 0 s long
            while first or time.monotonic() < phase_end:
                first = False
                try:
                    status = self.client.savepoint_status(old, request_id)
                except FlinkError as exc:
                    if exc.status == 404:  # Flink forgot the operation (JobManager restart, expiry)
                        return self._stop_outcome_unknown(error=None, may_retry_stop=False)
                    raise
                if status.completed:
                    return self._savepoint_completed(status.location, status.failure, request_id)
                time.sleep(self.poll_s)
        summary = job_summary(self.client, old)
        if summary is None or summary.state != "RUNNING":
            # The status says "in progress" but the job is gone or stopped: decide by the job.
            return self._stop_outcome_unknown(error=None, may_retry_stop=False)
        return self._result(
            FAILED,
            f"the savepoint of {self.deployment.job_name} did not complete within {self.savepoint_timeout_s:g} s "
            f"(nor {self.grace_s:g} s later). The job still runs unchanged (job {old}), but the savepoint is still "
            f"in progress and will stop the job when it completes: retry action {self.state['action_id']!r} to restart "
            f"it unchanged in that case.",
            new_job_id=old,
            final=False,
        )

    def _savepoint_completed(self, location: str | None, failure: str | None, request_id: str | None) -> RescaleResult:
        timed_out = bool((self.state.get("savepoint") or {}).get("timed_out"))
        if location and not failure:
            self.state["savepoint"] = {
                "location": location,
                "failure": None,
                "timed_out": timed_out,
                "duration_s": round(seconds_since(self.state["stop"]["at"]), 3),
            }
            self.journal.save()
            return self._submit("restore" if timed_out else "rescale")
        cause = failure or "no location reported"
        if request_id is not None:
            cause = savepoint_failure_cause(self.client, self.state["old_job_id"], request_id, cause)
        if timed_out:
            cause = f"it did not complete within {self.savepoint_timeout_s:g} s and then failed: {cause}"
        self.state["savepoint"] = {"location": None, "failure": cause, "timed_out": timed_out, "duration_s": None}
        self.journal.save()
        return self._savepoint_failed(cause)

    def _savepoint_failed(self, cause: str) -> RescaleResult:
        """No savepoint: the job should still be running; make sure it is, then report."""
        old = self.state["old_job_id"]
        end = time.monotonic() + self.start_timeout_s
        summary = job_summary(self.client, old)
        # e.g. RESTARTING after a failed synchronous savepoint, or RUNNING with its tasks rescheduled after a lost TaskManager
        while summary is not None and not summary.all_running and summary.state in ACTIVE_STATES and time.monotonic() < end:
            time.sleep(self.poll_s)
            summary = job_summary(self.client, old)
        if summary is None:
            return self._recover_lost_job(f" (its savepoint failed: {cause})")
        if summary.state != "RUNNING":  # stopped all the same (a TaskManager lost while stopping): never left so
            return self._recover_lost_job(f" (it is {summary.state}: its savepoint failed: {cause})")
        message = f"the savepoint of {self.deployment.job_name} failed: {cause}. The job keeps running unchanged (job {old})."
        return self._finish(FAILED, message, new_job_id=old)

    def _stop_outcome_unknown(self, error: FlinkError | None, may_retry_stop: bool) -> RescaleResult:
        """The stop request failed or its answer was lost: what happened to the old job decides."""
        old = self.state["old_job_id"]
        summary = job_summary(self.client, old)
        state = summary.state if summary else None
        if state == "RUNNING" and error is None and may_retry_stop and not savepoint_in_progress(self.client, old):
            return self._stop(may_retry_stop=False)  # the stop never reached Flink: ask (once) again
        refused = error is not None and error.status is not None and error.status < 500
        if state == "RUNNING" and not refused:
            # A stop may be in flight: watch until the job leaves RUNNING, or until no savepoint has
            # been in progress for a while (the checkpoint statistics are cached: give them time).
            end = time.monotonic() + self.savepoint_timeout_s + self.grace_s
            quiet_since = time.monotonic()
            while state == "RUNNING" and time.monotonic() < end:
                if savepoint_in_progress(self.client, old):
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > 2.0 + 2 * self.poll_s:
                    break
                time.sleep(self.poll_s)
                summary = job_summary(self.client, old)
                state = summary.state if summary else None
        end = time.monotonic() + self.start_timeout_s
        while state in ACTIVE_STATES and state != "RUNNING" and time.monotonic() < end:
            time.sleep(self.poll_s)  # e.g. RESTARTING after two stops collided: it comes back by itself
            summary = job_summary(self.client, old)
            state = summary.state if summary else None
        if state == "FINISHED":
            location = savepoint_from_history(self.client, old, float(self.state["stop"]["at"]["wall"]))
            if location:
                return self._savepoint_completed(location, None, None)
            return self._finish(
                FAILED,
                f"{self.deployment.job_name} (job {old}) FINISHED after the stop request, but Flink reports no savepoint "
                f"of it: the job is STOPPED; restart it from its latest savepoint or retained checkpoint.",
            )
        why = f" ({error})" if error is not None else ""
        if state is None:  # Flink no longer knows the job: its JobManager restarted (no high availability)
            return self._recover_lost_job(why)
        if state == "RUNNING":
            return self._finish(
                FAILED,
                f"the stop-with-savepoint of {self.deployment.job_name} did not happen{why}. "
                f"The job keeps running unchanged (job {old}).",
                new_job_id=old,
            )
        return self._finish(
            FAILED,
            f"the stop-with-savepoint of {self.deployment.job_name} had no clear outcome{why}, and job {old} is "
            f"{state or 'unknown to the cluster'}: nothing was restarted; check the cluster.",
        )
