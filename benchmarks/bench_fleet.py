"""The autoscaler's own cost and latency for a fleet of real jobs, and the policy alone for 100 jobs.

One local stack (scripts/ds2_local.py's: Flink, the warm Spark Connect engine, PostgreSQL and
Airflow with its four services), N test jobs on the one Flink cluster (1 source subtask each, a
light constant load that needs no rescale), each with its scaling DAG at ``--interval``. For each
N in ``--jobs`` the CPU time of the autoscaler's processes (the Airflow services and every task
process they start, the Spark Connect server, PostgreSQL) is read from /proc over ``--epochs``
whole intervals, and divided by the job-epochs that ran. Flink's own CPU (the workload) is not
counted. N = 0 (no job registered) gives the idle cost of the stack.

Latency per run, from the Airflow API: epoch end -> the decide task finished (the decision is
available) and -> the run finished; and the policy task's duration.

``--policy-jobs 100``: the policy alone for 100 jobs' epochs through the warm engine (one real
test-job epoch copied per job), run as the policy task runs it (a client session per job), one
after the other; server and client CPU and wall time.

``--batched``: the jobs are registered with ``batched: true``: one fleet run per interval
(``ds2_fleet_<interval>s``) collects, validates and decides them all; latency is read from its
``decide_jobs`` task, and a fleet run that finishes counts as one run per job it decided.

``--replay``: the jobs are served by the Flink REST replay (``benchmarks/flink_replay.py``: the
counters recorded from the real test job, advancing with time) instead of running on Flink, for
fleets larger than this machine's Flink holds. Its CPU is the workload's, like Flink's: not counted.

``--hog N``: N busy processes run through the measured intervals (2 cores: N = 4 keeps the load
at 4 or more). Afterwards the runs may drain (up to 5 minutes), and the epochs that ended in the
measured intervals are counted: decided (late or not) or lost, with epoch end -> decision.

``--executor celery``: Airflow as the cluster mode runs it (the CeleryExecutor with two workers on the
project's Redis broker, conf/airflow/celery.env); Redis counts as the autoscaler's.

    .venv/bin/python benchmarks/bench_fleet.py [--jobs 0,1,5,10] [--interval 30] [--epochs 4]
        [--policy-jobs 100] [--executor local|celery] [--batched] [--replay] [--hog 4] [--results benchmarks/results/fleet]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "include"), str(ROOT / "plugins")]

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import load_script, machine, machine_line, write_results  # noqa: E402

from autoscaler import testjob  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
FIXTURE = ROOT / "tests" / "fixtures" / "flink-epoch"


def load_local() -> Any:
    return load_script("ds2_local", ROOT / "scripts" / "ds2_local.py")


def _procs() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, cpu seconds incl. reaped children)."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ppid = int(fields[1])
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        out[int(entry.name)] = (ppid, (utime + stime + cutime + cstime) / TICK)
    return out


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds of the processes under ``roots`` (live ones, and the children they reaped)."""
    procs = _procs()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, stack, seen = 0.0, list(roots), set()
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in procs:
            continue
        seen.add(pid)
        total += procs[pid][1]
        stack += children.get(pid, [])
    return total


