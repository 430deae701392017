"""The cluster mode end to end (``make cluster-test``), with faults injected while work is in flight.

One cluster of ``scripts/ds2_cluster.py`` (what ``make cluster-up`` starts) and two jobs on its
two-TaskManager Flink, their scaling DAGs run by the Celery workers:

1. ``auto`` (30,000 records/s, Count at 1: DS2 asks for 6, more than one TaskManager holds) is rescaled
   with no approval. The Celery worker running its rescale is killed with all it forked: the attempt
   stops heartbeating, the scheduler fails it, and the retry completes the rescale on the other worker,
   once (one new Flink job, the keyed counts continued).
2. ``gated`` (10,000 records/s, Count 1 -> 2) waits for an approval, given through the REST API.
3. A TaskManager is killed: both jobs recover from their checkpoints once it is back (the same job
   ids), and the first epoch after it says the window spans a restart instead of deciding on it.
4. A backfill of ``auto``'s past epochs on the Spark cluster, with a Spark worker killed while it runs:
   it completes, with the decisions the live runs made.
5. Redis is restarted while runs are in flight: no run is lost.
6. ``down`` leaves no process.
"""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from autoscaler.config.jobs import load_jobs
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS
from tests.cluster.cluster_setup import Cluster, alive, job_args, job_entry, kill_host, start_cluster
from tests.conftest import ROOT
from tests.helpers import poll
from tests.integration.airflow_fixtures import _instance_env
from tests.integration.conftest import wait_running
from tests.integration.test_flink_taskmanagers import hosts_of
from tests.integration.test_rescale import assert_state_continued

pytestmark = [pytest.mark.cluster, pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]
INTERVAL_S = 30
REDIS_SH = ROOT / "scripts" / "redis.sh"
CELERY_ENV = ROOT / "conf" / "airflow" / "celery.env"


@pytest.fixture(scope="module")
def cluster():
    # The first epoch starts after the cluster is up and the jobs run (about 2 minutes on 2 cores).
    start = datetime.fromtimestamp(math.ceil((time.time() + 180) / INTERVAL_S) * INTERVAL_S, tz=UTC).isoformat()
    approval = {"required": True, "approvers": ["admin"], "timeout": "30m", "on_timeout": "reject"}
    yield from start_cluster(
        lambda folder: [
            job_entry("auto", 30000, INTERVAL_S, folder, start_date=start),
            job_entry("gated", 10000, INTERVAL_S, folder, start_date=start, approval=approval),
        ]
    )


def submit(cluster: Cluster, name: str, rate: int) -> str:
    from autoscaler import testjob

    client = cluster.flink
    jar = client.upload_jar(testjob.JAR)
    job_id = client.run_jar(jar, None, [*job_args(name, rate), "--count-parallelism", "1"])
    wait_running(client, job_id, 120)
    return job_id


def runs(server, dag: str, run_type: str = "scheduled") -> list[dict]:
    params = {"run_type": run_type, "order_by": "-logical_date", "limit": 50}
    return server.api("GET", f"/api/v2/dags/{dag}/dagRuns", params=params)["dag_runs"]


def task(server, dag: str, run_id: str, task_id: str) -> dict:
    return server.api("GET", f"/api/v2/dags/{dag}/dagRuns/{run_id}/taskInstances/{task_id}", ok=(200, 404)) or {}


def worker_that_ran(cluster: Cluster, run_id: str, task_id: str, try_number: int) -> int | None:
    """Which Celery worker (1 or 2) logged executing that attempt, from the workers' own logs."""
    for n in (1, 2):
        log = (cluster.folder / "airflow" / "logs" / f"celery-worker-{n}.log").read_text(errors="replace")
        for line in log.splitlines():
            if "Executing workload in Celery" in line and f"run_id='{run_id}'" in line and f"task_id='{task_id}'" in line \
                    and f"try_number={try_number}," in line:  # fmt: skip
                return n
    return None


