"""A backfill on the cluster mode's Spark (a standalone master, two workers of one core) against local[2].

The same warm engine in both: a Spark Connect server of ``scripts/spark.sh`` (``up`` runs its
executors in the server's JVM, ``local[2]``; ``up --cluster`` on two workers of ``scripts/spark.sh``'s
standalone cluster, ``spark.cores.max`` 2). The same backfill in both: ``decide_stored_epochs`` over
every epoch of the policy benchmark's data set (``benchmarks/bench_policy.py``: 10 operators x 4
instances per epoch, cached under data/bench/), its decisions written to a fresh store, timed from
the client. Each mode gets a warm-up run (not counted), then ``--repeat`` measured runs. The peak
resident memory of the Connect server (its JVM, and the Python workers it forks) and of the client
is sampled during each run.

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_cluster.py [--rows 1e7] [--repeat 3]
    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_cluster.py --modes local --rows 1e8 --name backfill-engine-1e8
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(Path(__file__).resolve().parent)]

from harness import load_script, machine, machine_line, stats, write_results  # noqa: E402

SPARK_SH = ROOT / "scripts" / "spark.sh"
RUN = """
import sys, time, uuid
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark import engine
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
url, store, job, topology, out, kind = sys.argv[1:7]
spark = engine.connect(url)
t0 = time.monotonic()
options = PolicyOptions(kind=kind)
n = decide_stored_epochs(spark, StoreRun(store, job, None, None, "backfill", uuid.uuid4().hex, topology, options, out))
print(f"{time.monotonic() - t0:.3f} {n}")
spark.stop()
"""


def load_bench_policy() -> Any:
    return load_script("bench_policy", ROOT / "benchmarks" / "bench_policy.py")


def engine(mode: str, folder: Path) -> tuple[dict[str, str], str, float]:
    """Start the engine (``local`` or ``cluster``); its environment, URL and start-up seconds."""
    env = {**os.environ, "SPARK_DATA_DIR": str(folder / mode), "SPARK_LOCAL_IP": "127.0.0.1", "DS2_SPARK_WARMUP": "0"}
    t0 = time.monotonic()
    subprocess.run([str(SPARK_SH), "up", *(["--cluster"] if mode == "cluster" else [])], env=env, check=True, cwd=ROOT)
    up_s = time.monotonic() - t0
    url = subprocess.run([str(SPARK_SH), "url"], env=env, check=True, cwd=ROOT, capture_output=True, text=True).stdout.strip()
    token = subprocess.run([str(SPARK_SH), "token-file"], env=env, check=True, cwd=ROOT, capture_output=True, text=True).stdout
    # The clients' way in: the benchmark's client processes inherit it (one engine runs at a time).
    secret = Path(token.strip()).read_text().strip()
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = secret
    return env, url, up_s


def server(env: dict[str, str]) -> psutil.Process:
    """The Connect server's JVM, from the pid file ``scripts/spark.sh`` wrote."""
    return psutil.Process(int((Path(env["SPARK_DATA_DIR"]) / "pids" / "connect.pid").read_text().split()[0]))


