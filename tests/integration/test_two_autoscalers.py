"""Two Airflow instances, each with its own jobs config and store, autoscaling one real Flink job.

Each deployment is a separate Airflow (its own scheduler, triggerer, metadata database and store) that
registers the same under-provisioned test job (DS2 asks for Count 4) with an approval gate, and is
given the same lease database (``lease_conn_id``). Both approvals are answered at once, so both
rescale tasks start together: exactly one restarts the job at Count 4, and the other records a
no-op that says why it did not act (the Flink job's lease held by the other deployment, or, when it
came after the other finished, a job rescaled since its epoch was measured). The job restarts once,
its keyed counts continuing.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from autoscaler.config.jobs import load_jobs
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, environment, job_entry, pending_approval, wait_parked
from tests.integration.test_rescale import assert_runs_at, assert_state_continued, wait_counted

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]
INTERVAL_S = 20
NAME, DAG = "twin", "ds2_twin"
APPROVAL = {"required": True, "approvers": ["admin"], "timeout": "10m", "on_timeout": "reject"}


def lease_connection(postgres_server) -> str:
    """The shared lease database as an Airflow connection (JSON), on the session's PostgreSQL."""
    from sqlalchemy.engine import make_url

    url = make_url(postgres_server.script("url", "ds2twinlease").stdout.strip().splitlines()[-1])
    return json.dumps({"conn_type": "postgres", "host": url.host, "port": url.port, "login": url.username,
                       "password": url.password, "schema": url.database})  # fmt: skip


def test_two_airflow_instances_on_one_flink_job_one_acts_and_the_other_records_why(
    flink, spark_engine, airflow_server_factory, postgres_server, tmp_path_factory
):
    flink.cancel_all()
    original = flink.start_job(HONEST_UNDERPROVISIONED).id
    wait_counted(flink.client, original, 2000)
    lease = lease_connection(postgres_server)
    sides = []
    try:
        for side in ("a", "b"):
            data = tmp_path_factory.mktemp(f"ds2-twin-{side}")
            env = environment(flink, data / "jobs.yaml", data, [job_entry(flink, NAME, INTERVAL_S, approval=APPROVAL)],
                              spark_engine.connection)  # fmt: skip
            env.update({"AIRFLOW_CONN_DS2_TWIN_LEASE": lease, "DS2_LEASE_CONN_ID": "ds2_twin_lease"})
            server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env, reuse=False)
            sides.append((server, data / "store", load_jobs(data / "jobs.yaml")[0]))
        details = []
        for server, _, _ in sides:
            server.wait_dag(DAG)
            detail = poll(f"a pending approval at {server.base_url}", lambda s=server: pending_approval(s, DAG), 300)
            assert "| Count | 1 → **4** |" in detail["body"], detail["body"]
            details.append(detail)
        for (server, _, _), detail in zip(sides, details):
            wait_parked(server, DAG, detail)
        for (server, _, _), detail in zip(sides, details):  # both answered at once: both rescale tasks start together
            path = f"/api/v2/dags/{DAG}/dagRuns/{detail['task_instance']['dag_run_id']}/taskInstances/approve/-1/hitlDetails"
            server.api("PATCH", path, json={"chosen_options": ["Approve"], "params_input": {}})

        rows = []
        for (server, store, job), detail in zip(sides, details):
            run_id = detail["task_instance"]["dag_run_id"]
            server.wait_run(DAG, run_id, timeout_s=240)
            run = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}")
            epoch = job.epoch_of(datetime.fromisoformat(run["data_interval_end"]))
            rows.append(poll("the epoch's action row", lambda st=store, e=epoch: next(
                (a for a in read_epochs(st, ACTIONS, NAME).to_pylist() if a["epoch"] == e), None), 60))  # fmt: skip
        outcomes = sorted(r["outcome"] for r in rows)
        assert outcomes == ["noop", "succeeded"], rows
        acted, held = sorted(rows, key=lambda r: r["outcome"] != "succeeded")
        assert held["message"].startswith("not acted: "), held
        assert "holds its lease" in held["message"] or "parallelism changed since the epoch was measured" in held["message"]
        new = assert_runs_at(flink.client, "ds2-testjob", {"Count": 4})
        assert acted["old_flink_job_id"] == original and acted["new_flink_job_id"] == new
        # Restarted once: the jobs of the name since this test's (the session's cluster keeps earlier tests' too).
        since = next(j.start_time_ms for j in flink.client.jobs() if j.id == original)
        ours = sorted((j.start_time_ms, j.id) for j in flink.client.jobs()
                      if j.name == "ds2-testjob" and j.start_time_ms >= since)  # fmt: skip
        assert [job_id for _, job_id in ours] == [original, new], ours
        assert_state_continued(flink.client, new)
    finally:
        for server, _, _ in sides:
            server.stop()
        flink.cancel_all()
