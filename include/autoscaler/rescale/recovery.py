"""Where a stopped job can be restarted from when the normal answer is missing.

- :func:`savepoint_from_history`: the savepoint a stop produced, from the job's checkpoint
  statistics (the stop's answer was lost, but Flink still knows the job);
- :func:`savepoint_written` and :func:`latest_checkpoint`: a JobManager without high
  availability forgets every job when it restarts, and with them the savepoint operation's
  answer. What the old job left on disk is then the only record: the savepoint its stop wrote
  (Flink names it ``savepoint-<first 6 characters of the job id>-<random>``, complete once its
  ``_metadata`` file exists) or, failing that, its latest retained checkpoint
  (``<execution.checkpointing.dir>/<job id>/chk-<n>/_metadata``). Only local ``file:`` folders
  can be searched here.
"""

from __future__ import annotations

import re
from pathlib import Path

from autoscaler.flink.client import FlinkError, FlinkRestClient

CLOCK_SLACK_S = 2.0  # file times and the journal's wall clock may disagree by rounding
CHECKPOINT_DIR_KEYS = ("execution.checkpointing.dir", "state.checkpoints.dir")
_CHECKPOINT = re.compile(r"chk-(\d+)")


def local_folder(uri: str) -> Path | None:
    """The local folder of a ``file:`` URI or an absolute path; None for any other scheme."""
    if uri.startswith("file://"):
        return Path(uri.removeprefix("file://"))
    if uri.startswith("file:"):
        return Path(uri.removeprefix("file:"))
    return Path(uri) if uri.startswith("/") else None


def savepoint_from_history(client: FlinkRestClient, job_id: str, stopped_at_wall_s: float) -> str | None:
    """The savepoint a stop produced, from the job's checkpoint statistics (if taken after the stop)."""
    try:
        latest = (client.checkpoints(job_id).get("latest") or {}).get("savepoint") or {}
    except FlinkError:
        return None
    if latest.get("status") == "COMPLETED" and latest.get("trigger_timestamp", 0) >= (stopped_at_wall_s - CLOCK_SLACK_S) * 1000:
        return latest.get("external_path")
    return None


def savepoint_written(savepoint_uri: str, job_id: str, since_wall_s: float) -> str | None:
    """The newest complete savepoint of ``job_id`` in ``savepoint_uri`` written since ``since_wall_s``."""
    folder = local_folder(savepoint_uri)
    if folder is None or not folder.is_dir():
        return None
    found = [
        p
        for p in folder.glob(f"savepoint-{job_id[:6]}-*")
        if (p / "_metadata").is_file() and (p / "_metadata").stat().st_mtime >= since_wall_s - CLOCK_SLACK_S
    ]
    newest = max(found, key=lambda p: (p / "_metadata").stat().st_mtime, default=None)
    return f"file:{newest}" if newest else None


def latest_checkpoint(client: FlinkRestClient, job_id: str) -> str | None:
    """The newest complete retained checkpoint of ``job_id`` in the cluster's checkpoint folder."""
    try:
        config = {item.get("key"): item.get("value") for item in client.get("/jobmanager/config") or []}
    except FlinkError:
        return None
    for key in CHECKPOINT_DIR_KEYS:
        folder = local_folder(config.get(key) or "")
        if folder is None or not (folder / job_id).is_dir():
            continue
        numbered = [(int(m.group(1)), p) for p in (folder / job_id).iterdir() if (m := _CHECKPOINT.fullmatch(p.name))]
        complete = [(n, p) for n, p in numbered if (p / "_metadata").is_file()]
        if complete:
            return f"file:{max(complete)[1]}"
    return None


def savepoint_in_progress(client: FlinkRestClient, job_id: str) -> bool:
    """A savepoint of the job is being taken (its checkpoint history says so; False when Flink cannot tell)."""
    try:
        history = client.checkpoints(job_id).get("history", [])
    except FlinkError:
        return False
    return any(h.get("is_savepoint") and h.get("status") == "IN_PROGRESS" for h in history)