def kill_the_worker_running_the_rescale(cluster: Cluster, server, dag: str) -> tuple[dict, int]:
    """Kill the Celery worker that runs a rescale of ``dag`` (with all it forked) and wait for the run: its
    retry succeeds on the other worker. Returns the run and the killed worker's number."""

    def rescale_running():
        for run in runs(server, dag):
            ti = task(server, dag, run["dag_run_id"], "rescale")
            if ti.get("state") == "running":
                worker = worker_that_ran(cluster, run["dag_run_id"], "rescale", ti["try_number"])
                return (run, ti, worker) if worker else None
        return None

    run, ti, worker = poll(f"{dag}'s rescale running on a Celery worker", rescale_running, 420, 0.2)
    killed = kill_host(cluster.celery_worker_pid(worker), f"celery-worker-{worker}")
    print(f"killed celery-worker-{worker} (pids {killed}) while it ran {run['dag_run_id']} rescale try {ti['try_number']}")
    assert server.wait_run(dag, run["dag_run_id"], timeout_s=420) == "success"
    retried = task(server, dag, run["dag_run_id"], "rescale")
    assert retried["state"] == "success" and retried["try_number"] > ti["try_number"], retried
    assert worker_that_ran(cluster, run["dag_run_id"], "rescale", retried["try_number"]) == 3 - worker
    return run, worker


def records_through(client, job_id: str, vertex: str) -> list[int] | None:
    """Records each subtask of ``vertex`` has read, once every one has read some; else None (and what
    every vertex has read and written, to the log)."""
    details = client.job(job_id)
    counts = [c.records_in for c in client.subtask_counters(job_id, details.vertex(vertex).id)]
    if counts and all(n > 0 for n in counts):
        return counts
    flow = {
        v.name: [(c.records_in, c.records_out, c.status) for c in client.subtask_counters(job_id, v.id)] for v in details.vertices
    }
    print(f"{time.strftime('%H:%M:%S')} not yet: {flow}")
    return None


def actions(cluster: Cluster, job: str) -> dict[int, dict]:
    return {a["epoch"]: a for a in read_epochs(cluster.folder / "store", ACTIONS, job).to_pylist()}


