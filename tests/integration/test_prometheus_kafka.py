"""A Kafka-fed query chained into one task, read from Prometheus as from the REST API (``make test-kafka``).

Nexmark q1 (Kafka source -> calc -> sink, one task) runs at parallelism 2 on a cluster with Flink's
Prometheus reporter, over 4-partition topics the Nexmark generator fills at 3,000 events/s. The REST path
snapshots three boundaries 20 s apart; the Prometheus path reads the same boundaries afterwards. For the
source, both must carry what sizing a source needs: its arrival and what it took in, counted in the source
operator's own records (the task puts out nothing: its chain ends in a sink), and its 4 partitions as its
highest useful parallelism. Stated tolerance: 3 % plus the share of the window by which the two reads of a
boundary are apart (a scrape interval, 1 s, each).
"""

from __future__ import annotations

import time
from itertools import pairwise

import pytest

from autoscaler.collect.prometheus import PrometheusConnection, PrometheusReader, snapshot_at
from autoscaler.collect.snapshot import take_snapshot, window_metrics
from autoscaler.flink import sql
from autoscaler.kafka.client import ensure_topic
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.conftest import wait_running

pytestmark = [pytest.mark.flink, pytest.mark.kafka, pytest.mark.kafka_long, pytest.mark.slow]
NEXMARK = ROOT / "flink-job" / "sql" / "nexmark"
WINDOW_S = 20


def by_instance(rows) -> dict[int, dict]:
    return {r["instance"]: r for r in rows.to_pylist() if r["is_source"]}


def test_a_chained_kafka_source_reads_the_same_from_prometheus(flink_reporting, prometheus_scraping_flink, kafka):
    flink, prom = flink_reporting, prometheus_scraping_flink
    flink.cancel_all()
    for topic in ("person", "auction", "bid"):
        ensure_topic(kafka.config, f"nexmark-{topic}", 4)
    gen = kafka.produce("nexmark", "--events", "nexmark", "--rate", "3000")
    try:
        script = sql.read_scripts([NEXMARK / "tables.sql", NEXMARK / "q1.sql"])
        job_id = sql.submit(flink.client, script, parallelism=2, kafka_client_config=kafka.client_config)
        wait_running(flink.client, job_id)
        reader = PrometheusReader(PrometheusConnection(prom.url, *prom.auth))
        poll("q1's pendingRecords in Prometheus", lambda: len(prom.query(
            'flink_taskmanager_job_task_operator_pendingRecords{job_name="nexmark_q1"}')) > 0, 120)  # fmt: skip
        time.sleep(5)  # every partition fetched once: its metrics registered
        rest = [take_snapshot(flink.client, "nexmark-q1")]
        for _ in range(2):
            time.sleep(WINDOW_S)
            rest.append(take_snapshot(flink.client, "nexmark-q1"))
        time.sleep(3)  # the last boundary scraped
        scraped = [snapshot_at(reader, "nexmark-q1", s.taken_at, rest[0]) for s in rest]
        for epoch, ((a, b), (pa, pb)) in enumerate(zip(pairwise(rest), pairwise(scraped), strict=True), start=1):
            by_rest = by_instance(window_metrics(a, b, "q1", epoch))
            by_prom = by_instance(window_metrics(pa, pb, "q1", epoch, "prometheus"))
            assert by_rest.keys() == by_prom.keys() == {1, 2}
            apart = (abs((pa.taken_at - a.taken_at).total_seconds()) + abs((pb.taken_at - b.taken_at).total_seconds())) / WINDOW_S
            for i, r in by_rest.items():
                p = by_prom[i]
                assert r["max_parallelism"] == p["max_parallelism"] == 4, (r["max_parallelism"], p["max_parallelism"])
                assert r["source_rate_basis"] == p["source_rate_basis"] == "emitted+lag"
                assert r["observed_processing_rate"] > 500 and r["true_processing_rate"] > r["observed_processing_rate"]
                for key in ("true_output_rate", "observed_processing_rate"):
                    assert p[key] == pytest.approx(r[key], rel=0.03 + apart), (epoch, i, key, r[key], p[key])
    finally:
        gen.stop()
        flink.cancel_all()
