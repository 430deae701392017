"""A backfill of N past epochs under a real scheduler: Spark applications started and wall time.

Metrics for N consecutive epochs are made by replicating one real epoch of the test job (rows of
tests/fixtures, shifted in time), then ``airflow backfill create`` recomputes their decisions
(local Airflow from scripts/airflow.sh, spark-submit local[2]; no Flink needed: backfills never
collect or rescale). Reports the backfill's wall time, how many runs started a Spark application
(the batching leader) and the per-epoch cost, against one cold spark-submit per epoch.

    .venv/bin/python benchmarks/bench_backfill.py [--epochs 60] [--interval 60] [--results benchmarks/results/backfill]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "include"), str(Path(__file__).resolve().parent)]

from harness import machine, machine_line, write_results  # noqa: E402

from autoscaler import testjob  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "flink-epoch"


def synthesize(store: Path, job: str, first: int, count: int, interval_s: int) -> None:
    """``count`` epochs from the fixture epoch, each shifted to its own interval."""
    import pyarrow.parquet as pq

    from autoscaler.store.parquet import epoch_block, write_epochs
    from autoscaler.store.schemas import METRICS

    rows = pq.read_table(FIXTURE / "metrics.parquet")
    tables = []
    for epoch in range(first, first + count):
        start = datetime.fromtimestamp(epoch * interval_s, tz=UTC) + timedelta(seconds=1)
        shift = start - rows.column("window_start")[0].as_py()
        t = rows
        for name in ("window_start", "window_end"):
            shifted = pc.add(t.column(name), pa.scalar(shift, pa.duration("us")))
            t = t.set_column(t.schema.get_field_index(name), name, shifted)
        t = t.set_column(t.schema.get_field_index("epoch"), "epoch", pa.array([epoch] * t.num_rows, pa.int64()))
        t = t.set_column(t.schema.get_field_index("job"), "job", pa.array([job] * t.num_rows, pa.string()))
        block = pa.array([epoch_block(epoch)] * t.num_rows, pa.int64())
        t = t.set_column(t.schema.get_field_index("epoch_block"), "epoch_block", block)
        tables.append(t)
    write_epochs(store, METRICS, job, pa.concat_tables(tables).cast(METRICS.arrow_schema()))
    topo = store / "topologies"
    topo.mkdir(parents=True, exist_ok=True)
    (topo / f"{job}.csv").write_text((FIXTURE / "topology.csv").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "backfill"))
    args = parser.parse_args()

    from tests.integration.airflow_fixtures import start_airflow, start_postgres

    work = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    entry = {
        "name": "bf",
        "flink_job_name": "ds2-testjob",
        "jar": str(testjob.JAR),
        "parallelism_args": testjob.PARALLELISM_ARGS,
        "policy_interval": f"{args.interval}s",
    }
    (work / "jobs.yaml").write_text(yaml.safe_dump({"jobs": [entry]}))
    env = {"DS2_JOBS_CONFIG": str(work / "jobs.yaml"), "DS2_DATA_DIR": str(work / "data"), "SPARK_LOCAL_IP": "127.0.0.1"}
    os.environ.update(env)
    from autoscaler.config.jobs import load_jobs
    from autoscaler.store.parquet import read_epochs
    from autoscaler.store.schemas import DECISIONS

    job = load_jobs(work / "jobs.yaml")[0]
    now_epoch = job.epoch_of(datetime.now(UTC))
    first = now_epoch - args.epochs - 5
    synthesize(work / "data" / "store", "bf", first, args.epochs, args.interval)
    postgres = start_postgres()
    server = start_airflow(work / "airflow", ROOT / "dags", env, postgres.data_dir)
    try:
        server.wait_dag("ds2_bf")
        server.api("PATCH", "/api/v2/dags/ds2_bf", json={"is_paused": True})  # no live runs: no Flink here
        start, end = job.epoch_start(first), job.epoch_start(first + args.epochs - 1)
        t0 = time.monotonic()
        server.airflow(
            "backfill", "create", "--dag-id", "ds2_bf", "--from-date", start.isoformat(), "--to-date", end.isoformat(),
            "--max-active-runs", "4", "--reprocess-behavior", "none",
        )  # fmt: skip
        server.api("PATCH", "/api/v2/dags/ds2_bf", json={"is_paused": False})
        while True:
            runs = server.api("GET", "/api/v2/dags/ds2_bf/dagRuns", params={"run_type": "backfill", "limit": 1000})["dag_runs"]
            if len(runs) == args.epochs and all(r["state"] in ("success", "failed") for r in runs):
                break
            if time.monotonic() - t0 > 1800:
                raise SystemExit("backfill did not finish within 30 min")
            time.sleep(2)
        wall = time.monotonic() - t0
        leaders = 0
        for r in runs:
            path = f"/api/v2/dags/ds2_bf/dagRuns/{r['dag_run_id']}/taskInstances/policy/xcomEntries/return_value"
            xcom = server.api("GET", path)
            value = json.loads(xcom["value"]) if isinstance(xcom["value"], str) else xcom["value"]
            leaders += 0 if value.get("batched") else 1
        decided = read_epochs(work / "data" / "store", DECISIONS, "bf").to_pylist()
        epochs_decided = len({d["epoch"] for d in decided if d["run_type"] == "backfill"})
        failed = sum(1 for r in runs if r["state"] != "success")
    finally:
        server.stop()
        postgres.script("down", check=False)
    conditions = machine()
    text = "\n".join(
        [
            f"# Backfill of {args.epochs} epochs (interval {args.interval} s) under a real scheduler",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; Airflow 3.3 LocalExecutor, "
            "PostgreSQL 15, spark-submit local[2], backfill --max-active-runs 4.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| backfill runs | {len(runs)} ({failed} failed) |",
            f"| runs that started a Spark application | {leaders} |",
            f"| epochs with backfill decisions | {epochs_decided} |",
            f"| wall time, create → all runs finished | {wall:.0f} s ({wall / args.epochs:.1f} s per epoch) |",
            "",
            machine_line(conditions),
        ]
    )
    print(text)
    figures = {"runs": len(runs), "failed": failed, "spark_leaders": leaders, "epochs_decided": epochs_decided, "wall_s": wall}
    results = Path(args.results)
    write_results(results.name, {"conditions": conditions, "epochs": args.epochs, **figures}, text, results.parent)


if __name__ == "__main__":
    main()
