"""Rescaling a running Flink job, safely and idempotently.

Two mechanisms:

- :func:`rescale_with_savepoint` (any scheduler): stop-with-savepoint, then run the job's jar
  from that savepoint with the new per-operator parallelism in its program arguments (Flink 2.3
  ignores ``pipeline.jobvertex-parallelism-overrides``). The job gets a new job id.
- :func:`rescale_in_place` (adaptive scheduler only): ``PUT /jobs/:id/resource-requirements``
  plus a manual FULL checkpoint so the change applies at once. Same job id.

Both verify what actually runs (``/jobs/:id`` vertex parallelism; the live ``/jobs/overview``
for "all tasks RUNNING"), because Flink accepts requests it then does not honour.

Failures never leave the job stopped when that can be avoided: a failed or late savepoint
leaves the job running (or restarts it unchanged from the late savepoint); a failed restart is
rolled back from the same savepoint at the previous parallelism. Only when the rollback fails
too is the job left stopped, and the result says so and names the savepoint that restores it.

Every step is journaled to ``journal_dir/<action_id>.json`` (atomic replace) before and after
its side effect, so an orchestrator retry (same ``action_id``) after a crash resumes where the
first attempt stopped: it returns a recorded result as is, never takes a second savepoint of a
job it already rescaled and never submits the job twice. Pure Python: no Airflow import.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, overload

from autoscaler.errors import InputError
from autoscaler.flink import ids
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.deployment import JobDeployment, check_parallelism, program_args, resolve_jar
from autoscaler.flink.models import JobDetails, JobSummary

SAVEPOINT_RESTART = "savepoint-restart"
IN_PLACE = "in-place"
OUTCOMES = ("succeeded", "failed", "rolled-back", "noop")

# States in which a job is (or is about to be) alive; anything else means it is gone.
ACTIVE_STATES = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "RECONCILING", "FAILING", "CANCELLING")
ENDED_STATES = ("FAILED", "CANCELED", "FINISHED", "SUSPENDED")

# /jobs/:id is cached for web.refresh-interval (500 ms here, 3 s by default): a parallelism that
# does not match is only believed after re-reading it for this long.
VERIFY_WINDOW_S = 3.5
JOURNAL_VERSION = 1
_ACTION_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:+=@-]{0,199}$")


# ---------------------------------------------------------------------------------------------
# result


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

    def to_row(self, job: str, epoch: int, approved_by: str | None = None) -> dict[str, Any]:
        """The ACTIONS-table row (``autoscaler.schemas.ACTIONS``): dicts as JSON, times in UTC."""
        from autoscaler.store import epoch_block  # pyarrow is only needed by callers that store rows

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


# ---------------------------------------------------------------------------------------------
# journal


@dataclass
class _Journal:
    """The action's journal file; ``data`` is None until the first write."""

    path: Path
    data: dict[str, Any] | None = None

    def save(self) -> None:
        """Atomic: write a temp file, fsync, rename over the journal (a crash leaves old or new)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump(self.data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def expect(self, mechanism: str, job_name: str, target: Mapping[str, int]) -> None:
        """A retry must ask for the same thing as the attempt it resumes."""
        assert self.data is not None
        recorded = (self.data.get("mechanism"), self.data.get("job_name"), self.data.get("target"))
        if recorded != (mechanism, job_name, dict(target)):
            raise InputError(
                str(self.path),
                f"action {self.data.get('action_id')!r} was journaled as {recorded[0]} of {recorded[1]!r} to "
                f"{recorded[2]}, not {mechanism} of {job_name!r} to {dict(target)}: use a new action id",
            )


@contextmanager
def _journal(journal_dir: str | Path, action_id: str) -> Iterator[_Journal]:
    """Open (and lock) the journal of ``action_id``: two attempts of one action never run at once."""
    if not isinstance(action_id, str) or not _ACTION_ID.match(action_id) or ".." in action_id:
        raise InputError(
            "action id", f"{action_id!r} must be 1-200 characters of letters, digits and _ . : + = @ - (it names a file)"
        )
    directory = Path(journal_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(directory), f"cannot create the rescale journal folder: {exc.strerror}") from None
    path = directory / f"{action_id}.json"
    with (directory / f".{action_id}.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError("action id", f"another attempt of action {action_id!r} is still running") from None
        data = None
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise InputError(str(path), f"the rescale journal is not valid JSON ({exc}): inspect it by hand") from None
            if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
                raise InputError(str(path), f"not a version-{JOURNAL_VERSION} rescale journal")
        yield _Journal(path, data)


# ---------------------------------------------------------------------------------------------
# time


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _mark() -> dict[str, Any]:
    """A point in time a later attempt (another process) can still measure from."""
    return {"mono": time.monotonic(), "wall": time.time(), "boot": _boot_id()}


def _since(mark: Mapping[str, Any], mono_end: float | None = None) -> float:
    """Seconds from ``mark`` to ``mono_end`` (default now): monotonic on the same boot, else wall clock."""
    end = time.monotonic() if mono_end is None else mono_end
    if mark.get("boot") is not None and mark.get("boot") == _boot_id():
        return max(0.0, end - float(mark["mono"]))
    return max(0.0, time.time() - (time.monotonic() - end) - float(mark["wall"]))


def _utcnow() -> datetime:
    return datetime.now(UTC)


# ---------------------------------------------------------------------------------------------
# shared checks and waits


def _check_target(target: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(target, Mapping) or not target:
        raise InputError("target parallelism", "give at least one operator name -> parallelism")
    for name in target:
        if not isinstance(name, str) or not name:
            raise InputError("target parallelism", f"operator names must be non-empty strings, got {name!r}")
    return {name: check_parallelism(name, value) for name, value in target.items()}


def _check_timeout(name: str, value: float, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise InputError(name, f"must be a number >= {minimum}, got {value!r}")
    return float(value)


def _validate_against_job(details: JobDetails, target: Mapping[str, int], mapped: Mapping[str, str] | None) -> None:
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


def _mismatch(details: JobDetails, expected: Mapping[str, int], job_name: str | None) -> list[str]:
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
class _Wait:
    """Outcome of waiting for a job to run at a parallelism."""

    details: JobDetails | None = None
    running_at: float | None = None  # monotonic time all tasks were first seen RUNNING at that parallelism
    reason: str | None = None


def _summary(client: FlinkRestClient, job_id: str) -> JobSummary | None:
    return next((j for j in client.jobs() if j.id == job_id), None)


def _failure_text(client: FlinkRestClient, job_id: str) -> str:
    try:
        return client.exceptions(job_id) or "no exception recorded"
    except FlinkError as exc:
        return f"exceptions unavailable ({exc})"


def _wait_running(
    client: FlinkRestClient,
    job_id: str,
    expected: Mapping[str, int],
    job_name: str | None,
    deadline: float,
    poll_s: float,
    mismatch_final_after: float | None,
    on_poll: Callable[[JobSummary | None], None] | None = None,
) -> _Wait:
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
        summary = _summary(client, job_id)
        if on_poll is not None:
            on_poll(summary)
        if summary is not None and summary.state in ENDED_STATES:
            return _Wait(reason=f"job {job_id} is {summary.state}: {_failure_text(client, job_id)}")
        if summary is not None:
            last = f"{summary.state}, {summary.tasks_running}/{summary.tasks_total} tasks running"
        if summary is not None and summary.state == "RUNNING" and 0 < summary.tasks_total == summary.tasks_running:
            running_since = running_since if running_since is not None else now
            if summary.tasks_total == want_total:
                at_target_since = at_target_since if at_target_since is not None else now
            details = client.job(job_id)
            problems = _mismatch(details, expected, job_name)
            if not problems:
                return _Wait(details=details, running_at=at_target_since if at_target_since is not None else now)
            last = f"all tasks running, but {'; '.join(problems)}"
            if mismatch_final_after is not None and now - running_since >= mismatch_final_after:
                return _Wait(reason=f"job {job_id} runs at the wrong parallelism: {'; '.join(problems)}")
        else:
            running_since = at_target_since = None
        if now >= deadline:
            return _Wait(reason=f"job {job_id} did not run all tasks at the requested parallelism in time ({last})")
        time.sleep(poll_s)


def _cancel_quietly(client: FlinkRestClient, job_id: str, timeout_s: float = 30.0) -> str | None:
    """Cancel a job we started and wait until it is gone; the problem in words if that fails."""
    try:
        summary = _summary(client, job_id)
        if summary is None or summary.state in ENDED_STATES:
            return None
        client.cancel(job_id)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            summary = _summary(client, job_id)
            if summary is None or summary.state in ENDED_STATES:
                return None
            time.sleep(0.1)
        return f"job {job_id} was still {summary.state if summary else 'unknown'} {timeout_s:.0f} s after cancel"
    except FlinkError as exc:
        return f"could not cancel job {job_id}: {exc}"


def _savepoint_failure(client: FlinkRestClient, job_id: str, request_id: str, fallback: str) -> str:
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


# ---------------------------------------------------------------------------------------------
# savepoint-restart


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
) -> RescaleResult | None: ...


def rescale_with_savepoint(
    client: FlinkRestClient,
    deployment: JobDeployment,
    target: Mapping[str, int],
    action_id: str,
    journal_dir: str | Path,
    savepoint_timeout_s: float = 60.0,
    start_timeout_s: float = 60.0,
    poll_s: float = 0.1,
    late_savepoint_grace_s: float = 30.0,
    verify_window_s: float = VERIFY_WINDOW_S,
    wait_for_savepoint: bool = True,
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

    ``wait_for_savepoint=False`` (a deferrable orchestrator task): return None as soon as the
    stop-with-savepoint is requested and journaled, instead of waiting for it; wait elsewhere
    (:func:`pending_savepoint` names the operation), then call again with the same action id,
    which carries on from the savepoint.
    """
    target = _check_target(target)
    rescale = _SavepointRescale(
        client,
        deployment,
        savepoint_timeout_s=_check_timeout("savepoint_timeout_s", savepoint_timeout_s),
        start_timeout_s=_check_timeout("start_timeout_s", start_timeout_s, 0.1),
        poll_s=_check_timeout("poll_s", poll_s, 0.01),
        grace_s=_check_timeout("late_savepoint_grace_s", late_savepoint_grace_s),
        verify_window_s=_check_timeout("verify_window_s", verify_window_s),
    )
    rescale.wait_for_savepoint = bool(wait_for_savepoint)
    with _journal(journal_dir, action_id) as journal:
        rescale.journal = journal
        try:
            if journal.data is None:
                return rescale.begin(action_id, target)
            journal.expect(SAVEPOINT_RESTART, deployment.job_name, target)
            return rescale.resume()
        except _SavepointPending:
            return None


