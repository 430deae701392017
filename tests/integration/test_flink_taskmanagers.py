"""Flink with several TaskManagers (issue 25's cluster mode, the Flink part): a job spread over two,
one killed by its pid while the job runs, and ``scripts/flink.sh start-missing`` bringing it back.

Savepoints and checkpoints live in the instance's data folder, which every process reaches (as a
shared volume would be in the compose deployment).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from autoscaler.flink.client import FlinkConnection, FlinkRestClient
from tests.conftest import ROOT
from tests.helpers import free_port, poll
from tests.integration.conftest import FLINK_SH, TESTJOB_JAR, wait_running

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.faults]  # kills a process: make test-faults


def taskmanager_pids(data_dir: Path) -> list[int]:
    pids = []
    for f in (data_dir / "pids").glob("*taskexecutor*.pid"):
        pids += [int(line) for line in f.read_text().split() if line.isdigit()]
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def hosts_of(client: FlinkRestClient, job_id: str, vertex_id: str) -> set[str]:
    """The TaskManagers running the vertex's subtasks."""
    body = client.get(f"/jobs/{job_id}/vertices/{vertex_id}/taskmanagers")
    return {tm["taskmanager-id"] for tm in body["taskmanagers"] if tm.get("status") == "RUNNING"}


def test_a_job_spread_over_two_taskmanagers_survives_losing_one(tmp_path):
    env = {**os.environ, "FLINK_DATA_DIR": str(tmp_path / "flink"), "FLINK_REST_PORT": str(free_port()),
           "FLINK_RPC_PORT": str(free_port()), "FLINK_TASKMANAGERS": "2", "FLINK_SLOTS": "2"}  # fmt: skip
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT)
    subprocess.run([str(FLINK_SH), "up"], check=True, cwd=ROOT, env=env)
    try:
        client = FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{env['FLINK_REST_PORT']}"))
        assert len(client.get("/taskmanagers")["taskmanagers"]) == 2 and client.overview()["slots-total"] == 4
        job_id = client.run_jar(client.upload_jar(TESTJOB_JAR), None, ["--rate", "2000", "--count-parallelism", "3"])
        count = wait_running(client, job_id).vertex("Count")
        assert len(hosts_of(client, job_id, count.id)) == 2  # 3 slots' worth of tasks over 2 x 2 slots

        # Wait for a completed checkpoint, then kill one TaskManager by its pid.
        poll("a completed checkpoint", lambda: client.checkpoints(job_id)["counts"]["completed"] > 0, 60)
        victim = taskmanager_pids(tmp_path / "flink")[0]
        os.kill(victim, signal.SIGKILL)
        poll("the job noticing the lost TaskManager", lambda: not client.jobs()[0].all_running, 60, every_s=0.2)

        started = subprocess.run([str(FLINK_SH), "start-missing"], cwd=ROOT, env=env, capture_output=True, text=True)
        assert started.returncode == 0 and "started taskmanager" in started.stderr, started.stderr
        assert len(taskmanager_pids(tmp_path / "flink")) == 2
        details = wait_running(client, job_id, timeout_s=120)  # the same job, recovered
        assert details.parallelism["Count"] == 3
        restored = poll("a restore from the checkpoint", lambda: client.checkpoints(job_id)["latest"].get("restored"), 60)
        assert restored["is_savepoint"] is False
        assert len(hosts_of(client, job_id, count.id)) == 2
    finally:
        subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)
    deadline = time.monotonic() + 10
    while taskmanager_pids(tmp_path / "flink") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not taskmanager_pids(tmp_path / "flink")
