"""Multi-configuration tuning against parallelism-only tuning by the default kind, on a stateful job whose load changes.

Two arms on the same job, machine and phases, each on a fresh cluster of its own (one TaskManager of 4 slots and
2 GiB, Flink's defaults otherwise: 10 s checkpoints, managed fraction 0.4):

- **parallelism only**: at each phase the default kind (``ds2_plus``) decides from three measured windows of the
  job (its own code, ``decide_job``), and the job is rescaled to its target by savepoint-and-restart; memory and
  checkpoint interval stay the cluster's;
- **tuned**: at each phase a tuning round (``autoscaler.tuning.round.tune``) runs profiling copies at the phase's
  rate within a budget, fits its model on every profile so far and the job's own windows, and the recommendation
  is applied through savepoint-and-restart (new TaskManagers with its memory via the local capacity provider).

The tuned arm is given each phase's rate as its target (``tune(..., rate=...)``, what a person's round may give):
an oracle for its forecast, where the parallelism-only arm measures the load itself. Its results are labelled so.

In both, the phase is then measured as the job runs it: slots and memory held, whether it sustains the rate (DS2's
max rate from counter deltas over a window), and the recovery after a TaskManager is killed (kill -> all tasks
running, with a replacement of the same memory started at once, as Kubernetes would restart the pod). The job: the
test job at a constant rate per phase, Count with a 500 us wait per record (about 2,000 records/s per instance,
independent of CPU contention on this 2-core machine) and 10,000 keys of 1 KiB state each.

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_tuning.py [--phases 1500,4500,2500] [--arms base,tuned]

Results: ``benchmarks/results/tuning.json`` and ``.md`` (per phase and arm, and the totals at equal phase lengths).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "include"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import pyarrow as pa  # noqa: E402

from autoscaler import testjob  # noqa: E402
from autoscaler.capacity.provider import LocalProcesses  # noqa: E402
from autoscaler.collect.snapshot import take_snapshot, window_metrics  # noqa: E402
from autoscaler.config.jobs import parse_jobs_each  # noqa: E402
from autoscaler.engine.spark.decisions import RunInfo, decide_job  # noqa: E402
from autoscaler.engine.windows import operator_windows  # noqa: E402
from autoscaler.flink.client import FlinkRestClient  # noqa: E402
from autoscaler.flink.deployment import program_args, resolve_jar  # noqa: E402
from autoscaler.rescale.savepoint import rescale_with_savepoint  # noqa: E402
from autoscaler.store.parquet import write_epochs  # noqa: E402
from autoscaler.store.schemas import METRICS  # noqa: E402
from autoscaler.tuning.apply import apply_configuration  # noqa: E402
from autoscaler.tuning.profile import max_sustainable_rate  # noqa: E402
from autoscaler.tuning.round import configuration_in_force, tune  # noqa: E402
from autoscaler.tuning.site import LocalClusters  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rescale import cluster  # noqa: E402
from harness import machine, machine_line, write_results  # noqa: E402

FLINK_SH = ROOT / "scripts" / "flink.sh"
NAME = "ds2-bench-tune"
JOB_ARGS = ["--job-name", NAME, "--count-wait-us", "500", "--keys", "10000", "--state-bytes-per-key", "1024",
            "--source-parallelism", "1"]  # fmt: skip
RECOVERY_TARGET = "2m"
WINDOW_S = 20.0


def job_config(rate: int, data_dir: Path, savepoints: Path, kind: str) -> Any:
    entry = {"name": "bench-tune", "flink_job_name": NAME, "jar": str(testjob.JAR), "parallelism_args": testjob.PARALLELISM_ARGS,
             "base_args": [*JOB_ARGS, "--rate", str(rate)], "savepoint_dir": str(savepoints), "policy": {"kind": kind},
             "capacity": {"provider": "local", "flink_data_dir": str(data_dir)},
             "tuning": {"site": "local", "rate_flag": "--rate", "max_slots": 2, "max_minutes": 8, "warmup": "10s",
                        "measure": "20s", "recovery_target": RECOVERY_TARGET}}  # fmt: skip
    jobs, errors = parse_jobs_each({"jobs": [entry]}, "bench_tuning")
    assert not errors, errors
    return jobs[0]


def windows(client: FlinkRestClient, store: Path, job: str, first_epoch: int, count: int) -> list[dict[str, Any]]:
    """``count`` consecutive windows of WINDOW_S, written to METRICS as epochs ``first_epoch``...; the last one's rows."""
    previous = take_snapshot(client, NAME)
    rows: list[dict[str, Any]] = []
    for k in range(count):
        time.sleep(WINDOW_S)
        current = take_snapshot(client, NAME)
        table = window_metrics(previous, current, job, first_epoch + k)
        write_epochs(store, METRICS, job, table.drop_columns(["epoch_block"]))
        rows, previous = table.to_pylist(), current
    return rows


