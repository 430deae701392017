"""The provider installed as a user would: the wheel (scripts/build-wheel.sh) into a fresh virtual environment
with the stock apache-airflow and nothing from this checkout on the path (``make test-install``, ~4 min).

- ``airflow providers list`` shows the provider and ``airflow config list`` its section;
- a real api-server lists the views, Data Docs and timetable plugins (``GET /api/v2/plugins``), loaded from the
  package's entry points;
- a user's DAG file of a few lines, with the jobs file and data folder set the Airflow way
  (``AIRFLOW__DS2_AUTOSCALER__*``), rescales the under-provisioned test job on a real Flink (the jar shipped in
  the package) through ``airflow dags test``: Count 1 -> 4.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS
from tests.conftest import ROOT
from tests.helpers import free_port
from tests.integration.scaling_setup import BASE_ARGS, HONEST_UNDERPROVISIONED, PARALLELISM_ARGS, next_epoch_end

pytestmark = [pytest.mark.install, pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]
INTERVAL_S = 10
USER_DAG = '''"""My Flink jobs, autoscaled by DS2 (the jobs: [ds2_autoscaler] jobs_file)."""

from ds2_airflow.dag_factory import autoscaler_dags

globals().update(autoscaler_dags())
'''


@dataclass
class Installed:
    venv: Path
    home: Path
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(list(args), cwd=self.home, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert res.returncode == 0, f"{' '.join(args)} exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
        return res

    def airflow(self, *args: str, timeout: float = 300) -> str:
        return self.run(str(self.venv / "bin" / "airflow"), *args, timeout=timeout).stdout

    def python(self, code: str) -> str:
        return self.run(str(self.venv / "bin" / "python"), "-c", code).stdout.strip()


def _json_tail(out: str) -> object:
    """The JSON document an Airflow CLI printed after its log lines."""
    return json.loads(out[min(i for i in (out.find("["), out.find("{")) if i >= 0) :])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("installed")
    wheel = subprocess.run([str(ROOT / "scripts" / "build-wheel.sh"), str(base / "dist")], check=True, capture_output=True,
                           text=True, timeout=600).stdout.strip().splitlines()[-1]  # fmt: skip
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True, capture_output=True, timeout=300)
    # The wheel's own ranges, held at the project's tested versions (requirements.txt as constraints).
    res = subprocess.run([*pip, "-c", str(ROOT / "requirements.txt"), wheel], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-5000:]
    home = base / "airflow-home"
    (home / "dags").mkdir(parents=True)
    java = shutil.which("java")
    assert java, "java is needed by spark-submit"
    env = {
        "PATH": f"{venv / 'bin'}:{Path(java).resolve().parent}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", str(base)),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    yield Installed(venv, home, env)


def test_nothing_comes_from_the_checkout(installed):
    where = json.loads(installed.python(
        "import json, autoscaler, ds2_airflow, spark_jobs; from autoscaler.config import paths; "
        "print(json.dumps([autoscaler.__file__, ds2_airflow.__file__, spark_jobs.__file__, str(paths.jar('ds2-testjob.jar')), "
        "paths.checkout()]))"
    ))  # fmt: skip
    site = str(installed.venv / "lib")
    assert all(p.startswith(site) for p in where[:4]), where
    assert where[4] is None and Path(where[3]).is_file()


def test_the_provider_and_its_settings_are_listed(installed):
    providers = _json_tail(installed.airflow("providers", "list", "-o", "json"))
    assert [p["version"] for p in providers if p["package_name"] == "ds2-autoscaler"] == ["0.2.0"]
    section = installed.airflow("config", "list", "--section", "ds2_autoscaler")
    assert all(f"{key} =" in section for key in ("jobs_file", "data_dir", "jars_dir", "spark_conf_dir")), section


def test_the_api_server_lists_the_plugins_from_the_entry_points(installed):
    port = free_port()
    passwords = installed.home / "passwords.json"
    env = {
        **installed.env,
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    }
    installed.airflow("db", "migrate", timeout=600)
    log = (installed.home / "api-server.log").open("w")
    command = [str(installed.venv / "bin" / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, cwd=installed.home, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, (installed.home / "api-server.log").read_text()[-3000:]
            try:
                if requests.get(f"{base}/api/v2/monitor/health", timeout=5).ok and passwords.is_file():
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "the api-server did not answer in 180 s"
            time.sleep(1)
        password = json.loads(passwords.read_text())["admin"]
        token = requests.post(f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=30)
        token.raise_for_status()
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        plugins = requests.get(f"{base}/api/v2/plugins", headers=headers, timeout=30).json()["plugins"]
        ours = {p["name"]: p for p in plugins if p["name"].startswith("ds2_")}
        assert set(ours) == {"ds2_views", "ds2_validation_docs", "ds2_timetables"}, [p["name"] for p in plugins]
        assert all("EntryPoint" in p["source"] for p in ours.values()), ours
        assert [a["name"] for a in ours["ds2_views"]["fastapi_apps"]] == ["DS2 autoscaler views"]
        # Served behind authentication: no token, no view.
        assert requests.get(f"{base}/ds2-views/fleet", timeout=30).status_code in (401, 403)
        import_errors = requests.get(f"{base}/api/v2/plugins/importErrors", headers=headers, timeout=30).json()
        assert import_errors["total_entries"] == 0, import_errors
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        log.close()


def test_a_five_line_dag_file_rescales_a_real_flink_job(installed, flink, tmp_path):
    data = tmp_path / "ds2-data"
    jar = installed.python("from autoscaler.config.paths import jar; print(jar('ds2-testjob.jar'))")
    host, port = flink.client.base_url.removeprefix("http://").split(":")
    jobs = {"version": 1, "jobs": [{
        "name": "auto", "flink_job_name": "ds2-testjob", "flink_conn_id": "flink_test", "spark_conn_id": "spark_test",
        "jar": jar, "base_args": BASE_ARGS, "parallelism_args": PARALLELISM_ARGS, "savepoint_dir": flink.savepoint_dir,
        "policy_interval": f"{INTERVAL_S}s", "collect": {"short_window": "4s"}, "validation": {"lateness_s": 90},
        "policy": {"kind": "ds2", "max_parallelism": {"Count": 8, "Parse": 8, "Sink: Writer": 8}},
    }]}  # fmt: skip
    jobs_file = tmp_path / "jobs.yaml"
    jobs_file.write_text(yaml.safe_dump(jobs))
    (installed.home / "dags" / "autoscaler.py").write_text(USER_DAG)
    assert len(USER_DAG.strip().splitlines()) <= 5
    installed.env.update({
        "AIRFLOW__DS2_AUTOSCALER__JOBS_FILE": str(jobs_file),
        "AIRFLOW__DS2_AUTOSCALER__DATA_DIR": str(data),
        "AIRFLOW_CONN_FLINK_TEST": json.dumps({"conn_type": "flink", "host": host, "port": int(port)}),
        "AIRFLOW_CONN_SPARK_TEST": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    })  # fmt: skip
    installed.airflow("db", "migrate", timeout=600)
    installed.run(str(installed.venv / "bin" / "python"), "-m", "ds2_airflow.bootstrap")
    # The DAG processor's work, once: the user's file parsed into the metadata DB, with no import error.
    installed.airflow("dags", "reserialize", timeout=600)
    assert "ds2_auto" in installed.airflow("dags", "list", "-o", "plain")
    assert "No data found" in installed.airflow("dags", "list-import-errors", "-o", "plain")

    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    epoch_end = next_epoch_end(INTERVAL_S)
    installed.airflow("dags", "test", "ds2_auto", epoch_end.isoformat(), timeout=600)
    actions = read_epochs(data / "store", ACTIONS, "auto").to_pylist()
    assert [a["outcome"] for a in actions] == ["succeeded"], actions
    assert json.loads(actions[0]["new_parallelism"]) == {"Count": 4}
    running = flink.client.running_job("ds2-testjob")
    assert flink.client.job(running.id).parallelism["Count"] == 4
    flink.cancel_all()
