"""Nexmark q1, q2, q5 and q8 as Flink SQL over Kafka, registered with ``sql_file:`` and no flags, autoscaled
by the scaling DAGs under a real scheduler (``make test-kafka``).

The generator writes Nexmark's persons, auctions and bids into three 4-partition topics at 3,000 events/s.
Each query starts at parallelism 2 and is measured from its Kafka sources' honest inputs (records out +
growth of ``pendingRecords``) every epoch:

- q5 and q8 have keyed and windowed operators behind their sources, which they do not need two of at this
  load: DS2 (the reference) scales them down in place. (q5's global MAX is capped at one instance by the
  planner and is short: DS2 says so and keeps it, the most it may have.)
- q1 and q2 are one task each: the planner chains the Kafka source, the map or filter and the sink, so
  the source vertex is all there is to rescale. ``utilization`` (the Flink autoscaler's model) sizes it
  from what it took in per busy second, capped at its 4 partitions, and scales it down in place. Its own
  scale-down wait (an hour) and limit (-40 %, which keeps 2 at 2) are set for the test to 0 s and -50 %.
"""

from __future__ import annotations

import json

import pytest

from autoscaler.flink import sql
from autoscaler.kafka.client import ensure_topic
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.conftest import wait_running
from tests.integration.scaling_setup import environment

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.kafka, pytest.mark.kafka_long, pytest.mark.slow]
INTERVAL_S = 20
NEXMARK = ROOT / "flink-job" / "sql" / "nexmark"
QUERIES = ["q1", "q2", "q5", "q8"]
SCALED = QUERIES
# q1 and q2: a source vertex, sized by a kind that sizes sources (ds2 keeps them, as DS2 does).
SOURCE_POLICY = {"kind": "utilization", "scale_down_interval": "0s", "max_scale_down_factor": 0.5}


def entry(flink, query: str, client_config) -> dict:
    # Every scale-down DS2 proposes (its kind ignores one by 1 by default, as DS2's scaling manager does).
    policy = SOURCE_POLICY if query in ("q1", "q2") else {"kind": "ds2", "ignore_scale_down_by": 0}
    return {
        "name": f"nexmark_{query}",
        "flink_job_name": f"nexmark-{query}",
        "flink_conn_id": "flink_test",
        "spark_conn_id": "spark_test",
        "sql_file": [str(NEXMARK / "tables.sql"), str(NEXMARK / f"{query}.sql")],
        "kafka_client_config": str(client_config),
        "savepoint_dir": flink.savepoint_dir,
        "mechanism": "in-place",
        "policy_interval": f"{INTERVAL_S}s",
        "collect": {"short_window": "4s"},
        "policy": policy,
        "validation": {"lateness_s": 90},
    }


def succeeded(store, job: str) -> dict | None:
    rows = [a for a in read_epochs(store, ACTIONS, job).to_pylist() if a["outcome"] == "succeeded"]
    return rows[0] if rows else None


def measured(store, query: str) -> list[dict]:
    """Decisions of epochs that were measured (not warm-up) and validated."""
    rows = read_epochs(store, DECISIONS, f"nexmark_{query}").to_pylist()
    return [d for d in rows if d["status"] == "ok" and "warm-up" not in d["reason"]]


def test_nexmark_queries_over_kafka_are_autoscaled_with_no_flags(
    flink_adaptive, kafka, spark_engine, airflow_server_factory, tmp_path_factory
):
    flink = flink_adaptive
    flink.cancel_all()
    for kind in ("person", "auction", "bid"):
        ensure_topic(kafka.config, f"nexmark-{kind}", 4)
    gen = kafka.produce("nexmark", "--events", "nexmark", "--rate", "3000")
    jobs = {}
    for q in QUERIES:
        script = sql.read_scripts([NEXMARK / "tables.sql", NEXMARK / f"{q}.sql"])
        jobs[q] = sql.submit(flink.client, script, parallelism=2, kafka_client_config=kafka.client_config)
        started = wait_running(flink.client, jobs[q]).parallelism
        assert max(started.values()) == 2, started
    data = tmp_path_factory.mktemp("ds2-nexmark")
    entries = [entry(flink, q, kafka.client_config) for q in QUERIES]
    env = environment(flink, data / "jobs.yaml", data, entries, spark_engine.connection)
    store = data / "store"
    server = airflow_server_factory(dags_folder=ROOT / "dags", extra_env=env)
    try:
        for q in QUERIES:
            server.wait_dag(f"ds2_nexmark_{q}")
        for q in QUERIES:
            decisions = poll(f"nexmark {q} decided on measured epochs", lambda q=q: measured(store, q), 300)
            sources = [d for d in decisions if d["operator_name"].startswith("Source:")]
            assert sources and all("records emitted + backlog growth" in d["reason"] for d in sources), sources[:1]
        for q in SCALED:
            action = poll(f"nexmark {q} scaled in place", lambda q=q: succeeded(store, f"nexmark_{q}"), 300)
            new = json.loads(action["new_parallelism"])
            assert action["mechanism"] == "in-place" and new and all(p < 2 for p in new.values()), action
            if q in ("q1", "q2"):
                assert list(new) == [flink.client.job(jobs[q]).vertices[0].name], new  # its one vertex: the source
            running = flink.client.running_job(f"nexmark-{q}")
            assert running.id == jobs[q]  # in place: the same job, reading on from its offsets
            for name, p in new.items():
                assert flink.client.job(running.id).parallelism[name] == p
        assert gen.process.poll() is None, "the generator stopped"
    finally:
        server.stop()
        gen.stop()
        flink.cancel_all()
