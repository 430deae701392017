"""The scaling DAG under a real scheduler: an approval gate answered over the REST API, and a backfill.

One job requiring approval (approver ``admin``, 20 s timeout, "reject" on timeout) against the
under-provisioned test job. In turn: the request times out (rejected, nothing changes), is
rejected over the REST API (nothing changes), is approved (rescaled 1 -> 4). Then a backfill
created over the REST API while the live schedule runs, over three past epochs, recomputes their decisions in one Spark
application and neither asks for approval nor rescales. Screenshots of the grid and of the
pending approval are taken in headless Chromium along the way.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime

import pytest
import requests

from autoscaler.config.jobs import load_jobs
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, environment, job_entry, pending_approval, wait_parked

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.scheduler_long]
INTERVAL_S = 20
DAG = "ds2_gated"
SCREENSHOTS = ROOT / "docs" / "screenshots"


def _pending(server):
    return pending_approval(server, DAG)


def _awaiting(server, detail, settle_s=3.0):
    wait_parked(server, DAG, detail, settle_s)


def _action(store, epoch):
    rows = [a for a in read_epochs(store, ACTIONS, "gated").to_pylist() if a["epoch"] == epoch]
    return rows[0] if rows else None


def _value(value):
    """An XCom value from the REST API (JSON text or already parsed)."""
    return json.loads(value) if isinstance(value, str) else value


def _user(answer):
    """Who answered, as the hitlDetails PATCH response names them (the test server runs all-admins)."""
    user = answer.get("responded_by_user") or answer.get("responded_by") or {}
    return user.get("name") or user.get("id")


def _keep_screenshot(path):
    """With DS2_UPDATE_SCREENSHOTS=1 the README's screenshots are refreshed from this run."""
    if os.environ.get("DS2_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / path.name)


def test_approval_gate_and_backfill_under_a_real_scheduler(
    flink, spark_engine, airflow_server_factory, prometheus, tmp_path_factory
):
    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    data = tmp_path_factory.mktemp("ds2-gated")
    approval = {"required": True, "approvers": ["admin"], "timeout": "20s", "on_timeout": "reject"}
    entries = [job_entry(flink, "gated", INTERVAL_S, approval=approval)]
    env = environment(flink, data / "jobs.yaml", data, entries, spark_engine.connection)
    env.update(prometheus.airflow_env)  # the tasks send the autoscaler's metrics (and Airflow its own) there
    job = load_jobs(data / "jobs.yaml")[0]
    store = data / "store"
    shots = tmp_path_factory.mktemp("screenshots")
    server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env)
    server.wait_dag(DAG)
    assert server.api("GET", "/api/v2/pools/ds2_gated")["slots"] == 1
    original = flink.client.running_job("ds2-testjob").id

    def finished(detail):
        """Wait for the run holding ``detail`` to finish; its state and the epoch's action row."""
        run_id = detail["task_instance"]["dag_run_id"]
        state = server.wait_run(DAG, run_id, timeout_s=120)
        run = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}")
        epoch = job.epoch_of(datetime.fromisoformat(run["data_interval_end"]))
        return state, poll("the action row", lambda: _action(store, epoch), 30)

    # 1. Nobody answers: after the timeout the configured answer (reject) applies.
    detail = poll("a pending approval", lambda: _pending(server), 240)
    assert "| Count | 1 → **4** |" in detail["body"] and detail["subject"].startswith("Rescale gated")
    # The body links the epoch's validation result, served by the api-server (ds2_airflow/docs_plugin.py).
    link = re.search(r"\[Data Docs\]\((http[^)]+)\)", detail["body"])
    assert link and link.group(1).startswith(server.base_url + "/ds2-docs/"), detail["body"]
    # (This server runs all-admins; tests/integration/test_auth.py checks that anonymous requests are refused.)
    page = requests.get(link.group(1), cookies={"_token": server.token()}, timeout=30)
    assert page.status_code == 200 and "gated" in page.text and "<html" in page.text.lower()
    server.screenshot(
        f"/dags/{DAG}/runs/{detail['task_instance']['dag_run_id']}/tasks/approve/required_actions", shots / "approval.png"
    )
    server.screenshot("/required_actions", shots / "required-actions.png")
    server.screenshot(f"/dags/{DAG}", shots / "grid.png")
    _, action = finished(detail)
    assert action["outcome"] == "rejected" and "no answer in time" in action["message"], action
    assert flink.client.running_job("ds2-testjob").id == original
    timed_out_epoch = action["epoch"]

    # 2. Rejected over the REST API.
    detail = poll("the next pending approval", lambda: _pending(server), 180)
    ti = detail["task_instance"]
    # The run above outlasted its interval twice over (the 20-s approval wait at a 10-s interval); the
    # intervals that ended meanwhile run late, in order (ds2_airflow.timetable): the next run decides
    # the very next epoch. Airflow's own timetable with catchup=False skipped to the latest one.
    run = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{ti['dag_run_id']}")
    assert job.epoch_of(datetime.fromisoformat(run["data_interval_end"])) == timed_out_epoch + 1, run
    path = f"/api/v2/dags/{DAG}/dagRuns/{ti['dag_run_id']}/taskInstances/approve/-1/hitlDetails"
    _awaiting(server, detail)
    answer = server.api("PATCH", path, json={"chosen_options": ["Reject"], "params_input": {}})
    server.api("PATCH", path, json={"chosen_options": ["Approve"], "params_input": {}}, ok=(409,))  # answered once
    _, action = finished(detail)
    assert action["outcome"] == "rejected" and action["approved_by"] == _user(answer), (action, answer)
    assert flink.client.running_job("ds2-testjob").id == original
    rejected_epoch = action["epoch"]

    # 3. Approved: the rescale runs and is recorded with who approved it.
    detail = poll("the next pending approval", lambda: _pending(server), 180)
    ti = detail["task_instance"]
    path = f"/api/v2/dags/{DAG}/dagRuns/{ti['dag_run_id']}/taskInstances/approve/-1/hitlDetails"
    _awaiting(server, detail)
    answer = server.api("PATCH", path, json={"chosen_options": ["Approve"], "params_input": {}})
    state, action = finished(detail)
    assert state == "success" and action["outcome"] == "succeeded", action
    assert action["approved_by"] == _user(answer) and action["approved_by"], (action, answer)
    running = flink.client.running_job("ds2-testjob")
    assert running.id != original and flink.client.job(running.id).parallelism["Count"] == 4

    # The next epoch (its window spans the restart, or is a short window of the new job when the
    # approval took long): a green no-op run -- warm-up, not decidable, or no change.
    def next_action():
        later = [a for a in read_epochs(store, ACTIONS, "gated").to_pylist() if a["epoch"] > action["epoch"]]
        return min(later, key=lambda a: a["epoch"]) if later else None

    server.screenshot(f"/dags/{DAG}/runs/{ti['dag_run_id']}/tasks/decide", shots / "decision-log.png")
    after = poll("the epoch after the rescale", next_action, 120)
    assert after["outcome"] == "noop", after
    # An epoch that ended while the approval was pending was measured at Count 1: it is held as measured
    # before the rescale took effect, never acted on (it would rescale the job at 4 again).
    reasons = ("not decidable", "warm-up", "no change", "measured before the rescale")
    assert any(why in after["message"] for why in reasons), after

    # 4. Backfill three past epochs ending with the rejected one: one Spark application,
    #    decisions marked backfill, no approval, no rescale, no action row.
    actions_before = {a["epoch"]: a for a in read_epochs(store, ACTIONS, "gated").to_pylist()}
    first = rejected_epoch - 2
    start = job.epoch_start(first)
    # Created as the UI does (POST /api/v2/backfills) while the live schedule keeps running: on
    # SQLite this met "Database is locked" (503); the metadata DB is PostgreSQL now.
    server.api(
        "POST",
        "/api/v2/backfills",
        json={
            "dag_id": DAG,
            "from_date": start.isoformat(),
            "to_date": job.epoch_start(rejected_epoch).isoformat(),
            "reprocess_behavior": "completed",
            "max_active_runs": 1,
        },
    )

    def backfill_runs():
        runs = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns", params={"run_type": "backfill"})["dag_runs"]
        return runs if len(runs) == 3 and all(r["state"] in ("success", "failed") for r in runs) else None

    runs = poll("three finished backfill runs", backfill_runs, 300, 2)
    assert {r["state"] for r in runs} == {"success"}, runs
    policies = []
    for r in sorted(runs, key=lambda r: r["logical_date"]):
        tis = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{r['dag_run_id']}/taskInstances")["task_instances"]
        states = {t["task_id"]: t["state"] for t in tis}
        assert states["collect"] == "skipped" and states["approve"] == "skipped" and states["rescale"] == "skipped", states
        value = server.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{r['dag_run_id']}/taskInstances/policy/xcomEntries/return_value")
        policies.append(_value(value["value"]))
    assert policies[0]["batched"] is False and policies[0]["epochs"] == 3, policies
    assert policies[0]["engine"] == "spark_connect", policies  # the warm engine, no spark-submit
    assert all(p["batched"] for p in policies[1:]), policies
    assert (policies[0]["from_epoch"], policies[0]["to_epoch"]) == (first, rejected_epoch), policies
    epochs = range(first, rejected_epoch + 1)
    decisions = read_epochs(store, DECISIONS, "gated", epochs).to_pylist()
    assert decisions and {d["run_type"] for d in decisions} == {"backfill"}, decisions
    recomputed = [d for d in decisions if d["epoch"] == rejected_epoch and d["operator_name"] == "Count"]
    assert recomputed and recomputed[0]["target_parallelism"] == 4  # the same decision, recomputed
    actions_after = {a["epoch"]: a for a in read_epochs(store, ACTIONS, "gated").to_pylist()}
    assert all(actions_after.get(e) == actions_before.get(e) for e in epochs)  # backfill records no action
    assert flink.client.running_job("ds2-testjob").id == running.id  # no rescale
    server.screenshot(f"/dags/{DAG}/backfills", shots / "backfills.png")

    # 5. What the record and policy tasks sent reached Prometheus, as Airflow's [metrics] said.
    def counted_as_recorded() -> dict[str, float] | None:
        """Prometheus's decisions by outcome, once they equal the action rows (the live schedule goes on)."""
        by_outcome: dict[str, float] = {}
        for a in read_epochs(store, ACTIONS, "gated").to_pylist():
            by_outcome[a["outcome"]] = by_outcome.get(a["outcome"], 0) + 1
        counted = prometheus.query('airflow_ds2_decisions_total{job="gated"}')
        return counted if counted == by_outcome else None

    decisions = poll("every recorded epoch counted in Prometheus", counted_as_recorded, 60)
    assert decisions["rejected"] >= 2 and decisions["succeeded"] == 1, decisions
    downtime = prometheus.query('airflow_ds2_rescale_downtime_seconds{job="gated",outcome="succeeded"}')
    assert downtime == {"succeeded": pytest.approx(action["downtime_s"])}
    assert prometheus.query('airflow_ds2_parallelism_current{job="gated",operator="Count"}') == {"Count": 4.0}
    assert prometheus.query('airflow_ds2_policy_duration_seconds{job="gated"}')[""] > 0
    assert prometheus.query('airflow_ds2_decision_lag_seconds{job="gated"}')[""] > 0
    for png in shots.glob("*.png"):
        assert png.stat().st_size > 10_000, png
        _keep_screenshot(png)
