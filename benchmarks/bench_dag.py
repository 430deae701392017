"""Wall time of one scaling-DAG run per task, and epoch end -> rescaled job running.

Runs the real DAG (dags/ds2_autoscaler.py) with ``dag.test()`` against a local Flink cluster of
its own and local spark-submit, on a temporary Airflow DB: per repetition, the under-provisioned
test job (Count 1, needs 4) is submitted, one run rescales it, one more run finds nothing to do.

    .venv/bin/python benchmarks/bench_dag.py [--repeat 3] [--interval 10] [--results benchmarks/results/dag]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import machine, machine_line, write_results  # noqa: E402

from autoscaler import testjob  # noqa: E402

TASKS = ("collect", "validate", "policy", "decide", "rescale", "record")


def wait_for_boundary(interval_s: int) -> datetime:
    boundary = (int(time.time() // interval_s) + 1) * interval_s
    while time.time() < boundary + 0.5:
        time.sleep(0.1)
    return datetime.fromtimestamp(boundary, tz=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--interval", type=int, default=10, help="policy interval, seconds")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "dag"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-dag-"))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(work / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "DS2_DATA_DIR": str(work / "data"),
            "DS2_JOBS_CONFIG": str(work / "jobs.yaml"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "AIRFLOW_CONN_SPARK_BENCH": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
        }
    )
    from benchmarks.bench_rescale import cluster

    with cluster(adaptive=False) as (client, data_dir):
        host, port = client.base_url.removeprefix("http://").split(":")
        os.environ["AIRFLOW_CONN_FLINK_BENCH"] = json.dumps({"conn_type": "flink", "host": host, "port": int(port)})
        jar = testjob.JAR
        base = ["--job-name", "ds2-testjob", "--rate", "20000", "--count-wait-us", "175"]
        entry = {
            "name": "bench",
            "flink_job_name": "ds2-testjob",
            "flink_conn_id": "flink_bench",
            "spark_conn_id": "spark_bench",
            "jar": str(jar),
            "base_args": base,
            "parallelism_args": testjob.PARALLELISM_ARGS,
            "savepoint_dir": f"file://{data_dir / 'savepoints'}",
            "policy_interval": f"{args.interval}s",
            "collect": {"short_window": "4s"},
        }
        Path(os.environ["DS2_JOBS_CONFIG"]).write_text(yaml.safe_dump({"jobs": [entry]}))
        from airflow.dag_processing.dagbag import BundleDagBag
        from airflow.utils import db

        from autoscaler.store.parquet import read_epochs
        from autoscaler.store.schemas import ACTIONS
        from ds2_airflow.bootstrap import ensure_pools

        db.resetdb()
        ensure_pools()
        dag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=str(ROOT / "dags")).dags["ds2_bench"]
        jar_id = client.upload_jar(jar)
        rows: list[dict] = []
        for rep in range(args.repeat):
            for job in client.jobs():
                if job.state == "RUNNING":
                    client.cancel(job.id)
            while any(j.state in ("RUNNING", "CANCELLING") for j in client.jobs()):
                time.sleep(0.2)
            client.run_jar(jar_id, None, [*base, "--count-parallelism", "1"])
            time.sleep(5)  # let the job reach its back-pressured steady state before the epoch is measured
            for kind in ("rescale", "steady"):
                end = wait_for_boundary(args.interval)
                run = dag.test(logical_date=end)
                tis = {ti.task_id: ti for ti in run.get_task_instances()}
                durations = {t: tis[t].duration for t in TASKS if t in tis and tis[t].duration is not None}
                action = read_epochs(work / "data" / "store", ACTIONS, "bench").to_pylist()
                latest = max(action, key=lambda a: a["epoch"])
                row = {
                    "rep": rep,
                    "kind": kind,
                    "state": str(run.state),
                    "outcome": latest["outcome"],
                    "epoch_end_to_running_s": (
                        (latest["finished_at"] - end).total_seconds() if latest["outcome"] == "succeeded" else None
                    ),
                    "downtime_s": latest["downtime_s"],
                    **{f"{t}_s": durations.get(t) for t in TASKS},
                }
                rows.append(row)
                print(json.dumps(row))

    def med(key: str, kind: str) -> str:
        values = [r[key] for r in rows if r["kind"] == kind and r[key] is not None]
        return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})" if values else "–"

    lines = [
        f"# One scaling-DAG run per task (dag.test, {args.repeat} repetitions, interval {args.interval} s)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; local Flink 2.3, spark-submit local[2], SQLite.",
        "Median (min–max), seconds.",
        "",
        "| task | run that rescales | steady run |",
        "|---|---|---|",
    ]
    lines += [f"| {t} | {med(f'{t}_s', 'rescale')} | {med(f'{t}_s', 'steady')} |" for t in TASKS]
    lines += [
        f"| epoch end → rescaled job running | {med('epoch_end_to_running_s', 'rescale')} | – |",
        f"| rescale downtime | {med('downtime_s', 'rescale')} | – |",
    ]
    conditions = machine()
    lines += ["", machine_line(conditions)]
    text = "\n".join(lines) + "\n"
    print(text)
    results = Path(args.results)
    write_results(results.name, {"conditions": conditions, "runs": rows}, text, results.parent)


if __name__ == "__main__":
    main()
