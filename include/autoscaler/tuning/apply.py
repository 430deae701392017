"""Applying a recommended configuration through the rescale path: savepoint, restart, verify, roll back.

A configuration is applied by one stop-with-savepoint and restart (:func:`rescale_with_savepoint`), with its
journal and its rollback:

- the parallelism goes into the job's program arguments, as any rescale's;
- the checkpoint interval goes into the restart's Flink configuration (``execution.checkpointing.interval``);
  a rollback restarts with the interval that was in force;
- memory is the TaskManagers' own: with a capacity provider, TaskManagers with the new memory are added
  *before* the stop (their start is not downtime), and the old ones, idle once the job stopped, are released
  before the restart, so that the job lands on the new ones. Without a provider memory stays a
  recommendation, said in the result. A rollback restarts the job at its old parallelism and interval on
  the new TaskManagers: the old ones are gone, and their memory is the one part not rolled back (said too).

After the restart the interval Flink reports for the new job is read back; a job that ignored it (one that
sets its interval in its own code) is reported, not hidden.
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

from autoscaler.capacity.inventory import Inventory
from autoscaler.capacity.provider import ADD, RELEASE, CapacityError, CapacityProvider, event_row, new_ids, record_event
from autoscaler.config.options import SAVEPOINT_RESTART
from autoscaler.flink import ids
from autoscaler.flink.client import FlinkRestClient
from autoscaler.flink.deployment import JobDeployment
from autoscaler.rescale.result import RescaleResult
from autoscaler.rescale.savepoint import rescale_with_savepoint
from autoscaler.store.schemas import SUCCEEDED
from autoscaler.tuning.configuration import Configuration
from autoscaler.tuning.round import configuration_in_force

SLOTS_FREED_S = 30.0  # three of Flink's default heartbeat intervals (heartbeat.interval 10 s): slot reports come with them


def apply_configuration(client: FlinkRestClient, deployment: JobDeployment, new: Configuration, action_id: str,
                        journal_dir: str | Path, provider: CapacityProvider | None, store_root: str | Path, job: str,
                        epoch: int, floor_mb: int, **timeouts: float) -> RescaleResult:  # fmt: skip
    """Apply ``new`` to the running job (see the module docstring); ``timeouts`` go to the savepoint-restart."""
    in_force, slots_per_tm, _ = configuration_in_force(client, deployment.job_name)
    target = {n: p for n, p in new.operators.items() if n in deployment.parallelism_args}
    memory_changes = (new.memory_per_slot_mb, new.managed_fraction) != (in_force.memory_per_slot_mb, in_force.managed_fraction)
    notes: list[str] = []
    before_restart = None
    if memory_changes and provider is None:
        notes.append(f"memory {new.memory_per_slot_mb} MB/slot, managed fraction {new.managed_fraction:g} stays a "
                     "recommendation: no capacity provider starts TaskManagers with it (capacity.provider)")  # fmt: skip
    elif memory_changes and provider is not None:
        old_tms = [str(t["id"]) for t in client.get("/taskmanagers").get("taskmanagers", [])]
        added = new_ids(job, epoch, math.ceil(new.slots / slots_per_tm), prefix="cfg")
        tm_mb = new.taskmanager_mb(slots_per_tm, floor_mb)
        try:
            provider.add(added, memory_mb=tm_mb, managed_fraction=new.managed_fraction)
        except CapacityError as exc:  # before the stop: the job runs on as it was
            with contextlib.suppress(CapacityError):
                provider.release([t for t in added if t in provider.taskmanagers()[1]])
            message = f"not applied: TaskManagers of {tm_mb} MB could not be added ({exc}); the job runs on unchanged"
            running = client.job(client.running_job(deployment.job_name).id)
            return RescaleResult.not_acted(action_id, SAVEPOINT_RESTART, message, running)
        inventory = Inventory.from_rest(client.get("/taskmanagers"))
        record_event(store_root, job, epoch, event_row(f"{action_id}:add", ADD, provider.name, added, inventory, SUCCEEDED,
                                                    f"TaskManagers of {tm_mb} MB, managed fraction {new.managed_fraction:g}, "
                                                    f"for configuration {new.key()}"))  # fmt: skip

        def swap() -> str:
            """The old TaskManagers, idle now that the job stopped, go; the job restarts on the new ones.

            Flink reports a stopped job's slots free only with the TaskManager's next slot report (a heartbeat, 10 s
            by default): each old one is waited for up to ``SLOTS_FREED_S``; one still busy then runs another job's
            tasks and stays (said in the message).
            """
            _, ours = provider.taskmanagers()
            mine = [t for t in old_tms if t in ours]
            deadline = time.monotonic() + SLOTS_FREED_S
            while True:
                inventory = Inventory.from_rest(client.get("/taskmanagers"))
                idle = [t.id for t in inventory.taskmanagers if t.id in mine and t.free_slots == t.slots]
                if len(idle) == len(mine) or time.monotonic() >= deadline:
                    break
                time.sleep(0.5)
            provider.release(idle)
            busy = sorted(set(mine) - set(idle))
            why = f"replaced by {added} for configuration {new.key()}"
            record_event(store_root, job, epoch, event_row(f"{action_id}:release", RELEASE, provider.name, idle, inventory,
                                                           SUCCEEDED, why))  # fmt: skip
            kept = f"; {busy} still ran other tasks after {SLOTS_FREED_S:g} s and stay" if busy else ""
            return f"TaskManagers {added} ({tm_mb} MB, managed fraction {new.managed_fraction:g}) replaced {idle}{kept}"

        before_restart = swap
    settings = (new.flink_configuration(), in_force.flink_configuration())
    result = rescale_with_savepoint(client, deployment, target, action_id, journal_dir, job_settings=settings,
                                    before_restart=before_restart, **timeouts)  # fmt: skip
    if result.outcome == SUCCEEDED and result.new_flink_job_id:
        interval = client.get(f"/jobs/{ids.job_id(result.new_flink_job_id)}/checkpoints/config").get("interval")
        if interval != round(new.checkpoint_interval_s * 1000):
            notes.append(f"the job reports a checkpoint interval of {interval} ms, not {new.checkpoint_interval_s:g} s: its "
                         "program sets its own, which the restart's configuration does not override")  # fmt: skip
    if notes:
        result = RescaleResult.from_dict({**result.to_dict(), "message": f"{result.message} Note: {'; '.join(notes)}."})
    return result
