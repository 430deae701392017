"""A jobs config for the scaling DAG tests: the test job on a test Flink cluster, short intervals."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from autoscaler import testjob
from tests.conftest import ROOT
from tests.integration.conftest import TESTJOB_JAR, UNDERPROVISIONED, FlinkCluster

# DS2 asks for Count 4 at this load (see UNDERPROVISIONED); every restart keeps these arguments. The source
# reads 8 partitions that owe what it could not emit and reports FLIP-33 pendingRecords, as a Kafka source
# does: the policy sees records out plus the backlog's growth (honest inputs), never the test job's own
# rate gauge, which only a test labelled oracle may feed (ORACLE_COLLECT).
PARALLELISM_ARGS = testjob.PARALLELISM_ARGS
BASE_ARGS = ["--job-name", "ds2-testjob", "--rate", "20000", "--count-wait-us", "175", "--partitions", "8",
             "--backlog", "true"]  # fmt: skip
ORACLE_COLLECT = {"short_window": "4s", "source_rate_metric": "Source__Source.scheduledRate"}
# The job these tests start: Count 1 at 20,000 r/s, with the honest source of BASE_ARGS.
HONEST_UNDERPROVISIONED = [*UNDERPROVISIONED, "--partitions", "8", "--backlog", "true"]


def job_entry(flink: FlinkCluster, name: str, interval_s: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "flink_job_name": "ds2-testjob",
        "flink_conn_id": "flink_test",
        "spark_conn_id": "spark_test",
        "jar": str(TESTJOB_JAR),
        "base_args": BASE_ARGS,
        "parallelism_args": PARALLELISM_ARGS,
        "savepoint_dir": flink.savepoint_dir,
        "policy_interval": f"{interval_s}s",
        "collect": {"short_window": "4s"},
        # DS2, the reference: these tests check the loop against its exact sizes (Count 1 -> 4 at 20,000 r/s).
        "policy": {"kind": "ds2", "max_parallelism": {"Count": 8, "Parse": 8, "Sink: Writer": 8}},
        # Short test intervals: a run queued behind an approval or a rescale measures late by more
        # than an interval on a loaded 2-core machine.
        "validation": {"lateness_s": 90},
        **extra,
    }


def environment(
    flink: FlinkCluster, config: Path, data: Path, entries: list[dict[str, Any]], spark_connection: str | None = None
) -> dict[str, str]:
    """Write the config; the environment the DAG file, its tasks and the policy engine need.

    ``spark_connection``: the ``spark_test`` connection (JSON); default spark-submit on local[2].
    """
    config.write_text(yaml.safe_dump({"version": 1, "jobs": entries}))
    host, port = flink.client.base_url.removeprefix("http://").split(":")
    return {
        "DS2_JOBS_CONFIG": str(config),
        "DS2_DATA_DIR": str(data),
        "AIRFLOW_CONN_FLINK_TEST": json.dumps({"conn_type": "flink", "host": host, "port": int(port)}),
        "AIRFLOW_CONN_SPARK_TEST": spark_connection or json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def next_epoch_end(interval_s: int, after: float | None = None) -> datetime:
    """Wait for the wall clock to pass the next epoch boundary (the scheduler's cadence); return it."""
    now = time.time() if after is None else after
    boundary = (int(now // interval_s) + 1) * interval_s
    while time.time() < boundary + 0.5:
        time.sleep(min(0.5, max(0.05, boundary + 0.5 - time.time())))
    return datetime.fromtimestamp(boundary, tz=UTC)


@contextmanager
def dag_test_environment(
    flink: FlinkCluster, data: Path, entries: list[dict[str, Any]], extra_env: dict[str, str] | None = None
) -> Iterator[Path]:
    """This process set up for ``dag.test()`` of ``entries``: the environment (plus ``extra_env``), a fresh
    Airflow DB, the pools.

    Yields ``data``; the environment is restored afterwards.
    """
    env = environment(flink, data / "jobs.yaml", data, entries) | (extra_env or {})
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    os.environ["PATH"] = f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"
    from airflow.utils import db

    db.resetdb()
    from ds2_airflow.bootstrap import ensure_pools

    ensure_pools()
    try:
        yield data
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pending_approval(server: Any, dag_id: str) -> dict[str, Any] | None:
    """The first approval of ``dag_id`` nobody has answered yet (its hitlDetails entry), or None."""
    body = server.api("GET", "/api/v2/dags/~/dagRuns/~/hitlDetails", params={"response_received": "false"})
    items = [d for d in body["hitl_details"] if d["task_instance"]["dag_id"] == dag_id]
    return items[0] if items else None


def wait_parked(server: Any, dag_id: str, detail: dict[str, Any], settle_s: float = 3.0) -> None:
    """The approval task is parked in awaiting_input (and has been for ``settle_s``).

    Airflow 3.3.2 marks the task FAILED when an answer arrives before the scheduler has processed
    the executor's report of the parked attempt ("finished with state success, but the task
    instance's state attribute is queued"); people never answer that fast, a test would.
    """
    path = f"/api/v2/dags/{dag_id}/dagRuns/{detail['task_instance']['dag_run_id']}/taskInstances/approve"
    since = None
    while True:
        state = server.api("GET", path)["state"]
        assert state in ("awaiting_input", "running", "queued", "scheduled"), state
        since = (since or time.monotonic()) if state == "awaiting_input" else None
        if since and time.monotonic() - since >= settle_s:
            return
        time.sleep(0.5)
