"""A late run is not bad data: the triggerer takes every boundary on time, so a scaling run that
starts two intervals after its epoch ended still measures exactly that epoch, validates green and
is decided (real Flink, the real scheduler and triggerer, the warm Spark engine).

The delay is injected by keeping the job's DAG paused and triggering the run for a past epoch.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import UTC, datetime

import pytest

from autoscaler.collect.boundaries import epoch_ending_at
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, environment, job_entry

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]
INTERVAL_S = 10
DAG = "ds2_late"


def test_a_run_two_intervals_late_measures_its_own_epoch(flink, spark_engine, airflow_server_factory, tmp_path_factory):
    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    data = tmp_path_factory.mktemp("ds2-late")
    # Validation at its defaults (lateness one interval, at least 30 s): no allowance for the delay.
    # Its schedule starts ahead, so that no scheduled run comes before the DAG is paused.
    start = math.ceil((time.time() + 60) / INTERVAL_S) * INTERVAL_S
    entry = job_entry(flink, "late", INTERVAL_S, validation={}, start_date=datetime.fromtimestamp(start, tz=UTC).isoformat())
    env = environment(flink, data / "jobs.yaml", data, [entry], spark_engine.connection)
    server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env, reuse=False)
    try:
        server.wait_dag(DAG)
        server.api("PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": True})  # no scheduled runs meanwhile
        server.wait_dag("ds2_boundaries")

        def deferred():
            runs = server.api("GET", "/api/v2/dags/ds2_boundaries/dagRuns")["dag_runs"]
            for run in runs:
                ti = server.api("GET", f"/api/v2/dags/ds2_boundaries/dagRuns/{run['dag_run_id']}/taskInstances/snapshots")
                if ti["state"] == "deferred":
                    return run
            return None

        poll("the boundary trigger to be deferred", deferred)
        store = data / "store"

        def on_time() -> dict[int, float]:
            """Epochs of the schedule whose end boundary was taken at its time: when it was taken."""
            folder = store / "snapshots" / "job=late"
            names = [p.name for p in folder.iterdir()] if folder.exists() else []
            epochs = (int(m[1]) for m in map(re.compile(r"epoch=(\d+)\.json").fullmatch, names) if m)
            taken = {e: json.loads((folder / f"epoch={e}.json").read_text())["taken_at"] for e in epochs}
            at = {e: datetime.fromisoformat(t).timestamp() for e, t in taken.items()}
            return {e: t for e, t in at.items() if 0 <= t - (e + 1) * INTERVAL_S < 8 and e * INTERVAL_S >= start}

        def two_boundaries():
            # Two boundaries 6 s apart or more (the 4-s short window, with room): the collector refuses a
            # shorter window and measures one now, which for a run this late ends past the lateness
            # allowed. A loaded machine takes the first boundary after the triggerer starts up to 8 s late.
            taken = on_time()
            return next((e for e in sorted(taken) if e - 1 in taken and taken[e] - taken[e - 1] >= 6), None)

        epoch = poll("two consecutive boundaries taken on time by the triggerer", two_boundaries, 90)
        boundary = (epoch + 1) * INTERVAL_S
        assert epoch_ending_at(INTERVAL_S, boundary) == epoch

        # Two intervals after the epoch ended, its run starts.
        while time.time() < boundary + 2 * INTERVAL_S:
            time.sleep(0.2)
        started = time.time()
        run = server.trigger(DAG, logical_date=datetime.fromtimestamp(boundary, tz=UTC))
        server.api("PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": False})  # a paused DAG's runs stay queued
        assert server.wait_run(DAG, run["dag_run_id"], timeout_s=180) == "success"
        base = f"/api/v2/dags/{DAG}/dagRuns/{run['dag_run_id']}/taskInstances"
        states = {t["task_id"]: t["state"] for t in server.api("GET", base)["task_instances"]}
        assert states["policy"] == "success" and states["decide"] == "success", states

        rows = read_epochs(store, METRICS, "late", [epoch]).to_pylist()
        assert rows and not any(r["warmup"] for r in rows)
        for r in rows:  # the window is the epoch's interval, not the time the run came
            assert abs(r["window_end"].timestamp() - boundary) < 5, r["window_end"]
            assert abs(r["window_start"].timestamp() - (boundary - INTERVAL_S)) < 5, r["window_start"]
        assert started - boundary >= 2 * INTERVAL_S
        validation = server.api("GET", f"{base}/validate/xcomEntries/return_value")["value"]
        validation = validation if isinstance(validation, dict) else json.loads(validation)
        assert validation["decidable"] is True, validation
        decisions = read_epochs(store, DECISIONS, "late", [epoch]).to_pylist()
        counts = [d for d in decisions if d["operator_name"] == "Count"]
        # The epoch is decided: a scale-up of Count, by DS2. It needs 20,000 r/s x 175 us = 3.5 instances, so
        # 4; but on a window of 6-10 s whose counters are each up to 2 s old (metrics.fetcher.update-interval),
        # the backlog's growth (about 14,000 r/s at Count 1) can read 2 s x 14,000 / 10 s = 14 % short: 3.
        assert counts and counts[0]["status"] == "ok", decisions
        assert counts[0]["target_parallelism"] in (3, 4), counts[0]["reason"]
    finally:
        server.stop()
