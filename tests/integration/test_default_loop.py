"""The default kind in a closed loop under the real scheduler, on honest inputs: a scale-up that buys drain
capacity, the release of that capacity once the backlog is drained, and a scale-down when the load falls.

Real Flink (the test job's partitioned source owes what it could not emit and reports ``pendingRecords``,
no rate gauge), the real scheduler and triggerer, the warm Spark engine. The job keeps the default kind's
options but two of its own, so that the whole behaviour fits in about six minutes: a 1-min scale-down wait,
and a steady quantile of 0.5, which two measured rises already read (at the default 0.9 it takes ten).
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime

import pytest

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.scaling_setup import BASE_ARGS, environment, job_entry

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.lab]
INTERVAL_S = 30
FALL_S = 270  # the load falls from 20,000 to 6,000 r/s this long after the first epoch's start
DAG = "ds2_loop"


def _rescales(store) -> list[dict]:
    actions = read_epochs(store, ACTIONS, "loop").to_pylist()
    return sorted((a for a in actions if a["outcome"] == "succeeded"), key=lambda a: a["epoch"])


def _count_reason(store, epoch: int) -> str:
    rows = [d for d in read_epochs(store, DECISIONS, "loop", [epoch]).to_pylist() if d["operator_name"] == "Count"]
    return rows[0]["reason"] if rows else ""


def test_the_default_scales_up_releases_its_drain_capacity_and_follows_a_fall(
    flink, spark_engine, airflow_server_factory, tmp_path_factory
):
    flink.cancel_all()
    start = math.ceil((time.time() + 75) / INTERVAL_S) * INTERVAL_S  # the first epoch: after Airflow is up
    schedule = ["--rate-schedule", f"0s:20000,{FALL_S}s:6000", "--schedule-start-ms", str(start * 1000)]
    args = [a for a in BASE_ARGS if a not in ("--rate", "20000")] + schedule
    flink.start_job([*args, "--count-parallelism", "1"])
    data = tmp_path_factory.mktemp("ds2-loop")
    policy = {
        "max_parallelism": {"Count": 8, "Parse": 8, "Sink: Writer": 8},
        "scale_down_interval": "60s",
        "steady_quantile": 0.5,
    }  # fmt: skip  (no kind: the default's)
    entry = job_entry(flink, "loop", INTERVAL_S, base_args=args, policy=policy,
                      start_date=datetime.fromtimestamp(start, tz=UTC).isoformat())  # fmt: skip
    env = environment(flink, data / "jobs.yaml", data, [entry], spark_engine.connection)
    server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env, reuse=False)
    store = data / "store"
    try:
        server.wait_dag(DAG)
        # Up (epoch 0, the under-provisioned start with its backlog), the release once drained, and the
        # scale-down after the fall: three rescales, the last one after the fall's wait.
        rescales = poll("three rescales", lambda: (r := _rescales(store)) and len(r) >= 3 and r, FALL_S + 330, 2.0)
        up, release, down = rescales[:3]
        assert "scale up" in _count_reason(store, up["epoch"])
        assert "drain capacity of the scale-up decided at epoch" in _count_reason(store, release["epoch"])
        assert "each epoch of it proposing less" in _count_reason(store, down["epoch"])
        assert down["epoch"] * INTERVAL_S >= FALL_S  # decided after the fall
        counts = [json.loads(r["new_parallelism"]).get("Count") for r in (up, release, down)]
        assert None not in counts and counts[0] > counts[1] > counts[2] >= 2, counts  # 6,000 r/s needs 2 of 5,700
        # Every rescale measured its downtime (what the next ones size their restart for) and left the job running.
        assert all(r["downtime_s"] and r["downtime_s"] > 0 for r in (up, release, down))
        assert any(j.state == "RUNNING" for j in flink.client.jobs())
    finally:
        server.stop()
