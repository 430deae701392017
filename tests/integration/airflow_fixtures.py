"""A real local Airflow (api-server, scheduler, dag-processor, triggerer) for integration tests.

Registered as a pytest plugin (``pytest_plugins`` in ``tests/integration/conftest.py``). Each server is
its own instance of ``scripts/airflow.sh``: ``AIRFLOW_HOME`` in a temp folder (logs, pid files), its
own database on the session's PostgreSQL (``postgres_server``: ``scripts/postgres.sh`` on a data dir of
its own, stopped at the end by its pid), a free port, ``AIRFLOW_ALL_ADMINS=1`` (no login, so headless
screenshots work), the DAG folder the test chooses; teardown stops exactly the processes it started
(``scripts/airflow.sh down`` reads that instance's pid files). A developer's Airflow on 8080 is never touched.

    def test_x(airflow_server_factory, tmp_path):
        server = airflow_server_factory(dags_folder=tmp_path / "dags", extra_env={"DS2_DATA_DIR": "..."})
        server.wait_dag("my_dag")
        run = server.trigger("my_dag")
        assert server.wait_run("my_dag", run["dag_run_id"]) == "success"
        server.api("GET", "/api/v2/dags/my_dag/dagRuns")
        server.airflow("dags", "list", "-o", "json")
        server.screenshot("/dags/my_dag", tmp_path / "grid.png")

Starting takes ~10-15 s, so servers live for the whole session and the factory hands the same server
to every request with the same DAG folder and extra environment (``reuse=False`` for a fresh one).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

from tests.conftest import ROOT
from tests.helpers import free_port, run_script

AIRFLOW_SH = ROOT / "scripts" / "airflow.sh"
POSTGRES_SH = ROOT / "scripts" / "postgres.sh"
SCREENSHOT_PY = ROOT / "scripts" / "screenshot.py"
VENV_BIN = ROOT / ".venv" / "bin"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
TERMINAL_RUN_STATES = {"success", "failed"}


def load_screenshot_module() -> ModuleType:
    """``scripts/screenshot.py`` as a module (scripts/ is not a package)."""
    name = "ds2_scripts_screenshot"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCREENSHOT_PY)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def process_alive(pid: int, start_ticks: int | None = None) -> bool:
    """The process runs (not a zombie) and, when given, started at ``start_ticks`` (not a recycled pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return False
    return start_ticks is None or int(fields[19]) == start_ticks


@dataclass
class AirflowServer:
    """One running instance: its URL, home, environment and helpers for the API and the CLI."""

    base_url: str
    home: Path
    dags_folder: Path
    env: dict[str, str]  # the instance's full environment (what 'eval "$(scripts/airflow.sh env)"' gives)
    up_seconds: float = 0.0
    up_log: str = ""  # what 'scripts/airflow.sh up' printed
    _token: str | None = field(default=None, repr=False)
    _session: requests.Session = field(default_factory=requests.Session, repr=False)

    # --- lifecycle -------------------------------------------------------------------------------------

    def pids(self) -> dict[str, tuple[int, int]]:
        """``{component: (pid, start ticks)}`` from the instance's pid files."""
        out = {}
        for c in COMPONENTS:
            f = self.home / "pids" / f"{c}.pid"
            if f.is_file():
                pid, start = f.read_text().split()
                out[c] = (int(pid), int(start))
        return out

    def script(self, command: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``scripts/airflow.sh <command>`` for this instance."""
        res = subprocess.run([str(AIRFLOW_SH), command], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"scripts/airflow.sh {command} exited {res.returncode}:\n{res.stdout}{res.stderr}")
        return res

    def stop(self) -> None:
        """Stop the instance's processes (idempotent)."""
        self.script("down", check=False)

    # --- REST ------------------------------------------------------------------------------------------

    def token(self) -> str:
        """A JWT for the admin user (``POST /auth/token``, with the instance's generated password), fetched once."""
        if self._token is None:
            login = {"username": "admin", "password": (self.home / "admin-password").read_text().strip()}
            r = self._session.post(f"{self.base_url}/auth/token", json=login, timeout=30)
            r.raise_for_status()
            self._token = r.json()["access_token"]
        return self._token

    def api(
        self,
        method: str,
        path: str,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        ok: tuple[int, ...] = (200, 201, 204),
    ) -> Any:
        """Call the REST API with the admin token; the parsed JSON, or an AssertionError with Airflow's text."""
        r = self._session.request(
            method,
            f"{self.base_url}{path}",
            json=json,
            params=params,
            headers={"Authorization": f"Bearer {self.token()}"},
            timeout=30,
        )
        if r.status_code not in ok:
            raise AssertionError(f"{method} {path} -> {r.status_code}: {r.text[:2000]}")
        return r.json() if r.content else None

    def health(self) -> dict[str, Any]:
        r = self._session.get(f"{self.base_url}/api/v2/monitor/health", timeout=10)
        r.raise_for_status()
        return r.json()

    def wait_dag(self, dag_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Wait until the dag-processor has registered ``dag_id``; its ``GET /api/v2/dags/{id}`` body."""
        deadline = time.monotonic() + timeout_s
        while True:
            r = self._session.get(
                f"{self.base_url}/api/v2/dags/{dag_id}", headers={"Authorization": f"Bearer {self.token()}"}, timeout=30
            )
            if r.status_code == 200:
                return r.json()
            if r.status_code != 404:
                raise AssertionError(f"GET /api/v2/dags/{dag_id} -> {r.status_code}: {r.text[:2000]}")
            if time.monotonic() > deadline:
                errors = self.api("GET", "/api/v2/importErrors")
                raise AssertionError(f"DAG {dag_id} not registered within {timeout_s} s; import errors: {errors}")
            time.sleep(0.5)

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, logical_date: datetime | None = None) -> dict[str, Any]:
        """``POST /api/v2/dags/{id}/dagRuns`` (logical date: now unless given); the new run."""
        when = logical_date or datetime.now(UTC)
        body = {"logical_date": when.isoformat(), "conf": dict(conf or {})}
        return self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 60.0) -> str:
        """Wait until the run is success or failed; its final state (AssertionError on timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            run = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in TERMINAL_RUN_STATES:
                return run["state"]
            if time.monotonic() > deadline:
                tis = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
                states = {t["task_id"]: t["state"] for t in tis["task_instances"]}
                raise AssertionError(f"run {run_id} still {run['state']} after {timeout_s} s; tasks: {states}")
            time.sleep(0.5)

    # --- CLI and UI ------------------------------------------------------------------------------------

    def airflow(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run an ``airflow`` CLI command against this instance (same home, DB and settings)."""
        res = subprocess.run(
            [str(VENV_BIN / "airflow"), *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and res.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} exited {res.returncode}:\n{res.stdout}{res.stderr}")
        return res

    def ui_url(self, path: str) -> str:
        """A URL that logs in (all-admins mode) and opens ``path`` of the UI."""
        return load_screenshot_module().airflow_login_url(self.base_url, path)

    def screenshot(self, path: str, out_png: Path, **kwargs: Any) -> Path:
        """A headless chromium screenshot of a UI page (kwargs: width, height, wait_ms, timeout_s)."""
        return load_screenshot_module().screenshot(self.ui_url(path), out_png, **kwargs)

    def dom(self, path: str, **kwargs: Any) -> str:
        """The rendered DOM of a UI page (to assert on its text)."""
        return load_screenshot_module().dump_dom(self.ui_url(path), **kwargs)


def _instance_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` plus the exports of ``scripts/airflow.sh env`` (read back through bash, quoting and all)."""
    res = subprocess.run(
        ["bash", "-c", 'eval "$("$0" env)" && env -0', str(AIRFLOW_SH)],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        check=True,
    )
    pairs = (item.split(b"=", 1) for item in res.stdout.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


@dataclass
class PostgresServer:
    """A PostgreSQL of ``scripts/postgres.sh`` on its own data dir."""

    data_dir: Path
    env: dict[str, str]

    def script(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_script(POSTGRES_SH, args, self.env, check, timeout)

    def pid(self) -> tuple[int, int] | None:
        """``(pid, start ticks)`` of the postmaster, from the pid file ``up`` wrote."""
        f = self.data_dir / "postgres.pid"
        if not f.is_file():
            return None
        pid, start = f.read_text().split()
        return int(pid), int(start)


def start_postgres() -> PostgresServer:
    """``scripts/postgres.sh up`` on a new data dir in /tmp (as root the server runs as 'postgres', which
    cannot enter pytest's private temp folders)."""
    data_dir = Path(tempfile.mkdtemp(prefix="ds2-tests-pg-"))
    data_dir.chmod(0o755)
    server = PostgresServer(data_dir, {**os.environ, "PG_DATA_DIR": str(data_dir)})
    server.script("up")
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL, holding every test Airflow's metadata DB; stopped and removed at the end."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.script("down", check=False)
        shutil.rmtree(server.data_dir, ignore_errors=True)


def start_airflow(
    home: Path, dags_folder: Path, extra_env: Mapping[str, str] | None = None, pg_data_dir: Path | None = None
) -> AirflowServer:
    """Start an instance in ``home`` (``scripts/airflow.sh up``) and return it once it is healthy."""
    dags_folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        **({"PG_DATA_DIR": str(pg_data_dir)} if pg_data_dir else {}),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW_PORT": str(port),
        "AIRFLOW_ALL_ADMINS": "1",
        "AIRFLOW_DAGS_FOLDER": str(dags_folder),
        **(extra_env or {}),
    }
    t0 = time.monotonic()
    res = subprocess.run([str(AIRFLOW_SH), "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    up_seconds = time.monotonic() - t0
    sys.stderr.write(res.stderr)
    if res.returncode != 0:
        subprocess.run([str(AIRFLOW_SH), "down"], cwd=ROOT, env=env, check=False, capture_output=True)
        raise AssertionError(f"scripts/airflow.sh up failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return AirflowServer(
        base_url=f"http://127.0.0.1:{port}",
        home=home,
        dags_folder=dags_folder,
        env=_instance_env(env),
        up_seconds=up_seconds,
        up_log=res.stderr,
    )


AirflowServerFactory = Callable[..., AirflowServer]


@pytest.fixture(scope="module")
def airflow_server_factory(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[AirflowServerFactory]:
    """``factory(dags_folder=None, extra_env=None, reuse=True) -> AirflowServer``.

    ``dags_folder`` defaults to the repository's ``dags/``. With ``reuse`` a server already started with
    the same folder and extra environment is returned (and must still be running). Every server this
    factory started is stopped at the end of the test module: an idle instance's scheduler and DAG
    processor keep two cores busy enough to double the later tests' times (a clean-clone make test ran
    test_scaling_dag in 231 s behind four idle instances, 105 s alone).
    """
    servers: dict[tuple[str, tuple[tuple[str, str], ...]], AirflowServer] = {}
    started: list[AirflowServer] = []

    def factory(dags_folder: Path | None = None, extra_env: Mapping[str, str] | None = None, reuse: bool = True) -> AirflowServer:
        folder = Path(dags_folder or ROOT / "dags").resolve()
        key = (str(folder), tuple(sorted((extra_env or {}).items())))
        if reuse and key in servers:
            server = servers[key]
            server.script("up")  # idempotent: reports, or restarts what a test stopped
            return server
        server = start_airflow(tmp_path_factory.mktemp("airflow"), folder, extra_env, postgres_server.data_dir)
        started.append(server)
        servers[key] = server
        return server

    try:
        yield factory
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def airflow_services(airflow_server_factory: AirflowServerFactory) -> AirflowServer:
    """One Airflow for the test module with the repository's ``dags/`` and ``plugins/``."""
    return airflow_server_factory()
