"""Metric collection from a real Flink cluster running the under-provisioned test job."""

from __future__ import annotations

import time

import pyarrow.compute as pc
import pytest

import ds2_policy
from autoscaler.collect.flink import collect_epoch_metrics, snapshot_path, topology_path
from autoscaler.collect.snapshot import save_snapshot, take_snapshot
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import read_topology_csv
from autoscaler.validate.view import pandas_metrics
from tests.integration.conftest import UNDERPROVISIONED, wait_running

pytestmark = pytest.mark.flink
JOB = "wordcount-under"
# The test job's per-subtask target rate: an oracle no production source has. The tests below that
# check collection mechanics use it for an exact expected rate; honest inputs have their own test.
RATE_METRIC = "Source__Source.scheduledRate"


def wait_for_busy_time(client, job_id: str, vertex: str, delta_ms: float, timeout_s: float = 60) -> None:
    """Poll until the vertex's reported busy time grew by ``delta_ms`` (a measurement window passed)."""
    vid = client.job(job_id).vertex(vertex).id
    start = sum(c.busy_ms for c in client.subtask_counters(job_id, vid))
    deadline = time.monotonic() + timeout_s
    while sum(c.busy_ms for c in client.subtask_counters(job_id, vid)) < start + delta_ms:
        assert time.monotonic() < deadline, f"{vertex} did not accumulate {delta_ms} ms busy time in {timeout_s} s"
        time.sleep(0.5)


def by_vertex(rows, name: str) -> list[dict]:
    return [r for r in rows.to_pylist() if r["operator_name"] == name]


def test_collect_shows_the_bottleneck_and_drives_a_policy_to_4(clean_flink, tmp_path, spark):
    clean_flink.start_job(UNDERPROVISIONED)
    store = tmp_path / "store"
    client = clean_flink.client

    first = collect_epoch_metrics(client, "ds2-testjob", JOB, 100, store, short_window_s=6, source_rate_metric=RATE_METRIC)
    assert first.measured_short_window and first.warmup_reason is None
    assert first.rows.num_rows == 2 + 1 + 1 + 1
    wait_for_busy_time(client, first.flink_job_id, "Count", 5000)  # one more measurement window
    second = collect_epoch_metrics(client, "ds2-testjob", JOB, 101, store, source_rate_metric=RATE_METRIC)
    assert not second.measured_short_window  # diffed against epoch 100's boundary
    assert second.rows.column("window_start")[0] == first.rows.column("window_end")[0]

    rows = second.rows
    count = by_vertex(rows, "Count")[0]
    window_ms = second.window_s * 1000
    assert count["busy_ms"] > 0.8 * window_ms  # the bottleneck is busy all the time
    parse = by_vertex(rows, "Parse")[0]
    assert parse["backpressured_ms"] > 0.6 * window_ms  # and its upstream is back-pressured
    assert 3500 < count["true_processing_rate"] < 8000  # ~5,660 rec/s per instance at 175 µs
    sources = by_vertex(rows, "Source: Source")
    # A source's records in are what it took in: here what its task put out (no sink in its chain); 0 with no
    # busy time reported (capacity unknown).
    assert len(sources) == 2 and all(s["is_source"] and s["observed_processing_rate"] in (0.0, s["observed_output_rate"])
                                     and s["true_processing_rate"] >= s["observed_processing_rate"] for s in sources)  # fmt: skip
    assert sum(s["true_output_rate"] for s in sources) == pytest.approx(20_000)  # the rate it is asked for
    assert all(s["backpressured_ms"] > 0.6 * window_ms for s in sources)
    # observed <= true up to the few percent by which per-vertex reads of Flink's metric store differ in time
    assert all(r["observed_processing_rate"] <= 1.1 * r["true_processing_rate"] + 1e-6 for r in rows.to_pylist())

    # Re-running an epoch recomputes the same rows from the stored boundaries (idempotent).
    again = collect_epoch_metrics(client, "ds2-testjob", JOB, 101, store)
    assert again.rows.equals(rows)
    assert read_epochs(store, METRICS, JOB).num_rows == 10

    # The collected metrics drive the Spark policy: Count 1 -> 4, nothing else changes.
    argv = ["--topology", str(topology_path(store, JOB)), "--metrics-store", "--store", str(store), "--job", JOB]
    assert ds2_policy.run([*argv, "--from-epoch", "101", "--to-epoch", "101"]) == 0
    decisions = read_epochs(store, DECISIONS, JOB, [101]).to_pylist()
    target = {d["operator_name"]: d["target_parallelism"] for d in decisions}
    assert target == {"Source: Source": 2, "Parse": 1, "Count": 4, "Sink: Writer": 1}, decisions
    assert {d["status"] for d in decisions} == {"ok"}


