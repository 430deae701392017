"""A backfill on the cluster mode's Spark (a standalone master, two workers of one core) against local[2].

The same warm engine in both: a Spark Connect server of ``scripts/spark.sh`` (``up`` runs its
executors in the server's JVM, ``local[2]``; ``up --cluster`` on two workers of ``scripts/spark.sh``'s
standalone cluster, ``spark.cores.max`` 2). The same backfill in both: ``decide_stored_epochs`` over
every epoch of the policy benchmark's data set (``benchmarks/bench_policy.py``: 10 operators x 4
instances per epoch, cached under data/bench/), its decisions written to a fresh store, timed from
the client. Each mode gets a warm-up run (not counted), then ``--repeat`` measured runs.

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_cluster.py [--rows 1e7] [--repeat 3]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(Path(__file__).resolve().parent)]

from harness import load_script, machine, machine_line, stats, write_results  # noqa: E402

SPARK_SH = ROOT / "scripts" / "spark.sh"
RUN = """
import sys, time, uuid
from autoscaler.config.options import PolicyOptions
from autoscaler.policy.spark import engine
from autoscaler.policy.spark.run import StoreRun, decide_stored_epochs
url, store, job, topology, out = sys.argv[1:6]
spark = engine.connect(url)
t0 = time.monotonic()
n = decide_stored_epochs(spark, StoreRun(store, job, None, None, "backfill", uuid.uuid4().hex, topology, PolicyOptions(), out))
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
    return env, url, up_s


def backfill(url: str, data: Path, job: str, out: Path) -> tuple[float, int]:
    res = subprocess.run([sys.executable, "-c", RUN, url, str(data / "store"), job, str(data / "topology.csv"), str(out)],
                         env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    if res.returncode != 0:
        logs = sorted(out.parent.glob("*/logs/connect.log"))
        kept = Path(tempfile.mkdtemp(prefix="ds2-bench-cluster-logs-"))
        for log in logs:
            shutil.copy(log, kept / f"{log.parent.parent.name}-connect.log")
        raise SystemExit(f"bench_cluster: the backfill failed (the engine's logs are in {kept}):\n{res.stderr[-1500:]}")
    seconds, epochs = res.stdout.split()[-2:]
    return float(seconds), int(epochs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=lambda v: int(float(v)), default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bench_policy = load_bench_policy()
    meta = bench_policy.generate(args.rows)
    data = bench_policy.dataset_dir(args.rows)
    work = Path(tempfile.mkdtemp(prefix="ds2-bench-cluster-"))
    results: dict[str, Any] = {}
    try:
        for mode in ("local", "cluster"):
            env, url, up_s = engine(mode, work)
            try:
                runs = []
                for i in range(args.repeat + 1):  # the first run warms the JVM up and is not counted
                    out = work / f"out-{mode}-{uuid.uuid4().hex[:8]}"
                    seconds, epochs = backfill(url, data, meta["job"], out)
                    shutil.rmtree(out, ignore_errors=True)
                    print(f"{mode}: run {i} {seconds:.2f} s ({epochs} epochs){' (warm-up)' if i == 0 else ''}", flush=True)
                    if i:
                        runs.append(seconds)
                results[mode] = {"engine_up_s": round(up_s, 1), "epochs": epochs, "seconds": stats(runs, 2), "runs": runs}
            finally:
                subprocess.run([str(SPARK_SH), "down"], env=env, check=False, cwd=ROOT)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    conditions = {**machine(), "rows": args.rows, "repeat": args.repeat}
    local, cluster = results["local"]["seconds"], results["cluster"]["seconds"]
    markdown = "\n".join([
        "# A backfill on the cluster mode's Spark (benchmarks/bench_cluster.py)",
        "",
        machine_line(conditions),
        "",
        f"The policy benchmark's data set: {args.rows:,} metrics rows ({meta['epochs']:,} epochs x {meta['operators']} "
        f"operators x {meta['instances']} instances), every epoch decided and written to a fresh store through the warm "
        f"Spark Connect engine; one warm-up run per engine, then {args.repeat} measured.",
        "",
        "| engine | executors | engine start-up s | backfill s, median | best | worst |",
        "|---|---|---:|---:|---:|---:|",
        f"| `scripts/spark.sh up` | local[2], in the server's JVM | {results['local']['engine_up_s']} | {local['median']} | "
        f"{local['min']} | {local['max']} |",
        f"| `scripts/spark.sh up --cluster` | 2 workers x 1 core (standalone master) | {results['cluster']['engine_up_s']} | "
        f"{cluster['median']} | {cluster['min']} | {cluster['max']} |",
        "",
    ])  # fmt: skip
    write_results("cluster", {"conditions": conditions, "results": results}, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
