"""An overloaded autoscaler decides late and never loses an epoch (real Flink, the real scheduler and
triggerer, the warm Spark engine, four busy processes on the machine).

A recommendation-only job at a 10-s interval (decided every epoch, never restarted) runs while four
busy processes keep the load far above the cores. Every interval from the first scheduled one to the
last one that ended under the hog must get a run whose decide task succeeds, however late. The
lateness itself belongs to the benchmark (``benchmarks/bench_fleet.py --hog``), not here.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, environment, job_entry

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]
INTERVAL_S = 10
DAG = "ds2_hogged"
HOGS = 4
EPOCHS_UNDER_LOAD = 8


def test_no_epoch_is_lost_under_a_cpu_hog(flink, spark_engine, airflow_server_factory, tmp_path_factory):
    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    data = tmp_path_factory.mktemp("ds2-hogged")
    start = math.ceil((time.time() + 40) / INTERVAL_S) * INTERVAL_S
    entry = job_entry(flink, "hogged", INTERVAL_S, recommendation_only=True,
                      start_date=datetime.fromtimestamp(start, tz=UTC).isoformat())  # fmt: skip
    env = environment(flink, data / "jobs.yaml", data, [entry], spark_engine.connection)
    server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env, reuse=False)
    hogs: list[subprocess.Popen] = []
    try:
        server.wait_dag(DAG)

        def runs() -> dict[float, dict]:
            found = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns", params={"limit": 200})["dag_runs"]
            return {datetime.fromisoformat(r["data_interval_end"]).timestamp(): r for r in found}

        first = poll("the first scheduled run", lambda: min(runs(), default=None), 120)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
        last = first + EPOCHS_UNDER_LOAD * INTERVAL_S
        while time.time() < last + 1:
            time.sleep(0.5)
        for hog in hogs:
            hog.kill()
            hog.wait()
        due = [first + k * INTERVAL_S for k in range(EPOCHS_UNDER_LOAD + 1)]

        def all_settled() -> dict[float, dict] | None:
            found = runs()
            settled = all(at in found and found[at]["state"] in ("success", "failed") for at in due)
            return found if settled else None

        found = poll("a finished run for every interval that ended under the hog", all_settled, 420)
        for at in due:
            run = found[at]
            tis = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]
            states = {t["task_id"]: t["state"] for t in tis}
            assert states.get("decide") == "success", (datetime.fromtimestamp(at, tz=UTC), run["state"], states)
    finally:
        for hog in hogs:
            if hog.poll() is None:
                hog.kill()
                hog.wait()
        server.stop()
