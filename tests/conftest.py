"""Shared fixtures: example paths, one local Spark session and one warm Spark Connect server per test run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ds2-wordcount"
TOPOLOGY_CSV = EXAMPLE / "flink_wordcount_topology.csv"
RATES_LOG = EXAMPLE / "flink_rates.log"
SPARK_SH = ROOT / "scripts" / "spark.sh"

sys.path.insert(0, str(ROOT / "spark_jobs"))
# Airflow reads AIRFLOW_HOME when first imported: never let tests touch a developer's home.
os.environ.setdefault("AIRFLOW_HOME", str(Path(tempfile.mkdtemp(prefix="ds2-tests-airflow-"))))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# The project's DAG folder, set before anything loads Airflow's settings: the DAG bundle manager
# reads it once, and dag.test() serializes the DAGs from it.
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
# The project's plugins folder, as every deployment sets it (airflow_local_settings.py); the ds2_airflow plugins
# themselves come from the editable install's entry points (plugins/.airflowignore).
os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(ROOT / "plugins"))


@pytest.fixture(scope="session")
def spark():
    """A local Spark session (2 cores, loopback), stopped at the end of the run."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["SPARK_CONF_DIR"] = str(ROOT / "conf" / "spark")
    from autoscaler.engine.spark.session import policy_session

    session = policy_session("ds2-tests", master="local[2]")
    yield session
    session.stop()


def pytest_unconfigure(config: pytest.Config) -> None:
    # py4j logs "Closing down clientserver connection" from a finalizer at interpreter exit, after
    # pytest has closed the stream its handler writes to: a "--- Logging error ---" traceback under a
    # green run. That info message is all it logs then.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@dataclass
class SparkEngine:
    """A Spark Connect server of ``scripts/spark.sh`` on its own data dir."""

    url: str
    data_dir: Path
    env: dict[str, str]

    def script(self, *args: str, check: bool = True, timeout: float = 400) -> subprocess.CompletedProcess[str]:
        from tests.helpers import run_script

        return run_script(SPARK_SH, args, self.env, check, timeout)

    @property
    def token(self) -> str:
        """The server's token (``scripts/spark.sh token-file``): a client without it is refused."""
        return (self.data_dir / "connect-token").read_text().strip()

    @property
    def client_env(self) -> dict[str, str]:
        """What a client process needs in its environment to be let in (pyspark reads the token from it)."""
        return {"SPARK_CONNECT_AUTHENTICATE_TOKEN": self.token}

    @property
    def connection(self) -> str:
        """The Airflow connection (JSON) of type spark_connect that points at this server, its token as the password."""
        host, port = self.url.removeprefix("sc://").rsplit(":", 1)
        return json.dumps({"conn_type": "spark_connect", "host": f"sc://{host}", "port": int(port), "password": self.token})


def start_spark_engine(data_dir: Path, *flags: str) -> SparkEngine:
    engine = SparkEngine("", data_dir, {**os.environ, "SPARK_DATA_DIR": str(data_dir)})
    try:
        engine.script("up", *flags)
    except AssertionError:
        engine.script("down", check=False)
        raise
    engine.url = engine.script("url").stdout.strip()
    return engine


@pytest.fixture(scope="session")
def spark_engine(tmp_path_factory):
    """A warm Spark Connect server (local mode) for the session, stopped by its pid at the end."""
    engine = start_spark_engine(tmp_path_factory.mktemp("spark-engine"))
    try:
        yield engine
    finally:
        engine.script("down", check=False)
