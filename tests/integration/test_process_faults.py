"""Processes killed mid-rescale, on a real Flink 2.3 cluster of the test's own (its daemons die here).

Each case kills a real process by its pid (``kill -9``: no shutdown hook runs), brings it back with
``scripts/flink.sh start-missing``, lets the action resume the way the DAG's retry or the
reconciler would (the same action id), and checks what a user needs: one job of the name RUNNING
at the old or the new parallelism, its keyed counts continuing (``Count.firstCountSeen`` > 1), and
one result saying what happened.

- a TaskManager killed while the savepoint is in flight;
- the JobManager killed after the savepoint stopped the job (no high availability: the restarted
  JobManager has forgotten the job and the savepoint operation): the action finds the savepoint
  on disk and restarts the job at the target;
- the JobManager killed while the savepoint was still being taken: no savepoint exists, so the job
  is restarted unchanged from its latest retained checkpoint;
- Flink's REST API unreachable during a collection and during the savepoint wait: a clear error,
  nothing written, and the action settles once Flink is back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.collect.flink import collect_epoch_metrics
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.rescale.result import RescaleResult
from autoscaler.rescale.savepoint import rescale_with_savepoint
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.conftest import FLINK_SH, FlinkCluster, _cluster
from tests.integration.test_rescale import assert_runs_at, assert_state_continued, deployment, running, start
from tests.integration.test_rescale_failures import wait_state

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.faults]

TARGET = {"Count": 3}


@pytest.fixture
def fragile_flink(tmp_path_factory) -> Iterator[FlinkCluster]:
    """A cluster of this test alone: its daemons are killed and started again."""
    yield from _cluster(tmp_path_factory, "flink-fragile")


def daemon_pid(cluster: FlinkCluster, daemon: str) -> int:
    """The live pid of ``standalonesession`` (the JobManager) or ``taskexecutor`` of this instance."""
    pid_file = cluster.data_dir / "pids" / f"flink--{daemon}.pid"
    for line in reversed(pid_file.read_text().split()):
        try:
            os.kill(int(line), 0)
        except (ValueError, ProcessLookupError):
            continue
        return int(line)
    raise AssertionError(f"no live {daemon} in {pid_file}")


def kill(cluster: FlinkCluster, daemon: str) -> None:
    pid = daemon_pid(cluster, daemon)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"{daemon} {pid} did not die")


def start_missing(cluster: FlinkCluster) -> None:
    res = subprocess.run([str(FLINK_SH), "start-missing"], cwd=ROOT, env=cluster.env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr


def wait_checkpoint(client: FlinkRestClient, job_id: str, timeout_s: float = 40) -> None:
    """Until the job completed a checkpoint triggered now or later (the cluster checkpoints every 10 s).

    :func:`start` returns once Count holds state for every key; a checkpoint triggered before that
    (the first one, on a loaded machine) can miss keys, and a job restored from it rightly starts
    them at 1 (seen once: ``firstCountSeen`` [1.0] after a restore from chk-1).
    """
    since_ms = time.time() * 1000
    poll(
        f"a checkpoint of job {job_id} triggered after {since_ms:.0f}",
        lambda: ((client.checkpoints(job_id).get("latest") or {}).get("completed") or {}).get("trigger_timestamp", 0) >= since_ms,
        timeout_s,
    )


def request_rescale(cluster: FlinkCluster, name: str, folder: Path) -> None:
    """The rescale's first half: the stop with a savepoint is requested, and the action defers (None)."""
    dep = deployment(name, folder / "sp")
    assert rescale_with_savepoint(cluster.client, dep, TARGET, "a1", folder / "journal", wait_for_savepoint=False) is None


def resume(cluster: FlinkCluster, name: str, folder: Path, action: str = "a1") -> RescaleResult:
    """The same action again, as the DAG's retry or the reconciler runs it."""
    return rescale_with_savepoint(cluster.client, deployment(name, folder / "sp"), TARGET, action, folder / "journal",
                                  savepoint_timeout_s=30, start_timeout_s=60)  # fmt: skip


