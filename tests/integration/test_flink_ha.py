"""Flink with ZooKeeper high availability: the leading JobManager killed mid-savepoint and mid-restart.

A real ZooKeeper (``scripts/zookeeper.sh``) and a Flink 2.3 cluster with two JobManagers
(``scripts/flink.sh up --ha``): the leader and a standby, each serving REST. The autoscaler is given
both addresses (the Flink connection's ``standby_urls``). The leader is found from the JobManagers'
logs and killed by its pid (``kill -9``); the standby takes the lead once the dead one's ZooKeeper
session expires and recovers the job from the HA store, under the same job id. The action then
resumes as the DAG's retry would, through the standby, and the job ends RUNNING at the old or the new
parallelism with its keyed counts continuing; it is never left stopped.

- mid-savepoint: the TaskManager is frozen (SIGSTOP) before the stop is requested, so the savepoint
  cannot complete before the leader dies; the new leader knows no such savepoint;
- mid-restart: the savepoint stopped the job; the TaskManager is frozen while the action submits the
  job from the savepoint, so the new job is still being scheduled when the leader dies.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoscaler.flink.client import FlinkConnection, FlinkRestClient
from autoscaler.flink.models import ACTIVE_STATES
from tests.conftest import ROOT
from tests.helpers import free_port, poll
from tests.integration.conftest import FLINK_SH, TESTJOB_JAR, FlinkCluster
from tests.integration.test_process_faults import TARGET, request_rescale, resume, wait_checkpoint
from tests.integration.test_rescale import assert_state_continued, running, start
from tests.integration.test_rescale_failures import wait_state

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.faults]

ZOOKEEPER_SH = ROOT / "scripts" / "zookeeper.sh"
GRANTED = re.compile(r"^(\S+ \S+) .*DispatcherRestEndpoint.* - (https?://[^ ]+) was granted leadership", re.M)


@dataclass
class HaCluster:
    flink: FlinkCluster
    ports: tuple[int, int]  # REST ports: the first leader's, the standby's

    def leader(self) -> tuple[int, int]:
        """(pid, REST port) of the leading JobManager: the newest REST endpoint granted leadership in the logs."""
        grants = []
        for log in (self.flink.data_dir / "log").glob("flink-*-standalonesession-*.log"):
            grants += GRANTED.findall(log.read_text(errors="replace"))
        assert grants, "no JobManager was granted leadership"
        port = int(max(grants)[1].rsplit(":", 1)[1].rstrip("/"))
        return jobmanager_pid(port), port


def jobmanager_pid(port: int) -> int:
    """The live JobManager serving REST on ``port`` (started with ``-D rest.port=<port>``)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"rest.port=%d" % port in args and any(b"StandaloneSessionClusterEntrypoint" in a for a in args):
            return int(pid)
    raise AssertionError(f"no JobManager serves REST on port {port}")


def taskmanager_pid(cluster: HaCluster) -> int:
    for line in (cluster.flink.data_dir / "pids").glob("*taskexecutor.pid"):
        for pid in line.read_text().split():
            if Path(f"/proc/{pid}").exists():
                return int(pid)
    raise AssertionError("no live TaskManager")


def kill_dead(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    poll(f"pid {pid} to die", lambda: not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), 30, 0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "Z"


@pytest.fixture
def ha_flink(tmp_path_factory) -> Iterator[HaCluster]:
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT)
    zk_env = {**os.environ, "ZOOKEEPER_DATA_DIR": str(tmp_path_factory.mktemp("zookeeper")), "ZOOKEEPER_PORT": str(free_port())}
    subprocess.run([str(ZOOKEEPER_SH), "up"], check=True, cwd=ROOT, env=zk_env)
    try:
        quorum = subprocess.run([str(ZOOKEEPER_SH), "quorum"], check=True, cwd=ROOT, env=zk_env, capture_output=True,
                                text=True).stdout.strip()  # fmt: skip
        data_dir, ports = tmp_path_factory.mktemp("flink-ha"), (free_port(), free_port())
        env = {**os.environ, "FLINK_DATA_DIR": str(data_dir), "FLINK_REST_PORT": str(ports[0]),
               "FLINK_STANDBY_REST_PORT": str(ports[1]), "FLINK_RPC_PORT": str(free_port()),
               "FLINK_ZOOKEEPER_QUORUM": quorum}  # fmt: skip
        subprocess.run([str(FLINK_SH), "up", "--ha"], check=True, cwd=ROOT, env=env)
        try:
            urls = [f"http://127.0.0.1:{p}" for p in ports]
            client = FlinkRestClient(FlinkConnection(base_url=urls[0], standby_urls=(urls[1],), retries=8))
            yield HaCluster(FlinkCluster(client, data_dir, env, client.upload_jar(TESTJOB_JAR)), ports)
        finally:
            subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)
    finally:
        subprocess.run([str(ZOOKEEPER_SH), "down"], check=False, cwd=ROOT, env=zk_env)


