"""The Airflow side of Flink: the hook's connection, the collect operator, the savepoint trigger."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import METRICS
from tests.integration.conftest import UNDERPROVISIONED

pytestmark = pytest.mark.flink


@pytest.fixture
def flink_conn(clean_flink, monkeypatch):
    """An Airflow connection of type flink (from the environment, as a deployment would)."""
    url = clean_flink.client.base_url
    host, port = url.removeprefix("http://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_TEST", json.dumps({"conn_type": "flink", "host": host, "port": int(port)}))
    return "flink_test"


def test_hook_builds_the_client_from_the_connection(flink_conn, monkeypatch):
    from ds2_airflow.hooks.flink import FlinkHook

    hook = FlinkHook(flink_conn)
    ok, message = hook.test_connection()
    assert ok and "8 slots" in message
    monkeypatch.setenv(
        "AIRFLOW_CONN_FLINK_TLS",
        json.dumps(
            {
                "conn_type": "flink",
                "host": "flink.example",
                "port": 443,
                "schema": "https",
                "login": "u",
                "password": "p",
                "extra": {"verify": "/etc/ca.pem", "timeout": 3, "submit_timeout": 120},
            }
        ),
    )
    conn = FlinkHook("flink_tls").connection()
    assert conn.base_url == "https://flink.example:443" and conn.verify == "/etc/ca.pem" and conn.timeout_s == 3
    assert conn.submit_timeout_s == 120 and FlinkHook(flink_conn).connection().submit_timeout_s == 600  # Flink's web.timeout
    assert "p" not in repr(conn).replace("https", "").replace("example", "")


def test_collect_operator_writes_the_epoch(flink_conn, clean_flink, tmp_path):
    from ds2_airflow.operators.collect import FlinkCollectMetricsOperator

    clean_flink.start_job(UNDERPROVISIONED)
    op = FlinkCollectMetricsOperator(
        task_id="collect",
        job="under",
        flink_job_name="ds2-testjob",
        epoch="42",
        store_root=str(tmp_path),
        flink_conn_id=flink_conn,
        short_window_s=3,
        source_rate_metric="Source__Source.scheduledRate",
    )
    result = op.execute(context={})
    assert result["epoch"] == 42 and result["rows"] == 5 and result["warmup_reason"] is None
    assert read_epochs(tmp_path, METRICS, "under", [42]).num_rows == 5


def test_savepoint_trigger_fires_when_the_savepoint_completes(flink_conn, clean_flink):
    from ds2_airflow.triggers.flink import FlinkSavepointTrigger

    details = clean_flink.start_job(UNDERPROVISIONED)
    request = clean_flink.client.stop_with_savepoint(details.id, clean_flink.savepoint_dir)
    trigger = FlinkSavepointTrigger(flink_conn, details.id, request, deadline=time.time() + 60)
    classpath, kwargs = trigger.serialize()
    assert classpath == "ds2_airflow.triggers.flink.FlinkSavepointTrigger" and kwargs["request_id"] == request

    async def first_event():
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(first_event())
    assert payload["status"] == "completed" and payload["failure"] is None
    assert payload["location"].startswith("file:") and "savepoint-" in payload["location"]


def test_savepoint_trigger_times_out(flink_conn, clean_flink):
    from ds2_airflow.triggers.flink import FlinkSavepointTrigger

    details = clean_flink.start_job(UNDERPROVISIONED)
    request = clean_flink.client.stop_with_savepoint(details.id, clean_flink.savepoint_dir)
    trigger = FlinkSavepointTrigger(flink_conn, details.id, request, deadline=time.time() - 1)

    async def first_event():
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(first_event())
    assert payload["status"] in ("timeout", "completed")  # completed when Flink was faster than one poll


def _deployment(cluster):
    from autoscaler.flink.deployment import JobDeployment

    return JobDeployment(
        job_name="ds2-testjob",
        savepoint_dir=cluster.savepoint_dir,
        parallelism_args={"Count": "--count-parallelism"},
        base_args=tuple(a for a in UNDERPROVISIONED if a not in ("--count-parallelism", "1")),
        jar_id=cluster.jar_id,
    )


def _run_trigger(trigger):
    async def first_event():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first_event())


def test_rescale_operator_defers_the_savepoint_wait_then_restarts(flink_conn, clean_flink, tmp_path):
    from airflow.sdk.exceptions import TaskDeferred

    from ds2_airflow.operators.rescale import FlinkRescaleOperator

    before = clean_flink.start_job(UNDERPROVISIONED)
    op = FlinkRescaleOperator(
        task_id="rescale",
        deployment=_deployment(clean_flink),
        target='{"Count": 4}',
        journal_dir=str(tmp_path),
        flink_conn_id=flink_conn,
    )
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context={})  # requests the stop, then frees the worker
    event = _run_trigger(deferred.value.trigger)
    assert event["status"] == "completed"
    result = getattr(op, deferred.value.method_name)(context={}, event=event)
    assert result["outcome"] == "succeeded", result
    assert result["old_flink_job_id"] == before.id and result["new_flink_job_id"] != before.id
    running = clean_flink.client.running_job("ds2-testjob")
    assert running.id == result["new_flink_job_id"]
    assert clean_flink.client.job(running.id).parallelism["Count"] == 4
    # A retry of the task (same action) returns the recorded result and rescales nothing.
    again = op.execute_complete(context={}, event=event)
    assert again["new_flink_job_id"] == result["new_flink_job_id"]
    assert clean_flink.client.running_job("ds2-testjob").id == running.id


def test_rescale_operator_in_place(flink_adaptive, tmp_path, monkeypatch):
    from ds2_airflow.operators.rescale import FlinkRescaleOperator

    flink_adaptive.cancel_all()
    host, port = flink_adaptive.client.base_url.removeprefix("http://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_ADAPTIVE", json.dumps({"conn_type": "flink", "host": host, "port": int(port)}))
    before = flink_adaptive.start_job(UNDERPROVISIONED)
    try:
        op = FlinkRescaleOperator(
            task_id="rescale",
            deployment=_deployment(flink_adaptive),
            target={"Count": 3},
            mechanism="in-place",
            journal_dir=str(tmp_path),
            flink_conn_id="flink_adaptive",
        )
        result = op.execute(context={})
        assert result["outcome"] == "succeeded" and result["new_flink_job_id"] == before.id
        assert flink_adaptive.client.job(before.id).parallelism["Count"] == 3
    finally:
        flink_adaptive.cancel_all()
