"""Prometheus as the metrics source: a real Prometheus scraping a real Flink's reporter, against the REST path.

The under-provisioned test job (a partitioned source owing what it cannot emit, Count at 1) runs on a
cluster with Flink's Prometheus reporter; Prometheus scrapes it every second. The REST path takes
its counter snapshots at three boundaries, as the collector does; the Prometheus path reads the same
boundaries afterwards from Prometheus (:mod:`autoscaler.collect.prometheus`), as a backfill of
epochs never collected live would. Stated tolerance: Count's capacity agrees within 3 %; each source
instance's arrival rate within 3 % plus the share of the 20-s window by which the two reads of its
boundaries are apart (up to a scrape interval, 1 s, each: most of a back-pressured source's arrival is
its backlog's growth, which moves with the read's time); the policy (DS2, on Spark) decides the same.
"""

from __future__ import annotations

import time
from itertools import pairwise

import pytest

from autoscaler.collect.flink import snapshot_path, topology_path
from autoscaler.collect.prometheus import PrometheusConnection, PrometheusReader, collect_epoch, snapshot_at
from autoscaler.collect.snapshot import save_snapshot, take_snapshot, window_metrics
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
from autoscaler.errors import InputError
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import write_topology_csv
from tests.helpers import poll

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]

JOB_ARGS = ["--job-name", "prom-src", "--rate", "20000", "--count-wait-us", "175", "--count-parallelism", "1",
            "--source-parallelism", "2", "--partitions", "4", "--backlog", "true"]  # fmt: skip
WINDOW_S = 20


def _decisions(spark, root, snapshots, source_format):
    for epoch, (a, b) in enumerate(pairwise(snapshots), start=1):
        write_epochs(root, METRICS, "prom-src", window_metrics(a, b, "prom-src", epoch, source_format))
    write_topology_csv(snapshots[-1].topology(), topology_path(root, "prom-src"), source="test")
    run = StoreRun(str(root), "prom-src", 1, 2, "backfill", source_format, str(topology_path(root, "prom-src")),
                   PolicyOptions(kind="ds2"))  # fmt: skip
    decide_stored_epochs(spark, run)
    rows = read_epochs(root, DECISIONS, "prom-src").to_pylist()
    return {(d["epoch"], d["operator_name"]): d["target_parallelism"] for d in rows}


