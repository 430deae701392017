"""The autoscaler's pages in a real Airflow UI, in a real browser (Playwright driving Debian's chromium).

The store is a closed-loop lab run's (``tests/fixtures/views``: step-up-down under ds2_plus, three
rescales of Count), registered in a jobs config; the api-server loads the project's plugins. The test
opens the job's tab on its DAG page and the fleet page as a user would, reads what each chart drew
from the page's SVG, follows a link to an epoch's reasons, checks that an anonymous request is
refused, and takes the README's screenshots.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT
from tests.integration.airflow_fixtures import load_screenshot_module

pytestmark = pytest.mark.slow

FIXTURE = ROOT / "tests" / "fixtures" / "views"
JOB = "lab-step-up-down-ds2_plus"
DAG_ID = "ds2_lab_step_up_down_ds2_plus"
SCREENSHOTS = Path(os.environ.get("DS2_SCREENSHOTS_DIR") or ROOT / "docs" / "screenshots")

# Per chart, what the page must have drawn: SVG marks, and the legend's labels.
CHART_SERIES_JS = """
name => {
  const root = document.getElementById(`chart-${name}`);
  const count = sel => root.querySelectorAll(sel).length;
  return {
    rendered: root.dataset.rendered || "",
    lines: count("g.mark-line path"),
    areas: count("g.mark-area path"),
    rects: count("g.mark-rect path"),
    points: count("g.mark-symbol path"),
    rules: count("g.mark-rule line"),
    legend: [...root.querySelectorAll("g.role-legend-label text")].map(t => t.textContent),
  };
}
"""


@pytest.fixture(scope="module")
def views_server(airflow_server_factory, tmp_path_factory):
    data = tmp_path_factory.mktemp("views-data")
    shutil.copytree(FIXTURE / "store", data / "store")
    alert = {"at": datetime.now(UTC).isoformat(), "dag_id": DAG_ID, "task_id": "rescale", "run_id": "r",
             "problem": "the job was left not running"}  # fmt: skip
    (data / "alerts.jsonl").write_text(json.dumps(alert) + "\n")
    # Real logins (not the all-admins mode of the other UI tests): an anonymous request must be refused.
    env = {"AIRFLOW_ALL_ADMINS": "0", "DS2_DATA_DIR": str(data), "DS2_JOBS_CONFIG": str(FIXTURE / "jobs.yaml")}
    server = airflow_server_factory(extra_env=env, reuse=False)
    server.wait_dag(DAG_ID, timeout_s=120)
    return server


def test_every_page_and_api_refuses_an_anonymous_request(views_server):
    for path in (f"/dags/{DAG_ID}", f"/dags/{DAG_ID}/epochs/1", "/fleet", "/api/fleet", f"/api/dags/{DAG_ID}/series",
                 "/static/vega.js"):  # fmt: skip
        r = requests.get(f"{views_server.base_url}/ds2-views{path}", timeout=30)
        assert r.status_code == 401, (path, r.status_code, r.text[:200])
        forged = requests.get(f"{views_server.base_url}/ds2-views{path}", cookies={"_token": "forged"}, timeout=30)
        assert forged.status_code in (401, 403), path
    bad = requests.get(f"{views_server.base_url}/ds2-views/dags/..%2Fx", headers=_bearer(views_server), timeout=30)
    assert bad.status_code in (404, 422)


def _log_in(page, server, path: str) -> None:
    page.goto(f"{server.base_url}{path}", timeout=60_000)
    page.locator("input[name=username]").wait_for(timeout=60_000)
    page.locator("input[name=username]").fill("admin")
    page.locator("input[name=password]").fill((server.home / "admin-password").read_text().strip())
    page.locator("button[type=submit]").click()
    page.wait_for_url(f"**{path}", timeout=60_000)


def _bearer(server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token()}"}


def test_the_read_api_serves_the_job_and_the_fleet_as_json(views_server):
    series = requests.get(f"{views_server.base_url}/ds2-views/api/dags/{DAG_ID}/series", headers=_bearer(views_server),
                          timeout=60).json()  # fmt: skip
    # The default range is the last 6 h, or the job's newest 6 h when it has no epoch in them (a stored run).
    assert series["job"] == JOB and (series["note"] == "" or series["note"].startswith("no epoch recorded since"))
    rescales = [e for e in series["events"] if e["outcome"] == "succeeded"]
    assert rescales and all(e["downtime_s"] > 0 for e in rescales)
    assert {p["operator"] for p in series["parallelism"]} >= {"Count", "Parse"}
    fleet = requests.get(f"{views_server.base_url}/ds2-views/api/fleet", headers=_bearer(views_server), timeout=60).json()
    (row,) = [r for r in fleet if r["job"] == JOB]
    assert row["alerts"] == 1 and row["current"]["Count"] >= 1


def test_the_job_view_and_the_fleet_page_render_their_series_in_a_browser(views_server):
    from playwright.sync_api import sync_playwright

    chromium = load_screenshot_module().find_chromium()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            # Logged in through the UI's login form, then the job's tab on its DAG page (an iframe of our page).
            _log_in(page, views_server, f"/dags/{DAG_ID}/plugin/ds2-autoscaler")
            frame = page.frame_locator("iframe").first
            frame.locator("#chart-parallelism[data-rendered=yes]").wait_for(timeout=60_000)
            view = next(f for f in page.frames if "/ds2-views/dags/" in f.url)
            view.evaluate("window.ds2Rendered")
            charts = {name: view.evaluate(CHART_SERIES_JS, name) for name in ("load", "backlog", "parallelism")}
            assert all(c["rendered"] == "yes" for c in charts.values()), charts
            assert charts["load"]["lines"] >= 2 and {"arrival rate", "throughput"} <= set(charts["load"]["legend"]), charts
            assert charts["backlog"]["areas"] >= 1, charts
            par = charts["parallelism"]
            assert par["lines"] >= 4 and par["points"] > 10 and par["rules"] >= 1, par
            assert {"Count", "Parse", "Sink: Writer", "parallelism", "recommended", "succeeded"} <= set(par["legend"]), par
            assert charts["load"]["rects"] >= 1  # the warm-up epochs after each rescale are shaded
            page.screenshot(path=str(SCREENSHOTS / "job-view.png"), full_page=True)

            # The reasons of a rescale's epoch, one click away.
            frame.locator("#actions a").first.click()
            frame.locator("#operators").wait_for(timeout=30_000)
            text = frame.locator("#operators").inner_text()
            assert "Count" in text and "r/s" in text, text

            # The fleet page, from the nav; its row links to the job's tab.
            page.goto(f"{views_server.base_url}/plugin/ds2-fleet", timeout=60_000)
            fleet = page.frame_locator("iframe").first
            row = fleet.locator(f'tr[data-job="{JOB}"]')
            row.wait_for(timeout=60_000)
            cells = row.locator("td").all_inner_texts()
            # The fixture's alert, and any the reconciler raised meanwhile (it finds no Flink job here).
            assert cells[0] == JOB and "Count" in cells[1] and int(cells[-2]) >= 1, cells
            assert "the job was left not running" in (row.locator("td").nth(len(cells) - 2).get_attribute("title") or "")
            assert row.locator("a").first.get_attribute("href") == f"/dags/{DAG_ID}/plugin/ds2-autoscaler"
            page.screenshot(path=str(SCREENSHOTS / "fleet.png"), full_page=True)
        finally:
            browser.close()
