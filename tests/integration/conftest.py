"""Real Flink 2.3 clusters for integration tests, started and stopped by this session.

Each cluster is its own instance (``FLINK_DATA_DIR`` in a temp folder, its own ports), so a
developer's cluster on 8081 is never touched; teardown stops exactly the processes it started
(``scripts/flink.sh down`` reads the pid files of that instance).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoscaler import testjob
from autoscaler.flink.client import FlinkConnection, FlinkError, FlinkRestClient
from autoscaler.flink.models import JobDetails
from tests.conftest import ROOT
from tests.helpers import free_port

FLINK_SH = ROOT / "scripts" / "flink.sh"
TESTJOB_JAR = testjob.JAR


@dataclass
class FlinkCluster:
    client: FlinkRestClient
    data_dir: Path
    env: dict[str, str]
    jar_id: str

    @property
    def savepoint_dir(self) -> str:
        return f"file://{self.data_dir / 'savepoints'}"

    def start_job(self, args: Sequence[str], timeout_s: float = 60.0) -> JobDetails:
        """Run the test job and wait until every task is RUNNING."""
        job_id = self.client.run_jar(self.jar_id, None, list(args))
        return wait_running(self.client, job_id, timeout_s)

    def cancel_all(self) -> None:
        for job in self.client.jobs():
            if job.state in ("RUNNING", "CREATED", "RESTARTING", "INITIALIZING"):
                self.client.cancel(job.id)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(j.state not in ("RUNNING", "CANCELLING", "CREATED", "RESTARTING") for j in self.client.jobs()):
                return
            time.sleep(0.2)


def wait_running(client: FlinkRestClient, job_id: str, timeout_s: float = 60.0) -> JobDetails:
    try:
        client.wait_all_running(job_id, timeout_s)
    except FlinkError as exc:
        raise AssertionError(str(exc)) from None
    return client.job(job_id)


def _cluster(tmp_path_factory: pytest.TempPathFactory, name: str, *flags: str) -> Iterator[FlinkCluster]:
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT)
    data_dir = tmp_path_factory.mktemp(name)
    env = {
        **os.environ,
        "FLINK_DATA_DIR": str(data_dir),
        "FLINK_REST_PORT": str(free_port()),
        "FLINK_RPC_PORT": str(free_port()),
    }
    subprocess.run([str(FLINK_SH), "up", *flags], check=True, cwd=ROOT, env=env)
    try:
        client = FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{env['FLINK_REST_PORT']}"))
        yield FlinkCluster(client, data_dir, env, client.upload_jar(TESTJOB_JAR))
    finally:
        subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)


@pytest.fixture(scope="session")
def flink(tmp_path_factory) -> Iterator[FlinkCluster]:
    """A local Flink cluster with the default scheduler and the test job's jar uploaded."""
    yield from _cluster(tmp_path_factory, "flink-default")


@pytest.fixture(scope="session")
def flink_adaptive(tmp_path_factory) -> Iterator[FlinkCluster]:
    """A local Flink cluster with the adaptive scheduler (in-place rescaling)."""
    yield from _cluster(tmp_path_factory, "flink-adaptive", "--adaptive")


@pytest.fixture
def clean_flink(flink) -> Iterator[FlinkCluster]:
    """The default cluster with no job left running after the test."""
    flink.cancel_all()
    yield flink
    flink.cancel_all()


# The under-provisioned start of the reference: 20,000 rec/s, Count at 175 µs per record
# sustains ~5,660 rec/s per instance, so DS2 should ask for 4.
UNDERPROVISIONED = ["--rate", "20000", "--count-wait-us", "175", "--count-parallelism", "1"]


# A real local Airflow (api-server, scheduler, dag-processor, triggerer) per test session.
from tests.integration.airflow_fixtures import airflow_server_factory, airflow_services, postgres_server  # noqa: E402, F401
from tests.integration.kafka_fixtures import kafka  # noqa: E402, F401
from tests.integration.object_store_fixtures import object_env, object_store  # noqa: E402, F401


@dataclass
class Prometheus:
    """A Prometheus of scripts/prometheus.sh and the StatsD receiver it scrapes, in a temp folder."""

    url: str
    auth: tuple[str, str]
    airflow_env: dict[str, str]  # the AIRFLOW__METRICS__* that send an Airflow's metrics to it

    def query(self, promql: str) -> dict[str, float]:
        """An instant query's result, as {the series' operator, outcome or "": value}."""
        import requests

        r = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, auth=self.auth, timeout=10)
        r.raise_for_status()
        return {
            s["metric"].get("operator") or s["metric"].get("outcome") or "": float(s["value"][1])
            for s in r.json()["data"]["result"]
        }


def _prometheus(tmp_path_factory, flink_targets: str = "") -> Iterator[Prometheus]:
    from tests.helpers import run_script
    from tests.integration.airflow_fixtures import process_alive

    script, folder = ROOT / "scripts" / "prometheus.sh", tmp_path_factory.mktemp("prometheus")
    env = {**os.environ, "PROM_DATA_DIR": str(folder), "PROM_SCRAPE_INTERVAL": "1s", "PROM_FLINK_TARGETS": flink_targets}
    run_script(script, ["up"], env, timeout=120)
    state = dict(line.split("=", 1) for line in run_script(script, ["env"], env).stdout.split())
    pids = [tuple(map(int, p.read_text().split())) for p in (folder / "pids").glob("*.pid")]
    password = (folder / "password").read_text().strip()
    try:
        yield Prometheus(state["PROM_URL"], (state["PROM_USER"], password),
                         {k: v for k, v in state.items() if k.startswith("AIRFLOW__METRICS__")})  # fmt: skip
    finally:
        run_script(script, ["down"], env)
        assert len(pids) == 2 and not any(process_alive(pid, start) for pid, start in pids)


@pytest.fixture()
def prometheus(tmp_path_factory) -> Iterator[Prometheus]:
    yield from _prometheus(tmp_path_factory)


# Flink's Prometheus reporter takes the first free port from 9249: the JobManager, then the TaskManager.
FLINK_REPORTERS = ",".join(f"127.0.0.1:{p}" for p in range(9249, 9253))


@pytest.fixture(scope="module")
def flink_reporting(tmp_path_factory) -> Iterator[FlinkCluster]:
    """A cluster with Flink's Prometheus reporter on (scripts/flink.sh up --prometheus)."""
    yield from _cluster(tmp_path_factory, "flink-prometheus", "--prometheus")


@pytest.fixture()
def prometheus_scraping_flink(tmp_path_factory) -> Iterator[Prometheus]:
    yield from _prometheus(tmp_path_factory, FLINK_REPORTERS)
