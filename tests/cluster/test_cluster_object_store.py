"""The cluster mode with its store on an object store (``make cluster-test-s3``): S3Proxy holds the tables,
snapshots, topologies and rescale journals, and each Celery worker has a data folder of its own, as
workers on two hosts have. The Celery-worker-killed drill of ``test_cluster.py`` still passes: the
retry on the other worker finds the journal on the object store and finishes the rescale, once.
"""

from __future__ import annotations

import json
import math
import os
import time
from datetime import UTC, datetime

import pytest

from autoscaler.config.jobs import load_jobs
from autoscaler.store.files import store_path
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS
from tests.cluster.cluster_setup import Cluster, start_cluster
from tests.cluster.test_cluster import kill_the_worker_running_the_rescale, status_ok, submit
from tests.helpers import poll

pytestmark = [pytest.mark.cluster, pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]
INTERVAL_S = 30


@pytest.fixture(scope="module")
def cluster(monkeypatch_module):
    from tests.cluster.cluster_setup import job_entry

    monkeypatch_module.setenv("DS2_CLUSTER_STORE", "s3")
    start = datetime.fromtimestamp(math.ceil((time.time() + 180) / INTERVAL_S) * INTERVAL_S, tz=UTC).isoformat()
    yield from start_cluster(lambda folder: [job_entry("auto", 30000, INTERVAL_S, folder, start_date=start)])


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def store_of(cluster: Cluster) -> str:
    """The cluster's store URL, with the object store's client variables in this process (to read it)."""
    client = dict(line.split("=", 1) for line in (cluster.folder / "s3proxy" / "client.env").read_text().splitlines())
    os.environ.update({k: v for k, v in client.items() if k.startswith("AWS_")})
    return client["DS2_STORE"]


def test_the_cluster_mode_on_an_object_store_with_a_celery_worker_killed(cluster):
    client, server = cluster.flink, cluster.airflow()
    status = status_ok(cluster)
    assert "s3proxy: running on" in status and "celery-worker-2" in status, status
    url = store_of(cluster)
    jobs = {j.name: j for j in load_jobs(cluster.folder / "jobs.yaml")}
    submit(cluster, "auto", 30000)

    run, worker = kill_the_worker_running_the_rescale(cluster, server, "ds2_auto")
    epoch = jobs["auto"].epoch_of(datetime.fromisoformat(run["data_interval_end"]))
    actions = lambda: {a["epoch"]: a for a in read_epochs(url, ACTIONS, "auto").to_pylist()}  # noqa: E731
    action = poll("auto's action row on the object store", lambda: actions().get(epoch), 60)
    assert action["outcome"] == "succeeded", action
    named = [j for j in client.jobs() if j.name == "ds2-auto"]
    assert len(named) == 2 and {j.state for j in named} == {"FINISHED", "RUNNING"}, named  # rescaled once
    assert client.job(client.running_job("ds2-auto").id).parallelism["Count"] == 6
    journal = json.loads(store_path(url, "journal", f"{action['action_id']}.json").read_text())
    assert journal["result"]["outcome"] == "succeeded"  # the killed attempt's journal, finished by the other worker
    # The tables are on the object store; each worker's own folder holds no store.
    assert epoch in set(read_epochs(url, METRICS, "auto").column("epoch").to_pylist())
    assert epoch in {d["epoch"] for d in read_epochs(url, DECISIONS, "auto").to_pylist()}
    hosts = cluster.folder / "hosts"
    assert sorted(p.name for p in hosts.iterdir()) == ["celery-worker-1", "celery-worker-2"]
    for host in ("celery-worker-1", "celery-worker-2"):
        assert not (hosts / host / "store").exists() and not (hosts / host / "journal").exists(), host
    assert not (cluster.folder / "store").exists() and not (cluster.folder / "journal").exists()
    print(f"auto rescaled 1 -> 6 once, on the other worker; downtime {action['downtime_s']} s: {action['message']}")
    cluster.run("up")  # starts the killed worker again
    assert f"celery-worker-{worker}" in status_ok(cluster)
