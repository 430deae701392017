"""The project's PostgreSQL (scripts/postgres.sh) and the local Airflow on it under concurrent writes.

- ``up`` is idempotent, keeps its port, never takes a port that is already taken, ``url`` creates a
  role and database with a password of their own, ``down`` stops exactly the server it started.
- Several backfills (REST and CLI) and triggered runs created at once while the scheduler is busy:
  no "database is locked", every run finishes (SQLite refused backfill creation under this load:
  503 "Database is locked. Backfill creation is not supported on SQLite under concurrent access").
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg2
import pytest

from tests.integration.airflow_fixtures import PostgresServer, process_alive, start_postgres

pytestmark = pytest.mark.slow


def _connect(url: str):
    return psycopg2.connect(url.replace("postgresql+psycopg2://", "postgresql://"), connect_timeout=10)


def test_postgres_script_lifecycle():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy_port = taken.getsockname()[1]
        server = start_postgres()
        try:
            state = dict(line.split("=", 1) for line in (server.data_dir / "ds2-postgres.env").read_text().split())
            port = int(state["PG_PORT"])
            assert port != busy_port and len(state["PG_ADMIN_PASSWORD"]) == 32
            assert (server.data_dir / "ds2-postgres.env").stat().st_mode & 0o077 == 0  # secrets: owner only
            pid, start = server.pid()
            assert process_alive(pid, start)

            # A port someone else holds is refused with one line, and the running server is untouched.
            res = server.script("up", check=False)
            assert res.returncode == 0 and "already running" in res.stderr
            stopped_env = {**server.env, "PG_PORT": str(busy_port)}
            server.script("down")
            assert not process_alive(pid, start)
            forced = PostgresServer(server.data_dir, stopped_env)
            res = forced.script("up", check=False)
            assert res.returncode == 1 and f"port {busy_port} (PG_PORT) is taken" in res.stderr, res.stderr
            assert "Traceback" not in res.stderr

            # Restarted, it keeps its port and its data.
            server.script("up")
            assert server.script("status").stdout.startswith(f"postgres: running on 127.0.0.1:{port} ")
            url = server.script("url", "app_one").stdout.strip()
            assert url.startswith("postgresql+psycopg2://app_one:") and url.endswith(f"@127.0.0.1:{port}/app_one")
            with _connect(url) as conn, conn.cursor() as cur:
                cur.execute("CREATE TABLE t (x int); INSERT INTO t VALUES (42)")
            assert server.script("url", "app_one").stdout.strip() == url  # idempotent
            other = server.script("url", "app_two").stdout.strip()
            assert other.split("@")[0] != url.split("@")[0]  # a password per role
            # A role's password does not open another role's database.
            with pytest.raises(psycopg2.OperationalError):
                _connect(url.replace("app_one:", "app_two:", 1))
            server.script("down")
            server.script("up")
            with _connect(url) as conn, conn.cursor() as cur:
                cur.execute("SELECT x FROM t")
                assert cur.fetchall() == [(42,)]  # durable across a restart

            # Names that would go into SQL or paths are checked by full match.
            for bad in ("app\n", "App", "1app", "a-b", "x" * 64, "../x"):
                res = server.script("url", bad, check=False)
                assert res.returncode == 1 and "database name" in res.stderr, (bad, res.stderr)
        finally:
            server.script("down", check=False)
            shutil.rmtree(server.data_dir, ignore_errors=True)
    assert server.script("status", check=False).returncode == 3


def test_postgres_moves_on_when_its_port_is_taken_at_bind_time():
    """A port that a connect test sees free can still be held, by a socket bound and not listening (the
    local end of an outgoing connection in the ephemeral range is one): ``up`` takes the next free port."""
    data_dir = Path(tempfile.mkdtemp(prefix="ds2-tests-pg-"))
    data_dir.chmod(0o755)
    server = PostgresServer(data_dir, {**os.environ, "PG_DATA_DIR": str(data_dir)})
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # bound, never listening: invisible to a connect test
        held_port = held.getsockname()[1]
        try:
            server.script("up")
            server.script("down")
            state = data_dir / "ds2-postgres.env"  # the port it keeps across restarts becomes the held one
            state.write_text(re.sub(r"(?m)^PG_PORT=.*$", f"PG_PORT={held_port}", state.read_text()))
            res = server.script("up")
            assert f"port {held_port} was taken before the server bound it" in res.stderr, res.stderr
            port = int(dict(line.split("=", 1) for line in (data_dir / "ds2-postgres.env").read_text().split())["PG_PORT"])
            assert port != held_port
            assert server.script("status").stdout.startswith(f"postgres: running on 127.0.0.1:{port} ")
        finally:
            server.script("down", check=False)
            shutil.rmtree(data_dir, ignore_errors=True)


STRESS_DAGS = 3
STRESS_DAG = textwrap.dedent(
    """
    from datetime import datetime, timedelta

    from airflow.sdk import dag, task

    for i in range({n}):

        @dag(dag_id=f"ds2_stress_{{i}}", schedule=timedelta(days=1), start_date=datetime(2026, 1, 1), catchup=False,
             max_active_runs=4, tags=["ds2-test"])
        def stress():
            @task
            def work() -> int:
                return 1

            work()

        stress()
    """
)


def test_backfills_and_triggers_at_once_under_a_busy_scheduler(airflow_server_factory, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "stress.py").write_text(STRESS_DAG.format(n=STRESS_DAGS + 1))
    server = airflow_server_factory(dags_folder=dags, extra_env={"DS2_TEST_MARKER": "stress"}, reuse=False)
    ids = [f"ds2_stress_{i}" for i in range(STRESS_DAGS + 1)]
    for dag_id in ids:
        server.wait_dag(dag_id)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=8), today - timedelta(days=4)  # 5 daily runs per backfill

    def rest_backfill(dag_id: str) -> object:
        body = {"dag_id": dag_id, "from_date": start.isoformat(), "to_date": end.isoformat(),
                "reprocess_behavior": "none", "max_active_runs": 2}  # fmt: skip
        return server.api("POST", "/api/v2/backfills", json=body)

    def trigger(dag_id: str, k: int) -> object:
        return server.trigger(dag_id, logical_date=today - timedelta(days=20 + k))

    def cli_backfill(dag_id: str) -> object:
        return server.airflow(
            "backfill", "create", "--dag-id", dag_id, "--from-date", start.isoformat(), "--to-date", end.isoformat(),
            "--max-active-runs", "2", "--reprocess-behavior", "none",
        )  # fmt: skip

    # All at once: the REST backfills, the CLI backfill and 3 triggered runs per DAG, while the
    # scheduler is already creating each DAG's latest run.
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(rest_backfill, d) for d in ids[:-1]]
        futures.append(pool.submit(cli_backfill, ids[-1]))
        futures += [pool.submit(trigger, d, k) for d in ids for k in range(3)]
        errors = []
        for f in futures:
            try:
                f.result(timeout=180)
            except AssertionError as e:  # an HTTP error or a failed CLI call, with Airflow's text
                errors.append(str(e))
    assert not errors, "\n".join(errors)

    def runs_of(dag_id: str) -> list[dict]:
        return server.api("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]

    deadline = time.monotonic() + 300
    while True:
        runs = {d: runs_of(d) for d in ids}
        backfill = {d: sum(r["run_type"] == "backfill" for r in rs) for d, rs in runs.items()}
        manual = {d: sum(r["run_type"] == "manual" for r in rs) for d, rs in runs.items()}
        pending = [r["dag_run_id"] for rs in runs.values() for r in rs if r["state"] not in ("success", "failed")]
        if all(n == 5 for n in backfill.values()) and all(n == 3 for n in manual.values()) and not pending:
            break
        assert time.monotonic() < deadline, f"backfill runs {backfill}, triggered runs {manual}, unfinished {pending}"
        time.sleep(1)
    failed = [(d, r["dag_run_id"]) for d, rs in runs.items() for r in rs if r["state"] != "success"]
    assert not failed, failed
    text = "".join(p.read_text(errors="replace") for p in (server.home / "logs").glob("*.log"))
    assert "database is locked" not in text.lower()
