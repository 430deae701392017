"""What a rescale costs against the size of the job's keyed state, per mechanism and state backend.

For each state backend (RocksDB, ForSt) and mechanism (savepoint-and-restart on a default-scheduler
cluster, in place through the adaptive scheduler) it starts a cluster of its own (``scripts/flink.sh
up``, its own ``FLINK_DATA_DIR`` and ports; stopped by its own pids) and, per state size, a fresh test
job whose Count operator holds ``--state-bytes-per-key`` of incompressible payload for each of
``size / bytes`` keys. Once the job's latest completed checkpoint reports at least 90 % of the size
(Flink's checkpoint statistics, the full ``state_size``), Count is rescaled 2 -> 4 with the project's
own rescale code, and it records:

- downtime (stop request or resource-requirements PUT -> all tasks RUNNING at the new parallelism),
  and for savepoint-and-restart the savepoint's part of it;
- the time until the backlog the restart left is drained (the source owes what it did not emit:
  ``--partitions`` with backlog; drained = its ``pendingRecords`` at most one second of arrivals),
  counted from the start of the rescale;
- the peak resident memory of the TaskManager and JobManager processes during the rescale and drain
  (``/proc/<pid>/status`` VmRSS, sampled every 0.2 s).

Results: ``benchmarks/results/state-size.json`` and ``.md``, ``docs/state-size.png``, and the fitted downtime model per
mechanism and backend (seconds = a + b x GiB, least squares) in
``include/autoscaler/rescale/downtime_prior.json``: the prior the autoscaler's mechanism choice uses
until a job has its own measured rescales (``autoscaler.rescale.mechanism``).

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_state_size.py [--sizes-gb 0.1,0.5,1,2] \\
        [--backends rocksdb,forst] [--mechanisms savepoint-restart,in-place]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "include"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from autoscaler import testjob  # noqa: E402
from autoscaler.flink.client import FlinkRestClient  # noqa: E402
from autoscaler.flink.deployment import JobDeployment  # noqa: E402
from autoscaler.rescale.in_place import rescale_in_place  # noqa: E402
from autoscaler.rescale.mechanism import GIB, fit_line, write_prior  # noqa: E402
from autoscaler.rescale.savepoint import rescale_with_savepoint  # noqa: E402
from tests.helpers import poll  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rescale import cluster  # noqa: E402
from harness import machine, machine_line, write_results  # noqa: E402

FLINK_SH = ROOT / "scripts" / "flink.sh"
RESULTS_FILE = ROOT / "benchmarks" / "results" / "state-size.json"
RATE = 20_000  # records/s offered: light for the job, so what is measured is the state's cost


def log_tail(data_dir: Path, lines: int = 15) -> str:
    """The last lines of the TaskManagers' logs and outputs (kept for the report of a failure)."""
    out = []
    for f in sorted((data_dir / "log").glob("*taskexecutor*")):
        out.append(f"--- {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(out)


def flink_pids(data_dir: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"taskexecutor": [], "standalonesession": []}
    for f in (data_dir / "pids").glob("*.pid"):
        kind = f.stem.rsplit("-", 1)[-1]
        if kind in out:
            out[kind] += [int(x) for x in f.read_text().split() if x.isdigit()]
    return out


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMemory:
    """Peak summed RSS of the TaskManagers and of the JobManager, sampled in a thread."""

    def __init__(self, data_dir: Path) -> None:
        self.pids = flink_pids(data_dir)
        self.peak = {"taskmanagers": 0, "jobmanager": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            tm = sum(rss_bytes(p) for p in self.pids["taskexecutor"])
            jm = sum(rss_bytes(p) for p in self.pids["standalonesession"])
            self.peak["taskmanagers"] = max(self.peak["taskmanagers"], tm)
            self.peak["jobmanager"] = max(self.peak["jobmanager"], jm)
            self._stop.wait(0.2)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def latest_state_bytes(client: FlinkRestClient, job_id: str) -> int:
    latest = (client.checkpoints(job_id).get("latest") or {}).get("completed") or {}
    return int(latest.get("state_size") or 0)


def pending(client: FlinkRestClient, job_name: str) -> float | None:
    job = client.job(client.running_job(job_name).id)
    source = next(v for v in job.vertices if v.name.startswith("Source"))
    data = client.get(f"/jobs/{job.id}/vertices/{source.id}/subtasks/metrics", get="Source__Source.pendingRecords", agg="sum")
    values = [float(item["sum"]) for item in data or [] if "sum" in item]
    return values[0] if values else None


def one_size(
    client: FlinkRestClient,
    data_dir: Path,
    jar_id: str,
    backend: str,
    mechanism: str,
    size_gb: float,
    bytes_per_key: int,
    run: int,
) -> dict[str, Any]:
    keys = max(1, int(size_gb * GIB / bytes_per_key))
    name = f"bench-state-{backend}-{mechanism}-{size_gb:g}-{run}"
    args = ["--job-name", name, "--rate", str(RATE), "--partitions", "4", "--keys", str(keys),
            "--state-bytes-per-key", str(bytes_per_key), "--checkpoint-interval-ms", "10000"]  # fmt: skip
    job_id = client.run_jar(jar_id, None, [*args, "--count-parallelism", "2"])
    client.wait_all_running(job_id, timeout_s=120)
    t_fill = time.monotonic()
    target = 0.9 * size_gb * GIB
    last_print = [0.0]

    def filled() -> int | None:
        size = latest_state_bytes(client, job_id)
        if time.monotonic() - last_print[0] > 30:
            print(f"bench: {name}: latest checkpoint {size / GIB:.3f} GiB of {size_gb} GiB", flush=True)
            last_print[0] = time.monotonic()
        return size if size >= target else None

    state = poll(f"{name}: state of {size_gb} GiB", filled, timeout_s=1800, every_s=2.0)
    fill_s = time.monotonic() - t_fill
    deployment = JobDeployment(job_name=name, savepoint_dir=f"file://{data_dir / 'savepoints'}",
                               parallelism_args=testjob.PARALLELISM_ARGS, base_args=args, jar_id=jar_id,
                               savepoint_format="native" if backend == "forst" else "canonical")  # fmt: skip
    journal = data_dir / "journal"
    with PeakMemory(data_dir) as memory:
        t0 = time.monotonic()
        if mechanism == "in-place":
            result = rescale_in_place(client, name, {"Count": 4}, f"{name}-up", journal, timeout_s=900, poll_s=0.1)
        else:
            result = rescale_with_savepoint(client, deployment, {"Count": 4}, f"{name}-up", journal, poll_s=0.1,
                                            savepoint_timeout_s=900, start_timeout_s=900)  # fmt: skip
        if result.outcome != "succeeded":
            raise RuntimeError(f"{name}: {result.outcome}: {result.message}")
        drained = poll(f"{name}: backlog drained", lambda: (p := pending(client, name)) is not None and p <= RATE,
                           timeout_s=900, every_s=0.5)  # fmt: skip
        drain_s = time.monotonic() - t0
    final_id = client.running_job(name).id
    client.cancel(final_id)
    # The next job starts only once this one is gone and its slots are free again (a job with large state takes a
    # while to cancel, and the adaptive scheduler would otherwise wait for slots).
    poll(f"{name}: cancelled", lambda: client.job(final_id).state == "CANCELED", timeout_s=300, every_s=0.5)
    poll("free slots", lambda: (o := client.overview())["slots-available"] == o["slots-total"], timeout_s=300, every_s=0.5)
    if client.overview()["taskmanagers"] < 1:
        raise RuntimeError(f"{name}: the TaskManager died after the job was cancelled: {log_tail(data_dir)}")
    row = {
        "run": run,
        "backend": backend,
        "mechanism": mechanism,
        "size_gb": size_gb,
        "keys": keys,
        "state_bytes": state,
        "fill_s": round(fill_s, 1),
        "downtime_s": result.downtime_s,
        "savepoint_s": result.savepoint_duration_s,
        "drain_s": round(drain_s, 2),
        "peak_rss_taskmanagers": memory.peak["taskmanagers"],
        "peak_rss_jobmanager": memory.peak["jobmanager"],
        "load_1m": round(os.getloadavg()[0], 2),
    }
    print(f"bench: {json.dumps(row)} (pending at the end {drained})", flush=True)
    for sub in ("savepoints", "checkpoints"):  # the next size needs the disk
        shutil.rmtree(data_dir / sub, ignore_errors=True)
        (data_dir / sub).mkdir(exist_ok=True)
    return row


def markdown(report: dict[str, Any]) -> str:
    c = report["conditions"]
    lines = [
        "# Rescale cost against state size (`benchmarks/bench_state_size.py`)",
        "",
        machine_line(c),
        f"- Flink {c['flink_version']}, one TaskManager (8 slots, 2 GiB process memory), incremental checkpoints every 10 s; "
        f"the test job at {RATE:,} records/s from 4 partitions (backlog owed), Count rescaled 2 -> 4; "
        f"{c['bytes_per_key']:,} bytes of incompressible payload per key",
        "",
        "| Backend | Mechanism | Run | State (GiB, measured) | Downtime (s) | of it savepoint (s) | Drained after (s) "
        "| Peak RSS TMs (GiB) | Peak RSS JM (GiB) | Load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rescales"]:
        sp = "-" if r["savepoint_s"] is None else f"{r['savepoint_s']:.2f}"
        lines.append(
            f"| {r['backend']} | {r['mechanism']} | {r['run']} | {r['state_bytes'] / GIB:.2f} | {r['downtime_s']:.2f} | {sp} | "
            f"{r['drain_s']:.1f} | {r['peak_rss_taskmanagers'] / GIB:.2f} | {r['peak_rss_jobmanager'] / GIB:.2f} | "
            f"{r['load_1m']} |"
        )
    lines += ["", "Fitted downtime (s) = a + b x state (GiB), least squares over the sizes above:", ""]
    for key, fit in report["fits"].items():
        lines.append(f"- {key}: a = {fit['a']:.2f} s, b = {fit['b']:.2f} s/GiB ({fit['n']} rescales)")
    for note in report.get("failures", []):
        lines.append(f"- failed: {note}")
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    """Downtime and drain time against state size, a panel per backend, the fitted lines dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = sorted({r["backend"] for r in report["rescales"]})
    fig, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 4.2), sharey=True, squeeze=False)
    for ax, backend in zip(axes[0], backends, strict=True):
        for mechanism, colour in (("savepoint-restart", "tab:red"), ("in-place", "tab:blue")):
            mine = [r for r in report["rescales"] if (r["backend"], r["mechanism"]) == (backend, mechanism)]
            if not mine:
                continue
            xs = [r["state_bytes"] / GIB for r in mine]
            ax.scatter(xs, [r["downtime_s"] for r in mine], color=colour, label=f"{mechanism}: downtime")
            ax.scatter(xs, [r["drain_s"] for r in mine], color=colour, marker="x", label=f"{mechanism}: drained after")
            fit = report["fits"].get(f"{backend}/{mechanism}")
            if fit:
                top = max(xs)
                ax.plot([0, top], [fit["a"], fit["a"] + fit["b"] * top], color=colour, linestyle="--", linewidth=1)
        ax.set_title(f"{backend}")
        ax.set_xlabel("state (GiB, Flink's checkpoint statistics)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("seconds from the start of the rescale")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-gb", default="0.1,0.5,1,2")
    parser.add_argument("--backends", default="rocksdb,forst")
    parser.add_argument("--mechanisms", default="savepoint-restart,in-place")
    parser.add_argument("--bytes-per-key", type=int, default=10240)
    parser.add_argument("--runs", type=int, default=2, help="rescales per size (each on a fresh job)")
    parser.add_argument("--no-prior", action="store_true", help="do not rewrite the autoscaler's downtime prior")
    parser.add_argument("--plot-only", action="store_true", help="redraw docs/state-size.png from the stored results")
    parser.add_argument("--merge", action="store_true",
                        help="keep the stored results of the pairs (backend, mechanism) not run now")  # fmt: skip
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(RESULTS_FILE.read_text()), ROOT / "docs" / "state-size.png")
        return
    subprocess.run([str(FLINK_SH), "build-job"], check=True, cwd=ROOT)
    sizes = [float(x) for x in args.sizes_gb.split(",")]
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    flink_version = None
    for backend in args.backends.split(","):
        for mechanism in args.mechanisms.split(","):
            try:
                env = {"FLINK_STATE_BACKEND": backend, "FLINK_START_TIMEOUT": "120"}
                logs = ROOT / "build" / "bench-state-logs"  # for a failure's diagnosis; build/ is ignored
                with cluster(mechanism == "in-place", env, ROOT / "build", logs) as (client, data_dir):
                    flink_version = client.overview().get("flink-version")
                    jar_id = client.upload_jar(testjob.JAR)
                    for run in range(1, args.runs + 1):
                        for size in sizes:
                            rows.append(one_size(client, data_dir, jar_id, backend, mechanism, size, args.bytes_per_key, run))
            except Exception as exc:  # one backend failing (ForSt is experimental) must not lose the others
                failures.append(f"{backend} {mechanism}: {type(exc).__name__}: {exc}")
                print(f"bench: FAILED {failures[-1]}", flush=True)
    if args.merge and (RESULTS_FILE).exists():
        ran = {(b, m) for b in args.backends.split(",") for m in args.mechanisms.split(",")}
        stored = json.loads(RESULTS_FILE.read_text())
        rows = [r for r in stored["rescales"] if (r["backend"], r["mechanism"]) not in ran] + rows
        failures = [f for f in stored.get("failures", []) if tuple(f.split(":")[0].split(" ")) not in ran] + failures
    fits = {}
    for backend, mechanism in sorted({(r["backend"], r["mechanism"]) for r in rows}):
        mine = [r for r in rows if (r["backend"], r["mechanism"]) == (backend, mechanism)]
        points = [(r["state_bytes"] / GIB, r["downtime_s"]) for r in mine]
        if len(points) >= 2:
            a, b = fit_line(points)
            fits[f"{backend}/{mechanism}"] = {"a": round(a, 3), "b": round(b, 3), "n": len(points)}
    conditions = {
        **machine(),
        "flink_version": flink_version,
        "bytes_per_key": args.bytes_per_key,
        "rate": RATE,
        "runs": args.runs,
    }
    report = {"conditions": conditions, "rescales": rows, "fits": fits, "failures": failures}
    write_results("state-size", report, markdown(report))
    plot(report, ROOT / "docs" / "state-size.png")
    if fits and not args.no_prior:
        write_prior(fits, source="benchmarks/results/state-size.json", date=conditions["date"])


if __name__ == "__main__":
    main()