def pid_file(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


CELERY = {"AIRFLOW_EXECUTOR": "CeleryExecutor", "AIRFLOW_CELERY_WORKERS": "2", "AIRFLOW_PARALLELISM": "16"}


class Stack:
    def __init__(self, local: Any, folder: Path, executor: str = "local") -> None:
        self.folder = folder
        self.stack = local.Stack(folder, local.free_port(18081), local.free_port(18080), {
            "DS2_DATA_DIR": str(folder / "data"), "DS2_JOBS_CONFIG": str(folder / "jobs.yaml"), "FLINK_SLOTS": "12",
            "REDIS_DATA_DIR": str(folder / "redis"), **(CELERY if executor == "celery" else {}),
        })  # fmt: skip
        self.session = requests.Session()

    def groups(self) -> dict[str, list[int]]:
        f = self.folder
        airflow = [p for p in (pid_file(x) for x in (f / "airflow" / "pids").glob("*.pid")) if p]
        return {
            "airflow": airflow,
            "spark": [p for p in [pid_file(f / "spark" / "pids" / "connect.pid")] if p],
            "postgres": [p for p in [pid_file(f / "postgres" / "postgres.pid")] if p],
            "redis": [p for p in [pid_file(f / "redis" / "redis.pid")] if p],
            "flink": [p for p in (pid_file(x) for x in (f / "flink" / "pids").glob("*.pid")) if p],
        }

    def cpu(self) -> dict[str, float]:
        return {name: tree_cpu(pids) for name, pids in self.groups().items()}

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        if not hasattr(self, "_token"):
            password = (self.stack.folder / "airflow" / "admin-password").read_text().strip()
            login = {"username": "admin", "password": password}
            r = self.session.post(f"{self.stack.airflow_url}/auth/token", json=login, timeout=30)
            self._token = r.json()["access_token"]
        r = self.session.request(method, f"{self.stack.airflow_url}{path}", headers={"Authorization": f"Bearer {self._token}"},
                                 timeout=60, **kwargs)  # fmt: skip
        r.raise_for_status()
        return r.json() if r.content else None


def job_entries(n: int, interval: int, start: datetime, batched: bool = False, replay: bool = False) -> list[dict[str, Any]]:
    return [
        {
            "name": f"fleet{i}",
            "flink_job_name": f"ds2-fleet-{i}",
            "jar": str(testjob.JAR),
            "base_args": ["--job-name", f"ds2-fleet-{i}", "--rate", "1000", "--source-parallelism", "1"],
            "parallelism_args": testjob.PARALLELISM_ARGS,
            "policy_interval": f"{interval}s",
            "start_date": start.isoformat(),
            "collect": {"short_window": "5s"},
            **({"batched": True} if batched else {}),
            **({"flink_conn_id": "flink_replay"} if replay else {}),
        }
        for i in range(n)
    ]


def run_fleet(args: argparse.Namespace, local: Any, work: Path) -> list[dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    s = Stack(local, work, args.executor)
    results = []
    (work / "jobs.yaml").write_text(yaml.safe_dump({"version": 1, "jobs": []}))
    replay: subprocess.Popen | None = None
    if args.replay:
        replay_port = local.free_port(18091)
        conn = {"conn_type": "flink", "host": "127.0.0.1", "port": replay_port, "extra": {"timeout": 30}}
        s.stack.env.update({"AIRFLOW_CONN_FLINK_REPLAY": json.dumps(conn), "DS2_REPLAY_PORT": str(replay_port)})
    try:
        if not args.replay:
            s.stack.flink_up()
        s.stack.spark_up()
        s.stack.airflow_up()
        client = s.stack.client()
        for n in args.jobs:
            start = datetime.fromtimestamp(math.ceil((time.time() + 40) / args.interval) * args.interval, tz=UTC)
            entries = job_entries(n, args.interval, start, args.batched, args.replay)
            if args.replay:
                replay = start_replay(s, n, replay)
            else:
                for e in entries:
                    if client.find_job(e["flink_job_name"]) is None:
                        s.stack.submit([*e["base_args"]])
                for i in range(n, max(args.jobs)):  # jobs of a larger fleet measured before: stop them
                    job = client.find_job(f"ds2-fleet-{i}")
                    if job is not None:
                        client.cancel(job.id)
            (work / "jobs.yaml").write_text(yaml.safe_dump({"version": 1, "jobs": entries}, sort_keys=False))
            # Each job's one-slot pool, as after registering jobs in a running deployment.
            bootstrap = 'eval "$(scripts/airflow.sh env)" && python -m ds2_airflow.bootstrap'
            subprocess.run(["bash", "-c", bootstrap], cwd=ROOT, env=s.stack.env, check=True, capture_output=True)
            # Two intervals to settle (DAGs parsed, first runs), then whole intervals measured.
            first = start.timestamp() + 2 * args.interval
            while time.time() < first + 1:
                time.sleep(0.5)
            t0, c0 = time.time(), s.cpu()
            end = first + args.epochs * args.interval
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
            try:
                while time.time() < end + 1:
                    time.sleep(0.5)
                load = os.getloadavg()
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
            t1, c1 = time.time(), s.cpu()
            results.append(measure(s, n, args, t0, t1, {k: c1[k] - c0.get(k, 0.0) for k in c1}, (first, end)))
            if args.hog:
                results[-1]["hog"] = {"processes": args.hog, "load_at_end": [round(x, 2) for x in load],
                                      **epochs_decided(s, n, args, first, end)}  # fmt: skip
            print(json.dumps(results[-1]), flush=True)
    finally:
        if replay is not None:
            replay.terminate()
            replay.wait(30)
        s.stack.down()
        subprocess.run([str(ROOT / "scripts" / "redis.sh"), "down"], cwd=ROOT, env=s.stack.env, check=False)
    return results


def start_replay(s: Stack, n: int, running: subprocess.Popen | None) -> subprocess.Popen:
    """The Flink REST replay serving ``n`` jobs (a fleet size measured before is replaced)."""
    if running is not None:
        running.terminate()
        running.wait(30)
    port = s.stack.env["DS2_REPLAY_PORT"]
    args = [sys.executable, str(ROOT / "benchmarks" / "flink_replay.py"), "serve", "--jobs", str(n), "--port", port]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/overview", timeout=2).ok:
                return proc
        except requests.RequestException:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the Flink REST replay did not answer on port {port} within 30 s")


def measure(s: Stack, n: int, args: argparse.Namespace, t0: float, t1: float, cpu: dict[str, float],
            due: tuple[float, float]) -> dict:  # fmt: skip
    """Figures of the runs that finished inside the measured window [t0, t1], with the CPU spent in it.

    ``runs_finished`` counts the runs of the epochs due in the window (interval end in ``due``), so it never
    exceeds ``runs_due``; runs of earlier epochs that a fleet behind schedule finished in the window are
    ``runs_finished_from_before``. The CPU per job-epoch divides the window's CPU by every run finished in it,
    since those are the runs it paid for."""
    latencies, finished, before, failed, lag, failures = [], 0, 0, 0, [], []
    dags = [f"ds2_fleet_{args.interval}s"] if args.batched and n else [f"ds2_fleet{i}" for i in range(n)]
    per_run = n if args.batched else 1  # a fleet run decides every job's epoch
    decide, policy = ("decide_jobs", "decide_jobs") if args.batched else ("decide", "policy")
    for dag in dags:
        runs = s.api("GET", f"/api/v2/dags/{dag}/dagRuns", params={"limit": 200})["dag_runs"]
        for run in runs:
            if not run.get("end_date") or not t0 <= datetime.fromisoformat(run["end_date"]).timestamp() <= t1:
                continue
            interval_end = datetime.fromisoformat(run["data_interval_end"]).timestamp()
            if due[0] < interval_end <= due[1]:
                finished += per_run
            else:
                before += per_run
            failed += per_run if run["state"] == "failed" else 0
            tis = s.api("GET", f"/api/v2/dags/{dag}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]
            by = {t["task_id"]: t for t in tis}
            if run["state"] == "failed":
                failed_tasks = [t["task_id"] for t in tis if t["state"] == "failed"]
                failures.append(run_failure(s.folder, dag, run["dag_run_id"], failed_tasks))

            def after(t: str | None, at: float = interval_end) -> float | None:
                return datetime.fromisoformat(t).timestamp() - at if t else None

            latencies.append({
                "decision_s": after(by.get(decide, {}).get("end_date")),
                "run_s": after(run.get("end_date")),
                "policy_s": by.get(policy, {}).get("duration"),
                "policy_state": by.get(policy, {}).get("state"),
            })  # fmt: skip
        ended = [datetime.fromisoformat(r["data_interval_end"]).timestamp() for r in runs if r.get("end_date")]
        lag.append(t1 - max(ended, default=t0))
    autoscaler = cpu["airflow"] + cpu["spark"] + cpu["postgres"] + cpu.get("redis", 0.0)
    wall = t1 - t0

    def med(key: str) -> float | None:
        values = [x[key] for x in latencies if x[key] is not None]
        return round(statistics.median(values), 2) if values else None

    return {
        "jobs": n, "interval_s": args.interval, "epochs": args.epochs, "wall_s": round(wall, 1),
        "cpu_s": {k: round(v, 1) for k, v in cpu.items()}, "autoscaler_cpu_s": round(autoscaler, 1),
        "autoscaler_cores": round(autoscaler / wall, 3),
        "runs_finished": finished, "runs_due": n * args.epochs, "runs_finished_from_before": before, "failed_runs": failed,
        "cpu_s_per_job_epoch": round(autoscaler / (finished + before), 2) if finished + before else None,
        "max_lag_s": round(max(lag), 1) if lag else None,
        "median_epoch_end_to_decision_s": med("decision_s"), "median_epoch_end_to_run_end_s": med("run_s"),
        "median_policy_task_s": med("policy_s"),
        "policy_tasks_run": sum(1 for x in latencies if x["policy_state"] == "success"),
        "batched": bool(args.batched),
        **({"median_stage_s": stage_seconds(s.folder, t0, t1)} if args.batched else {}),
        "failures": failures[:10],
    }  # fmt: skip


def epochs_decided(s: Stack, n: int, args: argparse.Namespace, first: float, end: float, drain_s: float = 300) -> dict:
    """Of the epochs that ended in (first, end], how many were decided (late or not), once the runs drained.

    An epoch counts as decided when a run exists for its data interval and its decide task
    succeeded; an interval the scheduler never made a run for counts as lost.
    """
    dags = [f"ds2_fleet_{args.interval}s"] if args.batched else [f"ds2_fleet{i}" for i in range(n)]
    decide = "decide_jobs" if args.batched else "decide"
    due = [first + k * args.interval for k in range(1, round((end - first) / args.interval) + 1)]
    deadline = time.time() + drain_s
    while True:
        found: dict[tuple[str, float], dict] = {}
        for dag in dags:
            for run in s.api("GET", f"/api/v2/dags/{dag}/dagRuns", params={"limit": 200})["dag_runs"]:
                found[(dag, datetime.fromisoformat(run["data_interval_end"]).timestamp())] = run
        pending = [r for key, r in found.items() if key[1] in due and r["state"] not in ("success", "failed")]
        if not pending or time.time() > deadline:
            break
        time.sleep(2)
    decided, late = 0, []
    for dag in dags:
        for at in due:
            run = found.get((dag, at))
            if run is None:
                continue
            tis = s.api("GET", f"/api/v2/dags/{dag}/dagRuns/{run['dag_run_id']}/taskInstances")["task_instances"]
            task = next((t for t in tis if t["task_id"] == decide), None)
            if task and task["state"] == "success" and task.get("end_date"):
                decided += 1
                late.append(datetime.fromisoformat(task["end_date"]).timestamp() - at)
    per_run = n if args.batched else 1
    return {
        "epochs_due": len(due) * len(dags) * per_run, "epochs_decided": decided * per_run,
        "epoch_end_to_decision_s": {"median": round(statistics.median(late), 1), "max": round(max(late), 1)} if late else None,
    }  # fmt: skip


STAGES = re.compile(r"seconds per stage for (\d+) jobs: ([a-z]+ [0-9.]+(?:, [a-z]+ [0-9.]+)*)")


def run_failure(folder: Path, dag: str, run_id: str, tasks: list[str]) -> dict[str, Any]:
    """A failed run's failed tasks, with the last error line each task logged (why the run failed)."""
    errors = {}
    for task in tasks:
        for log in sorted(folder.rglob(f"dag_id={dag}/run_id={run_id}/task_id={task}/attempt=*.log")):
            lines = [line for line in log.read_text(errors="replace").splitlines() if '"level":"error"' in line.replace(" ", "")]
            errors[task] = lines[-1][:600] if lines else ""
    return {"run_id": run_id, "failed_tasks": tasks, "errors": errors}


def stage_seconds(folder: Path, t0: float, t1: float) -> dict[str, float]:
    """Median seconds per stage of the fleet runs' decide_jobs tasks whose log was last written in [t0, t1]."""
    per_stage: dict[str, list[float]] = {}
    for log in folder.rglob("task_id=decide_jobs/attempt=*.log"):
        if not t0 <= log.stat().st_mtime <= t1 + 60:
            continue
        for match in STAGES.finditer(log.read_text(errors="replace")):
            for part in match.group(2).split(", "):
                name, value = part.split(" ")
                per_stage.setdefault(name, []).append(float(value))
    return {k: round(statistics.median(v), 2) for k, v in per_stage.items()}


POLICY_RUN = """
import json, os, sys, time
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark import engine
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
url, store, topology, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
times = []
for i in range(jobs):
    t0 = time.monotonic()
    spark = engine.connect(url)  # a session per job, as each policy task opens its own
    decide_stored_epochs(spark, StoreRun(store, f"job{i}", None, None, "live", f"bench-{i}", topology, PolicyOptions()))
    spark.stop()
    times.append(time.monotonic() - t0)
print(json.dumps(times))
"""


def run_policy_alone(args: argparse.Namespace, local: Any, work: Path) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from autoscaler.store.parquet import write_epochs
    from autoscaler.store.schemas import METRICS

    stack = local.Stack(work, 0, 0, {})
    store = work / "store"
    table = pq.read_table(FIXTURE / "metrics.parquet")
    for i in range(args.policy_jobs):
        rows = table.set_column(table.schema.get_field_index("job"), "job", pa.array([f"job{i}"] * table.num_rows))
        write_epochs(store, METRICS, f"job{i}", rows)  # the writer conforms the rows to the schema
    try:
        stack.spark_up()
        conn = json.loads(stack.env["AIRFLOW_CONN_SPARK_DS2"])
        url = f"{conn['host']}:{conn['port']}"
        server = pid_file(work / "spark" / "pids" / "connect.pid")
        c0, t0 = tree_cpu([server]), time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", POLICY_RUN, url, str(store), str(FIXTURE / "topology.csv"),
                                 str(args.policy_jobs)], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})  # fmt: skip
        out, _ = proc.communicate()
        wall = time.monotonic() - t0
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        times = json.loads(out)
        server_cpu = tree_cpu([server]) - c0
    finally:
        stack.down()
    return {
        "jobs": args.policy_jobs, "wall_s": round(wall, 1), "median_per_job_s": round(statistics.median(times), 2),
        "p90_per_job_s": round(sorted(times)[int(0.9 * len(times))], 2), "server_cpu_s": round(server_cpu, 1),
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "cpu_s_per_job": round((server_cpu + usage.ru_utime + usage.ru_stime) / args.policy_jobs, 2),
    }  # fmt: skip


