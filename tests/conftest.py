"""Shared fixtures: example paths and one local Spark session per test run."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ds2-wordcount"
TOPOLOGY_CSV = EXAMPLE / "flink_wordcount_topology.csv"
RATES_LOG = EXAMPLE / "flink_rates.log"

sys.path.insert(0, str(ROOT / "spark_jobs"))
# Airflow reads AIRFLOW_HOME when first imported: never let tests touch a developer's home.
os.environ.setdefault("AIRFLOW_HOME", str(Path(tempfile.mkdtemp(prefix="ds2-tests-airflow-"))))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# The project's DAG folder, set before anything loads Airflow's settings: the DAG bundle manager
# reads it once, and dag.test() serializes the DAGs from it.
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))


@pytest.fixture(scope="session")
def spark():
    """A local Spark session (2 cores, loopback), stopped at the end of the run."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["SPARK_CONF_DIR"] = str(ROOT / "conf" / "spark")
    from autoscaler.sparkjob.session import policy_session

    session = policy_session("ds2-tests", master="local[2]")
    yield session
    session.stop()