def default_kind_target(client: FlinkRestClient, store: Path, job: Any, first_epoch: int) -> dict[str, int]:
    """What the default kind decides from three windows of the job (its own code, as the Spark job runs it)."""
    snapshot = take_snapshot(client, NAME)
    topology = snapshot.topology()
    tables = []
    previous = snapshot
    for k in range(3):
        time.sleep(WINDOW_S)
        current = take_snapshot(client, NAME)
        tables.append(operator_windows(window_metrics(previous, current, job.name, first_epoch + k)))
        previous = current
    decisions = decide_job(pa.concat_tables(tables), topology, job.policy.resolved(topology),
                           RunInfo("bench", "bench", snapshot.taken_at), {}, first_epoch + 2).to_pylist()  # fmt: skip
    return {d["operator_name"]: int(d["target_parallelism"]) for d in decisions if d["operator_name"] in testjob.PARALLELISM_ARGS}


def restart_at_rate(client: FlinkRestClient, job: Any, savepoints: Path) -> None:
    """The phase's load: the job restarted from a savepoint with the new rate, everything else as it runs."""
    in_force, _, _ = configuration_in_force(client, NAME)
    running = client.running_job(NAME)
    request = client.stop_with_savepoint(running.id, f"file://{savepoints}")
    status = client.wait_operation(lambda: client.savepoint_status(running.id, request), 120, what="the phase's savepoint")
    target = {n: p for n, p in in_force.operators.items() if n in testjob.PARALLELISM_ARGS}
    job_id = client.run_jar(resolve_jar(client, job.deployment), None, program_args(job.deployment, target),
                            savepoint_path=status.location, flink_configuration=in_force.flink_configuration())  # fmt: skip
    client.wait_all_running(job_id, 120)


def kill_and_recover(client: FlinkRestClient, data_dir: Path, provider: LocalProcesses, n: int) -> float:
    """Kill the TaskManager running the job; start a replacement with the same memory; seconds until all tasks run."""
    env = {**os.environ, "FLINK_DATA_DIR": str(data_dir), "FLINK_REST_PORT": str(client.base_url.rsplit(":", 1)[1])}
    lines = subprocess.run([str(FLINK_SH), "taskmanagers"], env=env, capture_output=True, text=True, check=True).stdout
    victim_id, pid = lines.splitlines()[1].split()
    detail = client.get(f"/taskmanagers/{victim_id}")
    memory = detail["memoryConfiguration"]
    mb = int(memory["totalProcessMemory"]) // 2**20
    fraction = round(int(memory["managedMemory"]) / int(memory["totalFlinkMemory"]), 2)
    job_id = client.running_job(NAME).id
    before = client.restarts(job_id) or 0
    killed = time.monotonic()
    os.kill(int(pid), signal.SIGKILL)
    provider.add([f"replace-{n}"], memory_mb=mb, managed_fraction=fraction)
    while True:
        job = next((j for j in client.jobs() if j.id == job_id), None)
        if job is not None and job.all_running and (client.restarts(job_id) or 0) > before:
            return time.monotonic() - killed
        if time.monotonic() - killed > 300:
            raise RuntimeError(f"the job did not recover in 300 s ({job})")
        time.sleep(0.2)


def held(client: FlinkRestClient) -> tuple[int, int]:
    """(task slots the job holds, MB of the TaskManagers it runs on)."""
    in_force, _, _ = configuration_in_force(client, NAME)
    tms = client.get("/taskmanagers")["taskmanagers"]
    busy = [t for t in tms if t["freeSlots"] < t["slotsNumber"]]
    mb = sum(int(client.get(f"/taskmanagers/{t['id']}")["memoryConfiguration"]["totalProcessMemory"]) for t in busy) // 2**20
    return in_force.slots, mb