def test_an_epoch_read_from_prometheus_agrees_with_the_rest_path(flink_reporting, prometheus_scraping_flink, spark, tmp_path):
    flink, prom = flink_reporting, prometheus_scraping_flink
    flink.cancel_all()
    flink.start_job(JOB_ARGS)
    reader = PrometheusReader(PrometheusConnection(prom.url, *prom.auth))
    poll("the job's counters in Prometheus",
         lambda: prom.query('count(flink_taskmanager_job_task_numRecordsOut{job_name="prom_src"})') == {"": 5.0}, 90)  # fmt: skip
    time.sleep(10)  # past the start-up: the source's backlog grows steadily from here
    rest = [take_snapshot(flink.client, "prom-src")]
    for _ in range(2):
        time.sleep(WINDOW_S)
        rest.append(take_snapshot(flink.client, "prom-src"))
    # Read afterwards, at the boundaries' times, once Prometheus has scraped past the last one.
    poll("a scrape after the last boundary", lambda: time.time() > rest[-1].taken_at.timestamp() + 2.5, 10)
    from_prometheus = [snapshot_at(reader, "prom-src", s.taken_at, rest[0]) for s in rest]
    for r, p in zip(rest, from_prometheus):
        assert p.flink_job_id == r.flink_job_id and abs((p.taken_at - r.taken_at).total_seconds()) <= 1.5
        assert {v.id: v.parallelism for v in p.vertices} == {v.id: v.parallelism for v in r.vertices}

    for epoch, pair in enumerate(zip(pairwise(rest), pairwise(from_prometheus)), start=1):
        (ra, rb), (pa, pb) = pair
        by_rest = {(x["operator_name"], x["instance"]): x for x in window_metrics(ra, rb, "j", epoch).to_pylist()}
        by_prom = {(x["operator_name"], x["instance"]): x for x in window_metrics(pa, pb, "j", epoch, "prometheus").to_pylist()}
        assert by_rest.keys() == by_prom.keys()
        # Each read of a boundary may be a scrape away from the REST one: a rate over the window then differs
        # by up to the two boundaries' skews' share of the window on top of the steady 3 %.
        skew = sum(abs((p.taken_at - r.taken_at).total_seconds()) for p, r in ((pa, ra), (pb, rb))) / WINDOW_S
        for key, x in by_rest.items():
            y = by_prom[key]
            assert y["source_format"] == "prometheus" and y["source_rate_basis"] == x["source_rate_basis"]
            if x["is_source"]:
                assert x["source_rate_basis"] == "emitted+lag" and x["true_output_rate"] > 5_000
                assert y["true_output_rate"] == pytest.approx(x["true_output_rate"], rel=0.03 + skew), (key, skew)
        count = by_rest[("Count", 1)]
        assert count["busy_ms"] > 0.8 * 1000 * WINDOW_S  # the bottleneck: its capacity is what DS2 sizes by
        assert by_prom[("Count", 1)]["true_processing_rate"] == pytest.approx(count["true_processing_rate"], rel=0.03)

    decided_rest = _decisions(spark, tmp_path / "rest", rest, "flink-rest")
    decided_prom = _decisions(spark, tmp_path / "prometheus", from_prometheus, "prometheus")
    assert decided_rest == decided_prom and decided_rest[(1, "Count")] >= 3, (decided_rest, decided_prom)

    # What a collect task with collect.prometheus_conn_id does for an epoch (a late run, or a backfill of an
    # epoch never collected): its rows read at its boundaries, the names from the stored boundary snapshot.
    root = tmp_path / "collected"
    save_snapshot(rest[0], snapshot_path(root, "prom-src", 7))
    rows, window_s, job_id = collect_epoch(reader, "prom-src", "prom-src", 7, rest[0].taken_at, rest[1].taken_at, root)
    stored = read_epochs(root, METRICS, "prom-src", [7]).to_pylist()
    rest_window_s = (rest[1].taken_at - rest[0].taken_at).total_seconds()
    assert rows == len(stored) == 5 and job_id == rest[1].flink_job_id and abs(window_s - rest_window_s) <= 1.5
    assert {r["source_format"] for r in stored} == {"prometheus"}
    assert {r["operator_name"] for r in stored} == {v.name for v in rest[0].vertices}  # "Sink: Writer", not "Sink:_Writer"
    arrival = sum(r["true_output_rate"] for r in stored if r["is_source"])
    rest_rows = window_metrics(rest[0], rest[1], "prom-src", 7).to_pylist()
    assert arrival == pytest.approx(sum(r["true_output_rate"] for r in rest_rows if r["is_source"]), rel=0.03)


def test_a_job_prometheus_never_saw_is_one_clear_error(prometheus_scraping_flink):
    prom = prometheus_scraping_flink
    reader = PrometheusReader(PrometheusConnection(prom.url, *prom.auth))
    from datetime import UTC, datetime

    with pytest.raises(InputError, match="no samples of job 'nobody'"):
        snapshot_at(reader, "nobody", datetime.now(UTC), None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="refused the credentials"):
        PrometheusReader(PrometheusConnection(prom.url, "ds2", "wrong")).instant("up", datetime.now(UTC))
    with pytest.raises(InputError, match="must be http"):
        PrometheusReader(PrometheusConnection("http://x/api?query=up"))


def test_flinks_reporter_serves_on_the_loopback_only(flink_reporting):
    """Flink's own reporter binds every interface; the one scripts/flink.sh installs binds the loopback."""
    import urllib.request

    import psutil

    pids = [int(pid) for f in (flink_reporting.data_dir / "pids").glob("*.pid") for pid in f.read_text().split()]
    listening = [c.laddr for pid in pids if psutil.pid_exists(pid)
                 for c in psutil.Process(pid).net_connections(kind="tcp")
                 if c.status == psutil.CONN_LISTEN and 9249 <= c.laddr.port <= 9260]  # fmt: skip
    # JobManager and TaskManager, each on the loopback (a Java socket shows it IPv4-mapped); Flink's own: "::".
    assert len(listening) == 2 and {a.ip.removeprefix("::ffff:") for a in listening} == {"127.0.0.1"}, listening
    body = urllib.request.urlopen(f"http://127.0.0.1:{listening[0].port}/metrics", timeout=10).read().decode()
    assert "flink_" in body
