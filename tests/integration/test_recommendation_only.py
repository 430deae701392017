"""A recommendation-only job end to end with ``dag.test()``: real Flink, real spark-submit, a temporary Airflow DB.

The under-provisioned test job (Count at 1 where 20,000 rec/s need 4) is registered with
``recommendation_only: true``: the run collects, validates, decides and records the rescale it
would make, and the Flink job is never touched.
"""

from __future__ import annotations

import json

import pytest

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS
from tests.conftest import ROOT
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, dag_test_environment, job_entry, next_epoch_end

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]
INTERVAL_S = 10


@pytest.fixture(scope="module")
def watch_env(flink, tmp_path_factory):
    entry = job_entry(flink, "watch", INTERVAL_S, recommendation_only=True)
    with dag_test_environment(flink, tmp_path_factory.mktemp("ds2-data"), [entry]) as data:
        yield data


def test_a_recommendation_only_job_records_the_rescale_it_would_make_and_is_never_touched(flink, watch_env):
    from airflow.dag_processing.dagbag import BundleDagBag

    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    before = flink.client.running_job("ds2-testjob")
    bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=str(ROOT / "dags"))
    assert bag.import_errors == {}
    run = bag.dags["ds2_watch"].test(logical_date=next_epoch_end(INTERVAL_S))
    assert run.state == "success"
    actions = read_epochs(watch_env / "store", ACTIONS, "watch").to_pylist()
    assert len(actions) == 1, actions
    action = actions[0]
    assert action["outcome"] == "recommended", action["message"]
    assert action["message"].startswith("recommended, not acted on (recommendation-only job): rescale Count 1→4")
    assert json.loads(action["new_parallelism"]) == json.loads(action["old_parallelism"])  # nothing was applied
    decisions = read_epochs(watch_env / "store", DECISIONS, "watch", [action["epoch"]]).to_pylist()
    assert {d["operator_name"]: d["target_parallelism"] for d in decisions}["Count"] == 4
    after = flink.client.running_job("ds2-testjob")
    assert after.id == before.id and flink.client.job(after.id).parallelism["Count"] == 1