def run_arm(arm: str, phases: list[int]) -> list[dict[str, Any]]:
    out = []
    with cluster(False, {"FLINK_SLOTS": "4"}) as (client, data_dir):
        work = Path(tempfile.mkdtemp(prefix=f"bench-tune-{arm}-"))
        store, savepoints = work / "store", data_dir / "savepoints"
        job = job_config(phases[0], data_dir, savepoints, "ds2_plus")
        provider = LocalProcesses(data_dir, client.base_url)
        jar = resolve_jar(client, job.deployment)
        start = program_args(job.deployment, {"Count": 1, "Parse": 1, "Sink: Writer": 1})
        client.wait_all_running(client.run_jar(jar, None, start))
        site = LocalClusters(work / "profiles")
        for i, rate in enumerate(phases):
            job = job_config(rate, data_dir, savepoints, "ds2_plus")
            t0 = time.monotonic()
            if i:
                restart_at_rate(client, job, savepoints)
            time.sleep(WINDOW_S)
            row: dict[str, Any] = {"arm": arm, "phase": i + 1, "rate": rate}
            if arm == "base":
                target = default_kind_target(client, store, job, 100 * i)
                result = rescale_with_savepoint(client, job.deployment, target, f"base-{i}", work / "journal")
                row["change"] = f"{target}: {result.outcome}"
            else:
                windows(client, store, job.name, 100 * i, 2)  # the job's own history for the model
                rnd = tune(job, client, store, 100 * i + 50, site, force=True, rate=rate)
                row |= {"round": rnd.outcome, "profiles": len(rnd.profiles),
                        "profiling_slot_minutes": round(sum(p.slot_seconds for p in rnd.profiles) / 60, 2)}  # fmt: skip
                if rnd.recommended is not None and rnd.outcome == "recommended":
                    result = apply_configuration(client, job.deployment, rnd.recommended.configuration, f"tune-{i}",
                                                 work / "journal", provider, store, job.name, 100 * i + 50, 1024)  # fmt: skip
                    row["change"] = f"{rnd.recommended.configuration.key()}: {result.outcome}"
                else:
                    row["change"] = f"none ({rnd.message})"
            row["adapt_s"] = round(time.monotonic() - t0, 1)
            time.sleep(WINDOW_S)
            last = windows(client, store, job.name, 100 * i + 90, 1)
            max_rate, observed = max_sustainable_rate(last)
            sustains = bool(max_rate and max_rate >= rate and (observed or 0) >= 0.95 * rate)
            in_force, _, _ = configuration_in_force(client, NAME)
            slots, mb = held(client)
            row |= {"configuration": in_force.key(), "slots": slots, "memory_mb": mb, "max_rate": round(max_rate or 0),
                    "observed_rate": round(observed or 0), "sustains": sustains,
                    "recovery_s": round(kill_and_recover(client, data_dir, provider, i), 1)}  # fmt: skip
            print(row, flush=True)
            out.append(row)
    return out


def report(rows: list[dict[str, Any]], conditions: dict[str, Any]) -> str:
    lines = ["# Multi-configuration tuning against parallelism-only tuning", "",
             "**Oracle input:** the tuned arm was given each phase's rate as its target; the parallelism-only arm "
             "measured the load.", "", machine_line(conditions),
             f"- job: test job, {' '.join(JOB_ARGS[2:])}; phases at {conditions['phases']} records/s; recovery target "
             f"{RECOVERY_TARGET}; one TaskManager of 4 slots, 2 GiB to start with", "",
             "| arm | phase | rate | configuration | slots | memory MB | max rate | sustains | recovery s | adapt s "
             "| profiling slot-min |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cells = [r["arm"], r["phase"], r["rate"], r["configuration"], r["slots"], r["memory_mb"], r["max_rate"], r["sustains"],
                 r["recovery_s"], r["adapt_s"], r.get("profiling_slot_minutes", "")]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    for arm in sorted({r["arm"] for r in rows}):
        mine = [r for r in rows if r["arm"] == arm]
        sustained = f"sustained {sum(r['sustains'] for r in mine)} of {len(mine)}"
        lines.append(f"\n**{arm}** (equal phase lengths): {sum(r['slots'] for r in mine)} slot-phases, "
                     f"{sum(r['memory_mb'] for r in mine)} MB-phases, {sustained}, "
                     f"profiling {sum(r.get('profiling_slot_minutes', 0) for r in mine):.1f} slot-minutes")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default="1500,4500,2500")
    parser.add_argument("--arms", default="base,tuned")
    args = parser.parse_args()
    phases = [int(v) for v in args.phases.split(",")]
    conditions = {**machine(), "phases": phases}
    rows: list[dict[str, Any]] = []
    for arm in args.arms.split(","):
        rows += run_arm(arm, phases)
        write_results("tuning", {"conditions": conditions, "rows": rows}, report(rows, conditions))


if __name__ == "__main__":
    main()
