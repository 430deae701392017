"""Growing and shrinking the cluster on real Flink: a scale-up that needs more slots than exist adds a
TaskManager (the local provider, ``scripts/flink.sh add-taskmanager``), reaches its target through the
rescale operator, and after a scale-down the idle TaskManager is released once ``capacity.release_after``
has passed. The job keeps running throughout, and the CAPACITY and ACTIONS tables name each step.

Also: the epoch's state size per operator, from Flink's checkpoint statistics (table STATE).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from autoscaler import testjob
from autoscaler.capacity.inventory import Inventory
from autoscaler.capacity.provider import cluster_view, last_rescale_end, provider_for, release_idle
from autoscaler.collect.state import collect_state, recorded_state
from autoscaler.config.jobs import parse_jobs_each
from autoscaler.decide.mechanism_rule import choose_for_plan
from autoscaler.decide.rules import RESCALE, decide
from autoscaler.flink.client import FlinkConnection, FlinkRestClient
from autoscaler.record import audit, outcomes
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import CAPACITY, STATE
from tests.conftest import ROOT
from tests.helpers import free_port, poll
from tests.integration.conftest import FLINK_SH, TESTJOB_JAR, wait_running

pytestmark = [pytest.mark.flink, pytest.mark.slow]
JOB, FLINK_JOB = "cap", "ds2-capacity"
ARGS = ["--job-name", FLINK_JOB, "--rate", "2000", "--source-parallelism", "1", "--keys", "1000"]


@pytest.fixture
def small_cluster(tmp_path, monkeypatch):
    """One TaskManager of 2 slots and 2 declared cores, its own instance, stopped by its own pids."""
    env = {**os.environ, "FLINK_DATA_DIR": str(tmp_path / "flink"), "FLINK_REST_PORT": str(free_port()),
           "FLINK_RPC_PORT": str(free_port()), "FLINK_SLOTS": "2", "FLINK_TM_CORES": "2"}  # fmt: skip
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT, capture_output=True)
    subprocess.run([str(FLINK_SH), "up"], check=True, cwd=ROOT, env=env)
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_CAPACITY", json.dumps({"conn_type": "flink", "host": "127.0.0.1",
                                                                   "port": int(env["FLINK_REST_PORT"])}))  # fmt: skip
    try:
        yield FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{env['FLINK_REST_PORT']}")), tmp_path
    finally:
        subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)


def rows(current: int, target: int) -> list[dict]:
    op = {"operator_name": "Count", "is_source": False, "status": "ok", "reason": "DS2"}
    return [{**op, "operator_id": "count", "current_parallelism": current, "target_parallelism": target}]


def rescale(plan, job, client, tmp_path, epoch: int) -> dict:
    """The rescale task as the DAG runs it: the operator, its savepoint wait in the trigger, then the restart."""
    from airflow.sdk.exceptions import TaskDeferred

    from ds2_airflow.operators.rescale import FlinkRescaleOperator

    op = FlinkRescaleOperator(task_id=f"rescale-{epoch}", deployment=job.deployment, target=plan.target,
                              mechanism=plan.mechanism, journal_dir=str(tmp_path / "journal"), flink_conn_id="flink_capacity",
                              lease_store=str(tmp_path / "store"), capacity=job.capacity,
                              capacity_request={"job": JOB, "epoch": epoch,
                                                "add_taskmanagers": plan.add_taskmanagers})  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context={})

    async def first_event():
        async for event in deferred.value.trigger.run():
            return event.payload

    result = op.execute_complete(context={}, event=asyncio.run(first_event()))
    run = outcomes.EpochRun(f"a{epoch}", plan.mechanism, plan.current, plan.summary, rescaled=result,
                            plan_action=plan.action)  # fmt: skip
    audit.record_action(tmp_path / "store", outcomes.epoch_row(JOB, epoch, run))
    return result


def taskmanager_ids(client: FlinkRestClient) -> list[str]:
    return sorted(t["id"] for t in client.get("/taskmanagers")["taskmanagers"])


def test_a_scale_up_beyond_the_slots_adds_a_taskmanager_and_a_scale_down_releases_it(small_cluster):
    client, tmp_path = small_cluster
    store = tmp_path / "store"
    jar_id = client.upload_jar(TESTJOB_JAR)
    entry = {"name": JOB, "flink_job_name": FLINK_JOB, "jar_id": jar_id, "parallelism_args": testjob.PARALLELISM_ARGS,
             "base_args": ARGS, "savepoint_dir": str(tmp_path / "savepoints"), "flink_conn_id": "flink_capacity",
             "capacity": {"provider": "local", "flink_data_dir": str(tmp_path / "flink"), "max_taskmanagers": 2,
                          "release_after": "3s"}}  # fmt: skip
    jobs, errors = parse_jobs_each({"jobs": [entry]}, "test")
    assert not errors, errors
    job = jobs[0]
    first = wait_running(client, client.run_jar(jar_id, None, [*ARGS, "--count-parallelism", "2"]))
    assert taskmanager_ids(client) == ["tm-1"] and client.overview()["slots-available"] == 0

    # The epoch's state size, from the checkpoint statistics (checkpoints every 10 s on this cluster).
    poll("a completed checkpoint", lambda: client.checkpoints(first.id)["counts"]["completed"] > 0, 60)
    total = collect_state(client, first.id, JOB, 99, store)
    state = read_epochs(store, STATE, JOB, [99]).to_pylist()
    assert total and total == sum(r["state_bytes"] for r in state)
    assert {r["operator_name"] for r in state} >= {"Count"} and {r["state_backend"] for r in state} == {"hashmap"}
    assert recorded_state(store, JOB)[99] == (total, "hashmap")

    # Count 2 -> 4 needs 4 slots; the cluster has 2: the plan asks the provider for one TaskManager of 2 slots.
    view = cluster_view(client, job.capacity)
    plan = choose_for_plan(decide(job, 100, rows(2, 4), decided_epochs_since_rescale=1, cluster=view), job, store, view)
    assert plan.action == RESCALE and plan.target == {"Count": 4} and plan.add_taskmanagers == 1
    assert (
        "4 task slots needed, 2 available (0 free + 2 held by the job): adding 1 TaskManager(s) of 2 slots, 2 cores (local)"
        in plan.summary
    )
    assert plan.mechanism == "savepoint-restart"  # the default scheduler offers no in-place rescale
    up = rescale(plan, job, client, tmp_path, 100)
    assert up["outcome"] == "succeeded", up
    assert taskmanager_ids(client) == ["ds2-cap-100-1", "tm-1"]
    assert wait_running(client, up["new_flink_job_id"]).parallelism["Count"] == 4

    # Count 4 -> 2: the slots of one TaskManager fall idle; it is released only after release_after.
    view = cluster_view(client, job.capacity)
    plan = choose_for_plan(decide(job, 102, rows(4, 2), decided_epochs_since_rescale=1, cluster=view), job, store, view)
    assert plan.action == RESCALE and plan.add_taskmanagers == 0, plan.summary
    down = rescale(plan, job, client, tmp_path, 102)
    assert down["outcome"] == "succeeded", down
    provider = provider_for(job.capacity, client.base_url)
    ended = last_rescale_end(store, JOB)
    inventory = Inventory.from_rest(client.get("/taskmanagers"))
    assert release_idle(provider, inventory, store, JOB, 103, ended, timedelta(seconds=3), ended + timedelta(seconds=1)) is None
    assert len(taskmanager_ids(client)) == 2

    def released() -> str | None:
        inventory = Inventory.from_rest(client.get("/taskmanagers"))
        return release_idle(provider, inventory, store, JOB, 103, ended, timedelta(seconds=3), datetime.now(UTC))

    message = poll("the idle TaskManager released", released, 60)
    assert message.startswith("released ") and "release_after 3 s" in message
    assert len(taskmanager_ids(client)) == 1 and client.overview()["slots-total"] == 2
    # The job never stopped: the one restarted at Count 2 runs on, on the TaskManager that stayed.
    after = wait_running(client, down["new_flink_job_id"])
    assert after.parallelism["Count"] == 2 and client.running_job(FLINK_JOB).id == down["new_flink_job_id"]

    # The audit trail: the add with the scale-up's epoch, the release after the scale-down.
    events = read_epochs(store, CAPACITY, JOB).sort_by("epoch").to_pylist()
    assert [(e["epoch"], e["event"], e["outcome"]) for e in events] == [(100, "add", "succeeded"), (103, "release", "succeeded")]
    assert json.loads(events[0]["taskmanagers"]) == ["ds2-cap-100-1"] and events[0]["slots"] == 2 and events[0]["cores"] == 2.0
    assert events[0]["event_id"].endswith(":add") and events[1]["message"] == message
    actions = {a["epoch"]: a for a in audit.actions_log(store, JOB)}
    assert actions[100]["outcome"] == actions[102]["outcome"] == "succeeded"
    assert actions[100]["mechanism"] == "savepoint-restart"
