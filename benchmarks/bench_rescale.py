"""Downtime of the two rescale mechanisms on a real local Flink 2.3 cluster.

Starts its own cluster instances (``FLINK_DATA_DIR`` in a temp folder, free ports, via
``scripts/flink.sh up``/``down``; a developer's cluster on 8081 is never touched). For each job
profile -- ``underprovisioned`` (20,000 records/s, Count at 175 µs per record, 10,000 keys: Count
at 1 is back-pressured, at 4 it keeps up) and ``light`` (1,000 records/s, little state) -- it
starts the test job at Count 1 and rescales Count 1 -> 4 -> 1 ``--cycles`` times with each
mechanism:

- savepoint-restart on a default-scheduler cluster (``rescale_with_savepoint``);
- in place on an adaptive-scheduler cluster (``rescale_in_place``).

Per rescale: downtime (stop request / resource-requirements PUT -> all tasks RUNNING at the
new parallelism, monotonic clock, polled every ``--poll-s``), savepoint duration (stop request
-> savepoint COMPLETED), the state size of the savepoint or of the checkpoint that applied the
change, and the wall time of the whole call (including the verification re-reads). Results:
``benchmarks/results/rescale.json`` and ``rescale.md``.

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_rescale.py [--cycles 5] [--settle-s 5] \\
        [--profiles underprovisioned,light] [--mechanisms savepoint-restart,in-place]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "include"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from autoscaler import testjob  # noqa: E402
from autoscaler.flink.client import FlinkConnection, FlinkRestClient  # noqa: E402
from autoscaler.flink.deployment import JobDeployment  # noqa: E402
from autoscaler.rescale.in_place import rescale_in_place  # noqa: E402
from autoscaler.rescale.result import RescaleResult  # noqa: E402
from autoscaler.rescale.savepoint import rescale_with_savepoint  # noqa: E402
from tests.helpers import free_port  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import machine, stats, write_results  # noqa: E402

FLINK_SH = ROOT / "scripts" / "flink.sh"
JAR = testjob.JAR
RESULTS = ROOT / "benchmarks" / "results"
JOB = "bench-rescale"
PROFILES = {
    # The demo's start: Count at 1 is back-pressured (20,000/s offered, ~5,700/s per instance).
    "underprovisioned": ["--rate", "20000", "--count-wait-us", "175", "--keys", "10000"],
    # Little load and little state: close to the conditions of the reference figures.
    "light": ["--rate", "1000", "--keys", "1000"],
}
PARALLELISM_ARGS = testjob.PARALLELISM_ARGS
REFERENCE = {"savepoint-restart": (0.38, 0.48), "in-place": (1.07, 1.12)}  # docs: flink-rest.md, measured before


@contextmanager
def cluster(
    adaptive: bool, env_extra: dict[str, str] | None = None, under: Path | None = None, keep_logs: Path | None = None
) -> Iterator[tuple[FlinkRestClient, Path]]:
    """A cluster instance of its own, stopped (its own pids only) whatever happens.

    ``env_extra``: more of scripts/flink.sh's settings (a state backend, say); ``under``: the folder its data
    folder is made in (default: the temp folder); ``keep_logs``: where its logs are copied before it is removed.
    """
    data_dir = Path(tempfile.mkdtemp(prefix=f"bench-{'adaptive' if adaptive else 'default'}-", dir=under))
    env = {
        **os.environ,
        "FLINK_DATA_DIR": str(data_dir),
        "FLINK_REST_PORT": str(free_port()),
        "FLINK_RPC_PORT": str(free_port()),
        **(env_extra or {}),
    }
    try:
        subprocess.run([str(FLINK_SH), "up", *(["--adaptive"] if adaptive else [])], check=True, cwd=ROOT, env=env)
        yield FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{env['FLINK_REST_PORT']}")), data_dir
    finally:
        subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)
        if keep_logs is not None and (data_dir / "log").is_dir():
            shutil.copytree(data_dir / "log", keep_logs / data_dir.name, dirs_exist_ok=True)
        shutil.rmtree(data_dir, ignore_errors=True)


def state_size(client: FlinkRestClient, job_id: str, savepoint: bool) -> int | None:
    """Bytes of the savepoint a stop produced, or of the job's latest completed checkpoint."""
    try:
        latest = client.checkpoints(job_id).get("latest") or {}
    except Exception:  # the statistics are informative only
        return None
    entry = latest.get("savepoint" if savepoint else "completed") or {}
    size = entry.get("state_size", entry.get("checkpointed_size"))
    return int(size) if size is not None else None


