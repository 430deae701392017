"""Where profiling copies run: a Flink cluster of their own per copy, beside the job's.

A copy gets its own cluster so that its TaskManagers have the candidate's memory, a TaskManager of it can
be killed to measure recovery without touching the job, and stopping it leaves nothing behind. The
interface (:class:`ProfilingSite`) is what a Kubernetes implementation would give too (a FlinkDeployment
per copy); :class:`LocalClusters` is the one for the clusters this project starts (``scripts/flink.sh``
instances with their own folder and ports). Both read the job's savepoint from the shared folder that
every process of a cluster reaches anyway.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
from pathlib import Path
from typing import Protocol

from autoscaler.capacity.provider import flink_sh
from autoscaler.config import paths
from autoscaler.errors import InputError

COPY_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_PREFIX = "copy-"


class SiteError(RuntimeError):
    """A copy's cluster could not be started, changed or stopped (the message says which, and why)."""


class ProfilingSite(Protocol):
    name: str

    def start(self, copy_id: str, slots: int, taskmanager_mb: int, managed_fraction: float, state_backend: str) -> str:
        """Start the copy's cluster (one TaskManager of ``slots`` slots); return its REST URL once its slots are up."""

    def kill_taskmanager(self, copy_id: str) -> None:
        """Kill the copy's TaskManager without warning (a lost machine) and start a replacement."""

    def stop(self, copy_id: str) -> None:
        """Stop the copy's cluster and delete what it wrote; idempotent."""

    def copies(self) -> list[str]:
        """The copies whose clusters this site still holds (running or not yet cleaned up)."""


def check_copy_id(copy_id: str) -> str:
    if not isinstance(copy_id, str) or not COPY_ID.fullmatch(copy_id):
        raise InputError("profiling copy", f"copy id {copy_id!r} is not 1-63 of [a-z0-9-]")
    return copy_id


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalClusters:
    """One ``scripts/flink.sh`` instance per copy, in ``<root>/copy-<id>/`` with ports of its own."""

    name = "local"

    def __init__(self, root: str | Path | None = None, script: Path | None = None, timeout_s: float = 180.0) -> None:
        checkout = paths.checkout()
        if script is None and checkout is None:
            raise InputError("tuning.site", "local needs the project's checkout (scripts/flink.sh), which is not here")
        self.script = script or Path(checkout) / "scripts" / "flink.sh"  # type: ignore[arg-type]
        self.root = Path(root) if root is not None else paths.data_dir() / "profiles"
        self.timeout_s = timeout_s

    def folder(self, copy_id: str) -> Path:
        return self.root / f"{_PREFIX}{check_copy_id(copy_id)}"

    def _env(self, copy_id: str) -> dict[str, str]:
        """flink.sh's environment for the copy's instance: as it was started (a replacement TaskManager is the same)."""
        folder = self.folder(copy_id)
        try:
            settings = json.loads((folder / "site.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise SiteError(f"copy {copy_id}: no cluster was started in {folder}") from None
        return {**os.environ, "FLINK_DATA_DIR": str(folder), **{k: str(v) for k, v in settings.items()}}

    def _run(self, env: dict[str, str], *args: str) -> str:
        return flink_sh(self.script, env, args, self.timeout_s, SiteError)

    def start(self, copy_id: str, slots: int, taskmanager_mb: int, managed_fraction: float, state_backend: str) -> str:
        folder = self.folder(copy_id)
        folder.mkdir(parents=True, exist_ok=True)
        rest = _free_port()
        settings = {"FLINK_REST_PORT": rest, "FLINK_RPC_PORT": _free_port(), "FLINK_SLOTS": slots, "FLINK_TASKMANAGERS": 1,
                    "FLINK_TM_MEMORY": taskmanager_mb, "FLINK_TM_MANAGED_FRACTION": f"{managed_fraction:g}",
                    "FLINK_STATE_BACKEND": state_backend}  # fmt: skip
        (folder / "site.json").write_text(json.dumps(settings), encoding="utf-8")
        env = self._env(copy_id)
        try:
            self._run(env, "up")
        except SiteError as exc:
            self.stop(copy_id)
            raise SiteError(f"copy {copy_id}: its cluster did not start: {exc}") from None
        return f"http://127.0.0.1:{rest}"

    def kill_taskmanager(self, copy_id: str) -> None:
        env = self._env(copy_id)
        lines = [line.split() for line in self._run(env, "taskmanagers").splitlines()[1:] if line.strip()]
        if not lines:
            raise SiteError(f"copy {copy_id}: no TaskManager runs")
        pid = int(lines[0][1])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._run(env, "start-missing")  # a replacement, as Kubernetes would start one for a lost pod

    def stop(self, copy_id: str) -> None:
        folder = self.folder(copy_id)
        if not folder.exists():
            return
        if (folder / "site.json").exists():
            self._run(self._env(copy_id), "down")
        shutil.rmtree(folder, ignore_errors=True)

    def copies(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name[len(_PREFIX) :] for p in self.root.iterdir() if p.is_dir() and p.name.startswith(_PREFIX))


def site_for(name: str, root: str | Path | None = None) -> ProfilingSite | None:
    if name == "none":
        return None
    if name == "local":
        return LocalClusters(root)
    raise InputError("tuning.site", f"unknown site {name!r}")
