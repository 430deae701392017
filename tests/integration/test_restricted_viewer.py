"""A user who may read one job's DAG and not another's, under an auth manager with per-DAG permissions.

Airflow runs the FAB provider's auth manager (``AIRFLOW_AUTH_MANAGER=fab``). Two jobs are registered:
the lab run of ``tests/fixtures/views`` and a second one. Carol's role is FAB's Viewer without its
read access to every DAG, plus read access to the first job's DAG alone. Against the API (her JWT) and
in a real browser (Playwright driving Debian's chromium, logged in through FAB's login form), the
first job's view, its read API and its Data Docs page serve her; the second job's view, API and Data
Docs are refused, and the fleet page lists only the first. (The role also reads Plugins: Airflow's UI
shows a plugin's pages, the job's tab and the fleet page, only to who may, and FAB's Viewer may not.)
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys

import pytest
import requests
import yaml

from tests.conftest import ROOT
from tests.integration.airflow_fixtures import load_screenshot_module

pytestmark = [pytest.mark.slow, pytest.mark.faults]

FIXTURE = ROOT / "tests" / "fixtures" / "views"
SEEN, HIDDEN = "lab-step-up-down-ds2_plus", "other-job"
SEEN_DAG, HIDDEN_DAG = "ds2_lab_step_up_down_ds2_plus", "ds2_other_job"


def docs_page(job: str) -> str:
    return f"validations/ds2-metrics/{job}/{job}-epoch-1/20261128T000000/page.html"


ROLE = """
import os
from airflow.providers.fab.auth_manager.cli_commands.utils import get_application_builder

with get_application_builder() as appbuilder:
    sm = appbuilder.sm
    role = sm.find_role("ds2-one-job") or sm.add_role("ds2-one-job")
    for permission in sm.find_role("Viewer").permissions:
        if permission.resource.name != "DAGs":  # Viewer reads every DAG: everything else of it, not that
            sm.add_permission_to_role(role, permission)
    sm.add_permission_to_role(role, sm.create_permission("can_read", "DAG:" + os.environ["SEEN_DAG"]))
    # The UI lists a plugin's pages (the job's tab, the fleet page) to who may read Plugins; FAB's Viewer may not.
    sm.add_permission_to_role(role, sm.create_permission("can_read", "Plugins"))
    if not sm.find_user("carol"):
        assert sm.add_user("carol", "Carol", "Reader", "carol@localhost", role, os.environ["CAROL_PASSWORD"])
"""


@pytest.fixture(scope="module")
def fab_server(airflow_server_factory, tmp_path_factory):
    data = tmp_path_factory.mktemp("restricted-data")
    shutil.copytree(FIXTURE / "store", data / "store")
    for job in (SEEN, HIDDEN):  # GX's Data Docs layout: validations/<suite>/<job>/<run>/<time>/<page>
        page = data / "validation-docs" / docs_page(job)
        page.parent.mkdir(parents=True)
        page.write_text(f"<html>{job}: 70 of 70 expectations met</html>")
    (data / "validation-docs" / "index.html").write_text("<html>every job's validations</html>")
    config = yaml.safe_load((FIXTURE / "jobs.yaml").read_text())
    config["jobs"].append({**config["jobs"][0], "name": HIDDEN, "flink_job_name": HIDDEN})
    (data / "jobs.yaml").write_text(yaml.safe_dump(config))
    env = {"AIRFLOW_AUTH_MANAGER": "fab", "AIRFLOW_ALL_ADMINS": "0", "DS2_DATA_DIR": str(data),
           "DS2_JOBS_CONFIG": str(data / "jobs.yaml")}  # fmt: skip
    server = airflow_server_factory(extra_env=env, reuse=False)
    server.wait_dag(SEEN_DAG, timeout_s=120)
    server.wait_dag(HIDDEN_DAG, timeout_s=120)
    password = secrets.token_urlsafe(18)
    made = subprocess.run([sys.executable, "-c", ROLE], env={**server.env, "SEEN_DAG": SEEN_DAG, "CAROL_PASSWORD": password},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    server.carol_password = password
    return server


def carol(server) -> dict[str, str]:
    r = requests.post(f"{server.base_url}/auth/token", json={"username": "carol", "password": server.carol_password},
                      timeout=30)  # fmt: skip
    assert r.status_code in (200, 201), r.text
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


def test_the_api_serves_carol_one_job_and_refuses_the_other(fab_server):
    base, auth = fab_server.base_url, carol(fab_server)

    def status(path: str) -> int:
        return requests.get(f"{base}{path}", headers=auth, timeout=60).status_code

    assert status(f"/api/v2/dags/{SEEN_DAG}") == 200 and status(f"/api/v2/dags/{HIDDEN_DAG}") == 403
    assert status(f"/ds2-views/api/dags/{SEEN_DAG}/series") == 200
    assert status(f"/ds2-views/api/dags/{HIDDEN_DAG}/series") == 403
    assert status(f"/ds2-views/dags/{SEEN_DAG}") == 200 and status(f"/ds2-views/dags/{HIDDEN_DAG}") == 403
    fleet = requests.get(f"{base}/ds2-views/api/fleet", headers=auth, timeout=60).json()
    assert [r["job"] for r in fleet] == [SEEN], fleet
    assert status(f"/ds2-docs/{docs_page(SEEN)}") == 200 and status(f"/ds2-docs/{docs_page(HIDDEN)}") == 403
    assert status("/ds2-docs/index.html") == 403  # the site's index lists every job: only for who reads them all
    admin = {"Authorization": f"Bearer {fab_server.token()}"}  # the admin reads both
    assert requests.get(f"{base}/ds2-docs/{docs_page(HIDDEN)}", headers=admin, timeout=60).status_code == 200


def test_carol_sees_one_job_in_a_browser_and_is_refused_the_other(fab_server):
    from playwright.sync_api import sync_playwright

    chromium = load_screenshot_module().find_chromium()
    base = fab_server.base_url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"{base}/dags/{SEEN_DAG}/plugin/ds2-autoscaler", timeout=60_000)
            page.locator("input[name=username]").wait_for(timeout=60_000)  # FAB's login form
            page.locator("input[name=username]").fill("carol")
            page.locator("input[name=password]").fill(fab_server.carol_password)
            page.locator("input[name=password]").press("Enter")
            page.wait_for_url(f"**/dags/{SEEN_DAG}/**", timeout=60_000)
            frame = page.frame_locator("iframe").first
            frame.locator("#chart-parallelism[data-rendered=yes]").wait_for(timeout=60_000)  # her job's view renders

            refused = page.goto(f"{base}/ds2-views/dags/{HIDDEN_DAG}", timeout=60_000)
            assert refused is not None and refused.status == 403, refused and refused.status
            docs = page.goto(f"{base}/ds2-docs/{docs_page(HIDDEN)}", timeout=60_000)
            assert docs is not None and docs.status == 403 and "expectations" not in page.content()
            mine = page.goto(f"{base}/ds2-docs/{docs_page(SEEN)}", timeout=60_000)
            assert mine is not None and mine.status == 200 and "70 of 70" in page.content()

            page.goto(f"{base}/plugin/ds2-fleet", timeout=60_000)
            fleet = page.frame_locator("iframe").first
            fleet.locator(f'tr[data-job="{SEEN}"]').wait_for(timeout=60_000)
            assert fleet.locator(f'tr[data-job="{HIDDEN}"]').count() == 0
        finally:
            browser.close()
