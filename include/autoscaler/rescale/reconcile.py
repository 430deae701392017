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


@dataclass(frozen=True)
class Unfinished:
    """A journal without a result: its action id, job name, mechanism and seconds since its last step."""

    path: Path
    action_id: str
    job_name: str
    mechanism: str
    idle_s: float


def unfinished(journal_dir: str | Path, job_name: str | None = None) -> list[Unfinished]:
    """The journals of ``journal_dir`` (of one Flink job, when named) that hold no result yet."""
    out = []
    for path in sorted(Path(journal_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            idle_s = time.time() - path.stat().st_mtime
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


def reconcile(
    client: FlinkRestClient,
    deployment: JobDeployment,
    journal_dir: str | Path,
    stale_after_s: float,
    savepoint_timeout_s: float,
    start_timeout_s: float,
) -> tuple[list[RescaleResult], list[str]]:
    """Settle the job's stale unfinished actions: ``(results, problems)``, a problem per action
    that could not be settled now (Flink unreachable, another attempt running): alert on those."""
    results, problems = [], []
    for action in unfinished(journal_dir, deployment.job_name):
        if action.idle_s < stale_after_s:
            continue  # its own task may still be at work (waiting for the savepoint in the triggerer)
        try:
            results.append(settle(client, deployment, action, savepoint_timeout_s, start_timeout_s))
        except (FlinkError, InputError) as exc:
            problems.append(f"action {action.action_id} of {action.job_name} ({action.path}): {exc}")
    return results, problems
