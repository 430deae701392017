"""The fleet benchmark's Flink REST replay answers the collector as the recorded job did, for many jobs."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from autoscaler.collect.snapshot import take_snapshot, window_metrics
from autoscaler.flink.client import FlinkConnection, FlinkError, FlinkRestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from flink_replay import RECORDING, serve


@pytest.fixture(scope="module")
def replay():
    server = serve(jobs=50, prefix="ds2-fleet", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{server.server_address[1]}"))
    server.shutdown()
    server.server_close()


def test_the_recording_is_of_the_real_test_job():
    import json

    rec = json.loads(RECORDING.read_text())
    names = [v["name"] for v in rec["job"]["vertices"]]
    assert any("Source" in n for n in names) and any("Count" in n for n in names), names
    assert rec["readings"][1]["at"] > rec["readings"][0]["at"]


def test_each_replayed_job_is_measured_by_the_collector_with_counters_moving_at_the_recorded_rate(replay):
    jobs = replay.jobs()
    assert len(jobs) == 50 and len({j.id for j in jobs}) == 50 and jobs[7].name == "ds2-fleet-7"
    first = take_snapshot(replay, "ds2-fleet-7")
    time.sleep(1.0)
    second = take_snapshot(replay, "ds2-fleet-7")
    assert second.flink_job_id == first.flink_job_id != take_snapshot(replay, "ds2-fleet-8").flink_job_id
    rows = window_metrics(first, second, "fleet7", 1).to_pylist()
    assert {r["operator_name"] for r in rows} >= {"Count"}
    count = [r for r in rows if r["operator_name"] == "Count"]
    assert all(r["records_in"] > 0 and r["busy_ms"] + r["idle_ms"] + r["backpressured_ms"] > 0 for r in count), count
    assert replay.overview()["slots-total"] >= 50


def test_unknown_jobs_and_writes_are_refused(replay):
    with pytest.raises(FlinkError):
        replay.running_job("not-replayed")
    with pytest.raises(FlinkError):
        replay.cancel(replay.jobs()[0].id)
