"""The collector's honest arrival rate on a real Kafka source, against the load generator's known rate.

One run per consumer fetch size, each on its own Flink and Kafka instances (temp data dirs, free ports):
the test job reads 8 partitions at 12,000 records/s through the Flink Kafka connector.

1. **back-pressure**: Count 1 (about 5,700 records/s) for 40 s: the source emits half, the rest is lag;
2. **across a rescale**: stop-with-savepoint and restart at Source 4 and Count 4, so the 8 partitions move
   from 2 readers to 4; a window that spans the restart is warm-up (the collector never decides on it) and
   the first one after it is reported on its own;
3. **draining**: at Count 4 (about 22,800 records/s) the backlog falls while records keep arriving;
4. **steady**: the backlog is gone; the source emits what arrives.

A snapshot is taken every 5 s. Every window of 10 s and of 30 s between two snapshots is one sample:
the collector's arrival (``window_metrics``: records out + growth of ``pendingRecords``, per reader, summed)
against the generator's acknowledged records over the same wall-clock window. Results:
``benchmarks/results/kafka-rate-error.md`` (and its ``.json``).

    .venv/bin/python benchmarks/bench_kafka_rates.py [--fetch-bytes 1048576 16384]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from harness import RESULTS, machine, machine_line, stats, write_results  # noqa: E402

from autoscaler import testjob  # noqa: E402
from autoscaler.collect.snapshot import BASIS_LAG, Snapshot, take_snapshot, window_metrics  # noqa: E402
from autoscaler.flink.client import FlinkConnection, FlinkRestClient  # noqa: E402
from autoscaler.flink.deployment import JobDeployment  # noqa: E402
from autoscaler.kafka.client import ensure_topic, read_client_config  # noqa: E402
from autoscaler.kafka.generator import rate_between, read_progress  # noqa: E402
from autoscaler.rescale.savepoint import rescale_with_savepoint  # noqa: E402
from tests.helpers import free_port  # noqa: E402

RATE, PARTITIONS, JOB = 12_000, 8, "bench-kafka-rates"
BACKPRESSURE_S, STEADY_S, EVERY_S, WINDOWS_S = 40, 30, 5.0, (10, 30)
DRAINED = 2_000  # records of lag left in all partitions: the backlog is gone (a fraction of a second's input)


@contextmanager
def services() -> Iterator[tuple[FlinkRestClient, Path, dict[str, str]]]:
    data = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    env = {**os.environ, "FLINK_DATA_DIR": str(data / "flink"), "FLINK_REST_PORT": str(free_port()),
           "FLINK_RPC_PORT": str(free_port()), "KAFKA_DATA_DIR": str(data / "kafka"), "KAFKA_PORT": str(free_port())}  # fmt: skip
    try:
        subprocess.run([str(ROOT / "scripts" / "flink.sh"), "up"], check=True, cwd=ROOT, env=env)
        subprocess.run([str(ROOT / "scripts" / "kafka.sh"), "up"], check=True, cwd=ROOT, env=env)
        yield FlinkRestClient(FlinkConnection(base_url=f"http://127.0.0.1:{env['FLINK_REST_PORT']}")), data, env
    finally:
        subprocess.run([str(ROOT / "scripts" / "kafka.sh"), "down"], check=False, cwd=ROOT, env=env)
        subprocess.run([str(ROOT / "scripts" / "flink.sh"), "down"], check=False, cwd=ROOT, env=env)
        shutil.rmtree(data, ignore_errors=True)


def pending(snapshot: Snapshot) -> float:
    return sum(c.pending_records or 0 for c in snapshot.counters if c.pending_records is not None)


def run(fetch_bytes: int) -> dict[str, Any]:
    with services() as (client, data, _env):
        client_config = data / "kafka" / "client.properties"
        config = read_client_config(client_config)
        ensure_topic(config, "lines", PARTITIONS)
        ensure_topic(config, "counts", 1)
        args = ["--job-name", JOB, "--kafka-topic", "lines", "--kafka-group", JOB, "--kafka-client-config",
                str(client_config), "--kafka-partition-fetch-bytes", str(fetch_bytes), "--count-wait-us", "175",
                "--keys", "1000", "--checkpoint-interval-ms", "5000"]  # fmt: skip
        progress = data / "progress.jsonl"
        produce = [sys.executable, "-m", "autoscaler.kafka", "produce", "--client-config", str(client_config),
                   "--topic", "lines", "--rate", str(RATE), "--keys", "1000", "--progress", str(progress)]  # fmt: skip
        gen = subprocess.Popen(produce)
        snapshots: list[tuple[str, Snapshot]] = []
        try:
            jar = client.upload_jar(testjob.JAR)
            job = client.run_jar(jar, None, [*args, "--source-parallelism", "2", "--count-parallelism", "1"])
            client.wait_all_running(job, 60)
            time.sleep(10)  # the first fetches: pendingRecords is missing before them

            def sample(phase: str, for_s: float) -> None:
                end = time.monotonic() + for_s
                while time.monotonic() < end:
                    snapshots.append((phase, take_snapshot(client, JOB)))
                    time.sleep(EVERY_S)

            sample("back-pressure", BACKPRESSURE_S)
            deployment = JobDeployment(job_name=JOB, savepoint_dir=f"file://{data / 'savepoints'}", jar_path=testjob.JAR,
                                       parallelism_args={**testjob.PARALLELISM_ARGS, "Source: Source": "--source-parallelism"},
                                       base_args=args)  # fmt: skip
            result = rescale_with_savepoint(client, deployment, {"Source: Source": 4, "Count": 4}, "up", data / "journal")
            if result.outcome != "succeeded":
                raise SystemExit(f"the rescale failed: {result.message}")
            snapshots.append(("after-rescale", take_snapshot(client, JOB)))
            time.sleep(10)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                snap = take_snapshot(client, JOB)
                snapshots.append(("draining", snap))
                if pending(snap) < DRAINED:
                    break
                time.sleep(EVERY_S)
            sample("steady", STEADY_S)
        finally:
            gen.terminate()
            gen.wait(60)
        points = read_progress(progress)
    return {"fetch_bytes": fetch_bytes, "samples": windows(snapshots, points), "downtime_s": result.downtime_s}


def windows(snapshots: list[tuple[str, Snapshot]], points: list[tuple[float, int]]) -> list[dict[str, Any]]:
    out = []
    for i, (phase_a, a) in enumerate(snapshots):
        for phase_b, b in snapshots[i + 1 :]:
            length = (b.taken_at - a.taken_at).total_seconds()
            target = next((w for w in WINDOWS_S if abs(length - w) <= 2.5), None)
            if target is None:
                continue
            rows = [r for r in window_metrics(a, b, JOB, 1).to_pylist() if r["is_source"]]
            if any(r["warmup"] for r in rows):
                case = "across the rescale (warm-up, not decided on)"
            elif phase_a == "after-rescale":
                case = "first window after the rescale"
            elif phase_a == phase_b or (phase_a, phase_b) == ("draining", "steady"):
                case = phase_a
            else:
                continue
            truth = rate_between(points, a.taken_at.timestamp(), b.taken_at.timestamp())
            arrival = sum(r["true_output_rate"] for r in rows)
            bases = sorted({r["source_rate_basis"] for r in rows})
            out.append({"case": case, "window_s": target, "truth": truth, "arrival": arrival,
                        "emitted": sum(r["observed_output_rate"] for r in rows), "bases": bases,
                        "error": arrival / truth - 1 if truth else None, "all_lag": bases == [BASIS_LAG]})  # fmt: skip
    return out


CASES = ["back-pressure", "across the rescale (warm-up, not decided on)", "first window after the rescale", "draining", "steady"]


def markdown(runs: list[dict[str, Any]], conditions: dict[str, Any]) -> str:
    lines = ["# The collector's arrival rate on a real Kafka source, against the generator's", "",
             f"{machine_line(conditions)}. Flink 2.3.0, flink-sql-connector-kafka 5.0.0-2.2, Kafka 4.4.0 (one broker, "
             f"SCRAM), {RATE:,} records/s into {PARTITIONS} partitions; `benchmarks/bench_kafka_rates.py`.", "",
             "Error = collector's arrival / generator's acknowledged rate − 1, over the same wall-clock window; "
             "|error| as median and max per case.", "",
             "| max.partition.fetch.bytes | case | window | n | median error | median abs | max abs | emitted / truth |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    by_fetch: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by_fetch[r["fetch_bytes"]].append(r)
    for fetch_bytes, same in sorted(by_fetch.items(), reverse=True):
        groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for r in same:
            for s in r["samples"]:
                groups[(s["case"], s["window_s"])].append(s)
        for case in CASES:
            for w in WINDOWS_S:
                g = groups.get((case, w))
                if not g:
                    continue
                if case.startswith("across"):
                    lines.append(f"| {fetch_bytes:,} ({len(same)} runs) | {case} | {w} s | {len(g)} | not measured: the "
                                 "collector marks a window over a restart warm-up and reads no rate from it | | | |")  # fmt: skip
                    continue
                errs = [s["error"] for s in g if s["error"] is not None]
                ab = stats([abs(e) for e in errs]) or {}
                med = stats(errs) or {}
                em = stats([s["emitted"] / s["truth"] for s in g if s["truth"]]) or {}
                lines.append(f"| {fetch_bytes:,} ({len(same)} runs) | {case} | {w} s | {len(g)} | {med.get('median', 0):+.1%} | "
                             f"{ab.get('median', 0):.1%} | {ab.get('max', 0):.1%} | {em.get('median', 0):.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fetch-bytes", type=int, nargs="+", default=[1_048_576, 16_384])
    p.add_argument("--markdown-only", action="store_true", help="rewrite the .md from the stored .json")
    p.add_argument("--append", action="store_true", help="add these runs to the stored ones (repeats of a setting pool)")
    a = p.parse_args()
    if a.markdown_only:
        report = json.loads((RESULTS / "kafka-rate-error.json").read_text())
        conditions, runs = report["conditions"], report["runs"]
    else:
        conditions = machine()
        runs = [run(f) for f in a.fetch_bytes]
        if a.append:
            runs = json.loads((RESULTS / "kafka-rate-error.json").read_text())["runs"] + runs
        report = {"conditions": conditions, "rate": RATE, "partitions": PARTITIONS, "runs": runs}
    md = markdown(runs, conditions)
    write_results("kafka-rate-error", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
