"""Multi-configuration tuning on real Flink: profiling copies beside a running job, and a configuration applied.

- A round runs two copies of the running test job at once, each on a cluster of its own with the candidate's
  memory, from a savepoint of the job, at the forecast rate, within a budget of 2 slots; each copy is measured
  (max rate, checkpoints, a TaskManager killed and the restart timed) and stopped, its folder deleted, the
  savepoint disposed of. The job itself is never touched (same job id, no restart).
- A recommended configuration (parallelism, checkpoint interval, memory per slot, managed fraction) is applied
  through savepoint-and-restart: new TaskManagers with the memory replace the old ones, the interval is in
  force, and the keyed state is restored.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from autoscaler import testjob
from autoscaler.capacity.provider import LocalProcesses
from autoscaler.config.jobs import parse_jobs_each
from autoscaler.flink.client import FlinkConnection, FlinkRestClient
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import CAPACITY, PROFILES, TUNING
from autoscaler.tuning.apply import apply_configuration
from autoscaler.tuning.configuration import Configuration
from autoscaler.tuning.round import configuration_in_force, tune
from autoscaler.tuning.site import LocalClusters
from tests.conftest import ROOT
from tests.helpers import free_port
from tests.integration.conftest import FLINK_SH, wait_running
from tests.integration.test_rescale import assert_state_continued, wait_counted

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.tuning_long]  # make test-tuning
JOB, FLINK_JOB = "tune", "ds2-tune"
ARGS = ["--job-name", FLINK_JOB, "--rate", "1000", "--keys", "100", "--source-parallelism", "1"]


@pytest.fixture
def cluster(tmp_path):
    """One TaskManager of 4 slots (2 GiB), its own instance, stopped by its own pids; the job running at Count 1."""
    env = {**os.environ, "FLINK_DATA_DIR": str(tmp_path / "flink"), "FLINK_REST_PORT": str(free_port()),
           "FLINK_RPC_PORT": str(free_port()), "FLINK_SLOTS": "4"}  # fmt: skip
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT, capture_output=True)
    subprocess.run([str(FLINK_SH), "up"], check=True, cwd=ROOT, env=env)
    try:
        client = FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{env['FLINK_REST_PORT']}"))
        job_id = wait_running(client, client.run_jar(client.upload_jar(testjob.JAR), None, ARGS)).id
        wait_counted(client, job_id, 1500)
        yield client, job_id, tmp_path, env
    finally:
        subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)


def job_config(tmp_path: Path, env: dict[str, str], **tuning: object):
    entry = {"name": JOB, "flink_job_name": FLINK_JOB, "jar": str(testjob.JAR), "parallelism_args": testjob.PARALLELISM_ARGS,
             "base_args": ARGS, "savepoint_dir": str(tmp_path / "savepoints"),
             "capacity": {"provider": "local", "flink_data_dir": env["FLINK_DATA_DIR"]},
             "tuning": {"site": "local", "rate_flag": "--rate", "drop_flags": ["--rate-schedule"], **tuning}}  # fmt: skip
    jobs, errors = parse_jobs_each({"jobs": [entry]}, "test")
    assert not errors, errors
    return jobs[0]


def test_two_profiling_copies_run_beside_the_job_within_the_budget_and_are_cleaned_up(cluster):
    client, job_id, tmp_path, env = cluster
    site = LocalClusters(tmp_path / "profiles")
    config = job_config(tmp_path, env, max_slots=2, max_minutes=8, warmup="5s", measure="10s")
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # how many copies hold a cluster at once, all along the round
        while not stop.is_set():
            seen.append(len(site.copies()))
            stop.wait(0.5)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = tune(config, client, tmp_path / "store", epoch=7, site=site, force=True, rate=1500)
    finally:
        stop.set()
        watcher.join()

    assert len(result.profiles) == 2, result.message
    assert sum(p.configuration.slots for p in result.profiles) <= 2, "the copies held more slots than the budget"
    assert max(seen) == 2, f"the two copies did not run at once: {seen}"
    for p in result.profiles:
        assert p.outcome == "succeeded", p.message
        assert p.max_rate and p.max_rate > 0 and p.observed_rate and p.observed_rate > 0, p
        assert p.restart_s and p.restart_s > 0, "the killed TaskManager's restart was not timed"
        assert p.checkpoint_s is not None and p.checkpoint_bytes, "no checkpoint of the copy was measured"
        assert p.slot_seconds > 0
    # Cleaned up: no copy's cluster or folder is left, no copy's process runs, the savepoint is disposed of.
    assert site.copies() == [] and not any((tmp_path / "profiles").glob("copy-*"))
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(tmp_path / "profiles") not in ps, "a copy's Flink process still runs"
    assert not list((tmp_path / "savepoints").glob("savepoint-*")), "the round's savepoint was not disposed of"
    # The job itself ran on, untouched.
    job = next(j for j in client.jobs() if j.id == job_id)
    assert job.state == "RUNNING" and client.restarts(job_id) == 0
    # Recorded: one PROFILES row per copy, one TUNING row for the round.
    profiles = read_epochs(tmp_path / "store", PROFILES, JOB, [7]).to_pylist()
    assert sorted(r["copy_id"] for r in profiles) == sorted(p.copy_id for p in result.profiles)
    assert all(r["outcome"] == "succeeded" and r["restart_s"] > 0 for r in profiles)
    (row,) = read_epochs(tmp_path / "store", TUNING, JOB, [7]).to_pylist()
    assert row["profiles_run"] == 2 and row["forecast_rate"] == 1500 and row["outcome"] in ("recommended", "none"), row


def test_a_recommended_configuration_is_applied_through_savepoint_and_restart_with_state_kept(cluster):
    client, _job_id, tmp_path, env = cluster
    before, _slots_per_tm, _ = configuration_in_force(client, FLINK_JOB)
    assert (before.checkpoint_interval_s, before.memory_per_slot_mb, before.managed_fraction) == (10, 512, 0.4)
    config = job_config(tmp_path, env)
    new = Configuration.of({**before.operators, "Count": 2}, 30, 256, 0.2)
    provider = LocalProcesses(env["FLINK_DATA_DIR"], client.base_url)

    result = apply_configuration(client, config.deployment, new, "tune-apply-1", tmp_path / "journal", provider,
                                 tmp_path / "store", JOB, 3, config.tuning.min_taskmanager_mb)  # fmt: skip

    assert result.outcome == "succeeded", result.message
    after, _, _ = configuration_in_force(client, FLINK_JOB)
    assert after == new, f"in force after the restart: {after.key()}, not {new.key()}"
    tms = client.get("/taskmanagers")["taskmanagers"]
    assert [t["id"] for t in tms] == ["cfg-tune-3-1"], "the old TaskManager was not replaced by one with the new memory"
    memory = client.get("/taskmanagers/cfg-tune-3-1")["memoryConfiguration"]
    assert memory["totalProcessMemory"] == 1024 * 1024 * 1024  # 256 MB x 4 slots, at Flink's floor of 1 GiB
    assert_state_continued(client, result.new_flink_job_id)
    events = sorted((r["event"], r["outcome"]) for r in read_epochs(tmp_path / "store", CAPACITY, JOB, [3]).to_pylist())
    assert events == [("add", "succeeded"), ("release", "succeeded")]
    assert "execution.checkpointing.interval" in result.message and "replaced ['tm-1']" in result.message


def test_the_tuning_dag_profiles_recommends_applies_and_cleans_up(cluster):
    """The DAG with ``dag.test()`` on a temporary Airflow DB: a forced round of one copy at 256 MB per slot (the only
    memory candidate), the recommendation applied through savepoint-and-restart, the TUNING row marked applied."""
    from airflow.dag_processing.dagbag import BundleDagBag

    from tests.integration.scaling_setup import dag_test_environment

    client, _job_id, tmp_path, env = cluster
    entry = {"name": "tuned", "flink_job_name": FLINK_JOB, "flink_conn_id": "flink_test", "jar": str(testjob.JAR),
             "base_args": ARGS, "parallelism_args": testjob.PARALLELISM_ARGS, "savepoint_dir": str(tmp_path / "savepoints"),
             "capacity": {"provider": "local", "flink_data_dir": env["FLINK_DATA_DIR"]},
             "tuning": {"site": "local", "rate_flag": "--rate", "max_slots": 1, "warmup": "5s", "measure": "10s",
                        "memory_per_slot_mb": ["256"], "checkpoint_intervals": ["10s"], "managed_fractions": ["0.4"],
                        "recovery_target": "10m"}}  # fmt: skip
    shim = type("Flink", (), {"client": client})()
    (tmp_path / "data").mkdir()
    with dag_test_environment(shim, tmp_path / "data", [entry]) as data:  # type: ignore[arg-type]
        bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=str(ROOT / "dags"))
        assert bag.import_errors == {}
        run = bag.dags["ds2__tuning_tuned"].test(run_conf={"force": True, "rate": 1500})
        states = {ti.task_id: ti.state for ti in run.get_task_instances()}
        assert states == {"tune": "success", "decide": "success", "apply": "success", "cleanup": "success"}, states
        (row,) = read_epochs(data / "store", TUNING, "tuned").to_pylist()
        assert row["outcome"] == "applied" and row["profiles_run"] == 1, row
        in_force, _, _ = configuration_in_force(client, FLINK_JOB)
        assert in_force.memory_per_slot_mb == 256, in_force.key()
        assert LocalClusters(data / "profiles").copies() == []
