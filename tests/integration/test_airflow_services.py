"""scripts/airflow.sh end to end: the four processes come up healthy, a DAG is registered unpaused,
a run triggered over REST runs a task on the LocalExecutor (execution API, shared JWT secret), the UI
renders in headless chromium, and 'down' stops exactly the processes it started."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
import time

import pytest
import requests

from tests.conftest import ROOT
from tests.integration.airflow_fixtures import load_screenshot_module, process_alive

pytestmark = pytest.mark.slow

DAG_ID = "ds2_services_smoke"
DAG_FILE = textwrap.dedent(
    f'''
    from datetime import datetime

    from airflow.sdk import dag, task


    @dag(dag_id="{DAG_ID}", schedule=None, start_date=datetime(2024, 1, 1), catchup=False, tags=["ds2-test"])
    def smoke():
        @task
        def answer() -> int:
            return 42

        @task
        def check(value: int) -> str:
            assert value == 42, value
            return "ok"

        check(answer())


    smoke()
    '''
)


def test_airflow_services_up_run_screenshot_down(airflow_server_factory, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "smoke.py").write_text(DAG_FILE)

    server = airflow_server_factory(dags_folder=dags, extra_env={"DS2_TEST_MARKER": "services"}, reuse=False)
    health = server.health()
    assert {k: health[k]["status"] for k in ("metadatabase", "scheduler", "dag_processor", "triggerer")} == dict.fromkeys(
        ("metadatabase", "scheduler", "dag_processor", "triggerer"), "healthy"
    ), health
    pids = server.pids()
    assert set(pids) == {"api-server", "scheduler", "dag-processor", "triggerer"}
    assert all(process_alive(pid, start) for pid, start in pids.values())
    # The instance's environment: what the CLI and the processes see.
    assert server.env["AIRFLOW_HOME"] == str(server.home)
    assert server.env["DS2_TEST_MARKER"] == "services"
    assert server.env["PATH"].split(":")[0].endswith("/.venv/bin")
    # The metadata DB is this instance's own database on the project's PostgreSQL, on loopback.
    assert re.fullmatch(
        r"postgresql\+psycopg2://airflow_[0-9a-f]{12}:[A-Za-z0-9]{32}@127\.0\.0\.1:\d+/airflow_[0-9a-f]{12}",
        server.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
    )
    # The CLI hint 'up' printed works exactly as printed, from a shell that knows nothing else.
    hint = re.search(r"CLI against this instance: (.+)", server.up_log)
    assert hint, server.up_log
    clean = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    res = subprocess.run(["bash", "-c", hint.group(1)], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr

    dag = server.wait_dag(DAG_ID, timeout_s=60)
    assert dag["is_paused"] is False

    run = server.trigger(DAG_ID)
    t0 = time.monotonic()
    assert server.wait_run(DAG_ID, run["dag_run_id"], timeout_s=90) == "success"
    run_s = time.monotonic() - t0
    tis = server.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances")
    assert {t["task_id"]: t["state"] for t in tis["task_instances"]} == {"answer": "success", "check": "success"}
    xcom = server.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/answer/xcomEntries/return_value")
    assert xcom["value"] in (42, "42")

    # 'scripts/airflow.sh token' logs in with the generated password (handed to curl on its stdin, never
    # on a command line) and its JWT reads the API.
    token = server.script("token").stdout.strip()
    r = requests.get(f"{server.base_url}/api/v2/dags/{DAG_ID}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200 and r.json()["dag_id"] == DAG_ID, r.text

    # The CLI against the same home sees the same DAG, and so does the printed hint.
    assert DAG_ID in server.airflow("dags", "list", "-o", "plain").stdout
    res = subprocess.run(["bash", "-c", hint.group(1)], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and DAG_ID in res.stdout, res.stdout + res.stderr

    # The UI: the DAG's grid, logged in through the all-admins token URL.
    t0 = time.monotonic()
    png = server.screenshot(f"/dags/{DAG_ID}", tmp_path / "grid.png")
    shot_s = time.monotonic() - t0
    summary = load_screenshot_module().png_summary(png)
    assert (summary.width, summary.height) == (1400, 900)
    assert summary.size_bytes > 20_000, summary
    assert summary.colors > 200, summary  # a blank or error page has a handful
    assert summary.background_share < 0.98, summary
    dom = server.dom(f"/dags/{DAG_ID}")
    assert DAG_ID in dom and ">answer<" in dom and ">check<" in dom, dom[:2000]  # the grid lists the tasks

    server.stop()
    for name, (pid, start) in pids.items():
        assert not process_alive(pid, start), f"{name} (pid {pid}) still runs after down"
    assert not list((server.home / "pids").glob("*.pid"))
    assert server.script("status", check=False).returncode == 3
    print(f"airflow up {server.up_seconds:.1f} s, run {run_s:.1f} s, screenshot {shot_s:.1f} s")
