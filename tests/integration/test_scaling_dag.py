"""The scaling DAG end to end with ``dag.test()``: real Flink, real spark-submit, a temporary Airflow DB.

The under-provisioned test job (Count at 1 where 20,000 rec/s need 4) is rescaled in the first
run; the next runs change nothing (converged, no oscillation).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS
from tests.conftest import ROOT
from tests.integration.scaling_setup import HONEST_UNDERPROVISIONED, dag_test_environment, job_entry, next_epoch_end

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow]
INTERVAL_S = 10


@pytest.fixture(scope="module")
def scaling_env(flink, tmp_path_factory):
    with dag_test_environment(flink, tmp_path_factory.mktemp("ds2-data"), [job_entry(flink, "auto", INTERVAL_S)]) as data:
        from ds2_airflow.bootstrap import ensure_pools

        assert ensure_pools() == ["ds2_auto"]
        yield data


@pytest.fixture(scope="module")
def dags(scaling_env):
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(ROOT / "dags"), bundle_path=str(ROOT / "dags"))
    assert bag.import_errors == {}
    return bag.dags


def test_dag_integrity(dags):
    assert set(dags) == {"ds2_auto", "ds2_what_if", "ds2_boundaries", "ds2_reconcile"}
    dag = dags["ds2_auto"]
    downstream = {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}
    assert downstream == {
        "collect": ["validate"],
        "validate": ["policy"],
        "policy": ["decide"],
        "decide": ["record", "rescale"],
        "rescale": ["record"],
        "record": [],
    }
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert dag.task_dict["rescale"].pool == "ds2_auto" and dag.task_dict["policy"].pool == "ds2_auto"
    assert dag.task_dict["record"].trigger_rule == "all_done"
    assert type(dag.timetable).__name__ == "LateRunsTimetable" and dag.timetable.max_late_epochs == 4


def _xcom(run, task_id):
    """A task's return value in a ``dag.test()`` run (the metadata DB's XCom table)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
        row = session.scalars(query).first()
        assert row is not None, f"no return value of {task_id}"
        return XComModel.deserialize_value(row)


def _actions(data, job="auto"):
    return read_epochs(data / "store", ACTIONS, job).sort_by([("epoch", "ascending")]).to_pylist()


def test_underprovisioned_job_is_rescaled_in_one_run_then_converges(flink, dags, scaling_env):
    flink.cancel_all()
    flink.start_job(HONEST_UNDERPROVISIONED)
    dag = dags["ds2_auto"]

    first = next_epoch_end(INTERVAL_S)
    run = dag.test(logical_date=first)
    assert run.state == "success"
    actions = _actions(scaling_env)
    assert len(actions) == 1, actions
    action = actions[0]
    assert action["outcome"] == "succeeded", action["message"]
    assert json.loads(action["old_parallelism"])["Count"] == 1 and json.loads(action["new_parallelism"]) == {"Count": 4}
    assert action["downtime_s"] is not None and action["savepoint_path"]
    running = flink.client.running_job("ds2-testjob")
    assert running.id == action["new_flink_job_id"] and flink.client.job(running.id).parallelism["Count"] == 4
    decisions = read_epochs(scaling_env / "store", DECISIONS, "auto", [action["epoch"]]).to_pylist()
    assert {d["run_type"] for d in decisions} == {"live"}

    # The next runs: the warm-up epoch of the rescaled job, then a decided one -> no change, no restart.
    for _ in range(2):
        run = dag.test(logical_date=next_epoch_end(INTERVAL_S))
        assert run.state == "success"
    later = _actions(scaling_env)[1:]
    assert len(later) == 2 and all(a["outcome"] in ("noop", "skipped") for a in later), later
    assert flink.client.running_job("ds2-testjob").id == running.id
    assert any(a["outcome"] == "noop" and "no change" in a["message"] for a in later), later


def test_what_if_recomputes_a_range_without_touching_live_decisions(dags, scaling_env):
    """Runs after the convergence test: its epochs are in the store."""
    live_before = read_epochs(scaling_env / "store", DECISIONS, "auto").to_pylist()
    assert live_before, "needs the epochs of the convergence test"
    first, last = min(d["epoch"] for d in live_before), max(d["epoch"] for d in live_before)
    start = datetime.fromtimestamp(first * INTERVAL_S, tz=UTC)
    end = datetime.fromtimestamp((last + 1) * INTERVAL_S, tz=UTC)
    conf = {"job": "auto", "start": start.isoformat(), "end": end.isoformat(), "factor": 1.0, "cooldown": 3600}
    run = dags["ds2_what_if"].test(run_conf=conf)
    assert run.state == "success"
    summary = _xcom(run, "compare")
    # Through the decide rules: the job's own (no cooldown) replay the live proposals into at least the rescale
    # the job made; the run's hour of cooldown allows one rescale in this range, whatever the proposals.
    assert summary["live_rescales"] >= 1 and summary["what_if_rescales"] == 1, summary
    assert summary["stability"] == {"cooldown": 3600}
    what_if_root = scaling_env / "what-if"
    stores = list(what_if_root.iterdir())
    assert len(stores) == 1
    what_if = read_epochs(stores[0], DECISIONS, "auto").to_pylist()
    assert {d["run_type"] for d in what_if} == {"what-if"} and {d["epoch"] for d in what_if} == {d["epoch"] for d in live_before}
    assert all(json.loads(d["options"])["factor"] == 1.0 for d in what_if)
    rescaled = min(d["epoch"] for d in live_before)
    count = {d["epoch"]: d for d in what_if if d["operator_name"] == "Count"}
    live_count = {d["epoch"]: d for d in live_before if d["operator_name"] == "Count"}
    # Twice the over-provisioning factor: the first epoch (Count at 1, 3.5 needed) asks for ceil(3.5 * 2) = 8.
    assert live_count[rescaled]["target_parallelism"] == 4 and count[rescaled]["target_parallelism"] == 8
    # Live decisions untouched (compared as JSON: an operator with no input has an optimal of NaN, never == itself).
    after = read_epochs(scaling_env / "store", DECISIONS, "auto").to_pylist()
    assert json.dumps(after, sort_keys=True, default=str) == json.dumps(live_before, sort_keys=True, default=str)


def test_the_reconciler_checks_every_job_in_one_task_and_alerts_on_the_one_that_does_not_run(dags, scaling_env, monkeypatch):
    """Runs after the convergence test: job ``auto`` runs on Flink. A second registration of a Flink job that
    was never started is named, in the task's error and in the alerts file, and the running one is not."""
    import yaml

    from ds2_airflow.dag_factory import reconcile_dag

    assert dags["ds2_reconcile"].test().state == "success"  # the one job runs, nothing is stale
    config = yaml.safe_load((scaling_env / "jobs.yaml").read_text())
    ghost = config["jobs"][0] | {"name": "ghost", "flink_job_name": "ds2-never-started"}
    (scaling_env / "jobs-ghost.yaml").write_text(yaml.safe_dump({"jobs": [*config["jobs"], ghost]}))
    monkeypatch.setenv("DS2_JOBS_CONFIG", str(scaling_env / "jobs-ghost.yaml"))
    assert reconcile_dag().test().state == "failed"
    alerts = [json.loads(line) for line in (scaling_env / "alerts.jsonl").read_text().splitlines()]
    mine = [a for a in alerts if a["dag_id"] == "ds2_reconcile"]
    assert [(a["job"], a["kind"]) for a in mine] == [("ghost", "needs-a-person")], mine
    assert "no job called 'ds2-never-started' runs on Flink" in mine[0]["problem"]
