"""What the cluster offers a plan: its TaskManagers, the job's limits, and the capacity check.

A job runs in one slot-sharing group (Flink's default), so it needs as many slots as its largest
operator's parallelism, and a rescale frees the slots the job holds now. A slot's tasks are busy
when the job is sized to its load, so a TaskManager running more of the job's slots than it has CPU
cores gives less capacity per instance than the policy sized for: the check counts each
TaskManager's slots up to its cores (:func:`usable_slots`).

When a plan needs more than the cluster offers, the check asks for TaskManagers of the cluster's
own shape (slots and cores of its largest), within ``capacity.max_taskmanagers`` and
``capacity.max_slots``, before it cuts the plan down; what it cannot get, it cuts, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autoscaler.errors import InputError


@dataclass(frozen=True)
class TaskManager:
    id: str
    slots: int
    free_slots: int
    cores: float  # the CPU cores it declares (Flink's taskmanager.cpu.cores, REST totalResource.cpuCores)

    def usable(self, cores: float | None) -> int:
        """Slots that can be busy at once: its slots, at most its cores (``cores`` overrides what it declares)."""
        return min(self.slots, math.floor((cores if cores is not None else self.cores) + 1e-9))


@dataclass(frozen=True)
class Inventory:
    taskmanagers: tuple[TaskManager, ...]

    @classmethod
    def from_rest(cls, body: Mapping[str, Any], source: str = "Flink /taskmanagers") -> Inventory:
        """From the REST API's ``/taskmanagers`` answer; a TaskManager that declares no cores counts one per slot."""
        try:
            tms = []
            for t in body.get("taskmanagers", []):
                slots = int(t["slotsNumber"])
                cores = float((t.get("totalResource") or {}).get("cpuCores") or 0) or float(slots)
                tms.append(TaskManager(str(t["id"]), slots, int(t["freeSlots"]), cores))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(source, f"a TaskManager entry lacks slotsNumber or freeSlots: {exc}") from None
        return cls(tuple(sorted(tms, key=lambda t: t.id)))

    @classmethod
    def slots_only(cls, free_slots: int) -> Inventory:
        """What a caller that knows only the free slots can say: one TaskManager with as many cores as slots."""
        return cls((TaskManager("cluster", free_slots, free_slots, float(free_slots)),))

    @property
    def slots(self) -> int:
        return sum(t.slots for t in self.taskmanagers)

    @property
    def free_slots(self) -> int:
        return sum(t.free_slots for t in self.taskmanagers)

    def get(self, tm_id: str) -> TaskManager | None:
        return next((t for t in self.taskmanagers if t.id == tm_id), None)


@dataclass(frozen=True)
class CapacityLimits:
    max_taskmanagers: int | None = None
    max_slots: int | None = None
    cores_per_taskmanager: float | None = None


@dataclass(frozen=True)
class ClusterView:
    """What the decide step knows of the cluster: its inventory, the job's limits, whether TaskManagers can be added."""

    inventory: Inventory
    limits: CapacityLimits = field(default_factory=CapacityLimits)
    provider: str | None = None  # the provider that adds TaskManagers (None: the cluster is fixed)
    adaptive: bool = False  # the adaptive scheduler runs: a rescale in place is offered
    slots_only: bool = False  # from the free-slot count alone: the check counts slots, not cores
    reserved: int = 0  # free slots already planned for other jobs' rescales in this interval (the fleet's decide)


@dataclass(frozen=True)
class CapacityFit:
    needed: int  # slots the plan needs (its largest operator's parallelism)
    available: int  # the most it can have: usable now plus what the added TaskManagers bring
    add_taskmanagers: int  # TaskManagers to add before the rescale (0: none)
    note: str  # '' when the plan fits the cluster as it is; otherwise what was added or why it is cut


def usable_slots(view: ClusterView, held: int) -> tuple[int, str]:
    """Slots the job can have busy after its restart, and in words what bounds them.

    Free slots plus the job's own; and at most, summed over TaskManagers, their slots up to their cores,
    less the slots other jobs keep busy.
    """
    inv = view.inventory
    by_slots = max(0, inv.free_slots - view.reserved) + held
    if view.slots_only:
        return by_slots, f"{by_slots} available ({_free(inv, view.reserved)} + {held} held by the job)"
    cores = view.limits.cores_per_taskmanager
    others = max(0, inv.slots - inv.free_slots - held) + view.reserved
    by_cores = sum(t.usable(cores) for t in inv.taskmanagers) - others
    if by_cores < by_slots:
        shape = ", ".join(f"{t.id}: {t.slots} slots, {cores or t.cores:g} cores" for t in inv.taskmanagers)
        return max(by_cores, 0), (
            f"{max(by_cores, 0)} busy slots within the TaskManagers' cores ({shape}"
            + (f"; {others} {'busy with' if not view.reserved else 'busy with or planned for'} other jobs" if others else "")
            + "): more busy slots on a TaskManager than its cores would not give the capacity the plan counts on"
        )
    return by_slots, f"{by_slots} available ({_free(inv, view.reserved)} + {held} held by the job)"


def _free(inv: Inventory, reserved: int) -> str:
    return f"{inv.free_slots} free" if not reserved else f"{inv.free_slots} free - {reserved} planned for other jobs"


def fit(view: ClusterView, needed: int, held: int) -> CapacityFit:
    """How the plan fits the cluster: as it is, with TaskManagers added (when a provider may), or cut down."""
    usable, what = usable_slots(view, held)
    if needed <= usable:
        return CapacityFit(needed, usable, 0, "")
    shortfall = needed - usable
    inv, limits = view.inventory, view.limits
    if view.provider is None or view.slots_only or not inv.taskmanagers:
        return CapacityFit(needed, usable, 0, f"{needed} task slots needed, {what}")
    shape = max(inv.taskmanagers, key=lambda t: (t.usable(limits.cores_per_taskmanager), t.slots))
    per_tm = shape.usable(limits.cores_per_taskmanager)
    want = math.ceil(shortfall / per_tm) if per_tm > 0 else 0
    room = [want]
    if limits.max_taskmanagers is not None:
        room.append(max(0, limits.max_taskmanagers - len(inv.taskmanagers)))
    if limits.max_slots is not None:
        room.append(max(0, (limits.max_slots - inv.slots) // shape.slots))
    add = min(room)
    available = usable + add * per_tm
    brings = f"{add} TaskManager(s) of {shape.slots} slots, {limits.cores_per_taskmanager or shape.cores:g} cores"
    if add == want:
        return CapacityFit(needed, available, add, f"{needed} task slots needed, {what}: adding {brings} ({view.provider})")
    bound = "capacity.max_taskmanagers" if limits.max_taskmanagers is not None and add == room[1] else "capacity.max_slots"
    cut = f"{needed} task slots needed, {what}; {bound} allows adding {add} TaskManager(s) of the {want} needed"
    return CapacityFit(needed, available, add, cut + (f": adding {brings} ({view.provider})" if add else ""))


def idle_taskmanagers(inventory: Inventory, among: Sequence[str]) -> list[TaskManager]:
    """The TaskManagers of ``among`` that run nothing now."""
    return [t for t in inventory.taskmanagers if t.id in among and t.free_slots == t.slots]
