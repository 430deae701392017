"""Everything the api-server serves for us sits behind Airflow's authentication: these tests run the
normal auth manager, not the all-admins mode the other integration tests use for headless screenshots."""

from __future__ import annotations

import time

import pytest
import requests

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def secured(airflow_server_factory, tmp_path_factory):
    """One Airflow with logins required, its data folder holding a Data Docs page and a secret beside it."""
    root = tmp_path_factory.mktemp("secured")
    page = root / "data" / "validation-docs" / "wc" / "epoch=1" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html>epoch 1: 70 of 70 expectations met</html>")
    (root / "data" / "secret.txt").write_text("not for the web")
    env = {"AIRFLOW_ALL_ADMINS": "0", "DS2_DATA_DIR": str(root / "data")}
    return airflow_server_factory(dags_folder=root / "dags", extra_env=env, reuse=False)


def test_validation_docs_refuse_anonymous_requests(secured):
    url = f"{secured.base_url}/ds2-docs/wc/epoch=1/"
    anonymous = requests.get(url, timeout=30)
    assert anonymous.status_code == 401 and "expectations" not in anonymous.text
    assert requests.get(url, cookies={"_token": "forged"}, timeout=30).status_code in (401, 403)
    with_cookie = requests.get(url, cookies={"_token": secured.token()}, timeout=30)  # how the UI's browser asks
    assert with_cookie.status_code == 200 and "70 of 70" in with_cookie.text
    assert requests.get(url, headers={"Authorization": f"Bearer {secured.token()}"}, timeout=30).status_code == 200
    outside = requests.get(f"{secured.base_url}/ds2-docs/..%2F..%2Fsecret.txt", cookies={"_token": secured.token()}, timeout=30)
    assert outside.status_code == 404 and "not for the web" not in outside.text


def test_each_instance_gets_its_own_admin_password(secured):
    password_file = secured.home / "admin-password"
    password = password_file.read_text().strip()
    assert len(password) >= 20 and password != "admin" and password_file.stat().st_mode & 0o077 == 0
    # Never printed, not even by the 'up' that generated it: its output ends up in logs. 'up' says where it is.
    assert password not in secured.up_log and str(password_file) in secured.up_log
    refused = requests.post(f"{secured.base_url}/auth/token", json={"username": "admin", "password": "admin"}, timeout=30)
    assert refused.status_code in (401, 403)
    assert secured.token()  # the generated one works
    again = secured.script("up")  # idempotent: the password stays
    assert password_file.read_text().strip() == password and password not in again.stdout + again.stderr


APPROVAL_DAG = """
import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, task

from autoscaler.record import audit, outcomes
from autoscaler.rescale.result import RescaleResult
from ds2_airflow.operators.approval import RescaleApprovalOperator

with DAG("gate", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    approve = RescaleApprovalOperator(
        task_id="approve", subject="Rescale gated", body="Count 1 -> 4", defaults="Reject",
        response_timeout=timedelta(minutes=10), assigned_users=[{"id": "alice", "name": "alice"}],
    )

    @task
    def record(**context):
        # The record task's path: who answered goes into the epoch's ACTIONS row.
        now = datetime.now(UTC)
        rescaled = RescaleResult("a1", "savepoint-restart", "succeeded", None, None, {"Count": 1}, {"Count": 4},
                                 None, 1.0, "rescaled", now, now).to_dict()
        answer = context["ti"].xcom_pull(task_ids="approve", key="answer")
        run = outcomes.EpochRun("a1", "savepoint-restart", {"Count": 1}, "rescale Count 1->4", answer, rescaled)
        audit.record_action(os.environ["DS2_DATA_DIR"] + "/store", outcomes.epoch_row("gate", 7, run))

    approve >> record()
"""


def test_only_an_assigned_approver_can_answer_and_the_audit_names_them(airflow_server_factory, tmp_path_factory):
    from autoscaler.store.parquet import read_epochs
    from autoscaler.store.schemas import ACTIONS

    root = tmp_path_factory.mktemp("approvers")
    (root / "dags").mkdir()
    (root / "dags" / "gate.py").write_text(APPROVAL_DAG)
    env = {"AIRFLOW_ALL_ADMINS": "0", "AIRFLOW_USERS": "alice:user,bob:user", "DS2_DATA_DIR": str(root / "data")}
    server = airflow_server_factory(dags_folder=root / "dags", extra_env=env, reuse=False)

    def login(user: str) -> dict[str, str]:
        password = (server.home / "user-passwords" / user).read_text().strip()
        r = requests.post(f"{server.base_url}/auth/token", json={"username": user, "password": password}, timeout=30)
        r.raise_for_status()
        return {"Authorization": f"Bearer {r.json()['access_token']}"}

    server.wait_dag("gate")
    server.api("PATCH", "/api/v2/dags/gate", json={"is_paused": False})
    run_id = server.trigger("gate")["dag_run_id"]
    task = f"/api/v2/dags/gate/dagRuns/{run_id}/taskInstances/approve"
    deadline, awaiting_since = time.monotonic() + 120, None
    while True:  # parked, and for a few seconds (an instant answer races the scheduler; see the scheduler test)
        state = server.api("GET", task)["state"]
        awaiting_since = (awaiting_since or time.monotonic()) if state == "awaiting_input" else None
        if awaiting_since and time.monotonic() - awaiting_since >= 3:
            break
        assert time.monotonic() < deadline, f"the approval never waited for input ({state})"
        time.sleep(0.5)
    answer = {"chosen_options": ["Approve"], "params_input": {}}
    refused = requests.patch(f"{server.base_url}{task}/-1/hitlDetails", json=answer, headers=login("bob"), timeout=30)
    assert refused.status_code == 403, refused.text  # bob is a user, but not an approver of this gate
    accepted = requests.patch(f"{server.base_url}{task}/-1/hitlDetails", json=answer, headers=login("alice"), timeout=30)
    assert accepted.status_code == 200, accepted.text
    assert server.wait_run("gate", run_id, timeout_s=120) == "success"
    row = read_epochs(root / "data" / "store", ACTIONS, "gate").to_pylist()[0]
    assert row["approved_by"] == "alice" and row["outcome"] == "succeeded", row
