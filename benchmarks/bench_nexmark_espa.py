"""Nexmark over Kafka under the ESPA evaluation's load patterns, autoscaled end to end by each policy kind.

The ESPA evaluation of stream autoscalers (DEBS 2024) drove Nexmark queries on Flink with Kafka under
cosine, increase and random load. Here: a query (q5, q8) under a pattern (cosine, increase) and a policy
kind (the default ``ds2_plus``, ``utilization``, ``ds2``), each run on a stack of its own (Flink with the
adaptive scheduler, Kafka, the warm Spark engine, PostgreSQL and Airflow's scheduler; ``scripts/ds2_local.py``'s
``Stack``). The query is registered with ``sql_file:`` and no flags, starts at ``--start-parallelism``, and the
scaling DAG runs every ``--interval`` seconds while the Nexmark generator follows the pattern.

Per run, from the store:

- **rescales**: actions that succeeded;
- **lag**: the sources' ``pendingRecords`` summed, per measured epoch (median and max);
- **instance-seconds over the measured need**: the run's instances x interval over its measured epochs,
  against the instances each of those epochs needed: per operator, its input that epoch (a source: its
  arrival) over its capacity per instance, rounded up, where the capacity is the median of what the run
  measured (true processing rate per instance, DS2's model; a source's: what it took in per busy second).
  An operator whose capacity the run never measured needs 1.

``--rejudge`` recomputes the table from the runs' stores (data/espa/) without running anything.

    .venv/bin/python benchmarks/bench_nexmark_espa.py --queries q5 --patterns cosine --kinds ds2_plus utilization ds2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness import RESULTS, load_script, machine, machine_line, write_results  # noqa: E402

local = load_script("ds2_local", ROOT / "scripts" / "ds2_local.py")

from autoscaler.flink import sql  # noqa: E402
from autoscaler.kafka.client import ensure_topic, read_client_config  # noqa: E402
from autoscaler.store.parquet import read_epochs  # noqa: E402
from autoscaler.store.schemas import ACTIONS, METRICS  # noqa: E402

NEXMARK = ROOT / "flink-job" / "sql" / "nexmark"
STEP_S = 10  # the generator's schedule changes rate every 10 s


def pattern_schedule(pattern: str, duration_s: int, low: float, high: float, period_s: int) -> str:
    """The pattern as the generator's step schedule: cosine between low and high over ``period_s``; or an
    increase from low to high over the run (ESPA's cosine and increase)."""
    steps = []
    for t in range(0, duration_s, STEP_S):
        if pattern == "cosine":
            rate = low + (high - low) * (1 - math.cos(2 * math.pi * t / period_s)) / 2
        elif pattern == "increase":
            rate = low + (high - low) * t / max(duration_s - STEP_S, 1)
        else:
            raise SystemExit(f"unknown pattern {pattern!r}: cosine or increase")
        steps.append(f"{t}s:{round(rate)}")
    return ",".join(steps)


def one_run(query: str, pattern: str, kind: str, a: argparse.Namespace) -> dict[str, Any]:
    # Under data/ (as the demo's): the project's PostgreSQL runs as its own user and must reach the folder.
    folder = ROOT / "data" / "espa" / f"{query}-{pattern}-{kind}"
    if folder.exists():
        local.Stack(folder, 0, 0, {}).down()
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    env = {"DS2_DATA_DIR": str(folder), "DS2_JOBS_CONFIG": str(folder / "jobs.yaml"), "AIRFLOW_ADMIN_PASSWORD": "admin",
           "KAFKA_PORT": str(local.free_port(29092))}  # fmt: skip
    stack = local.Stack(folder, local.free_port(8081), local.free_port(8080), env)
    generator = None
    try:
        local.run([str(local.FLINK_SH), "build-job"], stack.env)
        local.run([str(local.FLINK_SH), "up", "--adaptive"], stack.env)
        client_config = stack.kafka_up()
        config = read_client_config(client_config)
        for topic in ("person", "auction", "bid"):
            ensure_topic(config, f"nexmark-{topic}", a.partitions)
        script = sql.read_scripts([NEXMARK / "tables.sql", NEXMARK / f"{query}.sql"])
        job_id = sql.submit(stack.client(), script, parallelism=a.start_parallelism, kafka_client_config=client_config)
        stack.client().wait_all_running(job_id, timeout_s=60)
        start = math.ceil((time.time() + a.startup) / a.interval) * a.interval
        schedule = pattern_schedule(pattern, a.duration, a.low, a.high, a.period)
        python = str(local.VENV_BIN / "python")
        generator = subprocess.Popen(
            [python, "-m", "autoscaler.kafka", "produce", "--client-config", str(client_config), "--topic", "nexmark",
             "--events", "nexmark", "--rate-schedule", schedule, "--start-ms", str(start * 1000),
             "--progress", str(folder / "generator.jsonl")],
            cwd=ROOT, env=stack.env, stdout=subprocess.DEVNULL, stderr=(folder / "generator.log").open("w"),
        )  # fmt: skip
        entry = {
            "name": "espa", "flink_job_name": f"nexmark-{query}",
            "sql_file": [str(NEXMARK / "tables.sql"), str(NEXMARK / f"{query}.sql")],
            "kafka_client_config": str(client_config), "savepoint_dir": f"file://{folder / 'savepoints'}",
            "mechanism": "in-place", "policy_interval": f"{a.interval}s", "collect": {"short_window": "10s"},
            # ds2_plus and utilization wait the same before a scale-down (ds2 has no wait): see --scale-down-interval.
            "policy": {"kind": kind, "job_max_parallelism": a.max_parallelism,
                       "scale_down_interval": f"{a.scale_down_interval or a.period // 2}s"},
            "start_date": datetime.fromtimestamp(start, tz=UTC).isoformat(),
        }  # fmt: skip
        (folder / "jobs.yaml").write_text(yaml.safe_dump({"version": 1, "jobs": [entry]}, sort_keys=False))
        stack.spark_up()
        stack.airflow_up()
        end = start + a.duration
        while time.time() < end + 2 * a.interval:
            time.sleep(5)
        return judge(folder / "store", query, pattern, kind, a, range(int(start // a.interval), int(end // a.interval)))
    finally:
        if generator is not None and generator.poll() is None:
            generator.terminate()
            generator.wait(60)
        stack.down()


def judge(store: Path, query: str, pattern: str, kind: str, a: argparse.Namespace, epochs: range) -> dict[str, Any]:
    rows = [r for r in read_epochs(store, METRICS, "espa").to_pylist() if r["epoch"] in epochs]
    actions = [r for r in read_epochs(store, ACTIONS, "espa").to_pylist() if r["epoch"] in epochs]
    by_epoch: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_epoch[r["epoch"]].append(r)
    # Per operator, sources too: what an instance takes in per busy second (a source: in its arrival's units).
    capacity: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if not r["warmup"] and r["true_processing_rate"] > 0:
            capacity[r["operator_name"]].append(r["true_processing_rate"])
    per_instance = {op: statistics.median(v) for op, v in capacity.items()}
    used = needed = 0.0
    lags = []
    for epoch_rows in by_epoch.values():
        ops = {r["operator_name"]: r for r in epoch_rows}
        if any(r["warmup"] for r in epoch_rows):
            continue  # a restart's window: no rates to size a need by, so neither side counts it
        used += sum(r["parallelism"] for r in ops.values()) * a.interval
        lags.append(sum(r["pending_records"] or 0 for r in epoch_rows if r["is_source"]))
        for op in ops:
            # What it took in per wall second (a source: its arrival, which it must take in to keep up).
            key = "true_output_rate" if ops[op]["is_source"] else "observed_processing_rate"
            inputs = sum(x[key] for x in epoch_rows if x["operator_name"] == op)
            need = max(1, math.ceil(inputs / per_instance[op] - 1e-9)) if op in per_instance else 1
            needed += need * a.interval
    return {"query": query, "pattern": pattern, "kind": kind, "epochs": len(by_epoch),
            "rescales": sum(1 for x in actions if x["outcome"] == "succeeded"),
            "lag_median": statistics.median(lags) if lags else None, "lag_max": max(lags) if lags else None,
            "instance_s": used, "need_s": needed, "over_need": used / needed if needed else None}  # fmt: skip


def rejudge(a: argparse.Namespace) -> int:
    """The stored results judged again from each run's store, with the settings and epochs they were run with."""
    stored = json.loads((RESULTS / "nexmark-espa.json").read_text())
    settings = stored["settings"]
    run = argparse.Namespace(**{**vars(a), **settings})
    results = []
    for r in stored["results"]:
        folder = ROOT / "data" / "espa" / f"{r['query']}-{r['pattern']}-{r['kind']}"
        if not (folder / "store").is_dir():
            raise SystemExit(f"{folder}: no store of the run {r['query']} {r['pattern']} {r['kind']}")
        # The run's epochs: from its job's start date (its first measured epoch) over the run's duration.
        entry = yaml.safe_load((folder / "jobs.yaml").read_text())["jobs"][0]
        start = datetime.fromisoformat(str(entry["start_date"])).timestamp()
        epochs = range(int(start // run.interval), int((start + run.duration) // run.interval))
        results.append(judge(folder / "store", r["query"], r["pattern"], r["kind"], run, epochs))
    write_results("nexmark-espa", {**stored, "results": results}, markdown(results, stored["conditions"], settings))
    print((RESULTS / "nexmark-espa.md").read_text())
    return 0


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def markdown(results: list[dict[str, Any]], conditions: dict[str, Any], a: dict[str, Any]) -> str:
    lines = ["# Nexmark over Kafka under ESPA's load patterns", "",
             f"{machine_line(conditions)}. {a['duration']} s per run, policy interval {a['interval']} s, "
             f"{a['low']:,}-{a['high']:,} events/s (cosine period {a['period']} s), {a['partitions']} partitions a topic, "
             f"the query started at parallelism {a.get('start_parallelism', 1)}, ds2_plus and utilization waiting "
             f"{a.get('scale_down_interval') or 'their own time'} s before a scale-down (ds2 has no wait); "
             "one run per cell; `benchmarks/bench_nexmark_espa.py`.", "",
             "| query | pattern | kind | rescales | lag median | lag max | instance-s | needed | over need |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        lines.append(f"| {r['query']} | {r['pattern']} | {r['kind']} | {r['rescales']} | {_count(r['lag_median'])} | "
                     f"{_count(r['lag_max'])} | {r['instance_s']:,.0f} | {r['need_s']:,.0f} | "
                     f"{(r['over_need'] or 0):.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", nargs="+", default=["q5", "q8"])
    p.add_argument("--patterns", nargs="+", default=["cosine", "increase"])
    p.add_argument("--kinds", nargs="+", default=["ds2_plus", "utilization", "ds2"])
    p.add_argument("--duration", type=int, default=480)
    p.add_argument("--interval", type=int, default=30)
    p.add_argument("--startup", type=int, default=75)
    p.add_argument("--low", type=int, default=1000)
    p.add_argument("--high", type=int, default=6000)
    p.add_argument("--period", type=int, default=240)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--max-parallelism", type=int, default=4)
    # On 2 cores one instance of each operator carries what the generator can write beside Flink: a run that
    # starts above that measures how each kind sheds what the job does not need, and whether lag follows.
    p.add_argument("--start-parallelism", type=int, default=2)
    # The runs compress time: a cosine period of minutes, not hours. Each kind's own wait before a scale-down
    # (ds2_plus 5 min, utilization an hour; ds2 has none) would outlast a run, so both wait the same share of the
    # load's period instead, half of it, as the demo waits half a phase (an option of the job, not a kind's default).
    p.add_argument("--scale-down-interval", type=int, default=None, help="s (default: half the cosine period)")
    p.add_argument("--append", action="store_true", help="add to the stored results")
    p.add_argument("--rejudge", action="store_true", help="recompute the stored results from the runs' stores")
    a = p.parse_args()
    if a.rejudge:
        return rejudge(a)
    conditions = machine()
    results = json.loads((RESULTS / "nexmark-espa.json").read_text())["results"] if a.append else []
    for query in a.queries:
        for pattern in a.patterns:
            for kind in a.kinds:
                print(f"== {query} {pattern} {kind}", flush=True)
                results.append(one_run(query, pattern, kind, a))
                a.scale_down_interval = a.scale_down_interval or a.period // 2
                settings = {k: getattr(a, k) for k in ("duration", "interval", "low", "high", "period", "partitions",
                                                       "start_parallelism", "scale_down_interval")}  # fmt: skip
                write_results("nexmark-espa", {"conditions": conditions, "settings": settings, "results": results},
                              markdown(results, conditions, settings))  # fmt: skip
    print((RESULTS / "nexmark-espa.md").read_text())
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
