"""The scaling DAG with its store on an object store (S3Proxy): real Flink, real spark-submit reading the Delta
tables through S3A, the credentials from an Airflow connection, nothing written to the local data folder."""

from __future__ import annotations

import json
import os

import pytest

from autoscaler.collect.flink import snapshot_path, topology_path
from autoscaler.store.files import store_path
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS, VALIDATIONS
from tests.conftest import ROOT
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, dag_test_environment, job_entry, next_epoch_end

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.object_store_dag]
INTERVAL_S = 10
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP", "AWS_SESSION_TOKEN")


@pytest.fixture(scope="module")
def on_object_store(flink, object_store, postgres_server, tmp_path_factory):
    """The DAG's environment with DS2_STORE on S3Proxy and its credentials only in the ds2_store connection; the
    rescale journal's lease in the test PostgreSQL (dag.test()'s own Airflow database is SQLite)."""
    from sqlalchemy.engine import make_url

    url = object_store.store("dag")
    client = object_store.env
    connection = {"conn_type": "aws", "login": client["AWS_ACCESS_KEY_ID"], "password": client["AWS_SECRET_ACCESS_KEY"],
                  "extra": {"endpoint_url": client["AWS_ENDPOINT_URL"], "region_name": client["AWS_REGION"]}}  # fmt: skip
    lease = make_url(postgres_server.script("url", "ds2lease").stdout.strip().splitlines()[-1])
    extra = {"DS2_STORE": url, "DS2_STORE_CONN_ID": "ds2_store", "AIRFLOW_CONN_DS2_STORE": json.dumps(connection),
             "DS2_LEASE_DSN": lease.set(drivername="postgresql").render_as_string(hide_password=False)}  # fmt: skip
    saved = {k: os.environ.pop(k) for k in AWS if k in os.environ}
    data = tmp_path_factory.mktemp("ds2-data")
    try:
        with dag_test_environment(flink, data, [job_entry(flink, "shared", INTERVAL_S)], extra_env=extra):
            yield data, url
    finally:
        for key in AWS:
            os.environ.pop(key, None)  # what the DAG factory exported from the connection
        os.environ.update(saved)


def test_a_job_is_rescaled_with_its_store_on_the_object_store(flink, on_object_store):
    from airflow.dag_processing.dagbag import BundleDagBag

    data, url = on_object_store
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ  # only the connection holds it, until a DAG file is parsed
    bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert os.environ["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")  # exported from the connection
    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    dag = bag.dags["ds2_shared"]
    for _ in range(2):
        assert dag.test(logical_date=next_epoch_end(INTERVAL_S)).state == "success"
    actions = read_epochs(url, ACTIONS, "shared").to_pylist()
    assert actions[0]["outcome"] == "succeeded", actions
    assert json.loads(actions[0]["new_parallelism"]) == {"Count": 4}
    assert flink.client.job(flink.client.running_job("ds2-testjob").id).parallelism["Count"] == 4
    epochs = {a["epoch"] for a in actions}
    assert {d["epoch"] for d in read_epochs(url, DECISIONS, "shared").to_pylist()} == epochs
    assert set(read_epochs(url, METRICS, "shared").column("epoch").to_pylist()) == epochs
    assert {v["epoch"] for v in read_epochs(url, VALIDATIONS, "shared").to_pylist()} == epochs
    assert topology_path(url, "shared").exists() and snapshot_path(url, "shared", max(epochs)).exists()
    journal = store_path(url, "journal", f"{actions[0]['action_id']}.json")  # where a retry on another host finds it
    assert json.loads(journal.read_text())["result"]["outcome"] == "succeeded"
    assert not (data / "store").exists()  # the tables, snapshots and topology all went to the object store
    flink.cancel_all()


def test_bootstrap_asks_the_store_through_object_storage_path(on_object_store, monkeypatch):
    """The store answers with the connection's credentials; a wrong secret is named with the store and the
    connection, without the secret, instead of failing the first task."""
    from autoscaler.errors import InputError
    from ds2_airflow.store_access import check_store

    _, url = on_object_store
    check_store(url, "ds2_store")
    connection = json.loads(os.environ["AIRFLOW_CONN_DS2_STORE"])
    monkeypatch.setenv("AIRFLOW_CONN_DS2_WRONG", json.dumps({**connection, "password": "not-the-secret"}))
    with pytest.raises(InputError, match=r"store s3://ds2/dag-\w+: cannot be reached with connection 'ds2_wrong'") as caught:
        check_store(url, "ds2_wrong")
    assert "not-the-secret" not in str(caught.value)
