"""Cost of metric collection on a real local Flink 2.3 cluster.

Starts its own cluster instance (see ``bench_rescale.cluster``), runs the under-provisioned
test job (4 vertices, 5 subtasks) and measures, ``--repeat`` times:

- ``snapshot``: one counter snapshot (jobs overview, job details, one call per vertex, one
  gauge call per source subtask);
- ``collect``: a whole epoch collected against the previous boundary (two snapshots are not
  needed: one snapshot + the window rows + the store write + the topology file);
- the number of REST calls per snapshot.

Results go to ``benchmarks/results/collect.json`` and ``collect.md``.

    PATH=.venv/bin:$PATH .venv/bin/python benchmarks/bench_collect.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rescale import JAR, cluster  # noqa: E402
from harness import machine, machine_line, stats, write_results  # noqa: E402

from autoscaler.collect.flink import collect_epoch_metrics  # noqa: E402
from autoscaler.collect.snapshot import take_snapshot  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
RATE_METRIC = "Source__Source.scheduledRate"
ARGS = ["--rate", "20000", "--count-wait-us", "175", "--count-parallelism", "1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with cluster(adaptive=False) as (client, _):
        job_id = client.run_jar(client.upload_jar(JAR), None, ARGS)
        client.wait_all_running(job_id)
        calls = {"n": 0}
        original = client.session.request

        def counting(*a, **kw):
            calls["n"] += 1
            return original(*a, **kw)

        client.session.request = counting  # type: ignore[method-assign]
        snapshot_s, calls_per_snapshot = [], []
        for _ in range(args.repeat):
            calls["n"] = 0
            t0 = time.perf_counter()
            take_snapshot(client, "ds2-testjob", RATE_METRIC)
            snapshot_s.append(time.perf_counter() - t0)
            calls_per_snapshot.append(calls["n"])
        store = Path(tempfile.mkdtemp(prefix="bench-collect-"))
        collect_epoch_metrics(client, "ds2-testjob", "bench", 0, store, short_window_s=1, source_rate_metric=RATE_METRIC)
        collect_s = []
        for epoch in range(1, args.repeat + 1):
            t0 = time.perf_counter()
            collect_epoch_metrics(client, "ds2-testjob", "bench", epoch, store, source_rate_metric=RATE_METRIC)
            collect_s.append(time.perf_counter() - t0)
    report = {
        "conditions": {**machine(), "job": "ds2-testjob, 4 vertices, 5 subtasks, 20,000 rec/s", "repeat": args.repeat},
        "snapshot_s": stats(snapshot_s),
        "rest_calls_per_snapshot": statistics.median(calls_per_snapshot),
        "collect_epoch_s": stats(collect_s),
    }
    c = report["conditions"]
    md = [
        "# Metric collection cost",
        "",
        f"Measured {c['date']} by `benchmarks/bench_collect.py`: {c['job']}, local cluster, {args.repeat} repeats.",
        "",
        machine_line(c),
        "",
        "| step | min s | median s | max s |",
        "|---|---:|---:|---:|",
    ]
    for name in ("snapshot_s", "collect_epoch_s"):
        s = report[name]
        md.append(f"| {name.removesuffix('_s')} | {s['min']:.3f} | {s['median']:.3f} | {s['max']:.3f} |")
    md += ["", f"REST calls per snapshot: {report['rest_calls_per_snapshot']:.0f}", ""]
    write_results("collect", report, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