def report(fleet: list[dict[str, Any]], policy: dict[str, Any] | None, args: argparse.Namespace) -> str:
    lines = [
        "# Fleet cost and latency (benchmarks/bench_fleet.py)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f} at the end. "
        "One local stack (Flink 12 slots, Spark Connect local[2], PostgreSQL 15, "
        + (
            "Airflow 3.3 CeleryExecutor with 2 workers, parallelism 16, Redis 7.0"
            if args.executor == "celery"
            else "Airflow 3.3 LocalExecutor parallelism 4"
        )
        + "); test jobs at 1,000 rec/s, 1 source subtask, no rescale needed; "
        + (
            "batched: one fleet run per interval decides every job (the policy column is its decide_jobs task); "
            if args.batched
            else ""
        )
        + ("the jobs served by the Flink REST replay (benchmarks/flink_replay.py), not Flink; " if args.replay else "")
        + f"policy interval {args.interval} s; {args.epochs} whole intervals measured per fleet size.",
        "",
        "| jobs | autoscaler CPU-s per job-epoch | autoscaler cores (Airflow + Spark + PostgreSQL + Redis) "
        "| CPU-s: Airflow / Spark / PostgreSQL / Redis | runs finished / due (failed) | newest finished epoch's lag "
        "| epoch end → decision, median | → run finished, median | policy task, median |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in fleet:
        c = r["cpu_s"]
        per = r["cpu_s_per_job_epoch"]
        earlier = r.get("runs_finished_from_before")
        earlier_text = f" + {earlier} of earlier epochs" if earlier else ""
        lines.append(
            f"| {r['jobs']} | {per if per is not None else '– (idle)'} | {r['autoscaler_cores']} | "
            f"{c['airflow']} / {c['spark']} / {c['postgres']} / {c.get('redis', 0.0)} | "
            f"{r['runs_finished']} / {r['runs_due']} ({r['failed_runs']}){earlier_text} | "
            f"{r['max_lag_s']} s | "
            f"{r['median_epoch_end_to_decision_s']} s | {r['median_epoch_end_to_run_end_s']} s | {r['median_policy_task_s']} s |"
        )
    for r in (r for r in fleet if r.get("hog")):
        h = r["hog"]
        lines += ["", f"Under a CPU hog ({h['processes']} busy processes during the measured intervals; load average at "
                  f"their end {h['load_at_end'][0]} (1 min)): {h['epochs_decided']} of {h['epochs_due']} epochs decided once "
                  f"the runs drained; epoch end → decision {h['epoch_end_to_decision_s']}."]  # fmt: skip
    staged = [r for r in fleet if r.get("median_stage_s")]
    if staged:
        lines += ["", "Seconds per stage of the decide_jobs task, median (from its log line):", ""]
        lines += [f"- {r['jobs']} jobs: " + ", ".join(f"{k} {v}" for k, v in r["median_stage_s"].items()) for r in staged]
    idle = next((r for r in fleet if r["jobs"] == 0), None)
    busiest = max(fleet, key=lambda r: r["jobs"])
    if busiest["jobs"]:
        idle_cpu = idle["autoscaler_cores"] * busiest["wall_s"] if idle else 0.0
        done = busiest["runs_finished"] + busiest.get("runs_finished_from_before", 0)
        marginal = (busiest["autoscaler_cpu_s"] - idle_cpu) / max(done, 1)
        per_core = 300 / marginal if marginal > 0 else float("inf")
        lines += [
            "",
            f"Marginal cost at {busiest['jobs']} jobs (minus the idle stack): {marginal:.2f} CPU-s per job-epoch, so one core "
            f"of autoscaler CPU serves about {per_core:.0f} jobs at a 5-minute interval.",
        ]
    if policy:
        lines += [
            "",
            f"Policy alone, {policy['jobs']} jobs' epochs through the warm engine (a client session per job, one after the "
            f"other): {policy['wall_s']} s wall, {policy['median_per_job_s']} s median per job (p90 "
            f"{policy['p90_per_job_s']} s), server {policy['server_cpu_s']} CPU-s + client {policy['client_cpu_s']} CPU-s "
            f"= {policy['cpu_s_per_job']} CPU-s per job.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="0,1,5,10", type=lambda v: [int(x) for x in v.split(",")])
    parser.add_argument("--interval", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--policy-jobs", type=int, default=100, help="0 skips the policy-alone measurement")
    parser.add_argument("--executor", choices=("local", "celery"), default="local")
    parser.add_argument("--batched", action="store_true", help="register the jobs with batched: true (the fleet path)")
    parser.add_argument("--replay", action="store_true", help="serve the jobs from the Flink REST replay, not Flink")
    parser.add_argument("--hog", type=int, default=0, help="busy processes running through the measured intervals")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "fleet"))
    args = parser.parse_args()
    local = load_local()
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-", dir="/tmp"))
    work.chmod(0o755)  # PostgreSQL runs as 'postgres' when we are root
    try:
        fleet = run_fleet(args, local, work / "fleet") if args.jobs else []
        policy = run_policy_alone(args, local, work / "policy") if args.policy_jobs else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    conditions = machine()
    text = report(fleet, policy, args) + "\n" + machine_line(conditions) + "\n"
    print(text)
    results = Path(args.results)
    write_results(results.name, {"conditions": conditions, "fleet": fleet, "policy_alone": policy}, text, results.parent)


if __name__ == "__main__":
    main()
