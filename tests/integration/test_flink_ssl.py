"""Flink's REST API over TLS with client certificates (``scripts/flink.sh up --ssl``): the client and
the Airflow connection reach it with the instance's CA and client certificate; without a client
certificate, or over plain HTTP, nothing gets through."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler import testjob
from autoscaler.collect.snapshot import take_snapshot
from autoscaler.flink.client import FlinkConnection, FlinkRestClient, FlinkUnreachable
from autoscaler.rescale.savepoint import rescale_with_savepoint
from tests.helpers import free_port
from tests.integration.conftest import FLINK_SH, ROOT
from tests.integration.test_rescale import base_args, deployment

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def tls_flink(tmp_path_factory) -> Iterator[tuple[dict[str, str], Path, str]]:
    data_dir = tmp_path_factory.mktemp("flink-ssl")
    port = free_port()
    env = {**os.environ, "FLINK_DATA_DIR": str(data_dir), "FLINK_REST_PORT": str(port), "FLINK_RPC_PORT": str(free_port())}
    subprocess.run([str(FLINK_SH), "up", "--ssl"], check=True, cwd=ROOT, env=env)
    try:
        yield env, data_dir / "ssl", f"https://127.0.0.1:{port}"
    finally:
        subprocess.run([str(FLINK_SH), "down"], check=False, cwd=ROOT, env=env)


def test_only_a_client_with_a_certificate_gets_through(tls_flink):
    env, ssl, url = tls_flink
    anonymous = FlinkRestClient(FlinkConnection(url, verify=str(ssl / "ca.pem"), retries=0, timeout_s=5))
    with pytest.raises(FlinkUnreachable) as err:
        anonymous.overview()
    assert url in str(err.value)
    plain = FlinkRestClient(FlinkConnection(url.replace("https", "http"), retries=0, timeout_s=5))
    with pytest.raises(FlinkUnreachable):
        plain.overview()
    status = subprocess.run([str(FLINK_SH), "status"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert status.returncode == 0 and url in status.stdout  # the script itself uses the client certificate


def test_collect_and_rescale_over_mutual_tls(tls_flink, tmp_path):
    _, ssl, url = tls_flink
    connection = FlinkConnection(
        url, verify=str(ssl / "ca.pem"), client_cert=str(ssl / "client.pem"), client_key=str(ssl / "client.key")
    )
    client = FlinkRestClient(connection)
    assert client.overview()["slots-total"] == 8
    job_id = client.run_jar(client.upload_jar(testjob.JAR), None, [*base_args("tls"), "--count-parallelism", "1"])
    client.wait_all_running(job_id)
    assert {v.name for v in take_snapshot(client, "tls").vertices} >= {"Count", "Parse"}
    result = rescale_with_savepoint(client, deployment("tls", tmp_path / "sp"), {"Count": 2}, "tls-1", tmp_path / "journal")
    assert result.outcome == "succeeded", result.message


def test_the_airflow_connection_carries_the_client_certificate(tls_flink, monkeypatch):
    from ds2_airflow.hooks.flink import FlinkHook

    _, ssl, url = tls_flink
    port = int(url.rsplit(":", 1)[1])
    extra = {"verify": str(ssl / "ca.pem"), "client_cert": str(ssl / "client.pem"), "client_key": str(ssl / "client.key")}
    conn = {"conn_type": "flink", "host": "127.0.0.1", "port": port, "schema": "https", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_TLS", json.dumps(conn))
    ok, message = FlinkHook("flink_tls").test_connection()
    assert ok, message
