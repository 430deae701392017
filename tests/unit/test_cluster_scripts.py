"""The cluster mode's script settings: a bad value is refused in one line naming it, before anything starts."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("script", "command", "env", "message"),
    [
        ("redis.sh", "up", {"REDIS_PORT": "6379x"}, "REDIS_PORT must be a number, got '6379x'"),
        ("redis.sh", "status", {"REDIS_START_TIMEOUT": "-1"}, "REDIS_START_TIMEOUT must be a number, got '-1'"),
        ("airflow.sh", "status", {"AIRFLOW_EXECUTOR": "KubernetesExecutor"},
         "AIRFLOW_EXECUTOR must be LocalExecutor or CeleryExecutor, got 'KubernetesExecutor'"),
        ("airflow.sh", "status", {"AIRFLOW_CELERY_WORKERS": "0"}, "AIRFLOW_CELERY_WORKERS must be 1 to 16, got '0'"),
        ("airflow.sh", "status", {"AIRFLOW_CELERY_WORKERS": "two"}, "AIRFLOW_CELERY_WORKERS must be a number, got 'two'"),
        ("spark.sh", "status", {"SPARK_WORKERS": "9"}, "SPARK_WORKERS must be 1 to 8, got '9'"),
        ("spark.sh", "status", {"SPARK_WORKERS": "2x"}, "SPARK_WORKERS must be a number, got '2x'"),
        ("spark.sh", "status", {"SPARK_WORKER_CORES": "two"}, "SPARK_WORKER_CORES must be a number, got 'two'"),
        ("zookeeper.sh", "status", {"ZOOKEEPER_PORT": "2181x"}, "ZOOKEEPER_PORT must be a number, got '2181x'"),
        ("airflow.sh", "status", {"AIRFLOW_AUTH_MANAGER": "ldap"}, "AIRFLOW_AUTH_MANAGER must be simple or fab, got 'ldap'"),
        ("flink.sh", "configure", {"FLINK_ZOOKEEPER_QUORUM": "zk:2181;rm -rf /"},
         "--ha needs FLINK_ZOOKEEPER_QUORUM as host:port[,host:port...] (scripts/zookeeper.sh quorum), got 'zk:2181;rm -rf /'"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_refused_in_one_line(tmp_path, script, command, env, message):
    base = {"REDIS_DATA_DIR": str(tmp_path / "redis"), "AIRFLOW_HOME": str(tmp_path / "airflow"),
            "SPARK_DATA_DIR": str(tmp_path / "spark"), "ZOOKEEPER_DATA_DIR": str(tmp_path / "zookeeper"),
            "FLINK_DATA_DIR": str(tmp_path / "flink")}  # fmt: skip
    args = ["--ha"] if script == "flink.sh" else []
    res = subprocess.run([str(ROOT / "scripts" / script), command, *args], env={**os.environ, **base, **env},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines()[-1] == f"{script}: error: {message}", res.stderr
    assert not (tmp_path / "redis").exists() and not (tmp_path / "spark").exists()  # nothing was started


def test_redis_status_of_a_data_dir_never_started(tmp_path):
    res = subprocess.run([str(ROOT / "scripts" / "redis.sh"), "status"], env={**os.environ, "REDIS_DATA_DIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 3 and res.stdout.strip() == f"redis: stopped (data {tmp_path})"


def test_a_kafka_cluster_id_never_starts_with_a_dash():
    """kafka-storage format reads an id starting with '-' as an option (seen: 1 install in 64 failed to format)."""
    library = ROOT / "conf" / "kafka" / "broker.sh"  # what scripts/kafka.sh and deploy/kafka-broker.sh both source
    ids = subprocess.run(["bash", "-c", 'source "$1"; for _ in $(seq 400); do kafka_new_cluster_id; done', "-", str(library)],
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert len(ids) == 400 and all(len(i) == 22 and not i.startswith("-") for i in ids), [i for i in ids if i.startswith("-")]
