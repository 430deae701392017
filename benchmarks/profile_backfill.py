"""Where a long backfill's time goes: each stage of ``decide_stored_epochs`` timed alone, in one SparkSession.

The stages are timed cumulatively, each a ``noop`` write (every row computed, nothing kept), in the
order the backfill runs them:

1. **read**: the stored metrics of the range (``inputs.metrics_store``);
2. **windows**: plus the operator windows (``decisions.operator_windows``: the instance rows summed
   per job, epoch and operator), with the scan of the largest parallelism that lets them take one
   aggregation, as the backfill does;
3. **policy**: plus every epoch's policy in the Python workers (``decisions.policy_decisions``);
4. **backfill**: the whole ``decide_stored_epochs``, with the writer, to a fresh store.

Each stage runs once to warm up (not counted) and then ``--repeat`` times. The data set is the one
the policy benchmark caches (``benchmarks/bench_policy.py``: 10 operators x 4 instances per epoch,
under data/bench/). The session is local[2] with the engine's 1-GB driver.

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/profile_backfill.py [--rows 1e6] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(Path(__file__).resolve().parent)]

from harness import machine, machine_line, stats, write_results  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=1e6, help="rows of the cached data set (1e5, 1e6, 1e7)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kind", default="ds2")
    parser.add_argument("--name", default=None, help="results file name (default: profile-backfill-<rows>)")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from autoscaler.config.policy_options import PolicyOptions
    from autoscaler.engine.spark import decisions, inputs
    from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs, run_options
    from autoscaler.topology import read_topology_csv

    data = ROOT / "data" / "bench" / f"rows-{int(args.rows)}"
    if not (data / "store").is_dir():
        raise SystemExit(f"{data}/store: no cached data set; run benchmarks/bench_policy.py --rows {int(args.rows)} first")
    spark = (
        SparkSession.builder.master("local[2]").appName("profile-backfill")
        .config("spark.driver.memory", "1g").config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    topology = read_topology_csv(str(data / "topology.csv"))
    store, job = str(data / "store"), "bench"
    out = Path(tempfile.mkdtemp(prefix="profile-backfill-"))
    run = StoreRun(
        store, job, None, None, "backfill", "profile", str(data / "topology.csv"), PolicyOptions(kind=args.kind), str(out)
    )
    options = run_options(run, topology)
    info = decisions.RunInfo("profile", "backfill", datetime.now(UTC))

    def metrics():
        df, _ = inputs.guard_operators(inputs.metrics_store(spark, store, job, None, None), topology)
        return df

    def backfill() -> None:
        target = out / uuid.uuid4().hex
        decide_stored_epochs(spark, StoreRun(store, job, None, None, "backfill", uuid.uuid4().hex, run.topology_path,
                                             run.options, str(target)), topology)  # fmt: skip
        shutil.rmtree(target, ignore_errors=True)

    def bound() -> int | None:
        return decisions.largest_parallelism(inputs.metrics_store(spark, store, job, None, None))

    stages: dict[str, Callable[[], None]] = {
        "read": lambda: metrics().write.format("noop").mode("overwrite").save(),
        "windows": lambda: decisions.operator_windows(metrics(), bound()).write.format("noop").mode("overwrite").save(),
        "policy": lambda: (
            decisions.policy_decisions(metrics(), topology, options, info, max_parallelism=bound())
            .write.format("noop")
            .mode("overwrite")
            .save()
        ),
        "backfill": backfill,
    }
    results = {}
    try:
        for name, stage in stages.items():
            stage()  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.monotonic()
                stage()
                times.append(time.monotonic() - t0)
            results[name] = stats(times)
            print(f"{name:9} {results[name]['median']:7.2f} s  ({', '.join(f'{t:.2f}' for t in times)})", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)
    name = args.name or f"profile-backfill-{int(args.rows):.0e}".replace("+0", "")
    conditions = machine()
    write_results(name, {"machine": conditions, "rows": int(args.rows), "kind": args.kind, "repeat": args.repeat,
                         "stages_s": results}, f"{machine_line(conditions)}\n\n" + "\n".join(
        f"- {k}: median {v['median']:.2f} s (min {v['min']:.2f}, max {v['max']:.2f})" for k, v in results.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
