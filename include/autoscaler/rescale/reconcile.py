"""The reconciler: settle rescale actions that nobody is finishing.

An action is journaled step by step (:mod:`.journal`); its orchestrator task normally finishes
it, also after a crash, by retrying with the same action id. When that retry never comes (the
run was marked failed, the worker and the scheduler died, the savepoint wait outlived Flink's
memory of the operation), the journal stays unfinished and the job may be left stopped. The
reconciler finds such journals -- no result, untouched for longer than the action could still be
running -- asks Flink what actually runs, and settles each one with the action's own resume path:
finished (the new job runs), rolled back, restarted unchanged from the savepoint it took, or
reported as failed with the job's state in words. A job found stopped with a completed
savepoint is restarted from it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from autoscaler.config.options import IN_PLACE, SAVEPOINT_RESTART
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.deployment import JobDeployment
from autoscaler.rescale.in_place import rescale_in_place
from autoscaler.rescale.result import RescaleResult
from autoscaler.rescale.savepoint import rescale_with_savepoint
from autoscaler.store.files import StorePath, as_store_path, modified_at


@dataclass(frozen=True)
class Unfinished:
    """A journal without a result: its action id, job name, mechanism and seconds since its last step."""

    path: StorePath
    action_id: str
    job_name: str
    mechanism: str
    idle_s: float


def unfinished(journal_dir: str | Path, job_name: str | None = None) -> list[Unfinished]:
    """The journals of ``journal_dir`` (of one Flink job, when named) that hold no result yet."""
    out = []
    folder = as_store_path(journal_dir)
    for path in sorted(folder.glob("*.json"), key=str) if folder.exists() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            idle_s = time.time() - modified_at(path)
        except (OSError, ValueError):
            continue  # being replaced right now, or not a journal: the next pass looks again
        if not isinstance(data, dict) or data.get("result") or (job_name and data.get("job_name") != job_name):
            continue
        out.append(Unfinished(path, str(data.get("action_id")), str(data.get("job_name")), str(data.get("mechanism")), idle_s))
    return out


def settle(
    client: FlinkRestClient,
    deployment: JobDeployment,
    action: Unfinished,
    savepoint_timeout_s: float,
    start_timeout_s: float,
) -> RescaleResult:
    """Finish ``action`` through its own resume path (the journal is locked meanwhile)."""
    data = json.loads(action.path.read_text(encoding="utf-8"))
    target = {str(k): int(v) for k, v in (data.get("target") or {}).items()}
    if action.mechanism == IN_PLACE:
        return rescale_in_place(client, action.job_name, target, action.action_id, action.path.parent, timeout_s=start_timeout_s)
    if action.mechanism != SAVEPOINT_RESTART:
        raise InputError(str(action.path), f"unknown rescale mechanism {action.mechanism!r}")
    result = rescale_with_savepoint(
        client,
        deployment,
        target,
        action.action_id,
        action.path.parent,
        savepoint_timeout_s=savepoint_timeout_s,
        start_timeout_s=start_timeout_s,
    )
    assert result is not None  # waits for the savepoint
    return result


def stale_after(savepoint_timeout_s: float, start_timeout_s: float) -> float:
    """Seconds after which an unfinished action untouched has no task finishing it: longer than it could still run."""
    return savepoint_timeout_s + start_timeout_s + 120.0


def reconcile(
    client: FlinkRestClient,
    deployment: JobDeployment,
    journal_dir: str | Path,
    stale_after_s: float,
    savepoint_timeout_s: float,
    start_timeout_s: float,
    actions: list[Unfinished] | None = None,
) -> tuple[list[RescaleResult], list[str]]:
    """Settle the job's stale unfinished actions: ``(results, problems)``, a problem per action
    that could not be settled now (Flink unreachable, another attempt running): alert on those.

    ``actions``: the job's unfinished journals when already read (default: read them from ``journal_dir``).
    """
    results, problems = [], []
    for action in unfinished(journal_dir, deployment.job_name) if actions is None else actions:
        if action.idle_s < stale_after_s:
            continue  # its own task may still be at work (waiting for the savepoint in the triggerer)
        try:
            results.append(settle(client, deployment, action, savepoint_timeout_s, start_timeout_s))
        except (FlinkError, InputError) as exc:
            problems.append(f"action {action.action_id} of {action.job_name} ({action.path}): {exc}")
    return results, problems


@dataclass(frozen=True)
class Watched:
    """What the reconciler needs of one registered job."""

    name: str  # the registered job's name (its alerts go to it)
    deployment: JobDeployment
    mechanism: str
    savepoint_timeout_s: float
    start_timeout_s: float


def reconcile_cluster(
    client: FlinkRestClient, jobs: list[Watched], journal_dir: str | Path
) -> tuple[list[RescaleResult], dict[str, list[str]]]:
    """Every job of one Flink cluster in one pass: settle each job's stale actions, then name each job
    left not running. ``(results, problems by job name)``.

    The journals are read once and the cluster's jobs listed once (after settling), whatever the
    number of jobs: a fleet's reconciliation is one pass, not a task and a listing per job. A job is
    not checked for running when it is rescaled in place (a rescale of ours never stops it) or while a
    rescale of it is still at work (an unfinished action younger than its staleness: that task reports).
    """
    by_flink_job: dict[str, list[Unfinished]] = {}
    for action in unfinished(journal_dir):
        by_flink_job.setdefault(action.job_name, []).append(action)
    results: list[RescaleResult] = []
    problems: dict[str, list[str]] = {}
    at_work: set[str] = set()  # jobs a rescale of ours may have stopped for now: not checked for running
    for job in jobs:
        actions = by_flink_job.get(job.deployment.job_name, [])
        if actions:
            stale_s = stale_after(job.savepoint_timeout_s, job.start_timeout_s)
            if any(action.idle_s < stale_s for action in actions):
                at_work.add(job.name)
            settled, unsettled = reconcile(
                client, job.deployment, journal_dir, stale_s, job.savepoint_timeout_s, job.start_timeout_s, actions
            )
            results += settled
            if unsettled:
                problems.setdefault(job.name, []).extend(unsettled)
    checked = [job for job in jobs if job.mechanism != IN_PLACE and job.name not in at_work]
    if checked:
        running = {j.name for j in client.jobs() if j.state == "RUNNING"}
        for job in checked:
            if job.deployment.job_name not in running:
                problem = f"no job called {job.deployment.job_name!r} runs on Flink ({client.base_url})"
                problems.setdefault(job.name, []).append(problem)
    return results, problems
