"""The capacity check (slots and cores, TaskManagers asked for before a plan is cut) and what may be released."""

from __future__ import annotations

from autoscaler.capacity.inventory import CapacityLimits, ClusterView, Inventory, TaskManager, fit
from autoscaler.capacity.provider import new_ids, releasable
from autoscaler.config.jobs import parse_jobs_each
from autoscaler.decide.rules import NOOP, RESCALE, decide


def tm(tm_id: str, slots: int, free: int, cores: float) -> TaskManager:
    return TaskManager(tm_id, slots, free, cores)


def rows(current: int, target: int) -> list[dict]:
    return [
        {"operator_id": "src", "operator_name": "Source", "is_source": True, "current_parallelism": 1,
         "target_parallelism": 1, "status": "ok"},
        {"operator_id": "cnt", "operator_name": "Count", "is_source": False, "current_parallelism": current,
         "target_parallelism": target, "status": "ok", "reason": "Count needs more"},
    ]  # fmt: skip


def job(**capacity):
    entry = {"name": "wc", "flink_job_name": "wc", "jar_id": "0b5ef4a1-2b3c-4d5e-8f90-123456789abc_x.jar"}
    if capacity:
        entry["capacity"] = capacity
    jobs, errors = parse_jobs_each({"jobs": [entry]}, "test")
    assert not errors
    return jobs[0]


def test_more_busy_slots_than_cores_is_refused_with_the_reason():
    # One TaskManager, 8 slots but 2 cores; the job holds 2 slots and DS2 wants Count at 4.
    view = ClusterView(Inventory((tm("tm-1", 8, 6, 2.0),)))
    plan = decide(job(), 10, rows(2, 4), decided_epochs_since_rescale=1, cluster=view)
    assert plan.action == NOOP
    assert plan.summary.startswith("blocked: 4 task slots needed, 2 busy slots within the TaskManagers' cores")
    assert "tm-1: 8 slots, 2 cores" in plan.summary and "more busy slots on a TaskManager than its cores" in plan.summary
    # Counted by slots alone, the same plan would have gone ahead.
    assert decide(job(), 10, rows(2, 4), decided_epochs_since_rescale=1, free_slots=6).action == RESCALE


def test_the_cores_option_overrides_what_the_taskmanagers_declare():
    view = ClusterView(Inventory((tm("tm-1", 8, 6, 8.0),)), CapacityLimits(cores_per_taskmanager=3))
    plan = decide(job(), 10, rows(2, 5), decided_epochs_since_rescale=1, cluster=view)
    assert plan.action == RESCALE and plan.target == {"Count": 3}
    assert "reduced 5→3: 5 task slots needed, 3 busy slots within the TaskManagers' cores" in plan.operators[1].notes[0]


def test_a_provider_is_asked_for_taskmanagers_before_the_plan_is_cut():
    view = ClusterView(Inventory((tm("tm-1", 2, 0, 2.0),)), provider="local")
    plan = decide(job(), 10, rows(2, 5), decided_epochs_since_rescale=1, cluster=view)
    assert plan.action == RESCALE and plan.target == {"Count": 5} and plan.add_taskmanagers == 2
    assert "adding 2 TaskManager(s) of 2 slots, 2 cores (local)" in plan.summary
    assert plan.slots_taken == 3


def test_the_limits_bound_what_is_added_and_the_rest_is_cut():
    inv = Inventory((tm("tm-1", 2, 0, 2.0),))
    capacity = fit(ClusterView(inv, CapacityLimits(max_taskmanagers=2), provider="local"), 6, 2)
    assert (capacity.add_taskmanagers, capacity.available) == (1, 4)
    assert "capacity.max_taskmanagers allows adding 1 TaskManager(s) of the 2 needed" in capacity.note
    capacity = fit(ClusterView(inv, CapacityLimits(max_slots=2), provider="local"), 6, 2)
    assert (capacity.add_taskmanagers, capacity.available) == (0, 2)
    assert "capacity.max_slots allows adding 0" in capacity.note
    view = ClusterView(inv, CapacityLimits(max_taskmanagers=2), provider="local")
    plan = decide(job(), 10, rows(2, 6), decided_epochs_since_rescale=1, cluster=view)
    assert plan.target == {"Count": 4} and plan.add_taskmanagers == 1 and plan.summary.startswith("rescale Count 2→4 (reduced:")


def test_other_jobs_busy_slots_count_against_the_cores():
    # 2 TaskManagers of 4 slots, 2 cores each; another job keeps 2 slots busy, ours holds 1.
    inv = Inventory((tm("a", 4, 1, 2.0), tm("b", 4, 4, 2.0)))
    assert fit(ClusterView(inv), 1, 1).note == ""
    capacity = fit(ClusterView(inv), 3, 1)
    assert capacity.available == 2 and "2 busy with other jobs" in capacity.note


def test_inventory_from_the_rest_answer():
    body = {"taskmanagers": [
        {"id": "tm-1", "slotsNumber": 2, "freeSlots": 1, "totalResource": {"cpuCores": 2.0}},
        {"id": "ds2-wc-9-1", "slotsNumber": 2, "freeSlots": 2, "totalResource": {"cpuCores": 0.0}},
    ]}  # fmt: skip
    inv = Inventory.from_rest(body)
    assert [(t.id, t.slots, t.free_slots, t.cores) for t in inv.taskmanagers] == [("ds2-wc-9-1", 2, 2, 2.0), ("tm-1", 2, 1, 2.0)]
    assert (inv.slots, inv.free_slots) == (4, 3)


def test_only_idle_taskmanagers_beyond_the_baseline_are_released_added_ones_first():
    inv = Inventory((tm("tm-1", 2, 2, 2.0), tm("ds2-wc-9-1", 2, 2, 2.0), tm("ds2-wc-9-2", 2, 0, 2.0)))
    assert releasable(inv, 1, ["tm-1", "ds2-wc-9-1", "ds2-wc-9-2"]) == ["ds2-wc-9-1", "tm-1"]
    assert releasable(inv, 2, ["tm-1", "ds2-wc-9-1", "ds2-wc-9-2"]) == ["ds2-wc-9-1"]
    assert releasable(inv, 3, ["tm-1", "ds2-wc-9-1", "ds2-wc-9-2"]) == []
    busy = Inventory((tm("tm-1", 2, 0, 2.0), tm("ds2-wc-9-1", 2, 1, 2.0)))
    assert releasable(busy, 1, ["tm-1", "ds2-wc-9-1"]) == []


def test_added_ids_are_stable_per_epoch_and_safe():
    assert new_ids("word count/x", 12, 2) == ["ds2-word-count-x-12-1", "ds2-word-count-x-12-2"]


def test_the_capacity_section_is_read_and_checked():
    settings = job(provider="local", max_taskmanagers=3, cores_per_taskmanager=2, release_after="45s").capacity
    assert settings.provider == "local" and settings.limits == CapacityLimits(3, None, 2.0)
    assert settings.release_after.total_seconds() == 45
    entry = {"name": "wc", "flink_job_name": "wc", "jar_id": "0b5ef4a1-2b3c-4d5e-8f90-123456789abc_x.jar",
             "capacity": {"provider": "cloud"}}  # fmt: skip
    _, errors = parse_jobs_each({"jobs": [entry]}, "test")
    assert "capacity.provider" in str(errors[0]) and "cloud" in str(errors[0])