def test_honest_inputs_know_a_back_pressured_kafka_like_sources_arrival_rate(clean_flink, tmp_path, spark):
    """No gauge: the partitioned source owes what it cannot emit and reports pendingRecords, and its
    arrival rate (records out + backlog growth) is the 20,000 records/s it is offered, though Count
    lets it emit only ~5,700. DS2 then asks for 4, as with the oracle gauge (without pendingRecords it
    would size for what the source managed to send)."""
    clean_flink.start_job([*UNDERPROVISIONED, "--partitions", "8", "--backlog", "true"])
    store, client = tmp_path / "store", clean_flink.client
    first = collect_epoch_metrics(client, "ds2-testjob", JOB, 300, store, short_window_s=6)
    wait_for_busy_time(client, first.flink_job_id, "Count", 8000)
    rows = collect_epoch_metrics(client, "ds2-testjob", JOB, 301, store).rows
    sources = by_vertex(rows, "Source: Source")
    assert {s["source_rate_basis"] for s in sources} == {"emitted+lag"}
    assert all(s["pending_records"] > 0 for s in sources)
    emitted = sum(s["observed_output_rate"] for s in sources)
    arrival = sum(s["true_output_rate"] for s in sources)
    assert emitted < 9_000 and arrival == pytest.approx(20_000, rel=0.1), (emitted, arrival)
    argv = ["--topology", str(topology_path(store, JOB)), "--metrics-store", "--store", str(store), "--job", JOB]
    assert ds2_policy.run([*argv, "--from-epoch", "301", "--to-epoch", "301"]) == 0
    decisions = {d["operator_name"]: d for d in read_epochs(store, DECISIONS, JOB, [301]).to_pylist()}
    assert decisions["Count"]["target_parallelism"] == 4, decisions["Count"]["reason"]
    assert "records emitted + backlog growth" in decisions["Source: Source"]["reason"]


def test_a_first_epoch_measured_after_its_boundary_does_not_overlap_the_next(clean_flink, tmp_path):
    """The triggerer took epoch 20's boundary on time, but there was no epoch 19 to diff against:
    epoch 20 measures a short window after its boundary, and epoch 21 starts where that window ended
    (starting at the boundary overlapped it, and validation quarantined epoch 21: seen in the lab)."""
    clean_flink.start_job(UNDERPROVISIONED)
    store, client = tmp_path / "store", clean_flink.client
    save_snapshot(take_snapshot(client, "ds2-testjob", RATE_METRIC), snapshot_path(store, JOB, 20))
    first = collect_epoch_metrics(client, "ds2-testjob", JOB, 20, store, short_window_s=3, source_rate_metric=RATE_METRIC)
    assert first.measured_short_window and snapshot_path(store, JOB, 20, end=True).exists()
    wait_for_busy_time(client, first.flink_job_id, "Count", 2000)
    second = collect_epoch_metrics(client, "ds2-testjob", JOB, 21, store, source_rate_metric=RATE_METRIC)
    assert not second.measured_short_window
    assert second.rows.column("window_start")[0] == first.rows.column("window_end")[0]
    rows = read_epochs(store, METRICS, JOB)
    later = rows.filter(pc.equal(rows.column("epoch"), 21))
    earlier = rows.filter(pc.equal(rows.column("epoch"), 20))
    view = pandas_metrics(later, earlier, None, read_topology_csv(topology_path(store, JOB)))
    assert (view["window_start"] >= view["previous_window_end"]).all(), view[["window_start", "previous_window_end"]]


def test_a_window_measured_past_the_next_boundary_is_where_the_next_epoch_starts(clean_flink, tmp_path):
    """Epoch 30's run came late: the triggerer had taken epoch 31's boundary on time before epoch 30
    measured its short window. Epoch 31 starting at its predecessor's boundary overlapped that window
    and validation quarantined it (`windows_ordered`: the clean-clone suite's 'skipped' epoch after a
    rescale). Epoch 31 now starts where epoch 30's window ended and ends when measured; epoch 32, on
    time again, runs from there to its own boundary."""
    clean_flink.start_job(UNDERPROVISIONED)
    store, client = tmp_path / "store", clean_flink.client
    save_snapshot(take_snapshot(client, "ds2-testjob", RATE_METRIC), snapshot_path(store, JOB, 30))
    save_snapshot(take_snapshot(client, "ds2-testjob", RATE_METRIC), snapshot_path(store, JOB, 31))
    first = collect_epoch_metrics(client, "ds2-testjob", JOB, 30, store, short_window_s=2, source_rate_metric=RATE_METRIC)
    assert first.measured_short_window
    second = collect_epoch_metrics(client, "ds2-testjob", JOB, 31, store, short_window_s=2, source_rate_metric=RATE_METRIC)
    assert not second.measured_short_window and second.window_s >= 2.0
    assert snapshot_path(store, JOB, 31, end=True).exists()
    again = collect_epoch_metrics(client, "ds2-testjob", JOB, 31, store, short_window_s=2, source_rate_metric=RATE_METRIC)
    assert again.rows.equals(second.rows)  # a re-run recomputes the same rows from the stored snapshots
    wait_for_busy_time(client, second.flink_job_id, "Count", 2000)
    save_snapshot(take_snapshot(client, "ds2-testjob", RATE_METRIC), snapshot_path(store, JOB, 32))
    third = collect_epoch_metrics(client, "ds2-testjob", JOB, 32, store, source_rate_metric=RATE_METRIC)
    assert not third.measured_short_window
    assert second.rows.column("window_start")[0] == first.rows.column("window_end")[0]
    assert third.rows.column("window_start")[0] == second.rows.column("window_end")[0]
    rows = read_epochs(store, METRICS, JOB)
    topology = read_topology_csv(topology_path(store, JOB))
    for epoch in (31, 32):
        later = rows.filter(pc.equal(rows.column("epoch"), epoch))
        earlier = rows.filter(pc.less(rows.column("epoch"), epoch))
        view = pandas_metrics(later, earlier, None, topology)
        assert (view["window_start"] >= view["previous_window_end"]).all(), (epoch, view[["window_start", "previous_window_end"]])


