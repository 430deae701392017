"""What adds and releases TaskManagers, and the audit trail of each add and release (table CAPACITY).

One interface (:class:`CapacityProvider`): the TaskManagers it added that still run, add these,
release these. Its implementation here is :class:`LocalProcesses`, for the clusters the project
starts: TaskManager processes beside a ``scripts/flink.sh`` instance (the development cluster, the
tests', the cluster mode's hosts), each with a resource id of the provider's choosing so that Flink's
REST API names it. The Flink Kubernetes Operator's (a ``FlinkDeployment``'s TaskManager count) is
designed in ``docs/deploy.md``.

- :func:`add_for_plan` runs before a rescale that needs them (``ScalingPlan.add_taskmanagers``);
- :func:`release_idle` runs at every epoch's record step: TaskManagers beyond the cluster's baseline that
  run nothing are released once ``capacity.release_after`` has passed since the job's last rescale ended.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import pyarrow as pa

from autoscaler.capacity.inventory import ClusterView, Inventory, idle_taskmanagers
from autoscaler.config import paths
from autoscaler.config.sections import CapacitySettings
from autoscaler.errors import InputError
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import CAPACITY

ADD, RELEASE = "add", "release"
_TM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class CapacityProvider(Protocol):
    name: str

    def taskmanagers(self) -> tuple[int, list[str]]:
        """The cluster's baseline (TaskManagers it runs with nothing added) and the ids of those it runs now."""

    def add(self, tm_ids: Sequence[str], memory_mb: int | None = None, managed_fraction: float | None = None) -> None:
        """Start these TaskManagers (of the cluster's shape, or with this memory) once Flink lists them; CapacityError."""

    def release(self, tm_ids: Sequence[str]) -> None:
        """Stop these TaskManagers and return once Flink no longer lists them; raises CapacityError."""


class CapacityError(RuntimeError):
    """A provider could not add or release TaskManagers (the message says which, and why)."""


class LocalProcesses:
    """TaskManager processes beside a ``scripts/flink.sh`` instance (``add-taskmanager``, ``release-taskmanager``)."""

    name = "local"

    def __init__(self, flink_data_dir: str | Path, rest_url: str, script: Path | None = None, timeout_s: float = 120.0) -> None:
        root = paths.checkout()
        if script is None and root is None:
            raise InputError("capacity.provider", "local needs the project's checkout (scripts/flink.sh), which is not here")
        self.script = script or Path(root) / "scripts" / "flink.sh"  # type: ignore[arg-type]
        self.data_dir = Path(flink_data_dir)
        port = urlsplit(rest_url).port
        if port is None:
            raise InputError("capacity.provider", f"local: the Flink REST URL {rest_url!r} names no port")
        self.env = {**os.environ, "FLINK_DATA_DIR": str(self.data_dir), "FLINK_REST_PORT": str(port)}
        self.timeout_s = timeout_s

    def _run(self, *args: str) -> str:
        return flink_sh(self.script, self.env, args, self.timeout_s, CapacityError)

    def taskmanagers(self) -> tuple[int, list[str]]:
        lines = [line.split() for line in self._run("taskmanagers").splitlines() if line.strip()]
        baseline = next((int(parts[1]) for parts in lines if parts[0] == "baseline"), 0)
        return baseline, [parts[0] for parts in lines if parts[0] != "baseline"]

    def add(self, tm_ids: Sequence[str], memory_mb: int | None = None, managed_fraction: float | None = None) -> None:
        memory = [] if memory_mb is None else ["--memory", str(int(memory_mb))]
        managed = [] if managed_fraction is None else ["--managed-fraction", f"{float(managed_fraction):g}"]
        for tm_id in tm_ids:
            self._run("add-taskmanager", _checked(tm_id), *memory, *managed)

    def release(self, tm_ids: Sequence[str]) -> None:
        for tm_id in tm_ids:
            self._run("release-taskmanager", _checked(tm_id))