def backfill(url: str, data: Path, job: str, out: Path, kind: str, engine_process: psutil.Process) -> tuple[float, int, dict]:
    """One backfill from a fresh client process: seconds, epochs written, and the peak memory of server and client."""
    rss = load_bench_policy().RssSampler
    argv = [sys.executable, "-c", RUN, url, str(data / "store"), job, str(data / "topology.csv"), str(out), kind]
    with rss(engine_process) as on_server:
        client = subprocess.Popen(argv, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
        with rss(psutil.Process(client.pid)) as on_client:
            stdout, stderr = client.communicate()
    server_peaks, client_peaks = on_server.figures(), on_client.figures()
    memory = {"server_jvm_mb": server_peaks["peak_jvm_mb"], "server_python_mb": server_peaks["peak_python_mb"],
              "client_mb": client_peaks["peak_total_mb"]}  # fmt: skip
    if client.returncode != 0:
        logs = sorted(out.parent.glob("*/logs/connect.log"))
        kept = Path(tempfile.mkdtemp(prefix="ds2-bench-cluster-logs-"))
        for log in logs:
            shutil.copy(log, kept / f"{log.parent.parent.name}-connect.log")
        raise SystemExit(f"bench_cluster: the backfill failed (the engine's logs are in {kept}):\n{stderr[-1500:]}")
    seconds, epochs = stdout.split()[-2:]
    return float(seconds), int(epochs), memory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=lambda v: int(float(v)), default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmups", type=int, default=1, help="runs per engine before the measured ones (not counted)")
    parser.add_argument("--modes", default="local,cluster", help="engines to run, joined by commas: local, cluster")
    parser.add_argument("--kind", default="ds2", help="the policy kind decided")
    parser.add_argument("--name", default="cluster", help="the results file's name under benchmarks/results/")
    args = parser.parse_args()
    modes = args.modes.split(",")
    bench_policy = load_bench_policy()
    meta = bench_policy.generate(args.rows)
    data = bench_policy.dataset_dir(args.rows)
    work = Path(tempfile.mkdtemp(prefix="ds2-bench-cluster-"))
    results: dict[str, Any] = {}
    try:
        for mode in modes:
            env, url, up_s = engine(mode, work)
            try:
                runs, memory = [], []
                for i in range(args.warmups + args.repeat):  # the first runs warm the JVM up and are not counted
                    out = work / f"out-{mode}-{uuid.uuid4().hex[:8]}"
                    seconds, epochs, peaks = backfill(url, data, meta["job"], out, args.kind, server(env))
                    shutil.rmtree(out, ignore_errors=True)
                    label = " (warm-up)" if i < args.warmups else ""
                    print(f"{mode}: run {i} {seconds:.2f} s ({epochs} epochs) {peaks}{label}", flush=True)
                    if i >= args.warmups:
                        runs.append(seconds)
                        memory.append(peaks)
                results[mode] = {"engine_up_s": round(up_s, 1), "epochs": epochs, "seconds": stats(runs, 2), "runs": runs,
                                 "memory": memory}  # fmt: skip
            finally:
                subprocess.run([str(SPARK_SH), "down"], env=env, check=False, cwd=ROOT)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    conditions = {**machine(), "rows": args.rows, "repeat": args.repeat, "kind": args.kind}
    executors = {"local": ("`scripts/spark.sh up`", "local[2], in the server's JVM"),
                 "cluster": ("`scripts/spark.sh up --cluster`", "2 workers x 1 core (standalone master)")}  # fmt: skip
    lines = [
        "# A backfill through the warm Spark engine (benchmarks/bench_cluster.py)",
        "",
        machine_line(conditions),
        "",
        f"The policy benchmark's data set: {args.rows:,} metrics rows ({meta['epochs']:,} epochs x {meta['operators']} "
        f"operators x {meta['instances']} instances), every epoch decided by the `{args.kind}` kind and written to a fresh "
        f"store through the warm Spark Connect engine; {args.warmups} warm-up run(s) per engine, then {args.repeat} measured. "
        "Memory: "
        "the highest resident size sampled in the measured runs.",
        "",
        "| engine | executors | engine start-up s | backfill s, median | best | worst | server JVM MB | server Python MB "
        "| client MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in modes:
        r, (command, where) = results[mode], executors[mode]
        peak = {k: max(m[k] for m in r["memory"]) for k in ("server_jvm_mb", "server_python_mb", "client_mb")}
        lines.append(f"| {command} | {where} | {r['engine_up_s']} | {r['seconds']['median']} | {r['seconds']['min']} | "
                     f"{r['seconds']['max']} | {peak['server_jvm_mb']:,.0f} | {peak['server_python_mb']:,.0f} | "
                     f"{peak['client_mb']:,.0f} |")  # fmt: skip
    markdown = "\n".join([*lines, ""])
    write_results(args.name, {"conditions": conditions, "results": results}, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
