"""Window rows from two counter snapshots: rates from deltas, restarts detected, jitter tolerated."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.collect.snapshot import Snapshot, failovers_between, restart_between, source_splits, window_metrics
from autoscaler.flink.models import SubtaskCounters, VertexInfo

SRC, CNT = "a" * 32, "b" * 32
T0 = datetime(2026, 11, 21, tzinfo=UTC)


def snap(seconds: float, count_in: int, count_busy: float, src_out: int, job_id: str = "c" * 32, rate=None) -> Snapshot:
    vertices = (VertexInfo(SRC, "Source", 1, 128, "RUNNING"), VertexInfo(CNT, "Count", 1, 128, "RUNNING"))
    counters = (
        # busy + idle + back-pressured time = the running time at the sample, as Flink books it
        SubtaskCounters(SRC, 0, 0, src_out, 0.0, seconds * 100, seconds * 900, "RUNNING", target_rate=rate),
        SubtaskCounters(CNT, 0, count_in, count_in, count_busy, seconds * 1000 - count_busy, 0.0, "RUNNING"),
    )
    return Snapshot("job", job_id, T0 + timedelta(seconds=seconds), vertices, ((SRC, CNT),), counters)


def test_rates_come_from_counter_deltas():
    rows = window_metrics(snap(10, 1000, 9000, 1000), snap(20, 6000, 18000, 6000), "j", 3).to_pylist()
    count = next(r for r in rows if r["operator_name"] == "Count")
    assert count["true_processing_rate"] == pytest.approx(5000 / 9.0)  # records / busy seconds
    assert count["observed_processing_rate"] == pytest.approx(500.0)  # records / wall seconds
    source = next(r for r in rows if r["is_source"])
    assert source["true_processing_rate"] == 0.0
    assert source["true_output_rate"] == pytest.approx(5000 / 1.0)  # blocked 9 of 10 s: what it sent while free
    blocked = snap(20, 6000, 18000, 6000)
    blocked_source = replace(blocked.counters[0], idle_ms=20 * 10, backpressured_ms=20 * 990)
    blocked = replace(blocked, counters=(blocked_source, blocked.counters[1]))
    rows = window_metrics(snap(10, 1000, 9000, 1000), blocked, "j", 3).to_pylist()
    # blocked > 95 % of the window: no usable estimate from counters, the observed rate is used
    assert next(r for r in rows if r["is_source"])["true_output_rate"] == pytest.approx(500.0)
    assert not any(r["warmup"] for r in rows)


def test_rates_use_the_time_the_samples_span_not_when_they_were_read():
    # Flink's metric store served the first snapshot's values 2 s old: the samples are 12 s
    # apart though the snapshots were read 10 s apart (seen in CI: observed 1.35 x true).
    stale = replace(snap(10, 1000, 9000, 1000), taken_at=T0 + timedelta(seconds=12))
    rows = window_metrics(stale, snap(22, 7000, 19800, 7000), "j", 3).to_pylist()
    count = next(r for r in rows if r["operator_name"] == "Count")
    assert count["observed_processing_rate"] == pytest.approx(500.0)  # 6000 records / 12 s, not / 10 s
    assert count["true_processing_rate"] == pytest.approx(6000 / 10.8)
    assert count["observed_processing_rate"] <= count["true_processing_rate"]
    assert next(r for r in rows if r["is_source"])["observed_output_rate"] == pytest.approx(500.0)
    # an instance that reports no time at all falls back to the read times
    silent = snap(22, 7000, 19800, 7000)
    silent = replace(silent, counters=(silent.counters[0], replace(silent.counters[1], busy_ms=9000, idle_ms=1000)))
    count = next(r for r in window_metrics(stale, silent, "j", 3).to_pylist() if r["operator_name"] == "Count")
    assert count["observed_processing_rate"] == pytest.approx(6000 / 10.0)


def test_a_source_rate_gauge_is_its_true_output_labelled_an_oracle():
    rows = window_metrics(snap(10, 0, 0, 0), snap(20, 10, 10, 10, rate=7000.0), "j", 1).to_pylist()
    source = next(r for r in rows if r["is_source"])
    assert source["true_output_rate"] == 7000.0 and source["source_rate_basis"] == "gauge (oracle)"


def with_pending(snapshot: Snapshot, pending: float | None) -> Snapshot:
    return replace(snapshot, counters=(replace(snapshot.counters[0], pending_records=pending), snapshot.counters[1]))


def with_idle_source(snapshot: Snapshot) -> Snapshot:
    """The source never back-pressured: its back-pressured time booked as idle."""
    c = snapshot.counters[0]
    return replace(snapshot, counters=(replace(c, idle_ms=c.idle_ms + c.backpressured_ms, backpressured_ms=0.0),
                                       snapshot.counters[1]))  # fmt: skip


def test_a_sources_arrival_rate_is_its_output_plus_the_growth_of_its_backlog():
    # 5,000 records out over 10 s while the backlog grew 40,000 -> 120,000: 500 + 8,000 = 8,500 r/s
    # arrived, though back-pressure let it send only 500 r/s (the Flink autoscaler's inputRate + lagRate).
    rows = window_metrics(with_pending(snap(10, 1000, 9000, 1000), 40_000), with_pending(snap(20, 6000, 18000, 6000), 120_000),
                          "j", 3).to_pylist()  # fmt: skip
    source = next(r for r in rows if r["is_source"])
    assert source["true_output_rate"] == pytest.approx(8_500.0) and source["source_rate_basis"] == "emitted+lag"
    assert source["observed_output_rate"] == pytest.approx(500.0) and source["pending_records"] == 120_000
    # A backlog being worked off: more was sent than arrived (500 - 300 = 200 r/s arrived).
    rows = window_metrics(with_pending(snap(10, 1000, 9000, 1000), 5_000), with_pending(snap(20, 6000, 18000, 6000), 2_000),
                          "j", 3).to_pylist()  # fmt: skip
    assert next(r for r in rows if r["is_source"])["true_output_rate"] == pytest.approx(200.0)
    # Never below zero (a gauge read a moment off the counters can shrink faster than records went out).
    rows = window_metrics(with_pending(snap(10, 1000, 9000, 1000), 90_000), with_pending(snap(20, 6000, 18000, 6000), 0),
                          "j", 3).to_pylist()  # fmt: skip
    assert next(r for r in rows if r["is_source"])["true_output_rate"] == 0.0
    # Without pendingRecords at either end: the fallback, named as such (back-pressured 90 % of the window).
    rows = window_metrics(snap(10, 1000, 9000, 1000), snap(20, 6000, 18000, 6000), "j", 3).to_pylist()
    source = next(r for r in rows if r["is_source"])
    assert source["true_output_rate"] == pytest.approx(5000.0) and source["source_rate_basis"] == "emitted-unblocked"
    # Known at the end only (a Kafka reader's first fetch came within the window): no more can have arrived than
    # what was emitted plus the backlog at the end, 5,000 + 7 records in 10 s, where the fallback says 5,000 r/s.
    rows = window_metrics(snap(10, 1000, 9000, 1000), with_pending(snap(20, 6000, 18000, 6000), 7), "j", 3).to_pylist()
    source = next(r for r in rows if r["is_source"])
    assert source["true_output_rate"] == pytest.approx(500.7) and source["source_rate_basis"] == "emitted+end-lag"
    # ... and where the fallback says less than that bound, the fallback stands (a source that was never blocked).
    idle_at_10, idle_at_20 = with_idle_source(snap(10, 1000, 9000, 1000)), with_idle_source(snap(20, 6000, 18000, 6000))
    rows = window_metrics(idle_at_10, with_pending(idle_at_20, 700), "j", 3).to_pylist()
    source = next(r for r in rows if r["is_source"])
    assert source["true_output_rate"] == pytest.approx(500.0) and source["source_rate_basis"] == "emitted-unblocked"
    assert next(r for r in rows if not r["is_source"])["source_rate_basis"] is None


def test_a_chained_sources_arrival_is_counted_in_its_own_records_then_in_its_tasks():
    """A SQL source chained with a filter and a partial aggregate: its task's records out are the chain's
    last operator's. Here the source read 30,000 records in 10 s (its own numRecordsOut) while its backlog
    grew by 20,000: 5,000 r/s arrived. The task put out 6,000 records for those 30,000 (a ratio of 0.2),
    so what flows on to the next vertex is 1,000 r/s. Counting the backlog in the task's units would have
    said 3,000 + 600 = 2,600."""

    def chained(at: float, task_out: int, own_out: int, pending: float) -> Snapshot:
        base = snap(at, task_out, 9000 * at / 10, task_out)
        source = replace(base.counters[0], pending_records=pending, source_records_out=own_out)
        return replace(base, counters=(source, base.counters[1]))

    rows = window_metrics(chained(10, 1000, 5_000, 10_000), chained(20, 7000, 35_000, 30_000), "j", 3).to_pylist()
    source = next(r for r in rows if r["is_source"])
    assert source["true_output_rate"] == pytest.approx(1_000.0) and source["source_rate_basis"] == "emitted+lag"
    # Nothing emitted in the window (blocked throughout): the backlog's growth alone, in the source's records.
    rows = window_metrics(chained(10, 1000, 5_000, 10_000), chained(20, 1000, 5_000, 30_000), "j", 3).to_pylist()
    assert next(r for r in rows if r["is_source"])["true_output_rate"] == pytest.approx(2_000.0)
    # A task whose chain ends in a sink (a query chained into one task) puts out nothing: its arrival is
    # the source's own, 5,000 r/s, not 0.
    alone = chained(10, 0, 5_000, 10_000), chained(20, 0, 35_000, 30_000)
    lone = [replace(x, vertices=x.vertices[:1], edges=(), counters=x.counters[:1]) for x in alone]
    rows = window_metrics(lone[0], lone[1], "j", 3).to_pylist()
    assert rows[0]["is_source"] and rows[0]["true_output_rate"] == pytest.approx(5_000.0)


def test_restarts_are_detected_but_time_jitter_is_not_a_restart():
    before = snap(10, 1000, 9000, 1000)
    assert restart_between(before, snap(20, 2000, 8990, 2000)) is None  # busy stepped back 10 ms
    rows = window_metrics(before, snap(20, 2000, 8990, 2000), "j", 1).to_pylist()
    count = next(r for r in rows if r["operator_name"] == "Count")
    assert count["busy_ms"] == 0.0
    assert count["true_processing_rate"] == pytest.approx(1000 / 0.001)  # busy stood still: counted as 1 ms
    assert "went down" in restart_between(before, snap(20, 500, 9500, 2000))  # records reset: failover
    assert "job id changed" in restart_between(before, snap(20, 10, 10, 10, job_id="d" * 32))
    resized = replace(
        snap(20, 2000, 18000, 2000),
        vertices=(VertexInfo(SRC, "Source", 1, 128, "RUNNING"), VertexInfo(CNT, "Count", 4, 128, "RUNNING")),
    )
    assert "parallelism 1 -> 4" in restart_between(before, resized)
    assert all(r["warmup"] for r in window_metrics(before, snap(20, 10, 10, 10, job_id="d" * 32), "j", 1).to_pylist())


def test_snapshots_round_trip_through_json():
    s = replace(snap(10, 1, 2, 3, rate=5.0), restarts=4)
    assert Snapshot.from_json(s.to_json()) == s
    old = s.to_json().replace(', "restarts": 4', "")  # written before the field: not known
    assert '"restarts"' not in old and Snapshot.from_json(old).restarts is None


def test_a_failover_whose_counters_caught_up_is_a_restart_and_a_rescale_is_no_failover():
    before = replace(snap(10, 1000, 9000, 1000), restarts=2)
    caught_up = replace(snap(40, 1500, 9500, 1500), restarts=5)  # restarted from 0 and passed the old counts
    assert failovers_between(before, caught_up) == 3
    assert restart_between(before, caught_up) == "the job failed over 3 times (numRestarts 2 -> 5)"
    assert all(r["warmup"] for r in window_metrics(before, caught_up, "j", 1).to_pylist())
    assert failovers_between(before, replace(caught_up, restarts=2)) == 0
    assert failovers_between(before, replace(caught_up, restarts=None)) == 0  # not reported: counters decide
    rescaled = replace(caught_up, vertices=(before.vertices[0], replace(before.vertices[1], parallelism=4)))
    assert failovers_between(before, rescaled) == 0  # an in-place rescale counts in numRestarts too
    assert failovers_between(before, replace(caught_up, flink_job_id="d" * 32)) == 0


def test_a_sources_capacity_is_what_it_took_in_per_busy_second_and_its_splits_cap_it():
    """A query chained into one task (Kafka source -> calc -> sink): in 10 s it read 40,000 records (its own
    numRecordsOut) in 8 s of busy time: 5,000 r/s a busy second, 4,000 a wall second. It reads 4 partitions,
    fewer than its 128 key groups: no instance beyond the 4th would read anything."""

    def lone(at: float, own_out: int, busy: float, splits: int | None) -> Snapshot:
        source = SubtaskCounters(SRC, 0, 0, 0, busy, at * 1000 - busy, 0.0, "RUNNING", pending_records=0.0,
                                 source_records_out=own_out, source_splits=splits)  # fmt: skip
        vertex = VertexInfo(SRC, "Source", 1, 128, "RUNNING")
        return Snapshot("job", "c" * 32, T0 + timedelta(seconds=at), (vertex,), (), (source,))

    row = window_metrics(lone(10, 10_000, 2_000, 4), lone(20, 50_000, 10_000, 4), "j", 3).to_pylist()[0]
    assert row["true_processing_rate"] == pytest.approx(5_000.0) and row["observed_processing_rate"] == pytest.approx(4_000.0)
    assert row["max_parallelism"] == 4 and row["records_in"] == 0  # Flink's own count of a source's records in
    # No splits reported (not a Kafka source): its key groups; no busy time reported: capacity unknown (0).
    row = window_metrics(lone(10, 10_000, 0.0, None), lone(20, 50_000, 0.0, None), "j", 3).to_pylist()[0]
    assert row["max_parallelism"] == 128 and row["true_processing_rate"] == 0.0


def test_a_sources_splits_are_counted_from_its_per_partition_metrics():
    prefix = "Source__KafkaSource-default_catalog_default_database_bid.KafkaSourceReader"
    names = [f"{prefix}.topic.nexmark.bid.partition.{p}.currentOffset" for p in range(3)]
    names += [f"{prefix}.topic.nexmark.bid.partition.1.committedOffset", f"{prefix}.KafkaConsumer.assigned-partitions",
              f"{prefix}.topic.other.partition.0.currentOffset"]  # fmt: skip
    assert source_splits(names) == 4  # three of a dotted topic, one of another
    assert source_splits(["Source__Source.pendingRecords"]) is None


def test_a_legacy_source_whose_busy_time_is_nan_has_no_capacity_not_a_nan_rate():
    def legacy(at: float, out: int) -> Snapshot:
        source = SubtaskCounters(SRC, 0, 0, out, float("nan"), 0.0, 0.0, "RUNNING")
        return Snapshot(
            "job", "c" * 32, T0 + timedelta(seconds=at), (VertexInfo(SRC, "Source", 1, 128, "RUNNING"),), (), (source,)
        )

    row = window_metrics(legacy(10, 1_000), legacy(20, 2_000), "j", 3).to_pylist()[0]
    assert row["true_processing_rate"] == 0.0 and row["observed_processing_rate"] == 0.0