def recovered(client: FlinkRestClient, name: str) -> list[str]:
    """The job's ids once the new leader knows it again (RUNNING, all tasks)."""
    return [j.id for j in client.jobs() if j.name == name and j.all_running]


def assert_one_running_at(client: FlinkRestClient, name: str, allowed: list[dict[str, int]]) -> str:
    alive = [j for j in client.jobs() if j.name == name and j.state in ACTIVE_STATES]
    assert len(alive) == 1 and alive[0].all_running, alive
    parallelism = client.job(alive[0].id).parallelism
    assert any(all(parallelism[k] == v for k, v in p.items()) for p in allowed), parallelism
    return alive[0].id


def test_the_leading_jobmanager_killed_while_the_savepoint_was_taken(ha_flink, tmp_path):
    cluster, client, name = ha_flink.flink, ha_flink.flink.client, "ha-during"
    old = start(cluster, name)
    wait_checkpoint(client, old)
    leader, port = ha_flink.leader()
    assert port == ha_flink.ports[0]
    taskmanager = taskmanager_pid(ha_flink)
    os.kill(taskmanager, signal.SIGSTOP)
    try:
        request_rescale(cluster, name, tmp_path)
        kill_dead(leader)
    finally:
        os.kill(taskmanager, signal.SIGCONT)
    assert not list((tmp_path / "sp").glob("savepoint-*/_metadata"))  # the window was hit
    # The standby leads once the dead leader's ZooKeeper session expires, and recovers the job (same id).
    poll("the standby to recover the job", lambda: recovered(client, name) == [old], 120, 0.5)
    assert client.base_url.endswith(f":{ha_flink.ports[1]}")  # the client follows the JobManager that answers
    result = resume(cluster, name, tmp_path)
    # The new leader has no record of the savepoint: the action says so and leaves the recovered job as it runs.
    assert result.outcome == "failed" and "did not happen" in result.message and "keeps running unchanged" in result.message
    assert assert_one_running_at(client, name, [{"Count": 1}]) == old
    assert_state_continued(client, old)


def test_the_leading_jobmanager_killed_while_the_job_was_restarted_from_its_savepoint(ha_flink, tmp_path):
    cluster, client, name = ha_flink.flink, ha_flink.flink.client, "ha-restart"
    old = start(cluster, name)
    wait_checkpoint(client, old)
    request_rescale(cluster, name, tmp_path)
    wait_state(client, old, "FINISHED")  # the savepoint completed and stopped it
    leader, _ = ha_flink.leader()
    taskmanager = taskmanager_pid(ha_flink)
    os.kill(taskmanager, signal.SIGSTOP)  # the restarted job cannot reach RUNNING until the leader is dead
    results = []
    action = threading.Thread(target=lambda: results.append(resume(cluster, name, tmp_path)), daemon=True)
    try:
        action.start()
        submitted = lambda: [j for j in client.jobs() if j.name == name and j.id != old]  # noqa: E731
        poll("the job submitted from the savepoint", submitted, 60, 0.1)
        kill_dead(leader)
    finally:
        os.kill(taskmanager, signal.SIGCONT)
    action.join(240)
    assert results, "the action did not finish"
    result = results[0]
    assert result.outcome in ("succeeded", "rolled-back"), result
    job = assert_one_running_at(client, name, [TARGET] if result.outcome == "succeeded" else [{"Count": 1}])
    assert running(client, name) == [job]
    assert_state_continued(client, job)
