"""What the store costs on an object store against the local folder: the per-epoch writes and reads of a live job.

Starts its own S3Proxy (``scripts/s3proxy.sh`` in a temp data dir; stopped by its pid file at the end) and, for
the local store and the Delta tables on S3Proxy alike, with the same rows:

- ``write``: one epoch's metrics rows (the test job's 4 vertices, 10 instances), ``--epochs`` epochs in a row,
  as collect writes them (compaction included when a block reaches its file count);
- ``read_history``: the 12 epochs before the newest (what decide and the views read), ``--reads`` times;
- ``read_epoch``: one epoch (what validate and policy read), ``--reads`` times;
- ``span``: the oldest and newest epoch (what the views ask first).

Results go to ``benchmarks/results/object-store.json`` and ``object-store.md``.

    .venv/bin/python benchmarks/bench_object_store.py [--epochs 100] [--reads 30]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT), str(Path(__file__).resolve().parent)]

from harness import machine, machine_line, stats, write_results  # noqa: E402

from autoscaler.store import delta  # noqa: E402
from autoscaler.store.parquet import epoch_span, read_epochs, write_epochs  # noqa: E402
from autoscaler.store.schemas import METRICS  # noqa: E402
from autoscaler.topology import Operator, Topology  # noqa: E402
from tests.helpers import metrics_rows, window  # noqa: E402

TOPOLOGY = Topology.from_edges(
    [Operator("src", "Source", 2), Operator("parse", "Parse", 2), Operator("count", "Count", 4), Operator("sink", "Sink", 2)],
    [("src", "parse"), ("parse", "count"), ("count", "sink")],
)
WINDOW = {"src": window(2, 40000.0, 20000.0), "parse": window(2, 30000.0, 20000.0), "count": window(4, 24000.0, 20000.0),
          "sink": window(2, 50000.0, 20000.0)}  # fmt: skip


def timed(action) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def measure(store: str, epochs: int, reads: int) -> dict:
    writes = [timed(lambda e=e: write_epochs(store, METRICS, "bench", metrics_rows(TOPOLOGY, {e: WINDOW}, "bench")))
              for e in range(epochs)]  # fmt: skip
    last = epochs - 1
    history = [timed(lambda: read_epochs(store, METRICS, "bench", range(last - 12, last))) for _ in range(reads)]
    one = [timed(lambda: read_epochs(store, METRICS, "bench", [last])) for _ in range(reads)]
    span = [timed(lambda: epoch_span(store, METRICS, "bench")) for _ in range(reads)]
    assert read_epochs(store, METRICS, "bench").num_rows == epochs * 10
    ms = lambda values: stats([v * 1000 for v in values], 1)  # noqa: E731
    return {"write_ms": ms(writes), "read_history_ms": ms(history), "read_epoch_ms": ms(one), "span_ms": ms(span)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--reads", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ds2-bench-store-") as tmp:
        env = {**os.environ, "S3PROXY_DATA_DIR": f"{tmp}/s3proxy"}
        subprocess.run([str(ROOT / "scripts" / "s3proxy.sh"), "up"], check=True, env=env)
        try:
            client = Path(f"{tmp}/s3proxy/client.env").read_text().splitlines()
            os.environ.update(line.split("=", 1) for line in client if line.startswith("AWS_"))
            results = {"local": measure(f"{tmp}/store", args.epochs, args.reads),
                       "object store": measure("s3://ds2/bench", args.epochs, args.reads)}  # fmt: skip
        finally:
            subprocess.run([str(ROOT / "scripts" / "s3proxy.sh"), "down"], check=False, env=env)
    conditions = machine() | {"epochs": args.epochs, "reads": args.reads, "rows_per_epoch": 10,
                              "object_store": "S3Proxy 4.1.0 (filesystem-nio2) on the loopback",
                              "compact_at_files": delta.COMPACT_AT_FILES}  # fmt: skip
    lines = ["# The store: local folder against Delta tables on an object store", "", machine_line(conditions), "",
             f"{args.epochs} epochs of 10 metrics rows written one at a time, then {args.reads} reads of each kind "
             "(milliseconds: median, max).", "", "| store | write | read 12 epochs | read 1 epoch | span |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in results.items():
        cells = [f"{r[k]['median']} ({r[k]['max']})" for k in ("write_ms", "read_history_ms", "read_epoch_ms", "span_ms")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    write_results("object-store", {"conditions": conditions, "results": results}, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