def test_a_boundary_taken_just_after_the_previous_window_is_not_a_window(clean_flink, tmp_path):
    """A run queued behind an approval measured epoch 40's window; epoch 41's boundary came 5 ms after
    its end. Read as epoch 41's window, those 5 ms showed no processing, and DS2 proposed Parse 1 -> 8
    (the clean-clone suite, 2026-11-27). A window shorter than a short window is measured to one."""
    clean_flink.start_job(UNDERPROVISIONED)
    store, client = tmp_path / "store", clean_flink.client
    first = collect_epoch_metrics(client, "ds2-testjob", JOB, 40, store, short_window_s=2, source_rate_metric=RATE_METRIC)
    save_snapshot(take_snapshot(client, "ds2-testjob", RATE_METRIC), snapshot_path(store, JOB, 41))
    # (Taking a snapshot and writing epoch 40's rows take a few seconds: a 10-s short window is longer.)
    second = collect_epoch_metrics(client, "ds2-testjob", JOB, 41, store, short_window_s=10, source_rate_metric=RATE_METRIC)
    assert second.window_s >= 10.0, second.window_s
    assert second.rows.column("window_start")[0] == first.rows.column("window_end")[0]
    assert snapshot_path(store, JOB, 41, end=True).exists()


def test_a_window_that_spans_a_restart_is_warmup(clean_flink, tmp_path, spark):
    details = clean_flink.start_job(UNDERPROVISIONED)
    store = tmp_path / "store"
    client = clean_flink.client
    collect_epoch_metrics(client, "ds2-testjob", JOB, 7, store, short_window_s=3, source_rate_metric=RATE_METRIC)
    client.cancel(details.id)
    clean_flink.cancel_all()
    clean_flink.start_job(UNDERPROVISIONED)  # a new job id, counters from zero
    result = collect_epoch_metrics(client, "ds2-testjob", JOB, 8, store, source_rate_metric=RATE_METRIC)
    assert result.warmup_reason and "job id changed" in result.warmup_reason
    assert all(result.rows.column("warmup").to_pylist())
    argv = ["--topology", str(topology_path(store, JOB)), "--metrics-store", "--store", str(store), "--job", JOB]
    assert ds2_policy.run([*argv, "--from-epoch", "8", "--to-epoch", "8"]) == 0
    decisions = read_epochs(store, DECISIONS, JOB, [8])
    assert set(decisions.column("status").to_pylist()) == {"warmup"}
    assert pc.all(pc.equal(decisions.column("target_parallelism"), decisions.column("current_parallelism"))).as_py()


def test_no_running_job_is_a_clear_error(clean_flink, tmp_path):
    from autoscaler.flink.client import FlinkError

    with pytest.raises(FlinkError, match="no RUNNING Flink job named 'ds2-testjob'"):
        collect_epoch_metrics(clean_flink.client, "ds2-testjob", JOB, 1, tmp_path, short_window_s=0)
    assert not snapshot_path(tmp_path, JOB, 1).exists()


def test_job_details_and_edges(clean_flink):
    details = clean_flink.start_job(UNDERPROVISIONED)
    names = {v.id: v.name for v in details.vertices}
    assert [names[a] + " -> " + names[b] for a, b in sorted(details.edges, key=lambda e: list(names).index(e[0]))] == [
        "Source: Source -> Parse",
        "Parse -> Count",
        "Count -> Sink: Writer",
    ]
    assert {v.max_parallelism for v in details.vertices} == {128}
    assert clean_flink.client.running_job("ds2-testjob").id == details.id
    assert wait_running(clean_flink.client, details.id).parallelism["Count"] == 1
