"""Checks and waits both rescale mechanisms share: the target against the job, "all tasks RUNNING
at this parallelism", cancelling a job we started, and the cause of a failed savepoint."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from autoscaler.errors import InputError
from autoscaler.flink import ids
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.deployment import check_parallelism
from autoscaler.flink.models import ENDED_STATES, JobDetails, JobSummary

# /jobs/:id is cached for web.refresh-interval (500 ms here, 3 s by default): a parallelism that
# does not match is only believed after re-reading it for this long.
VERIFY_WINDOW_S = 3.5


def check_target(target: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(target, Mapping) or not target:
        raise InputError("target parallelism", "give at least one operator name -> parallelism")
    for name in target:
        if not isinstance(name, str) or not name:
            raise InputError("target parallelism", f"operator names must be non-empty strings, got {name!r}")
    return {name: check_parallelism(name, value) for name, value in target.items()}


def check_timeout(name: str, value: float, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise InputError(name, f"must be a number >= {minimum}, got {value!r}")
    return float(value)


def validate_against_job(details: JobDetails, target: Mapping[str, int], mapped: Mapping[str, str] | None) -> None:
    """Target operators must exist in the job, have a program argument (if ``mapped``) and fit maxParallelism."""
    names = [v.name for v in details.vertices]
    unknown = [n for n in target if n not in names]
    if unknown:
        raise InputError("target parallelism", f"job {details.name!r} has no operator(s) {unknown} (operators: {names})")
    if mapped is not None:
        missing = [n for n in mapped if n not in names]
        if missing:
            raise InputError(
                "job deployment",
                f"parallelism_args names operator(s) {missing} that job {details.name!r} lacks (operators: {names})",
            )
        unmapped = [n for n in target if n not in mapped]
        if unmapped:
            raise InputError(
                "target parallelism",
                f"operator(s) {unmapped} of job {details.name!r} have no program argument in parallelism_args "
                f"(mapped: {sorted(mapped)}): their parallelism cannot be changed by a restart",
            )
    for name, p in target.items():
        vertex = details.vertex(name)
        if vertex.max_parallelism > 0 and p > vertex.max_parallelism:
            raise InputError(
                "target parallelism",
                f"operator {name!r}: parallelism {p} exceeds its max parallelism {vertex.max_parallelism} (key groups)",
            )


def changed_since_measured(details: JobDetails, measured: Mapping[str, int] | None) -> str | None:
    """Why the running job is not the one its epoch measured (someone else rescaled it since), or None.

    Acting on that epoch's decision would undo or repeat their change: another autoscaler deployment on the
    same Flink job that acted first (:mod:`.job_lease`), or a person."""
    now = details.parallelism
    moved = [f"{name} {was} → {now[name]}" for name, was in sorted((measured or {}).items()) if name in now and now[name] != was]
    if not moved:
        return None
    return (f"not acted: the job's parallelism changed since the epoch was measured ({', '.join(moved)}): "
            "another autoscaler or a person rescaled it, and this epoch's decision is out of date")  # fmt: skip


def mismatch(details: JobDetails, expected: Mapping[str, int], job_name: str | None) -> list[str]:
    problems = []
    if job_name is not None and details.name != job_name:
        problems.append(f"the job is called {details.name!r}, not {job_name!r} (check --job-name in base_args)")
    actual = details.parallelism
    for name, p in expected.items():
        if name not in actual:
            problems.append(f"{name}: missing")
        elif actual[name] != p:
            problems.append(f"{name}: {actual[name]} instead of {p}")
    problems += [f"{name}: unexpected operator" for name in actual if name not in expected]
    return problems


@dataclass
class Wait:
    """Outcome of waiting for a job to run at a parallelism."""

    details: JobDetails | None = None
    running_at: float | None = None  # monotonic time all tasks were first seen RUNNING at that parallelism
    reason: str | None = None


def job_summary(client: FlinkRestClient, job_id: str) -> JobSummary | None:
    return next((j for j in client.jobs() if j.id == job_id), None)


def failure_text(client: FlinkRestClient, job_id: str) -> str:
    try:
        return client.exceptions(job_id) or "no exception recorded"
    except FlinkError as exc:
        return f"exceptions unavailable ({exc})"


def wait_running(
    client: FlinkRestClient,
    job_id: str,
    expected: Mapping[str, int],
    job_name: str | None,
    deadline: float,
    poll_s: float,
    mismatch_final_after: float | None,
    on_poll: Callable[[JobSummary | None], None] | None = None,
) -> Wait:
    """Wait until every task of ``job_id`` is RUNNING and every vertex runs at ``expected``.

    "All RUNNING" comes from the live ``/jobs/overview``; the parallelism from ``/jobs/:id``,
    which is cached, so it is re-read until it matches. A new job's parallelism is fixed, so a
    mismatch that lasts ``mismatch_final_after`` seconds is final; an in-place rescale passes
    None (the old parallelism runs until the scheduler restarts the job).
    """
    want_total = sum(expected.values())
    running_since: float | None = None  # all tasks RUNNING, whatever the parallelism
    at_target_since: float | None = None  # ... with the expected number of tasks
    last = "not seen in /jobs/overview yet"
    while True:
        now = time.monotonic()
        summary = job_summary(client, job_id)
        if on_poll is not None:
            on_poll(summary)
        if summary is not None and summary.state in ENDED_STATES:
            return Wait(reason=f"job {job_id} is {summary.state}: {failure_text(client, job_id)}")
        if summary is not None:
            last = f"{summary.state}, {summary.tasks_running}/{summary.tasks_total} tasks running"
        if summary is not None and summary.all_running:
            running_since = running_since if running_since is not None else now
            if summary.tasks_total == want_total:
                at_target_since = at_target_since if at_target_since is not None else now
            details = client.job(job_id)
            problems = mismatch(details, expected, job_name)
            if not problems:
                return Wait(details=details, running_at=at_target_since if at_target_since is not None else now)
            last = f"all tasks running, but {'; '.join(problems)}"
            if mismatch_final_after is not None and now - running_since >= mismatch_final_after:
                return Wait(reason=f"job {job_id} runs at the wrong parallelism: {'; '.join(problems)}")
        else:
            running_since = at_target_since = None
        if now >= deadline:
            return Wait(reason=f"job {job_id} did not run all tasks at the requested parallelism in time ({last})")
        time.sleep(poll_s)


def cancel_quietly(client: FlinkRestClient, job_id: str, timeout_s: float = 30.0) -> str | None:
    """Cancel a job we started and wait until it is gone; the problem in words if that fails."""
    try:
        summary = job_summary(client, job_id)
        if summary is None or summary.state in ENDED_STATES:
            return None
        client.cancel(job_id)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            summary = job_summary(client, job_id)
            if summary is None or summary.state in ENDED_STATES:
                return None
            time.sleep(0.1)
        return f"job {job_id} was still {summary.state if summary else 'unknown'} {timeout_s:.0f} s after cancel"
    except FlinkError as exc:
        return f"could not cancel job {job_id}: {exc}"


def savepoint_failure_cause(client: FlinkRestClient, job_id: str, request_id: str, fallback: str) -> str:
    """The most specific cause of a failed savepoint (Flink's first line is generic)."""
    try:
        data = client.get(f"/jobs/{ids.job_id(job_id)}/savepoints/{ids.trigger_id(request_id)}")
        cause = (data.get("operation") or {}).get("failure-cause") or {}
        trace = cause.get("stack-trace", "") if isinstance(cause, dict) else str(cause)
    except (FlinkError, AttributeError):
        return fallback
    causes = [line.split("Caused by:", 1)[1].strip() for line in trace.splitlines() if line.startswith("Caused by:")]
    # e.g. "IOException: Failed to create savepoint directory at file:/etc/hostname/sp" + its cause
    useful = [c for c in causes if "CompletionException" not in c][-2:]
    return " <- ".join(useful) if useful else fallback


def require_adaptive(client: FlinkRestClient, job_id: str, job_name: str, what: str, instead: str) -> dict[str, dict[str, int]]:
    """The job's resource requirements; a clear error when its scheduler cannot change them.

    The job's JobManager configuration is read first: on the default scheduler the
    requirements endpoint answers HTTP 500, which the client retries for ~7 s before giving up.
    """
    try:
        config = {e["key"]: e["value"] for e in client.get(f"/jobs/{ids.job_id(job_id)}/jobmanager/config")}
    except (FlinkError, KeyError, TypeError):
        config = None  # older Flink: let the requirements endpoint answer
    if config is not None:
        scheduler = str(config.get("jobmanager.scheduler", "default")).lower()
        if scheduler != "adaptive" and str(config.get("scheduler-mode", "")).lower() != "reactive":
            raise InputError(
                f"job {job_name}",
                f"it runs on the {scheduler!r} scheduler; {what} needs the adaptive scheduler "
                f"(jobmanager.scheduler: adaptive, e.g. scripts/flink.sh up --adaptive): {instead}",
            )
    try:
        return client.resource_requirements(job_id)
    except FlinkError as exc:
        raise FlinkError(
            f"{what} of {job_name} is not possible: the resource-requirements endpoint failed ({exc})",
            status=exc.status,
            url=exc.url,
        ) from None


@dataclass
class CheckpointNudge:
    """Checkpoints make the adaptive scheduler apply new requirements at once.

    Of the type the job is configured for (CONFIGURED): incremental where the job checkpoints
    incrementally. A FULL one writes the whole state, which with large state is the very cost an
    in-place rescale avoids, and an incremental-only backend (ForSt) declines it: the job then fails
    over (measured: benchmarks/results/state-size.md).

    The scheduler rescales on a completed checkpoint only once the new slots have arrived; a
    checkpoint that completes before that is wasted and the change then waits for the
    scheduler's own delay (5 s here; measured: 3 of 4 fresh jobs). So a checkpoint is triggered
    every ``interval_s`` until the job starts restarting (at most ``max_triggers``). The trigger
    status says COMPLETED even when the checkpoint failed (e.g. "Not all required tasks are
    currently running"): the failure cause is kept for the message.
    """

    client: FlinkRestClient
    job_id: str
    interval_s: float = 0.25
    max_triggers: int = 10
    request_id: str | None = None
    triggers: int = 0
    next_at: float = field(default_factory=time.monotonic)
    first_total: int | None = None
    restarting: bool = False
    problem: str | None = None

    def poll(self, summary: JobSummary | None) -> None:
        if self.restarting:
            return
        if summary is not None:
            if self.first_total is None:
                self.first_total = summary.tasks_total
            if (
                summary.state != "RUNNING"
                or summary.tasks_running < summary.tasks_total
                or summary.tasks_total != self.first_total
            ):
                self.restarting = True  # the change is being applied: no more checkpoints needed
                return
        now = time.monotonic()
        try:
            if self.request_id is not None:
                status = self.client.checkpoint_status(self.job_id, self.request_id)
                if status.completed:
                    self.request_id, self.next_at = None, now + self.interval_s
                    self.problem = f"the checkpoint that applies the change failed: {status.failure}" if status.failure else None
                return
            if self.triggers < self.max_triggers and now >= self.next_at:
                self.triggers += 1
                self.request_id = self.client.trigger_checkpoint(self.job_id, "CONFIGURED")
        except FlinkError as exc:
            self.problem = f"the checkpoint that applies the change could not be triggered: {exc}"
            self.request_id, self.next_at = None, now + self.interval_s


def await_requirements(
    client: FlinkRestClient, job_id: str, parallelism: Mapping[str, int], job_name: str | None, deadline: float, poll_s: float
) -> tuple[Wait, CheckpointNudge]:
    """After a change of the job's resource requirements: wait until all its tasks run at ``parallelism``,
    nudging the adaptive scheduler with checkpoints. The old parallelism runs until the scheduler restarts
    the job, so a mismatch is never final before ``deadline``."""
    nudge = CheckpointNudge(client, job_id)
    wait = wait_running(client, job_id, parallelism, job_name, deadline, poll_s, None, on_poll=nudge.poll)
    return wait, nudge
