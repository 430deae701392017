"""The scheduler and the triggerer killed mid-rescale (``kill -9`` by their pids) and started again.

The under-provisioned test job (DS2 asks for Count 4) under a real scheduler. The triggerer is
killed first, so the rescale task that defers on the savepoint wait has nobody to run its trigger:
the savepoint completes and stops the job while no Airflow process watches. Then the scheduler is
killed too. ``scripts/airflow.sh up`` starts the missing components again; the trigger fires, the
task resumes from its journal and restarts the job at Count 4 from the savepoint: the keyed counts
continue, and the epoch has exactly one action row saying what happened.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime

import pytest

from autoscaler.config.jobs import load_jobs
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, environment, job_entry
from tests.integration.test_rescale import assert_runs_at, assert_state_continued, wait_counted

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]
INTERVAL_S = 20
DAG = "ds2_killed"


def _kill(server, component: str) -> None:
    """SIGKILL the component and every process of its group, as when its host or container dies.

    ``scripts/airflow.sh`` starts each component in its own session (pid = process group). Killing
    the scheduler's pid alone left its four LocalExecutor workers orphaned and running after the test.
    """
    pid, _ = server.pids()[component]
    assert os.getpgid(pid) == pid, f"{component} {pid} does not lead its process group"
    members = [p for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == pid]
    os.killpg(pid, signal.SIGKILL)
    poll(f"{component} {pid} and its group {members} to die", lambda: not any(_pgid(int(p)) == pid for p in members), 30)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _deferred_rescale(server):
    runs = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns", params={"order_by": "-logical_date", "limit": 5})["dag_runs"]
    for run in runs:
        ti = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}/taskInstances/rescale")
        if ti.get("state") == "deferred":
            return run
    return None


def test_scheduler_and_triggerer_killed_while_the_rescale_waits(flink, spark_engine, airflow_server_factory, tmp_path_factory):
    flink.cancel_all()
    old = flink.start_job(HONEST_UNDERPROVISIONED).id
    wait_counted(flink.client, old, 2000)
    data = tmp_path_factory.mktemp("ds2-killed")
    env = environment(flink, data / "jobs.yaml", data, [job_entry(flink, "killed", INTERVAL_S)], spark_engine.connection)
    job = load_jobs(data / "jobs.yaml")[0]
    server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env, reuse=False)
    try:
        server.wait_dag(DAG)
        _kill(server, "triggerer")
        run = poll("a rescale deferred on its savepoint", lambda: _deferred_rescale(server), 240)
        # Nobody runs the trigger: the savepoint completes and stops the job; nothing restarts it yet.
        poll("the job stopped by its savepoint", lambda: not flink.client.find_job("ds2-testjob"), 60)
        _kill(server, "scheduler")
        server.script("up")  # starts the scheduler and the triggerer again
        state = server.wait_run(DAG, run["dag_run_id"], timeout_s=240)
        assert state == "success", state
        new = assert_runs_at(flink.client, "ds2-testjob", {"Count": 4})
        assert_state_continued(flink.client, new)
        epoch = job.epoch_of(datetime.fromisoformat(run["data_interval_end"]))
        rows = [a for a in read_epochs(data / "store", ACTIONS, "killed").to_pylist() if a["epoch"] == epoch]
        assert len(rows) == 1 and rows[0]["outcome"] == "succeeded", rows
        assert rows[0]["new_flink_job_id"] == new and rows[0]["old_flink_job_id"] == old
    finally:
        server.stop()
        flink.cancel_all()