def run_mechanism(mechanism: str, profiles: list[str], cycles: int, settle_s: float, poll_s: float) -> list[dict[str, Any]]:
    """One cluster per mechanism; per profile a fresh job at Count 1, then ``cycles`` x (1 -> 4 -> 1)."""
    adaptive = mechanism == "in-place"
    runs = []
    with cluster(adaptive) as (client, data_dir):
        overview = client.overview()
        info = {"flink_version": overview.get("flink-version"), "slots": overview.get("slots-total")}
        jar_id = client.upload_jar(JAR)
        for profile in profiles:
            rows: list[dict[str, Any]] = []
            name = f"{JOB}-{profile}"
            args = ["--job-name", name, *PROFILES[profile]]
            job_id = client.run_jar(jar_id, None, [*args, "--count-parallelism", "1"])
            client.wait_all_running(job_id)
            time.sleep(settle_s)
            deployment = JobDeployment(
                job_name=name,
                savepoint_dir=f"file://{data_dir / 'savepoints'}",
                parallelism_args=PARALLELISM_ARGS,
                base_args=args,
                jar_id=jar_id,
            )
            journal = data_dir / "journal"
            for cycle in range(1, cycles + 1):
                for target in (4, 1):
                    action = f"{mechanism}-{profile}-{cycle}-{target}"
                    before = client.running_job(name).id
                    t0 = time.monotonic()
                    if adaptive:
                        result = rescale_in_place(client, name, {"Count": target}, action, journal, timeout_s=60, poll_s=poll_s)
                    else:
                        result = rescale_with_savepoint(
                            client, deployment, {"Count": target}, action, journal, poll_s=poll_s, start_timeout_s=60
                        )
                    call_s = time.monotonic() - t0
                    if result.outcome != "succeeded":
                        raise RuntimeError(f"{action}: {result.outcome}: {result.message}")
                    size = state_size(client, before, savepoint=not adaptive)
                    rows.append(_row(cycle, result, call_s, size))
                    print(
                        f"bench: {mechanism} {profile} cycle {cycle} Count {result.old_parallelism['Count']} -> {target}: "
                        f"downtime {result.downtime_s:.3f} s"
                        + (f", savepoint {result.savepoint_duration_s:.3f} s" if result.savepoint_duration_s else "")
                        + f", call {call_s:.3f} s, state {size} B, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    time.sleep(settle_s)  # let the job settle (back-pressure, buffers) before the next change
            client.cancel(client.running_job(name).id)
            runs.append(
                {
                    "mechanism": mechanism,
                    "profile": profile,
                    "job_args": PROFILES[profile],
                    "cluster": info,
                    "rescales": rows,
                    "summary": _summary(rows),
                }
            )
    return runs


def _row(cycle: int, result: RescaleResult, call_s: float, size: int | None) -> dict[str, Any]:
    return {
        "cycle": cycle,
        "from": result.old_parallelism["Count"],
        "to": result.new_parallelism["Count"],
        "downtime_s": result.downtime_s,
        "savepoint_s": result.savepoint_duration_s,
        "restart_s": round(result.downtime_s - result.savepoint_duration_s, 3)
        if result.downtime_s is not None and result.savepoint_duration_s is not None
        else None,
        "call_s": round(call_s, 3),
        "state_bytes": size,
        "load_1m": round(os.getloadavg()[0], 2),
        "old_job": result.old_flink_job_id,
        "new_job": result.new_flink_job_id,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("downtime_s", "savepoint_s", "restart_s", "call_s"):
        out[key] = stats([r[key] for r in rows if r[key] is not None])
        for direction, (a, b) in {"up": (1, 4), "down": (4, 1)}.items():
            out[f"{key}_{direction}"] = stats([r[key] for r in rows if r[key] is not None and (r["from"], r["to"]) == (a, b)])
    sizes = [r["state_bytes"] for r in rows if r["state_bytes"] is not None]
    out["state_bytes"] = stats(sizes)
    return out


def conditions(args: argparse.Namespace) -> dict[str, Any]:
    base = machine()
    return {
        **base,
        "load_avg_1m_at_start": base["load_avg_at_start"][0],
        "profiles": {name: PROFILES[name] for name in args.profiles},
        "cycles": args.cycles,
        "settle_s": args.settle_s,
        "poll_s": args.poll_s,
    }


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown(report: dict[str, Any]) -> str:
    c = report["conditions"]
    runs = report["runs"]
    versions = sorted({r["cluster"]["flink_version"] for r in runs})
    lines = [
        "# Rescale downtime: savepoint-restart vs in place",
        "",
        f"Measured {c['date']} by `benchmarks/bench_rescale.py --cycles {c['cycles']}`.",
        "",
        f"- machine: {c['cores']} cores ({c['cpu']}), {c['platform']}; 1-minute load average {c['load_avg_1m_at_start']} "
        f"at the start, {c['load_avg_1m_during']['min']}-{c['load_avg_1m_during']['max']} during the rescales "
        "(this benchmark's cluster plus other processes sharing the cores: a load above the core count inflates every figure)",
        f"- Flink {', '.join(versions)} (local, 1 TaskManager with 8 slots, `scripts/flink.sh`), {c['java']}, "
        f"Python {c['python']}",
        "- job: the test job (Source 2, Parse 1, Count 1 <-> 4, Sink 1), profiles: "
        + "; ".join(f"{name} `{' '.join(a)}`" for name, a in c["profiles"].items())
        + f". Under-provisioned: Count at 1 is back-pressured, at 4 it keeps up. {c['settle_s']} s between rescales.",
        "- downtime: stop-with-savepoint request (savepoint-restart) or resource-requirements PUT (in place) -> every "
        f"task RUNNING at the new parallelism in the live `/jobs/overview`, polled every {c['poll_s']} s (monotonic "
        "clock); savepoint: stop request -> savepoint COMPLETED; restart: downtime - savepoint; call: the whole "
        "function call including the parallelism verification (re-reads of the cached `/jobs/:id`) and the journal",
        "- in place: adaptive scheduler with the project's tuned timers (cooldown 0 s, stabilization 5 s) + a manual "
        "FULL checkpoint; the job keeps its id. State size: the savepoint's (savepoint-restart) or the latest "
        "checkpoint's (in place) `state_size`.",
        "",
        "| mechanism | profile | rescales | downtime min | median | max | savepoint median | restart median | "
        "call median | state size | reference |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        s = r["summary"]
        ref = REFERENCE[r["mechanism"]]
        size = s["state_bytes"]
        lines.append(
            f"| {r['mechanism']} | {r['profile']} | {s['downtime_s']['n']} | {_f(s['downtime_s']['min'])} | "
            f"{_f(s['downtime_s']['median'])} | {_f(s['downtime_s']['max'])} | {_f((s['savepoint_s'] or {}).get('median'))} | "
            f"{_f((s['restart_s'] or {}).get('median'))} | {_f(s['call_s']['median'])} | "
            f"{'-' if not size else format(size['median'] / 1024, '.0f') + ' KiB'} | {ref[0]}-{ref[1]} s |"
        )
    lines += ["", "Median downtime by direction (s):", "", "| mechanism | profile | 1 -> 4 | 4 -> 1 |", "|---|---|---:|---:|"]
    for r in runs:
        s = r["summary"]
        lines.append(
            f"| {r['mechanism']} | {r['profile']} | {_f((s['downtime_s_up'] or {}).get('median'))} | "
            f"{_f((s['downtime_s_down'] or {}).get('median'))} |"
        )
    lines += [
        "",
        "Per rescale:",
        "",
        "| mechanism | profile | cycle | Count | downtime s | savepoint s | restart s | call s | state bytes | load 1m |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        for x in r["rescales"]:
            lines.append(
                f"| {r['mechanism']} | {r['profile']} | {x['cycle']} | {x['from']} -> {x['to']} | {_f(x['downtime_s'])} | "
                f"{_f(x['savepoint_s'])} | {_f(x['restart_s'])} | {_f(x['call_s'])} | {x['state_bytes'] or '-'} | "
                f"{x['load_1m']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=5, help="1 -> 4 -> 1 cycles per mechanism (default 5)")
    parser.add_argument("--settle-s", type=float, default=5.0, help="seconds between rescales (default 5)")
    parser.add_argument("--poll-s", type=float, default=0.02, help="REST poll interval while waiting (default 0.02)")
    parser.add_argument("--mechanisms", default="savepoint-restart,in-place", help="comma-separated: savepoint-restart,in-place")
    parser.add_argument(
        "--profiles", default="underprovisioned,light", help=f"comma-separated job profiles: {','.join(PROFILES)}"
    )
    args = parser.parse_args(argv)
    args.profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    if not args.profiles or set(args.profiles) - set(PROFILES):
        parser.error(f"--profiles must name some of {sorted(PROFILES)}")
    if args.cycles < 1:
        parser.error("--cycles must be >= 1")
    mechanisms = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    if not mechanisms or set(mechanisms) - set(REFERENCE):
        parser.error(f"--mechanisms must name some of {sorted(REFERENCE)}")
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT)
    started = conditions(args)  # before the runs: the date and the machine's load at the start
    runs = [run for m in mechanisms for run in run_mechanism(m, args.profiles, args.cycles, args.settle_s, args.poll_s)]
    loads = [x["load_1m"] for r in runs for x in r["rescales"]]
    started["load_avg_1m_during"] = {"min": min(loads), "max": max(loads)}
    report = {"conditions": started, "runs": runs}
    write_results("rescale", report, markdown(report))
    print(f"bench: wrote {RESULTS / 'rescale.json'} and {RESULTS / 'rescale.md'}", flush=True)
    print((RESULTS / "rescale.md").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
