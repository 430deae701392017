"""The DAG file: every configured job's DAGs import with the expected tasks; a bad config names job and field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from tests.conftest import ROOT

DAGS = ROOT / "dags"


def load(monkeypatch, tmp_path, jobs=None):
    from airflow.dag_processing.dagbag import BundleDagBag

    if jobs is not None:
        (tmp_path / "jobs.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
        monkeypatch.setenv("DS2_JOBS_CONFIG", str(tmp_path / "jobs.yaml"))
    monkeypatch.setenv("DS2_DATA_DIR", str(tmp_path / "data"))
    return BundleDagBag(dag_folder=str(DAGS), bundle_path=str(DAGS))


def entry(name, **extra):
    return {
        "name": name,
        "flink_job_name": f"flink-{name}",
        "jar": "build/ds2-testjob.jar",
        "parallelism_args": {"Count": "--count-parallelism"},
        **extra,
    }


def test_the_shipped_config_imports(monkeypatch, tmp_path):
    bag = load(monkeypatch, tmp_path)
    assert bag.import_errors == {}
    assert set(bag.dags) == {"ds2_testjob", "ds2_what_if", "ds2_boundaries", "ds2_reconcile"}
    dag = bag.dags["ds2_testjob"]
    assert sorted(t.task_id for t in dag.tasks) == ["collect", "decide", "policy", "record", "rescale", "validate"]
    assert dag.task_dict["policy"].job.spark_conn_id == "spark_ds2" and dag.task_dict["rescale"].pool == "ds2_testjob"
    boundaries = bag.dags["ds2_boundaries"]
    assert [t.task_id for t in boundaries.tasks] == ["snapshots"] and boundaries.max_active_runs == 2
    what_if = bag.dags["ds2_what_if"]
    assert [t.task_id for t in what_if.tasks] == ["what_if_policy", "compare"]
    assert what_if.params.get_param("job").schema["enum"] == ["testjob"]
    # One reconcile task for every job, whatever their number (it reads the jobs config when it runs).
    assert [t.task_id for t in bag.dags["ds2_reconcile"].tasks] == ["reconcile"]


def test_approval_adds_the_gate(monkeypatch, tmp_path):
    approval = {"required": True, "approvers": ["alice"], "timeout": "15m", "on_timeout": "approve"}
    bag = load(monkeypatch, tmp_path, [entry("plain"), entry("gated", approval=approval, mechanism="in-place")])
    assert bag.import_errors == {}
    assert set(bag.dags) == {
        "ds2_plain",
        "ds2_gated",
        "ds2_what_if",
        "ds2_boundaries",
        "ds2_reconcile",
    }
    gated = bag.dags["ds2_gated"]
    downstream = {t.task_id: sorted(t.downstream_task_ids) for t in gated.tasks}
    assert downstream["decide"] == ["approve", "record"] and downstream["approve"] == ["rescale"]
    approve = gated.task_dict["approve"]
    assert approve.defaults == ["Approve"] and approve.response_timeout.total_seconds() == 900
    assert approve.assigned_users == [{"id": "alice", "name": "alice"}]
    assert gated.task_dict["rescale"].mechanism == "in-place"
    assert "approve" not in bag.dags["ds2_plain"].task_dict


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"policy": {"factor": -1}}, "job 'wc': policy.factor: must be a number >= 0, got -1"),
        ({"approval": {"on_timeout": "maybe"}}, "job 'wc': approval.on_timeout: must be one of approve, reject, got 'maybe'"),
    ],
)
def test_a_bad_config_fails_the_import_naming_job_and_field(monkeypatch, tmp_path, bad, message):
    bag = load(monkeypatch, tmp_path, [entry("wc", **bad)])
    assert bag.dags == {}
    (error,) = bag.import_errors.values()
    assert error.strip().splitlines()[-1].endswith(message)
    assert "jobs.py" not in error  # only the DAG file's own frame, no reader internals


def test_a_bad_entry_costs_only_itself(monkeypatch, tmp_path):
    jobs = [entry("good"), entry("bad", policy={"factor": -1}), entry("also_good"), entry("good")]
    bag = load(monkeypatch, tmp_path, jobs)
    assert set(bag.dags) == {
        "ds2_good",
        "ds2_also_good",
        "ds2_what_if",
        "ds2_boundaries",
        "ds2_reconcile",
    }
    (path, error) = next(iter(bag.import_errors.items()))
    assert len(bag.import_errors) == 1 and path.endswith("ds2_config_errors.py")
    lines = error.strip().splitlines()
    assert lines[-2].endswith("job 'bad': policy.factor: must be a number >= 0, got -1")
    assert lines[-1].endswith("job 'good': name: clashes with job 'good' (same name or DAG id)")
    assert "jobs.py" not in error


def test_one_what_if_dag_serves_every_job_and_no_job_takes_a_shared_dags_id(monkeypatch, tmp_path):
    jobs = [entry("a"), entry("what-if"), entry("b", policy={"kind": "ds2_plus"}), entry("fleet_60s"), entry("boundaries")]
    bag = load(monkeypatch, tmp_path, jobs)
    assert set(bag.dags) == {"ds2_a", "ds2_b", "ds2_what_if", "ds2_boundaries", "ds2_reconcile"}
    assert bag.dags["ds2_what_if"].params.get_param("job").schema["enum"] == ["a", "b"]
    assert {"factor", "catch_up_duration", "min_parallelism"} <= set(bag.dags["ds2_what_if"].params)
    errors = next(iter(bag.import_errors.values())).strip().splitlines()[-3:]
    assert [e.split("job ", 1)[1] for e in errors] == [
        "'what-if': name: its DAG id ds2_what_if is one of the autoscaler's own DAGs",
        "'fleet_60s': name: its DAG id ds2_fleet_60s is one of the autoscaler's own DAGs",
        "'boundaries': name: its DAG id ds2_boundaries is one of the autoscaler's own DAGs",
    ]


def test_a_what_if_of_a_job_the_config_does_not_hold_fails_naming_it(tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from ds2_airflow.operators.policy import what_if_job

    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump({"jobs": [entry("a")]}))
    assert what_if_job("a", str(tmp_path / "jobs.yaml")).name == "a"
    with pytest.raises(AirflowFailException, match=r"what-if job 'gone': .*no job named 'gone'"):
        what_if_job("gone", str(tmp_path / "jobs.yaml"))


def test_an_unreadable_config_fails_the_dag_file(monkeypatch, tmp_path):
    (tmp_path / "jobs.yaml").write_text("jobs: [unclosed\n")
    monkeypatch.setenv("DS2_JOBS_CONFIG", str(tmp_path / "jobs.yaml"))
    bag = load(monkeypatch, tmp_path)
    assert bag.dags == {}
    (path, error) = next(iter(bag.import_errors.items()))
    assert len(bag.import_errors) == 1 and path.endswith("ds2_autoscaler.py") and "not valid YAML" in error


def test_a_task_process_builds_only_its_own_dag(monkeypatch, tmp_path):
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "ds2_b")
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_TASK_ID", "collect")
    bag = load(monkeypatch, tmp_path, [entry("a"), entry("b"), entry("c")])
    assert set(bag.dags) == {"ds2_b"} and bag.import_errors == {}


def test_data_docs_pages_are_served_from_inside_their_folder_only(tmp_path):
    from fastapi import HTTPException

    from ds2_airflow.docs_plugin import docs_page

    (tmp_path / "docs" / "run").mkdir(parents=True)
    (tmp_path / "docs" / "run" / "index.html").write_text("<html>")
    (tmp_path / "secret.txt").write_text("no")
    assert docs_page(tmp_path / "docs", "run") == (tmp_path / "docs" / "run" / "index.html").resolve()
    for bad in ("../secret.txt", "run/../../secret.txt", "/etc/passwd", "missing.html"):
        with pytest.raises(HTTPException) as err:
            docs_page(tmp_path / "docs", bad)
        assert err.value.status_code == 404


def test_a_late_run_never_costs_an_epoch_unless_the_dag_is_far_behind():
    from datetime import UTC, datetime, timedelta

    from airflow.timetables.base import DataInterval, TimeRestriction

    from ds2_airflow.timetable import LateRunsTimetable

    step = timedelta(seconds=30)
    timetable = LateRunsTimetable(step, 4)
    restriction = TimeRestriction(earliest=datetime(2026, 1, 1, tzinfo=UTC), latest=None, catchup=False)
    now = datetime.now(UTC).replace(microsecond=0)
    now = now - timedelta(seconds=now.second % 30)  # on a boundary

    def next_after(end: datetime):
        last = DataInterval(end - step, end)
        return timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction).data_interval

    # A run for the interval ending 90 s ago just finished (it ran long): the next interval, not the latest.
    assert next_after(now - 3 * step) == DataInterval(now - 3 * step, now - 2 * step)
    # Ten intervals behind (the DAG was paused): skip to the latest, as catchup=False does.
    assert next_after(now - 10 * step).end >= now - step
    # Serialized with the DAG and back (the scheduler deserializes it through the registered plugin).
    assert LateRunsTimetable.deserialize(timetable.serialize()) == timetable


def test_the_scaling_dag_serializes_with_its_timetable(monkeypatch, tmp_path):
    from airflow.serialization.serialized_objects import DagSerialization

    dag = load(monkeypatch, tmp_path).dags["ds2_testjob"]
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert type(restored.timetable).__name__ == "LateRunsTimetable" and restored.timetable.max_late_epochs == 4


def test_a_job_read_from_prometheus_collects_at_its_epochs_boundaries(monkeypatch, tmp_path):
    bag = load(monkeypatch, tmp_path, [entry("viaprom", collect={"prometheus_conn_id": "prom_flink"}), entry("plain")])
    assert bag.import_errors == {}
    collect = bag.dags["ds2_viaprom"].task_dict["collect"]
    assert collect.prometheus_conn_id == "prom_flink" and bag.dags["ds2_plain"].task_dict["collect"].prometheus_conn_id is None
    macros = bag.dags["ds2_viaprom"].user_defined_macros
    from types import SimpleNamespace

    scheduled = SimpleNamespace(conf={}, data_interval_end=datetime(2026, 11, 25, 12, 1, tzinfo=UTC), run_after=None)
    epoch = macros["ds2_run_epoch"](scheduled)
    # A run triggered without a data interval (Airflow 3 leaves data_interval_end out of the context): its run_after.
    assert (
        macros["ds2_run_epoch"](SimpleNamespace(conf={}, data_interval_end=None, run_after=scheduled.data_interval_end)) == epoch
    )
    assert macros["ds2_epoch_start"](epoch) == "2026-11-25T12:00:00+00:00"
    assert macros["ds2_epoch_start"](epoch + 1) == "2026-11-25T12:01:00+00:00"
    assert "epoch_start" in collect.template_fields and "ds2_epoch_start" in collect.epoch_end


def test_batched_jobs_are_decided_by_one_fleet_dag_per_interval(monkeypatch, tmp_path):
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.timetables.base import TimeRestriction

    jobs = [
        entry("a", batched=True, policy_interval="30s"),
        entry("b", batched=True, policy_interval="30s", approval={"required": True}),
        entry("c", batched=True, policy_interval="1m"),
        entry("own", policy_interval="30s"),
    ]
    bag = load(monkeypatch, tmp_path, jobs)
    assert bag.import_errors == {}
    assert {"ds2_fleet_30s", "ds2_fleet_60s", "ds2_a", "ds2_b", "ds2_c", "ds2_own"} <= set(bag.dags)
    assert "ds2_fleet_own" not in bag.dags
    fleet = bag.dags["ds2_fleet_30s"]
    assert sorted(t.task_id for t in fleet.tasks) == ["act", "decide_jobs", "verdicts"]
    assert fleet.max_active_runs == 1 and type(fleet.timetable).__name__ == "LateRunsTimetable"
    assert "Jobs: a, b." in fleet.doc_md
    # A member keeps its whole chain (a fleet-started run skips collect/validate/policy) and its gate...
    assert "approve" in bag.dags["ds2_b"].task_dict
    # ...but the scheduler never schedules it: its timetable yields intervals only to a backfill.
    member = bag.dags["ds2_a"].timetable
    assert type(member).__name__ == "FleetMemberTimetable" and member.summary.startswith("decided by ds2_fleet_30s")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    scheduler = TimeRestriction(earliest=start, latest=None, catchup=False)
    assert member.next_dagrun_info(last_automated_data_interval=None, restriction=scheduler) is None
    backfill = TimeRestriction(earliest=start, latest=datetime(2026, 1, 1, 0, 2, tzinfo=UTC), catchup=True)
    info = member.next_dagrun_info(last_automated_data_interval=None, restriction=backfill)
    assert info is not None and (info.data_interval.end - info.data_interval.start).total_seconds() == 30
    restored = DagSerialization.from_dict(DagSerialization.to_dict(bag.dags["ds2_a"]))
    assert restored.timetable == member
    assert type(bag.dags["ds2_own"].timetable).__name__ == "LateRunsTimetable"


def test_a_fleet_started_run_takes_its_epoch_from_the_fleet_run():
    from datetime import timedelta
    from types import SimpleNamespace

    from autoscaler.config.jobs import JobConfig, JobDeployment
    from ds2_airflow.runtime import epoch_for, fleet_handoff

    job = JobConfig("j", "flink-j", JobDeployment.__new__(JobDeployment), interval=timedelta(seconds=30))
    handed = {"fleet_run": "scheduled__x", "epoch": 7}
    late = {"dag_run": SimpleNamespace(conf=handed, run_after=datetime(2026, 1, 1, tzinfo=UTC))}
    assert epoch_for(job, late) == 7
    own = {"dag_run": SimpleNamespace(conf={}, run_after=datetime.fromtimestamp(300, tz=UTC), data_interval_end=None)}
    assert fleet_handoff(own) is None and epoch_for(job, own) == 9
    with pytest.raises(ValueError, match="epoch must be a non-negative integer"):
        epoch_for(job, {"dag_run": SimpleNamespace(conf={"fleet_run": "x", "epoch": "7; rm"})})


def test_a_user_reads_only_the_data_docs_of_jobs_whose_dag_they_may_read(tmp_path, monkeypatch):
    """Any logged-in user could read every job's validation pages; now a page of one job needs read access to
    that job's DAG, as the job views do, and the site's index (every job) read access to all of them."""
    from airflow.api_fastapi.core_api.security import get_user, requires_authenticated
    from fastapi.testclient import TestClient

    from ds2_airflow import docs_plugin

    data = tmp_path / "data"
    pages = {"validations/ds2-metrics/a/a-epoch-1/t/page.html": "a's epoch", "expectations/ds2-metrics/b.html": "b's suite",
             "index.html": "every job", "static/styles/site.css": "css"}  # fmt: skip
    for path, text in pages.items():
        (data / "validation-docs" / path).parent.mkdir(parents=True, exist_ok=True)
        (data / "validation-docs" / path).write_text(text)
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [entry("a"), entry("b")]}))
    monkeypatch.setenv("DS2_DATA_DIR", str(data))
    monkeypatch.setenv("DS2_JOBS_CONFIG", str(jobs))

    class AuthManager:
        def __init__(self):
            self.readable: set[str] = set()

        def is_authorized_dag(self, *, method, user, details):
            assert method == "GET"
            return details.id in self.readable

    manager = AuthManager()
    monkeypatch.setattr(docs_plugin, "get_auth_manager", lambda: manager)
    app = docs_plugin.docs_app()
    app.dependency_overrides[requires_authenticated()] = lambda: None
    app.dependency_overrides[get_user] = lambda: object()
    client = TestClient(app)

    def status(path):
        return client.get(f"/{path}").status_code

    manager.readable = {"ds2_a"}
    assert [status(p) for p in pages] == [200, 403, 403, 200]
    manager.readable = {"ds2_b"}
    assert [status(p) for p in pages] == [403, 200, 403, 200]
    manager.readable = {"ds2_a", "ds2_b"}
    assert [status(p) for p in pages] == [200, 200, 200, 200]
    assert client.get("/validations/ds2-metrics/a/a-epoch-1/t/page.html").text == "a's epoch"


def test_a_job_with_a_tuning_site_gets_a_tuning_dag_with_its_gate_and_cleanup(monkeypatch, tmp_path):
    approval = {"required": True, "approvers": ["alice"], "timeout": "15m", "on_timeout": "reject"}
    jobs = [entry("plain"), entry("tuned", tuning={"site": "local", "rate_flag": "--rate"}),
            entry("gated-tuned", tuning={"site": "local"}, approval=approval)]  # fmt: skip
    bag = load(monkeypatch, tmp_path, jobs)
    assert bag.import_errors == {}
    assert {d for d in bag.dags if "tuning" in d} == {"ds2__tuning_tuned", "ds2__tuning_gated_tuned"}
    tuned = bag.dags["ds2__tuning_tuned"]
    assert sorted(t.task_id for t in tuned.tasks) == ["apply", "cleanup", "decide", "tune"]
    assert tuned.task_dict["apply"].pool == "ds2_tuned"  # never beside a rescale of the scaling DAG
    assert tuned.task_dict["cleanup"].trigger_rule == "all_done"
    assert set(tuned.task_dict["cleanup"].upstream_task_ids) == {"tune", "apply"}
    assert tuned.params.get_param("force").value is False
    gated = bag.dags["ds2__tuning_gated_tuned"]
    assert sorted(t.task_id for t in gated.tasks) == ["apply", "approve", "cleanup", "decide", "tune"]
    assert gated.task_dict["approve"].downstream_task_ids == {"apply"}