def pending_savepoint(journal_dir: str | Path, action_id: str) -> tuple[str, str]:
    """(job id, savepoint request id) of an action that stopped at "savepoint requested".

    For a deferrable task: poll ``GET /jobs/:job/savepoints/:request`` until COMPLETED, then
    call :func:`rescale_with_savepoint` again with the same action id.
    """
    path = Path(journal_dir) / f"{action_id}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        stop, savepoint = data.get("stop") or {}, data.get("savepoint") or {}
        if data.get("result") or not stop.get("request_id") or savepoint.get("location") or savepoint.get("failure"):
            raise KeyError("no savepoint pending")
        return ids.job_id(data["old_job_id"]), ids.trigger_id(stop["request_id"])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise InputError(str(path), f"action {action_id!r} has no savepoint pending ({exc})") from None


class _SavepointRescale:
    """The savepoint-restart procedure as resumable steps; the journal holds all its state.

    Journal keys: ``stop`` {at, request_id}; ``savepoint`` {location, failure, timed_out,
    duration_s}; ``submissions`` [{purpose: rescale|rollback|restore, job_id, error}];
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
        self.dep = deployment
        self.savepoint_timeout_s = savepoint_timeout_s
        self.start_timeout_s = start_timeout_s
        self.poll_s = poll_s
        self.grace_s = grace_s
        self.verify_window_s = verify_window_s
        self.wait_for_savepoint = True
        self.journal: _Journal = _Journal(Path())

    @property
    def d(self) -> dict[str, Any]:
        assert self.journal.data is not None
        return self.journal.data

    # -- start ----------------------------------------------------------------------------
    def begin(self, action_id: str, target: dict[str, int]) -> RescaleResult:
        job = self.client.running_job(self.dep.job_name)
        details = self.client.job(job.id)
        _validate_against_job(details, target, self.dep.parallelism_args)
        old = details.parallelism
        mapped_old = {name: old[name] for name in self.dep.parallelism_args}
        # Before the stop: a missing jar must not be found out while the job is down.
        jar_id = resolve_jar(self.client, self.dep) if {**old, **target} != old else None
        self.journal.data = {
            "version": JOURNAL_VERSION,
            "action_id": action_id,
            "mechanism": SAVEPOINT_RESTART,
            "job_name": self.dep.job_name,
            "target": target,
            "started_at": _utcnow().isoformat(),
            "old_job_id": job.id,
            "old_parallelism": old,
            "expected": {**old, **target},
            "mapped_old": mapped_old,
            "mapped_new": {**mapped_old, **target},
            "jar_id": jar_id,
            "stop": None,
            "savepoint": None,
            "submissions": [],
            "result": None,
        }
        if self.d["expected"] == old:
            return self._finish("noop", f"{self.dep.job_name} already runs at {target}: nothing to do", new_job_id=job.id)
        return self._stop(may_retry_stop=False)

    def resume(self) -> RescaleResult:
        """Continue a journaled attempt from its last recorded step."""
        d = self.d
        if d.get("result"):
            return RescaleResult.from_dict(d["result"])
        savepoint = d.get("savepoint") or {}
        if d.get("stop") is None:
            return self._stop(may_retry_stop=False)
        if not savepoint.get("location"):
            if savepoint.get("failure"):
                return self._savepoint_failed(savepoint["failure"])
            if d["stop"].get("request_id") is None:
                # The stop was about to be sent, or sent without its answer being recorded.
                return self._stop_outcome_unknown(error=None, may_retry_stop=True)
            if not self.wait_for_savepoint:
                raise _SavepointPending
            return self._await_savepoint(deadline=time.monotonic() + self.savepoint_timeout_s)
        subs = d["submissions"]
        if not subs:
            return self._submit("restore" if savepoint.get("timed_out") else "rescale")
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
        summary = _summary(self.client, last["job_id"])
        if summary is not None and summary.state in ACTIVE_STATES:
            return self._await_start(last["purpose"])
        reason = last.get("error") or f"job {last['job_id']} is {summary.state if summary else 'gone'}"
        return self._start_failed(last["purpose"], reason)

    # -- stop with savepoint --------------------------------------------------------------
    def _stop(self, may_retry_stop: bool) -> RescaleResult:
        self.d["stop"] = {"at": _mark(), "request_id": None}
        self.journal.save()  # before the side effect: a crash from here on resumes with "stop unknown"
        try:
            request_id = self.client.stop_with_savepoint(self.d["old_job_id"], self.dep.savepoint_uri)
        except FlinkError as exc:
            return self._stop_outcome_unknown(error=exc, may_retry_stop=may_retry_stop)
        self.d["stop"]["request_id"] = request_id
        self.journal.save()
        if not self.wait_for_savepoint:
            raise _SavepointPending
        return self._await_savepoint(deadline=time.monotonic() + self.savepoint_timeout_s)

    def _await_savepoint(self, deadline: float) -> RescaleResult:
        old, request_id = self.d["old_job_id"], self.d["stop"]["request_id"]
        for phase_end in (deadline, None):
            if phase_end is None:
                if not (self.d.get("savepoint") or {}).get("timed_out"):
                    self.d["savepoint"] = {"location": None, "failure": None, "timed_out": True, "duration_s": None}
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
        summary = _summary(self.client, old)
        if summary is None or summary.state != "RUNNING":
            # The status says "in progress" but the job is gone or stopped: decide by the job.
            return self._stop_outcome_unknown(error=None, may_retry_stop=False)
        return self._result(
            "failed",
            f"the savepoint of {self.dep.job_name} did not complete within {self.savepoint_timeout_s:g} s "
            f"(nor {self.grace_s:g} s later). The job still runs unchanged (job {old}), but the savepoint is still "
            f"in progress and will stop the job when it completes: retry action {self.d['action_id']!r} to restart "
            f"it unchanged in that case.",
            new_job_id=old,
            final=False,
        )

    def _savepoint_completed(self, location: str | None, failure: str | None, request_id: str | None) -> RescaleResult:
        timed_out = bool((self.d.get("savepoint") or {}).get("timed_out"))
        if location and not failure:
            self.d["savepoint"] = {
                "location": location,
                "failure": None,
                "timed_out": timed_out,
                "duration_s": round(_since(self.d["stop"]["at"]), 3),
            }
            self.journal.save()
            return self._submit("restore" if timed_out else "rescale")
        cause = failure or "no location reported"
        if request_id is not None:
            cause = _savepoint_failure(self.client, self.d["old_job_id"], request_id, cause)
        if timed_out:
            cause = f"it did not complete within {self.savepoint_timeout_s:g} s and then failed: {cause}"
        self.d["savepoint"] = {"location": None, "failure": cause, "timed_out": timed_out, "duration_s": None}
        self.journal.save()
        return self._savepoint_failed(cause)

    def _savepoint_failed(self, cause: str) -> RescaleResult:
        """No savepoint: the job should still be running; make sure it is, then report."""
        old = self.d["old_job_id"]
        end = time.monotonic() + self.start_timeout_s
        summary = _summary(self.client, old)
        while summary is not None and summary.state != "RUNNING" and summary.state in ACTIVE_STATES and time.monotonic() < end:
            time.sleep(self.poll_s)  # e.g. RESTARTING after a failed synchronous savepoint
            summary = _summary(self.client, old)
        state = summary.state if summary else "unknown to the cluster"
        if state == "RUNNING":
            message = f"the savepoint of {self.dep.job_name} failed: {cause}. The job keeps running unchanged (job {old})."
        else:
            message = (
                f"the savepoint of {self.dep.job_name} failed: {cause}. The job {old} is now {state} and was NOT "
                f"restarted (there is no savepoint of it): restart it from its latest retained checkpoint."
            )
        return self._finish("failed", message, new_job_id=old if state == "RUNNING" else None)

    def _stop_outcome_unknown(self, error: FlinkError | None, may_retry_stop: bool) -> RescaleResult:
        """The stop request failed or its answer was lost: what happened to the old job decides."""
        old = self.d["old_job_id"]
        summary = _summary(self.client, old)
        state = summary.state if summary else None
        if state == "RUNNING" and error is None and may_retry_stop and not self._savepoint_in_progress(old):
            return self._stop(may_retry_stop=False)  # the stop never reached Flink: ask (once) again
        refused = error is not None and error.status is not None and error.status < 500
        if state == "RUNNING" and not refused:
            # A stop may be in flight: watch until the job leaves RUNNING, or until no savepoint has
            # been in progress for a while (the checkpoint statistics are cached: give them time).
            end = time.monotonic() + self.savepoint_timeout_s + self.grace_s
            quiet_since = time.monotonic()
            while state == "RUNNING" and time.monotonic() < end:
                if self._savepoint_in_progress(old):
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > 2.0 + 2 * self.poll_s:
                    break
                time.sleep(self.poll_s)
                summary = _summary(self.client, old)
                state = summary.state if summary else None
        end = time.monotonic() + self.start_timeout_s
        while state in ACTIVE_STATES and state != "RUNNING" and time.monotonic() < end:
            time.sleep(self.poll_s)  # e.g. RESTARTING after two stops collided: it comes back by itself
            summary = _summary(self.client, old)
            state = summary.state if summary else None
        if state == "FINISHED":
            location = self._savepoint_from_history(old)
            if location:
                return self._savepoint_completed(location, None, None)
            return self._finish(
                "failed",
                f"{self.dep.job_name} (job {old}) FINISHED after the stop request, but Flink reports no savepoint "
                f"of it: the job is STOPPED; restart it from its latest savepoint or retained checkpoint.",
            )
        why = f" ({error})" if error is not None else ""
        if state == "RUNNING":
            return self._finish(
                "failed",
                f"the stop-with-savepoint of {self.dep.job_name} did not happen{why}. "
                f"The job keeps running unchanged (job {old}).",
                new_job_id=old,
            )
        return self._finish(
            "failed",
            f"the stop-with-savepoint of {self.dep.job_name} had no clear outcome{why}, and job {old} is "
            f"{state or 'unknown to the cluster'}: nothing was restarted; check the cluster.",
        )

    def _savepoint_in_progress(self, job_id: str) -> bool:
        try:
            history = self.client.checkpoints(job_id).get("history", [])
        except FlinkError:
            return False
        return any(h.get("is_savepoint") and h.get("status") == "IN_PROGRESS" for h in history)

    def _savepoint_from_history(self, job_id: str) -> str | None:
        """The savepoint a stop produced, from the job's checkpoint statistics (if taken after the stop)."""
        try:
            latest = (self.client.checkpoints(job_id).get("latest") or {}).get("savepoint") or {}
        except FlinkError:
            return None
        stopped_ms = float(self.d["stop"]["at"]["wall"]) * 1000 - 2000  # allow for clock rounding
        if latest.get("status") == "COMPLETED" and latest.get("trigger_timestamp", 0) >= stopped_ms:
            return latest.get("external_path")
        return None

    # -- restart --------------------------------------------------------------------------
    def _submit(self, purpose: str) -> RescaleResult:
        """Run the jar from the savepoint: at the target ("rescale") or unchanged ("rollback", "restore")."""
        mapped = self.d["mapped_new"] if purpose == "rescale" else self.d["mapped_old"]
        submission: dict[str, Any] = {"purpose": purpose, "job_id": None, "error": None}
        self.d["submissions"].append(submission)
        self.journal.save()  # before: a crash from here on looks for a submitted job by name first
        try:
            job_id = self._run_jar(mapped)
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

    def _run_jar(self, mapped: Mapping[str, int]) -> str:
        jar = self.d.get("jar_id") or resolve_jar(self.client, self.dep)
        for attempt in (1, 2):
            try:
                return self.client.run_jar(
                    jar,
                    self.dep.entry_class,
                    program_args(self.dep, mapped),
                    savepoint_path=self.d["savepoint"]["location"],
                    allow_non_restored_state=self.dep.allow_non_restored_state,
                    claim_mode="NO_CLAIM",  # the savepoint stays ours: a rollback needs it again
                )
            except FlinkError as exc:
                if exc.status != 404 or attempt == 2 or self.dep.jar_id is not None:
                    raise
                jar = resolve_jar(self.client, self.dep)  # the upload vanished since it was looked up: upload again
                self.d["jar_id"] = jar
                self.journal.save()
        raise AssertionError("unreachable")

    def _find_new_job(self) -> str | None:
        """A live job of our name started after the stop (a submission whose answer was lost)."""
        known = {self.d["old_job_id"]} | {s["job_id"] for s in self.d["submissions"] if s.get("job_id")}
        stopped_ms = float(self.d["stop"]["at"]["wall"]) * 1000 - 2000
        candidates = [
            j
            for j in self.client.jobs()
            if j.name == self.dep.job_name and j.state in ACTIVE_STATES and j.id not in known and j.start_time_ms >= stopped_ms
        ]
        return max(candidates, key=lambda j: j.start_time_ms).id if candidates else None

    def _await_start(self, purpose: str) -> RescaleResult:
        submission = self.d["submissions"][-1]
        job_id = submission["job_id"]
        expected = self.d["expected"] if purpose == "rescale" else self.d["old_parallelism"]
        wait = _wait_running(
            self.client,
            job_id,
            expected,
            # A rollback that runs is better than a stopped job, whatever base_args named it.
            self.dep.job_name if purpose == "rescale" else None,
            deadline=time.monotonic() + self.start_timeout_s,
            poll_s=self.poll_s,
            mismatch_final_after=self.verify_window_s,
        )
        if wait.reason is not None:
            problem = _cancel_quietly(self.client, job_id)
            submission["error"] = wait.reason + (f"; {problem}" if problem else f"; job {job_id} was cancelled")
            self.journal.save()
            return self._start_failed(purpose, submission["error"])
        downtime = _since(self.d["stop"]["at"], wait.running_at)
        savepoint = self.d["savepoint"]
        if purpose == "rescale":
            return self._finish(
                "succeeded",
                f"{self.dep.job_name} runs at {self.d['target']} (job {job_id}, from savepoint {savepoint['location']}; "
                f"{downtime:.2f} s from the stop request to all tasks running).",
                new_job_id=job_id,
                downtime_s=downtime,
            )
        if purpose == "rollback":
            first = next((s["error"] for s in self.d["submissions"] if s["purpose"] == "rescale" and s.get("error")), "?")
            return self._finish(
                "rolled-back",
                f"restarting {self.dep.job_name} at {self.d['target']} failed: {first}. Rolled back: the job runs again "
                f"at its previous parallelism from the same savepoint {savepoint['location']} (job {job_id}).",
                new_job_id=job_id,
                downtime_s=downtime,
            )
        return self._finish(
            "failed",
            f"the savepoint of {self.dep.job_name} did not complete within {self.savepoint_timeout_s:g} s; it completed "
            f"later (after {savepoint['duration_s']} s) and stopped the job, which was restarted unchanged from it "
            f"(job {job_id}). Not rescaled.",
            new_job_id=job_id,
            downtime_s=downtime,
        )

    def _start_failed(self, purpose: str, reason: str) -> RescaleResult:
        last = self.d["submissions"][-1] if self.d["submissions"] else None
        if last is not None and last["purpose"] == purpose and not last.get("error"):
            last["error"] = reason
            self.journal.save()
        if purpose == "rescale":
            return self._submit("rollback")
        location = self.d["savepoint"]["location"]
        if purpose == "rollback":
            first = next((s["error"] for s in self.d["submissions"] if s["purpose"] == "rescale" and s.get("error")), "?")
            how = "the same way" if reason == first else f"too: {reason.rstrip('.')}"
            what = (
                f"restarting {self.dep.job_name} at {self.d['target']} failed: {first.rstrip('.')}. "
                f"The rollback to the previous parallelism failed {how}"
            )
        else:
            what = (
                f"the savepoint of {self.dep.job_name} did not complete within {self.savepoint_timeout_s:g} s but later "
                f"stopped the job; restarting it unchanged from that savepoint failed: {reason.rstrip('.')}"
            )
        return self._finish(
            "failed",
            f"{what}. The job {self.dep.job_name} is STOPPED (no job of that name is running): savepoint {location} "
            f"restores it at its previous parallelism {self.d['mapped_old']}.",
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
        savepoint = self.d.get("savepoint") or {}
        result = RescaleResult(
            action_id=self.d["action_id"],
            mechanism=SAVEPOINT_RESTART,
            outcome=outcome,
            old_flink_job_id=self.d["old_job_id"],
            new_flink_job_id=new_job_id,
            old_parallelism=dict(self.d["old_parallelism"]),
            new_parallelism=dict(self.d["target"]),
            savepoint_path=savepoint.get("location"),
            downtime_s=None if downtime_s is None else round(downtime_s, 3),
            message=message,
            started_at=datetime.fromisoformat(self.d["started_at"]),
            finished_at=_utcnow(),
            savepoint_duration_s=savepoint.get("duration_s"),
        )
        if final:
            self.d["result"] = result.to_dict()
            self.journal.save()
        return result


# ---------------------------------------------------------------------------------------------
# in place (adaptive scheduler)


def rescale_in_place(
    client: FlinkRestClient,
    job_name: str,
    target_by_name: Mapping[str, int],
    action_id: str,
    journal_dir: str | Path,
    timeout_s: float = 60.0,
    poll_s: float = 0.1,
) -> RescaleResult:
    """Rescale the running job ``job_name`` without a restart from a savepoint (adaptive scheduler).

    Sets the resource requirements of ALL vertices (upper bound = target for the named
    operators, the current parallelism for the others; lower bound 1) and triggers a FULL
    checkpoint so the adaptive scheduler applies them at once instead of after its own delays.
    Succeeds when the same job id runs all tasks at the target; ``downtime_s`` counts from the
    PUT. If the target does not take effect within ``timeout_s`` (e.g. not enough slots: the
    scheduler then runs at what fits), the previous requirements are restored and the outcome is
    "failed". A job on the default scheduler raises :class:`InputError` before anything changes.
    """
    target = _check_target(target_by_name)
    timeout_s = _check_timeout("timeout_s", timeout_s, 0.1)
    poll_s = _check_timeout("poll_s", poll_s, 0.01)
    if not isinstance(job_name, str) or not job_name.strip():
        raise InputError("job name", "must be a non-empty string (the Flink job name)")
    with _journal(journal_dir, action_id) as journal:
        run = _InPlaceRescale(client, job_name, journal, timeout_s, poll_s)
        if journal.data is None:
            return run.begin(action_id, target)
        journal.expect(IN_PLACE, job_name, target)
        return run.resume()


def _require_adaptive(client: FlinkRestClient, job_id: str, job_name: str) -> dict[str, dict[str, int]]:
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
                f"it runs on the {scheduler!r} scheduler; in-place rescaling needs the adaptive scheduler "
                f"(jobmanager.scheduler: adaptive, e.g. scripts/flink.sh up --adaptive): use savepoint-restart instead",
            )
    try:
        return client.resource_requirements(job_id)
    except FlinkError as exc:
        raise FlinkError(
            f"in-place rescaling of {job_name} is not possible: the resource-requirements endpoint failed ({exc})",
            status=exc.status,
            url=exc.url,
        ) from None


