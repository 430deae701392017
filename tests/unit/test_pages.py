"""The job view and fleet pages: Vega-Lite specs carrying each series, reasons one click away, escaping, sorting."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.observe import pages
from autoscaler.observe.series import job_series
from autoscaler.observe.views import fleet_view, job_alerts, job_view, recent_alerts
from tests.unit.test_views import E0, INTERVAL, T0, store

LINKS = pages.Links(bundle="/v/static/vega.js", epoch_prefix="/v/dags/ds2_j/epochs/", fleet="/v/fleet")


def _specs(html: str) -> dict:
    return json.loads(re.search(r"const specs = (\{.*\});", html).group(1))


def _layer_values(spec: dict) -> list[list[dict]]:
    return [spec["datasets"][layer["data"]["name"]] for layer in spec["layer"]]


def test_the_job_page_embeds_each_series_and_links_each_epoch_to_its_reasons(tmp_path):
    root = store(tmp_path)
    series = job_series(root, "j", INTERVAL, E0, E0 + 4)
    recent = job_view(root, "j", INTERVAL, E0, E0 + 4)
    html = pages.job_page(series, title="j <b>", subtitle="Flink job x", links=LINKS, hours=6, recent=recent)
    specs = _specs(html)
    assert set(specs) == {"load", "backlog", "parallelism"}
    assert "$schema" in specs["load"] and "vega-lite" in specs["load"]["$schema"]
    shading, lines = _layer_values(specs["load"])
    assert {r["state"] for r in shading} == {"warm-up", "quarantined", "lost", "recommendation-only"}
    assert {(r["series"], r["value"]) for r in lines if r["time"] == T0.isoformat()} == {
        ("arrival rate", 20_000),
        ("throughput", 18_000),
    }
    _, backlog = _layer_values(specs["backlog"])
    assert [r["backlog"] for r in backlog] == [50_000]
    _, lines, points, rules = _layer_values(specs["parallelism"])
    assert {(r["operator"], r["what"], r["value"]) for r in lines if r["epoch"] == E0} == {
        ("COUNT", "parallelism", 1),
        ("COUNT", "recommended", 4),
    }
    href = next(layer for layer in specs["parallelism"]["layer"] if layer["mark"]["type"] == "point")["transform"]
    assert href == [{"calculate": '"/v/dags/ds2_j/epochs/" + datum.epoch', "as": "href"}] and points[0]["epoch"] == E0
    assert [(r["outcome"], r["change"]) for r in rules] == [("succeeded", "COUNT 1 -> 4"), ("recommended", "COUNT 1 -> 1")]
    # The newest epochs' reasons are one click away (a <details>), and every epoch links to its page.
    assert "<details><summary>2 operators</summary>" in html and "count needs 6" in html
    assert f'href="/v/dags/ds2_j/epochs/{E0 + 4}"' in html
    assert "j &lt;b&gt;" in html and "j <b>" not in html  # escaped
    hostile = replace(series, events=[series.events[0] | {"message": "</script><script>alert(1)</script>"}])
    page = pages.job_page(hostile, title="j", subtitle="", links=LINKS, hours=6, recent=recent)
    assert "<script>alert(1)" not in page and "&lt;/script&gt;&lt;script&gt;alert(1)" in page  # table and specs alike
    assert '<script type="module" src="/v/static/vega.js">' in html


def test_the_epoch_page_shows_its_reasons_action_and_links(tmp_path):
    (view,) = job_view(store(tmp_path), "j", INTERVAL, E0, E0)
    html = pages.epoch_page(view, title="j", links=LINKS, job_href="/v/dags/ds2_j", run_href="/dags/ds2_j/runs/r1",
                            docs_href="/ds2-docs/e/index.html")  # fmt: skip
    assert '<b id="state">decided</b>' in html and "count needs 4" in html and "approved by alice" in html
    assert "→ 4 applied" in html and 'href="/dags/ds2_j/runs/r1"' in html and 'href="/ds2-docs/e/index.html"' in html


def test_the_fleet_page_sorts_by_any_column_and_counts_alerts(tmp_path):
    now = T0 + timedelta(minutes=5, seconds=30)
    rows = fleet_view(store(tmp_path), [("j", INTERVAL)], now)
    other = fleet_view(tmp_path / "empty", [("k", INTERVAL)], now)
    alerts_file = tmp_path / "alerts.jsonl"
    alerts_file.write_text(
        json.dumps({"at": now.isoformat(), "dag_id": "ds2_j", "task_id": "rescale", "problem": "job left stopped"})
        + "\nnot json\n"
        + json.dumps({"at": (now - timedelta(days=2)).isoformat(), "dag_id": "ds2_j", "problem": "old"})
        + "\n"
        + json.dumps({"at": now.isoformat(), "dag_id": "ds2_reconcile", "job": "j", "kind": "task-failed", "problem": "x"})
        + "\n"
        + json.dumps({"at": now.isoformat(), "dag_id": "ds2_reconcile", "job": "k", "kind": "task-failed", "problem": "y"})
        + "\n"
    )
    alerts = recent_alerts(alerts_file, since_s=86_400, now=now)
    assert [a["problem"] for a in alerts["ds2_j"]] == ["job left stopped"]
    # The reconciler serves every job: its alerts go to the job they name.
    assert [a["problem"] for a in job_alerts(alerts, "j", "ds2_j")] == ["job left stopped", "x"]
    assert [a["problem"] for a in job_alerts(alerts, "k", "ds2_k")] == ["y"]
    html = pages.fleet_page(rows + other, hrefs={"j": "/dags/ds2_j/plugin/ds2-autoscaler"}, alerts={"j": alerts["ds2_j"]},
                            sort="gap", descending=True, links=LINKS, now=now)  # fmt: skip
    assert re.findall(r'data-job="(\w+)"', html) == ["j", "k"]
    assert 'href="/dags/ds2_j/plugin/ds2-autoscaler" target="_top">j</a>' in html
    assert "+2" in html and "job left stopped" in html
    by_name = pages.fleet_page(rows + other, hrefs={}, alerts={}, sort="job", descending=True, links=LINKS, now=now)
    assert re.findall(r'data-job="(\w+)"', by_name) == ["k", "j"]
    with pytest.raises(ValueError, match="cannot sort by 'nope'"):
        pages.fleet_page(rows, hrefs={}, alerts={}, sort="nope", descending=True, links=LINKS, now=now)


def test_the_job_page_lists_the_capacity_events_and_each_epochs_state_size(tmp_path):
    import pyarrow as pa

    from autoscaler.capacity.provider import record_event
    from autoscaler.store.parquet import write_epochs
    from autoscaler.store.schemas import STATE

    root = store(tmp_path)
    state = {"job": "j", "epoch": E0 + 1, "operator_id": "c", "operator_name": "COUNT", "checkpoint_id": 7, "checkpoint_at": T0,
             "state_bytes": 3 * 2**29, "checkpointed_bytes": 2**20, "state_backend": "rocksdb"}  # fmt: skip
    write_epochs(root, STATE, "j", pa.Table.from_pylist([state], schema=STATE.arrow_schema()).drop_columns(["epoch_block"]))
    event = {"event_id": "a:add", "event": "add", "provider": "local", "taskmanagers": '["ds2-j-1-1"]', "slots": 2,
             "cores": 2.0, "outcome": "succeeded", "message": "added ds2-j-1-1 for <the> rescale", "at": T0}  # fmt: skip
    record_event(root, "j", E0 + 1, event)
    record_event(root, "j", E0 + 1, event)  # the same event again (a retried task): one row
    recent = job_view(root, "j", INTERVAL, E0, E0 + 4)
    assert recent[1].state_bytes == 3 * 2**29 and recent[0].state_bytes is None and len(recent[1].capacity_events) == 1
    series = job_series(root, "j", INTERVAL, E0, E0 + 4)
    html = pages.job_page(series, title="j", subtitle="", links=LINKS, hours=6, recent=recent)
    assert '<table id="capacity">' in html and "add (local)" in html and "added ds2-j-1-1 for &lt;the&gt; rescale" in html
    assert "1.50 GiB" in html


def test_the_job_page_shows_the_configuration_in_force_the_rounds_and_each_profiles_prediction_against_its_measure(tmp_path):
    from datetime import UTC, datetime

    from autoscaler.observe.tuning_view import tuning_view
    from autoscaler.store.parquet import write_epochs
    from autoscaler.store.schemas import PROFILES
    from autoscaler.tuning.configuration import Configuration
    from autoscaler.tuning.model import Prediction
    from autoscaler.tuning.outcomes import RECOMMENDED
    from autoscaler.tuning.profile import Profile
    from autoscaler.tuning.round import RoundResult, _profile_row, record_round

    root = store(tmp_path)
    assert tuning_view(root, "j") is None  # never tuned: no section
    in_force = Configuration.of({"COUNT": 1}, 10, 512, 0.4)
    new = Configuration.of({"COUNT": 2}, 30, 256, 0.2)
    now = datetime.now(UTC)
    profile = Profile("j-ab12cd-9-1", new, 1500.0, "succeeded", "measured <it>", max_rate=1800.0, observed_rate=1500.0,
                      checkpoint_s=0.4, checkpoint_bytes=10, restart_s=51.0, recovery_s=80.0, cpu_load=0.5, heap_used_mb=60.0,
                      slot_seconds=240.0, started_at=now, finished_at=now)  # fmt: skip
    import pyarrow as pa

    row = _profile_row("j", E0 + 2, "j-ab12cd-9", profile, 1500.0)
    write_epochs(root, PROFILES, "j", pa.Table.from_pylist([row], schema=PROFILES.arrow_schema()).drop_columns(["epoch_block"]))
    best = Prediction(new, 1900.0, 1700.0, 85.0, 0.97, 0.93, new.cost(8, 1024))
    record_round(root, "j", E0 + 2, RoundResult("j-ab12cd-9", RECOMMENDED, "1 profile(s) run; recommended <new>", in_force, best,
                                                (profile,), 1400.0, 1500.0))  # fmt: skip
    view = tuning_view(root, "j")
    assert view is not None and view.in_force == in_force.to_dict() and view.profiles[0]["error"] == pytest.approx(0.2)
    series = job_series(root, "j", INTERVAL, E0, E0 + 4)
    html = pages.job_page(series, title="j", subtitle="", links=LINKS, hours=6, recent=job_view(root, "j", INTERVAL, E0, E0 + 4),
                          tuning=view)  # fmt: skip
    assert "In force: COUNT 1, checkpoint 10 s, 512 MB/slot, managed 0.4" in html
    assert '<table id="tuning-rounds">' in html and "recommended &lt;new&gt;" in html and "1,900/s" in html and "0.93" in html
    assert '<table id="profiles">' in html and "1,500/s" in html and "1,800/s" in html and "+20 %" in html
    assert "measured &lt;it&gt;" in html and "51.0 s" in html