def test_a_taskmanager_killed_during_the_savepoint(fragile_flink, tmp_path):
    client, name = fragile_flink.client, "pf-tm"
    old = start(fragile_flink, name)
    wait_checkpoint(client, old)
    request_rescale(fragile_flink, name, tmp_path)
    kill(fragile_flink, "taskexecutor")
    start_missing(fragile_flink)
    result = resume(fragile_flink, name, tmp_path)
    print(f"TaskManager killed during the savepoint: {result.outcome}: {result.message}")  # shown with -rP
    assert result.outcome in ("succeeded", "failed", "rolled-back"), result
    expected = {**{"Count": 1}, **(TARGET if result.outcome == "succeeded" else {})}
    job = assert_runs_at(client, name, expected)
    assert_state_continued(client, job)
    assert result.message and (result.new_flink_job_id in (job, None) or result.outcome != "succeeded")


def test_the_jobmanager_killed_after_the_savepoint_stopped_the_job(fragile_flink, tmp_path):
    client, name = fragile_flink.client, "pf-jm-after"
    old = start(fragile_flink, name)
    request_rescale(fragile_flink, name, tmp_path)
    wait_state(client, old, "FINISHED")  # the savepoint completed and stopped it; its answer was never read
    kill(fragile_flink, "standalonesession")
    start_missing(fragile_flink)  # a JobManager without high availability: it knows no job now
    assert running(client, name) == [] and all(j.id != old for j in client.jobs())
    result = resume(fragile_flink, name, tmp_path)
    assert result.outcome == "succeeded", result
    assert result.savepoint_path and "savepoint-" in result.savepoint_path
    job = assert_runs_at(client, name, {"Count": 3, "Parse": 1})
    assert job == result.new_flink_job_id
    assert_state_continued(client, job)


def test_the_jobmanager_killed_while_the_savepoint_was_taken(fragile_flink, tmp_path):
    """The savepoint cannot complete before the JobManager dies: the TaskManager is frozen (SIGSTOP) before the
    stop is requested, so it never acknowledges the savepoint's barrier, and is thawed once the JobManager is
    dead. Every run tests the window, instead of racing a savepoint that takes milliseconds."""
    client, name = fragile_flink.client, "pf-jm-during"
    old = start(fragile_flink, name)
    wait_checkpoint(client, old)
    taskmanager = daemon_pid(fragile_flink, "taskexecutor")
    os.kill(taskmanager, signal.SIGSTOP)
    try:
        request_rescale(fragile_flink, name, tmp_path)
        kill(fragile_flink, "standalonesession")
    finally:
        os.kill(taskmanager, signal.SIGCONT)
    assert not list((tmp_path / "sp").glob("savepoint-*/_metadata"))  # the window was hit: no savepoint completed
    start_missing(fragile_flink)
    result = resume(fragile_flink, name, tmp_path)
    assert result.outcome == "rolled-back", result
    assert "retained checkpoint" in result.message and "chk-" in (result.savepoint_path or "")
    job = assert_runs_at(client, name, {"Count": 1})
    assert_state_continued(client, job)


def test_rest_unreachable_during_collect_and_during_the_savepoint_wait(fragile_flink, tmp_path):
    client, name = fragile_flink.client, "pf-rest"
    start(fragile_flink, name)
    store = tmp_path / "store"
    request_rescale(fragile_flink, name, tmp_path)
    kill(fragile_flink, "standalonesession")
    with pytest.raises((FlinkError, InputError)) as caught:
        collect_epoch_metrics(client, name, "pf", 1, store, short_window_s=1)
    assert "127.0.0.1" in str(caught.value) and "Traceback" not in str(caught.value)
    assert not (store / "metrics").exists()  # nothing half-written
    with pytest.raises(FlinkError):
        resume(fragile_flink, name, tmp_path)  # the savepoint wait cannot ask Flink: the task fails and is retried
    start_missing(fragile_flink)
    result = resume(fragile_flink, name, tmp_path)
    assert result.outcome in ("succeeded", "rolled-back"), result
    job = assert_runs_at(client, name, TARGET if result.outcome == "succeeded" else {"Count": 1})
    assert_state_continued(client, job)