class _InPlaceRescale:
    """The in-place procedure; journal keys: job_id, vertex_ids, previous_requirements, put, phase."""

    def __init__(self, client: FlinkRestClient, job_name: str, journal: _Journal, timeout_s: float, poll_s: float) -> None:
        self.client = client
        self.job_name = job_name
        self.journal = journal
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    @property
    def d(self) -> dict[str, Any]:
        assert self.journal.data is not None
        return self.journal.data

    def begin(self, action_id: str, target: dict[str, int]) -> RescaleResult:
        job = self.client.running_job(self.job_name)
        details = self.client.job(job.id)
        _validate_against_job(details, target, None)
        previous = _require_adaptive(self.client, job.id, self.job_name)
        old = details.parallelism
        self.journal.data = {
            "version": JOURNAL_VERSION,
            "action_id": action_id,
            "mechanism": IN_PLACE,
            "job_name": self.job_name,
            "target": target,
            "started_at": _utcnow().isoformat(),
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
        if self.d["expected"] == old:
            return self._finish("noop", f"{self.job_name} already runs at {target}: nothing to do")
        return self._apply()

    def resume(self) -> RescaleResult:
        if self.d.get("result"):
            return RescaleResult.from_dict(self.d["result"])
        summary = _summary(self.client, self.d["job_id"])
        if summary is None or summary.state in ENDED_STATES:
            return self._finish(
                "failed",
                f"job {self.d['job_id']} of {self.job_name} is {summary.state if summary else 'gone'}: the in-place "
                f"rescale could not be resumed; nothing was changed by this retry.",
            )
        if self.d["phase"] == "restore":
            return self._restore(self.d["failure"])
        return self._apply()

    def _requirements(self, parallelism: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        return {self.d["vertex_ids"][name]: (1, p) for name, p in parallelism.items()}

    def _apply(self) -> RescaleResult:
        if self.d["put"] is None:
            self.d["put"] = _mark()  # the first PUT: what the downtime counts from, also after a retry
            self.journal.save()
        job_id = self.d["job_id"]
        # Idempotent: a retry sends the same requirements again.
        self.client.set_resource_requirements(job_id, self._requirements(self.d["expected"]))
        checkpoint = _CheckpointNudge(self.client, job_id)
        wait = _wait_running(
            self.client,
            job_id,
            self.d["expected"],
            self.job_name,
            deadline=time.monotonic() + self.timeout_s,
            poll_s=self.poll_s,
            mismatch_final_after=None,
            on_poll=checkpoint.poll,
        )
        if wait.reason is None:
            downtime = _since(self.d["put"], wait.running_at)
            note = f" ({checkpoint.problem})" if checkpoint.problem else ""
            return self._finish(
                "succeeded",
                f"{self.job_name} runs at {self.d['target']} in place (same job {job_id}; {downtime:.2f} s from the "
                f"resource-requirements change to all tasks running){note}.",
                downtime_s=downtime,
            )
        self.d["phase"] = "restore"
        self.d["failure"] = f"the new parallelism did not take effect within {self.timeout_s:g} s: {wait.reason}"
        self.journal.save()
        return self._restore(self.d["failure"])

    def _restore(self, failure: str) -> RescaleResult:
        """Put the previous requirements back, so the job does not stay at whatever partly fitted."""
        job_id = self.d["job_id"]
        previous = {vid: (int(r["lowerBound"]), int(r["upperBound"])) for vid, r in self.d["previous_requirements"].items()}
        try:
            self.client.set_resource_requirements(job_id, previous)
        except FlinkError as exc:
            return self._finish(
                "failed",
                f"{failure}. Restoring the previous resource requirements failed too ({exc}): the job may run at a "
                f"parallelism nobody asked for; set them back by hand: {self.d['previous_requirements']}.",
            )
        checkpoint = _CheckpointNudge(self.client, job_id)
        wait = _wait_running(
            self.client,
            job_id,
            self.d["old_parallelism"],
            self.job_name,
            deadline=time.monotonic() + self.timeout_s,
            poll_s=self.poll_s,
            mismatch_final_after=None,
            on_poll=checkpoint.poll,
        )
        if wait.reason is None:
            now = "it runs at its previous parallelism again"
        else:
            summary = _summary(self.client, job_id)
            try:
                current = self.client.job(job_id).parallelism
            except FlinkError:
                current = "unknown"
            now = f"it is {summary.state if summary else 'gone'} at {current} (not yet back at {self.d['old_parallelism']})"
        return self._finish("failed", f"{failure}. Restored the previous resource requirements: {now} (job {job_id}).")

    def _finish(self, outcome: str, message: str, downtime_s: float | None = None) -> RescaleResult:
        result = RescaleResult(
            action_id=self.d["action_id"],
            mechanism=IN_PLACE,
            outcome=outcome,
            old_flink_job_id=self.d["job_id"],
            new_flink_job_id=self.d["job_id"],
            old_parallelism=dict(self.d["old_parallelism"]),
            new_parallelism=dict(self.d["target"]),
            savepoint_path=None,
            downtime_s=None if downtime_s is None else round(downtime_s, 3),
            message=message,
            started_at=datetime.fromisoformat(self.d["started_at"]),
            finished_at=_utcnow(),
        )
        self.d["result"] = result.to_dict()
        self.journal.save()
        return result


@dataclass
class _CheckpointNudge:
    """FULL checkpoints make the adaptive scheduler apply new requirements at once.

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
                self.request_id = self.client.trigger_checkpoint(self.job_id, "FULL")
        except FlinkError as exc:
            self.problem = f"the checkpoint that applies the change could not be triggered: {exc}"
            self.request_id, self.next_at = None, now + self.interval_s