def status_ok(cluster: Cluster) -> str:
    res = cluster.run("status")
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_the_cluster_mode_end_to_end_with_faults(cluster):
    print(f"cluster up in {cluster.up_seconds:.1f} s")
    client, server = cluster.flink, cluster.airflow()
    jobs = {j.name: j for j in load_jobs(cluster.folder / "jobs.yaml")}
    # The topology and the settings the compose file describes.
    assert len(client.get("/taskmanagers")["taskmanagers"]) == 2 and client.overview()["slots-total"] == 8
    instance = _instance_env({**cluster.env, "AIRFLOW_HOME": str(cluster.folder / "airflow")})
    for line in CELERY_ENV.read_text().splitlines():
        if line and not line.startswith("#"):
            key, value = line.split("=", 1)
            assert instance[key] == value, key
    assert re.fullmatch(r"redis://:\w+@127\.0\.0\.1:\d+/0", instance["AIRFLOW__CELERY__BROKER_URL"])
    status = status_ok(cluster)
    assert "celery-worker-1" in status and "celery-worker-2" in status and "workers: 2 running" in status
    assert "kafka: running on" in status, status  # the broker of the cluster, as the compose file's kafka service
    originals = {"auto": submit(cluster, "auto", 30000), "gated": submit(cluster, "gated", 10000)}

    # 1. auto's rescale; the Celery worker running it is killed with everything it forked.
    run, _ = kill_the_worker_running_the_rescale(cluster, server, "ds2_auto")
    epoch = jobs["auto"].epoch_of(datetime.fromisoformat(run["data_interval_end"]))
    action = poll("auto's action row", lambda: actions(cluster, "auto").get(epoch), 60)
    assert action["outcome"] == "succeeded", action
    named = [j for j in client.jobs() if j.name == "ds2-auto"]
    assert len(named) == 2 and {j.state for j in named} == {"FINISHED", "RUNNING"}, named  # rescaled once
    auto = client.running_job("ds2-auto").id
    assert auto == action["new_flink_job_id"] and client.job(auto).parallelism["Count"] == 6
    flowing = poll("records through every Count subtask of the new job", lambda: records_through(client, auto, "Count"), 180, 1)
    print(f"the rescaled job's Count subtasks have read {flowing} records")
    assert_state_continued(client, auto)
    count = client.job(auto).vertex("Count")
    assert len(hosts_of(client, auto, count.id)) == 2  # 6 instances: more than one TaskManager's 4 slots
    print(f"auto rescaled 1 -> 6 once, on the other worker; downtime {action['downtime_s']} s: {action['message']}")
    cluster.run("up")  # starts the killed worker again
    assert "celery-worker-1" in status_ok(cluster)

    # 2. gated waits for an approval, given through the REST API.
    def pending():
        body = server.api("GET", "/api/v2/dags/~/dagRuns/~/hitlDetails", params={"response_received": "false"})
        items = [d for d in body["hitl_details"] if d["task_instance"]["dag_id"] == "ds2_gated"]
        parked = items and task(server, "ds2_gated", items[0]["task_instance"]["dag_run_id"], "approve").get("state")
        return items[0] if parked == "awaiting_input" else None

    detail = poll("gated's pending approval", pending, 300, 1)
    assert "| Count | 1 → **2** |" in detail["body"], detail["body"]
    run_id = detail["task_instance"]["dag_run_id"]
    # Answered once the attempt has been parked for a while: an answer before the scheduler processed the
    # parked attempt fails the task (Airflow 3.3.2; see test_scaling_scheduler._awaiting).
    parked_since = time.monotonic()
    poll("the approval parked for 3 s", lambda: task(server, "ds2_gated", run_id, "approve")["state"] == "awaiting_input"
         and time.monotonic() - parked_since >= 3, 30, 0.5)  # fmt: skip
    server.api("PATCH", f"/api/v2/dags/ds2_gated/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails",
               json={"chosen_options": ["Approve"], "params_input": {}})  # fmt: skip
    assert server.wait_run("ds2_gated", run_id, timeout_s=300) == "success"
    run = server.api("GET", f"/api/v2/dags/ds2_gated/dagRuns/{run_id}")
    epoch = jobs["gated"].epoch_of(datetime.fromisoformat(run["data_interval_end"]))
    action = poll("gated's action row", lambda: actions(cluster, "gated").get(epoch), 60)
    assert action["outcome"] == "succeeded" and action["approved_by"], action
    gated = client.running_job("ds2-gated").id
    assert gated != originals["gated"] and client.job(gated).parallelism["Count"] == 2
    print(f"gated rescaled 1 -> 2 after an approval by {action['approved_by']}")

    # 3. A TaskManager dies; both jobs recover once it is back, and the next epoch says so.
    killed_at = time.time()
    tm = cluster.taskmanager_pids()[0]
    kill_host(tm, "a TaskManager")
    res = cluster.run("up")
    assert res.returncode == 0, res.stdout + res.stderr
    for name, job_id in (("ds2-auto", auto), ("ds2-gated", gated)):
        wait_running(client, job_id, 240)  # the same job id: recovered from its checkpoint
        assert client.running_job(name).id == job_id
    recovered_at = time.time()
    print(f"TaskManager {tm} killed; both jobs running again after {recovered_at - killed_at:.1f} s")
    # The epoch whose interval holds the kill, and the epochs after it up to the first one decided on the
    # recovered job: none acts, and none whose window spans the failure is decided on (the window is
    # quarantined by validation, or its decision says it spans a restart).
    kill_epoch = jobs["auto"].epoch_of(datetime.fromtimestamp(killed_at, tz=UTC)) + 1
    store = cluster.folder / "store"

    def live_count_decisions() -> dict[int, dict]:
        rows = read_epochs(store, DECISIONS, "auto").to_pylist()
        return {
            r["epoch"]: r for r in rows if r["epoch"] >= kill_epoch and r["operator_name"] == "Count" and r["run_type"] == "live"
        }

    def decided_on_the_recovered_job() -> int | None:
        acted = actions(cluster, "auto")
        ok = [
            e
            for e, r in sorted(live_count_decisions().items())
            if r["status"] == "ok" and r["instances_observed"] == 6 and e in acted
        ]
        return ok[0] if ok else None

    first_ok = poll("an epoch of auto decided on the recovered job", decided_on_the_recovered_job, 8 * INTERVAL_S, 2)
    decided, acted = live_count_decisions(), actions(cluster, "auto")
    windows: dict[int, list[tuple[float, float]]] = {}
    for m in read_epochs(store, METRICS, "auto", range(kill_epoch, first_ok + 1)).to_pylist():
        windows.setdefault(m["epoch"], []).append((m["window_start"].timestamp(), m["window_end"].timestamp()))
    for e in range(kill_epoch, first_ok + 1):
        action = acted.get(e)
        assert action is None or action["outcome"] in ("noop", "skipped"), action
        spans = any(start < recovered_at and end > killed_at for start, end in windows.get(e, []))
        if spans and e in decided:
            assert decided[e]["status"] != "ok", (e, decided[e]["reason"])
        print(f"epoch {e}: {action['outcome'] if action else 'no action'}: {action['message'][:160] if action else ''}")
    assert decided[first_ok]["target_parallelism"] == 6, decided[first_ok]  # the recovered job at 6 needs no change

    # 4. A backfill of auto's decided epochs on the Spark cluster; a Spark worker dies while it runs.
    live = {
        (d["epoch"], d["operator_name"]): (d["status"], d["target_parallelism"])
        for d in read_epochs(cluster.folder / "store", DECISIONS, "auto").to_pylist()
        if d["run_type"] == "live"
    }
    epochs = sorted({e for e, _ in live})
    first, last = epochs[0], epochs[-1]
    server.api("POST", "/api/v2/backfills", json={
        "dag_id": "ds2_auto", "from_date": jobs["auto"].epoch_start(first).isoformat(),
        "to_date": jobs["auto"].epoch_start(last).isoformat(), "reprocess_behavior": "completed", "max_active_runs": 1,
    })  # fmt: skip

    def backfill_policy_running():
        for r in runs(server, "ds2_auto", "backfill"):
            if task(server, "ds2_auto", r["dag_run_id"], "policy").get("state") == "running":
                return r
        return None

    poll("the backfill's policy task running", backfill_policy_running, 300, 0.1)
    killed = kill_host(cluster.spark_worker_pid(1), "Spark worker-1")
    print(f"killed Spark worker-1 and its executor (pids {killed}) during the backfill")

    def backfill_done():
        rs = runs(server, "ds2_auto", "backfill")  # one per interval, also those quarantined live (no decision)
        return rs if len(rs) == last - first + 1 and all(r["state"] in ("success", "failed") for r in rs) else None

    done = poll("the backfill's runs to finish", backfill_done, 600, 2)
    assert {r["state"] for r in done} == {"success"}, [(r["dag_run_id"], r["state"]) for r in done]
    again = {
        (d["epoch"], d["operator_name"]): (d["status"], d["target_parallelism"])
        for d in read_epochs(cluster.folder / "store", DECISIONS, "auto", range(first, last + 1)).to_pylist()
    }
    kinds = {d["run_type"] for d in read_epochs(cluster.folder / "store", DECISIONS, "auto", range(first, last + 1)).to_pylist()}
    assert kinds == {"backfill"}, kinds
    # Every epoch decided live is decided alike. An epoch the live run found not decidable (its window
    # spans a restart: validation stops it before the policy) gets the policy's own "no change" rows now.
    assert {k: v for k, v in again.items() if k in live} == {k: v for k, v in live.items() if first <= k[0] <= last}
    extra = {k: v for k, v in again.items() if k not in live}
    assert all(status != "ok" for status, _ in extra.values()), extra
    print(f"backfill of epochs {first}..{last}: {len(again) - len(extra)} decisions equal to the live ones, "
          f"{len(extra)} more marked {sorted({status for status, _ in extra.values()})}")  # fmt: skip
    cluster.run("up")  # the Spark worker again
    assert "workers: 2 running" in status_ok(cluster)

    # 5. Redis restarts while runs are in flight: every interval's run still completes.
    def live_run_in_flight():
        return next((r for r in runs(server, "ds2_auto") if r["state"] in ("queued", "running")), None)

    poll("a live run of auto in flight", live_run_in_flight, 3 * INTERVAL_S, 0.2)
    restarted_at = time.time()
    res = subprocess.run([str(REDIS_SH), "restart"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**cluster.env, "REDIS_DATA_DIR": str(cluster.folder / "redis")})  # fmt: skip
    assert res.returncode == 0, res.stderr
    until = restarted_at + 3 * INTERVAL_S

    def ends(run: dict) -> float:
        return datetime.fromisoformat(run["data_interval_end"]).timestamp()

    def runs_after_restart(dag: str) -> list[dict] | None:
        rs = [r for r in runs(server, dag) if restarted_at - INTERVAL_S <= ends(r) <= until]
        return rs if time.time() > until and rs and all(r["state"] in ("success", "failed") for r in rs) else None

    for dag in ("ds2_auto", "ds2_gated"):
        rs = poll(f"{dag}'s runs around the Redis restart", lambda d=dag: runs_after_restart(d), 8 * INTERVAL_S, 2)
        boundaries = sorted(ends(r) for r in rs)
        assert all(b - a == INTERVAL_S for a, b in itertools.pairwise(boundaries)), boundaries  # no interval lost
        assert {r["state"] for r in rs} == {"success"}, [(r["dag_run_id"], r["state"]) for r in rs]
        print(f"{dag}: {len(rs)} runs around the Redis restart, all succeeded")

    # 6. Everything goes down, and no process is left.
    pids = cluster.recorded_pids()
    res = cluster.run("down")
    assert res.returncode == 0, res.stdout + res.stderr
    assert not [p for p in pids if alive(p)], "left running after down"
    assert not re.search(r"still running", res.stdout + res.stderr)
    assert Path(cluster.folder / "cluster.json").is_file()
