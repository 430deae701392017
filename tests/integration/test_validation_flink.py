"""Good epochs collected from the real local Flink test job pass validation; a stale topology is stopped and kept."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest

from autoscaler.collect.flink import collect_epoch_metrics
from autoscaler.collect.snapshot import METRICS_REFRESH_TIMEOUT_S
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import METRICS, VALIDATIONS
from autoscaler.topology import Operator, Topology
from autoscaler.validate import ValidationConfig, quarantined_epochs, release_quarantine, validate_epoch
from tests.integration.conftest import UNDERPROVISIONED
from tests.integration.test_collect import RATE_METRIC, wait_for_busy_time

pytestmark = pytest.mark.flink
JOB = "wordcount-valid"
WINDOW_S = 15.0  # the measurement window: long enough for the REST counters' staleness to stay small
STALENESS_S = 2.0  # how old Flink's REST counters may be: conf/flink's metrics.fetcher.update-interval
# A window's end snapshot waits up to its refresh bound for counters that moved (on a loaded machine, most of it:
# 9.5 s seen under three busy loops), and those are up to STALENESS_S old, so a window of WINDOW_S may measure that
# much longer. A 15-s interval makes this a large fraction; a production interval of minutes makes it small.
WINDOW_TOLERANCE = (METRICS_REFRESH_TIMEOUT_S + STALENESS_S) / WINDOW_S


def wait_one_window(client, job_id: str, vertex: str, since: datetime, window_s: float) -> None:
    """Poll the vertex's counters until ``window_s`` less their staleness passed since the last window's end
    (the boundary snapshot's time) and the counters moved: the polling keeps Flink's lazily refreshed metric
    fetcher fresh, as a collector's reads do. The next snapshot's own time (half its length) completes it."""
    vid = client.job(job_id).vertex(vertex).id
    first = sum(c.busy_ms for c in client.subtask_counters(job_id, vid))
    moved = False
    while not moved or (datetime.now(UTC) - since).total_seconds() < window_s - STALENESS_S:
        elapsed = (datetime.now(UTC) - since).total_seconds()
        assert elapsed < 4 * window_s, f"{vertex}'s counters did not move in {4 * window_s:g} s"
        time.sleep(0.5)
        moved = moved or sum(c.busy_ms for c in client.subtask_counters(job_id, vid)) > first


def settings(interval: tuple[datetime, datetime], topology: Topology) -> ValidationConfig:
    """The job's thresholds for a 15 s policy interval on a local cluster (counters up to 2 s stale each end)."""
    return ValidationConfig(
        topology=topology,
        data_interval=interval,
        window_s=WINDOW_S,
        window_tolerance=WINDOW_TOLERANCE,
        time_tolerance=0.3,
        rate_tolerance=0.3,
        lateness_s=2.0,
    )


def test_real_epochs_pass_and_a_stale_topology_is_stopped(clean_flink, tmp_path):
    details = clean_flink.start_job(UNDERPROVISIONED)
    client = clean_flink.client
    store = tmp_path / "data" / "store"
    wait_for_busy_time(client, details.id, "Count", 3000)  # past the start-up: counters move steadily
    # Epoch 0 only sets the boundary. (Its short window is measured by sleeping; Flink's metric fetcher
    # refreshes lazily on REST requests, so after a silent window the first vertices read can be stale,
    # which validation rejects -- see the report. Polling during a window, as below, keeps it fresh.)
    collected = collect_epoch_metrics(client, "ds2-testjob", JOB, 0, store, short_window_s=2, source_rate_metric=RATE_METRIC)

    intervals = {}
    results = {}
    boundary = datetime.now(UTC)
    for epoch in (1, 2):
        # One measurement window by the clock, as the scheduler makes one (busy time accrues slower than the
        # clock on a loaded machine, so waiting on it stretched the window past its tolerance in CI).
        since = collected.rows.column("window_end")[0].as_py()  # the last window's end: this one's start
        wait_one_window(client, details.id, "Count", since=since, window_s=WINDOW_S)
        collected = collect_epoch_metrics(client, "ds2-testjob", JOB, epoch, store, source_rate_metric=RATE_METRIC)
        assert collected.warmup_reason is None and not collected.measured_short_window
        intervals[epoch] = (boundary, boundary := datetime.now(UTC))
        topology = _topology(collected.rows.to_pylist())
        results[epoch] = validate_epoch(store, JOB, epoch, settings(intervals[epoch], topology))
        assert results[epoch].success and results[epoch].decidable, results[epoch].message()

    assert [r.rows for r in results.values()] == [5, 5]
    assert read_epochs(store, METRICS, JOB, [1, 2]).num_rows == 10 and quarantined_epochs(store, JOB) == []
    assert Path(results[2].docs_pages[0]).is_file() and (tmp_path / "data" / "validation-docs" / "index.html").is_file()
    assert read_epochs(store, VALIDATIONS, JOB, [1, 2]).column("status").to_pylist() == ["passed", "passed"]

    # The same real epoch against a topology that says Count runs 4 instances: stopped, named, kept.
    stale = _topology(read_epochs(store, METRICS, JOB, [2]).to_pylist(), count=4)
    rejected = validate_epoch(store, JOB, 2, settings(intervals[2], stale), docs=False)
    assert rejected.failed_rules == ["instances_present", "topology_matches"], rejected.message()
    missing = [o.where() for f in rejected.failures if f.rule == "instances_present" for o in f.offenders]
    assert missing == ["Count#2 (epoch 2)", "Count#3 (epoch 2)", "Count#4 (epoch 2)"]
    assert read_epochs(store, METRICS, JOB, [2]).num_rows == 0 and quarantined_epochs(store, JOB) == [2]
    assert release_quarantine(store, JOB, 2) == 5
    assert validate_epoch(store, JOB, 2, settings(intervals[2], topology), docs=False).success


def _topology(rows: list[dict], count: int | None = None) -> Topology:
    """The job graph as the rows describe it (optionally claiming another parallelism for Count)."""
    ops = {r["operator_id"]: (r["operator_name"], r["parallelism"]) for r in rows}
    order = ["Source: Source", "Parse", "Count", "Sink: Writer"]
    ids = {name: op_id for op_id, (name, _) in ops.items()}
    operators = [Operator(ids[name], name, count if (name == "Count" and count) else ops[ids[name]][1]) for name in order]
    return Topology.from_edges(operators, [(ids[a], ids[b]) for a, b in pairwise(order)])
