"""Airflow's metadata database (PostgreSQL) stopped and started again mid-run, under a real scheduler.

A recommendation-only job on the test job's real Flink cluster runs every ``INTERVAL_S`` under the
LocalExecutor, and under the CeleryExecutor (one worker, a Redis broker), on a PostgreSQL of its own
(``scripts/postgres.sh``). While a run is in flight, the
database is stopped for longer than an interval and started again; then ``scripts/airflow.sh up``
starts again whatever component died, as a service manager would. What must hold, read from Airflow's
API and the store: no run lost (every interval from the first to the last has its run, the late ones
run late by the DAGs' timetable), none doubled (one run per interval), no epoch decided twice (each
run's policy and decide tasks ran once, or their retry found the epoch's rows and wrote the same),
and one audit row per epoch.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime

import pytest

from autoscaler.config.jobs import load_jobs
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.airflow_fixtures import start_airflow, start_postgres
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, environment, job_entry
from tests.integration.test_rescale import wait_counted

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]
INTERVAL_S = 20
NAME, DAG = "pgdrill", "ds2_pgdrill"
OUTAGE_S = 30  # longer than an interval: a boundary passes while the database is down


def runs(server) -> list[dict]:
    body = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns", params={"order_by": "logical_date", "limit": 100})
    return body["dag_runs"]


def task_tries(server, run_id: str) -> dict[str, int]:
    body = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")
    return {t["task_id"]: t["try_number"] for t in body["task_instances"]}


@pytest.mark.parametrize("executor", ["LocalExecutor", "CeleryExecutor"])
def test_the_metadata_database_restarted_mid_run_loses_and_doubles_nothing(flink, spark_engine, tmp_path_factory, executor):
    flink.cancel_all()
    job_id = flink.start_job(HONEST_UNDERPROVISIONED).id
    wait_counted(flink.client, job_id, 2000)
    data = tmp_path_factory.mktemp("pgdrill")
    entry = job_entry(flink, NAME, INTERVAL_S, recommendation_only=True)
    env = environment(flink, data / "jobs.yaml", data, [entry], spark_engine.connection)
    redis = {"REDIS_DATA_DIR": str(tmp_path_factory.mktemp("pgdrill-redis"))}
    env.update({"AIRFLOW_EXECUTOR": executor, "AIRFLOW_CELERY_WORKERS": "1", **redis})
    job = load_jobs(data / "jobs.yaml")[0]
    postgres = start_postgres()
    server = None
    try:
        server = start_airflow(tmp_path_factory.mktemp("pgdrill-airflow"), ROOT / "dags", env, postgres.data_dir)
        server.wait_dag(DAG, timeout_s=120)
        server.api("PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": False})
        poll("two runs done", lambda: sum(r["state"] == "success" for r in runs(server)) >= 2, 300, 2)
        poll("a run in flight", lambda: any(r["state"] == "running" for r in runs(server)), 120, 0.5)
        postgres.script("down")
        down_at = time.time()
        time.sleep(OUTAGE_S)  # the outage itself: the database stays down this long, on purpose
        postgres.script("up")
        # Airflow's components exit when their database goes away (some only once it is back and their
        # retries are spent): a service manager restarts them, as systemd's Restart= or compose's restart
        # policy would, until the instance is healthy.
        restarts = []

        def restarted() -> bool:
            res = server.script("up", check=False)
            restarts.append(res.stderr.strip().splitlines()[0] if res.stderr.strip() else "")
            return res.returncode == 0

        poll("Airflow healthy again", restarted, 300, 5)
        print(f"back after {time.time() - down_at:.0f} s: {restarts}")
        after = len(runs(server))
        poll("three runs after the outage", lambda: sum(
            r["state"] == "success" for r in runs(server)[after - 1 :]) >= 3, 400, 2)  # fmt: skip
        finished = [r for r in runs(server) if r["state"] in ("success", "failed")]
        epochs = [job.epoch_of(datetime.fromisoformat(r["data_interval_end"])) for r in finished]
        print("runs:", [(e, r["state"]) for e, r in zip(epochs, finished)])
        assert all(r["state"] == "success" for r in finished), finished  # the one in flight too
        assert len(epochs) == len(set(epochs)), epochs  # none doubled
        assert sorted(epochs) == list(range(min(epochs), max(epochs) + 1)), epochs  # none lost
        tries = {r["dag_run_id"]: task_tries(server, r["dag_run_id"]) for r in finished}
        assert all(t.get("policy", 1) <= 1 and t.get("decide", 1) <= 1 for t in tries.values()), tries  # decided once
        actions = read_epochs(data / "store", ACTIONS, NAME).to_pylist()
        assert sorted(a["epoch"] for a in actions) == sorted(epochs), actions  # one audit row per run's epoch
        assert {a["outcome"] for a in actions} == {"recommended"}, actions
        decided = {(d["epoch"], d["decided_at"]) for d in read_epochs(data / "store", DECISIONS, NAME).to_pylist()}
        assert sorted(e for e, _ in decided) == sorted(epochs), decided  # one decision time per epoch
    finally:
        if server is not None:
            server.stop()
        postgres.script("down", check=False)
        if executor == "CeleryExecutor":
            subprocess.run([str(ROOT / "scripts" / "redis.sh"), "down"], env={**os.environ, **redis}, check=False)
        flink.cancel_all()