def flink_sh(script: Path, env: Mapping[str, str], args: Sequence[str], timeout_s: float, error: type[Exception]) -> str:
    """``scripts/flink.sh`` with ``args`` (a list: no shell); its output, or ``error`` with its last line of complaint."""
    try:
        done = subprocess.run([str(script), *args], env=dict(env), capture_output=True, text=True, timeout=timeout_s,
                              check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"flink.sh {args[0]}: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise error(lines[-1] if lines else f"flink.sh {args[0]} exited with {done.returncode}")
    return done.stdout


def _checked(tm_id: str) -> str:
    if not _TM_ID.fullmatch(tm_id):
        raise InputError("capacity", f"TaskManager id {tm_id!r} is not 1-64 of [A-Za-z0-9_-]")
    return tm_id


def provider_for(settings: CapacitySettings, rest_url: str) -> CapacityProvider | None:
    """The job's provider (None: the cluster is fixed)."""
    if settings.provider == "none":
        return None
    if settings.provider == "local":
        return LocalProcesses(settings.flink_data_dir or paths.data_dir() / "flink", rest_url)
    raise InputError("capacity.provider", f"unknown provider {settings.provider!r}")


def new_ids(job: str, epoch: int, count: int, prefix: str = "ds2") -> list[str]:
    """Resource ids for the TaskManagers added for ``job`` at ``epoch``: the same on a retry, so none is added twice.

    ``prefix``: what they are for (``ds2``: a rescale's capacity; ``cfg``: a tuning round's new memory)."""
    base = re.sub(r"[^A-Za-z0-9_-]", "-", job)[:40]
    return [f"{prefix}-{base}-{epoch}-{i}" for i in range(1, count + 1)]


def record_event(store_root: str | Path, job: str, epoch: int, event: dict[str, object]) -> None:
    """Add one event to the epoch's CAPACITY rows (replacing an earlier row with the same event id)."""
    rows = [r for r in read_epochs(store_root, CAPACITY, job, [epoch]).to_pylist() if r["event_id"] != event["event_id"]]
    rows.append({"job": job, "epoch": epoch, **event})
    table = pa.Table.from_pylist(rows, schema=CAPACITY.arrow_schema()).drop_columns(["epoch_block"])
    write_epochs(store_root, CAPACITY, job, table)


def event_row(event_id: str, kind: str, provider: str, tms: Sequence[str], inv: Inventory, outcome: str, message: str) -> dict:
    shapes = [inv.get(t) for t in tms]
    slots = sum(s.slots for s in shapes if s) if any(shapes) else 0
    cores = sum(s.cores for s in shapes if s) if any(shapes) else 0.0
    return {"event_id": event_id, "event": kind, "provider": provider, "taskmanagers": json.dumps(list(tms)), "slots": slots,
            "cores": float(cores), "outcome": outcome, "message": message, "at": datetime.now(UTC)}  # fmt: skip


def add_for_plan(provider: CapacityProvider, read_inventory: Callable[[], Inventory], store_root: str | Path, job: str,
                 epoch: int, count: int, action_id: str) -> str:  # fmt: skip
    """Add ``count`` TaskManagers before a rescale, recorded; returns what happened in words. Raises CapacityError."""
    tm_ids = new_ids(job, epoch, count)
    try:
        provider.add(tm_ids)
    except CapacityError as exc:
        record_event(store_root, job, epoch, event_row(f"{action_id}:add", ADD, provider.name, tm_ids, Inventory(()), "failed",
                                                    f"could not add {', '.join(tm_ids)}: {exc}"))  # fmt: skip
        raise
    inventory = read_inventory()
    message = f"added {', '.join(tm_ids)} for the rescale of epoch {epoch} ({inventory.slots} slots in the cluster now)"
    event = event_row(f"{action_id}:add", ADD, provider.name, tm_ids, inventory, "succeeded", message)
    record_event(store_root, job, epoch, event)
    return message


def releasable(inventory: Inventory, baseline: int, running: list[str]) -> list[str]:
    """The idle TaskManagers that may go: as many as run beyond the baseline, those the provider added first.

    Which TaskManager a restarted job lands on is Flink's choice, so after a scale-down the idle one
    may be one the cluster started with: the provider gives back a count, as a Kubernetes deployment
    does, not a particular TaskManager.
    """
    surplus = len(running) - baseline
    if surplus <= 0:
        return []
    idle = sorted((t.id for t in idle_taskmanagers(inventory, running)), key=lambda i: (not i.startswith("ds2-"), i))
    return idle[:surplus]


def release_idle(provider: CapacityProvider, inventory: Inventory, store_root: str | Path, job: str, epoch: int,
                 last_rescale_end: datetime | None, release_after: timedelta, now: datetime) -> str | None:  # fmt: skip
    """Release the TaskManagers beyond the baseline that run nothing, once ``release_after`` has passed since the
    last rescale.

    Returns what was done in words (None: nothing to release). A release that fails is recorded and
    tried again at the next epoch.
    """
    idle = releasable(inventory, *provider.taskmanagers())
    if not idle:
        return None
    if last_rescale_end is not None and now - last_rescale_end < release_after:
        return None
    event_id = f"release-{epoch}"
    try:
        provider.release(idle)
    except CapacityError as exc:
        record_event(store_root, job, epoch, event_row(event_id, RELEASE, provider.name, idle, inventory, "failed", str(exc)))
        return f"could not release {', '.join(idle)}: {exc}"
    since = "" if last_rescale_end is None else f", {(now - last_rescale_end).total_seconds():.0f} s after the last rescale"
    message = f"released {', '.join(idle)}: idle{since} (release_after {release_after.total_seconds():g} s)"
    record_event(store_root, job, epoch, event_row(event_id, RELEASE, provider.name, idle, inventory, "succeeded", message))
    return message


def cluster_view(client: object, settings: CapacitySettings) -> ClusterView:
    """What the job's cluster offers now, read from its REST API (``/taskmanagers``, ``/jobmanager/config``)."""
    inventory = Inventory.from_rest(client.get("/taskmanagers"))  # type: ignore[attr-defined]
    config = {str(e.get("key")): str(e.get("value")) for e in client.get("/jobmanager/config") or [] if isinstance(e, dict)}  # type: ignore[attr-defined]
    return ClusterView(inventory, settings.limits, None if settings.provider == "none" else settings.provider,
                       adaptive=config.get("jobmanager.scheduler", "").lower() == "adaptive")  # fmt: skip


def last_rescale_end(store_root: str | Path, job: str, epochs: range | None = None) -> datetime | None:
    """When the job's newest rescale (any outcome that restarted it) ended, from its ACTIONS rows of ``epochs``
    (None: all; a caller that only asks whether one ended within a span reads that span's epochs)."""
    import pyarrow.compute as pc

    from autoscaler.store.schemas import ACTIONS, RESTARTED

    rows = read_epochs(store_root, ACTIONS, job, epochs, columns=["outcome", "finished_at"])
    rows = rows.filter(pc.and_(pc.is_in(rows.column("outcome"), pa.array(RESTARTED)), pc.is_valid(rows.column("finished_at"))))
    if not rows.num_rows:
        return None
    end = pc.max(rows.column("finished_at")).as_py()
    return end if end.tzinfo else end.replace(tzinfo=UTC)
