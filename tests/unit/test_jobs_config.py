"""The jobs config: the shipped file loads, and every bad field is named with its job."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from autoscaler.config.fields import parse_duration
from autoscaler.config.jobs import load_jobs, parse_jobs
from autoscaler.errors import InputError
from tests.conftest import ROOT

BASE = {
    "name": "wc",
    "flink_job_name": "wordcount",
    "jar": "build/ds2-testjob.jar",
    "parallelism_args": {"Count": "--count-parallelism"},
}


def one(**changes):
    entry = copy.deepcopy(BASE)
    entry.update(changes)
    return parse_jobs({"jobs": [entry]}, "jobs.yaml")[0]


def test_the_shipped_config_loads():
    jobs = load_jobs(ROOT / "include" / "jobs.yaml")
    assert [j.name for j in jobs] == ["testjob"]
    job = jobs[0]
    assert job.dag_id == "ds2_testjob" and job.pool == "ds2_testjob"
    assert job.stability.ignore_scale_down_by == 0 and job.approval.required is False  # ds2_plus's own
    assert job.deployment.parallelism_args["Count"] == "--count-parallelism"


def test_defaults():
    job = one()
    assert job.interval == timedelta(minutes=1) and job.mechanism == "auto"
    assert job.flink_conn_id == "flink_default" and job.spark_conn_id == "spark_ds2"
    assert job.approval.timeout_answer == "Reject"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"policy": {"factor": -1}}, "job 'wc': policy.factor: must be a number >= 0, got -1"),
        ({"policy": {"threshold": 0.5}}, "job 'wc': policy.threshold: must be a number >= 1"),
        ({"policy": {"max_parallelism": {"Count": 0}}}, "job 'wc': policy.max_parallelism.Count: must be an integer >= 1"),
        ({"policy": {"min_parallelism": {"Count": 5}, "max_parallelism": {"Count": 2}}}, "max 2 is below min 5"),
        ({"policy": {"warmup_epochs": -1}}, "policy.warmup_epochs: must be an integer >= 0"),
        ({"policy": {"activation_epochs": 0}}, "policy.activation_epochs: must be an integer >= 1"),
        ({"policy": {"cooldown": "soon"}}, "policy.cooldown: expected a duration like 30s"),
        ({"policy": {"facter": 1}}, "job 'wc': policy.facter: unknown field"),
        (
            {"policy": {"kind": "ds2_plus", "catch_up_duration": "10s", "restart_time": "5s"}},
            "policy.catch_up_duration: 10 s is not longer than what a change takes (decision latency 7 s + restart 5 s)",
        ),
        ({"mechanism": "yolo"}, "job 'wc': mechanism: must be one of auto, savepoint-restart, in-place, got 'yolo'"),
        ({"policy_interval": "7s"}, "policy_interval: 0:00:07 must divide a day"),
        ({"policy_interval": "1s"}, "policy_interval: must be at least 5 s"),
        ({"approval": {"on_timeout": "maybe"}}, "job 'wc': approval.on_timeout: must be one of approve, reject"),
        ({"approval": {"approvers": "bob"}}, "approval.approvers: must be a list of strings"),
        ({"flink_conn_id": "bad id!"}, "flink_conn_id: 'bad id!' is not a valid Airflow connection id"),
        ({"parallelism_args": {"Count": "count"}}, "job 'wc': deployment: parallelism_args['Count']: flag 'count'"),
        ({"base_args": "--rate 5"}, "base_args: must be a list of strings"),
        ({"name": "bad name"}, "job 'bad name': name:"),
        ({"flink_job_name": None}, "job 'wc': flink_job_name: is required"),
        ({"validation": {"window_tolerance": 5}}, "job 'wc': validation.window_tolerance: must be a finite number"),
        ({"collect": {"short_window": "2m"}}, "collect.short_window: 0:02:00 must be shorter than policy_interval"),
        ({"jar": None}, "give exactly one of jar_path"),
        ({"colour": "red"}, "job 'wc': colour: unknown field"),
    ],
)
def test_bad_fields_are_named(changes, message):
    with pytest.raises(InputError) as err:
        one(**changes)
    assert message in str(err.value) and str(err.value).startswith("jobs.yaml: job")


def test_duplicate_names_and_bad_yaml(tmp_path):
    with pytest.raises(InputError, match="name: clashes with job 'wc'"):
        parse_jobs({"jobs": [BASE, BASE]}, "jobs.yaml")
    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs:\n  - name: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_jobs(bad)
    with pytest.raises(InputError, match="cannot read the jobs config"):
        load_jobs(tmp_path / "missing.yaml")
    bad.write_text(yaml.safe_dump({"jobs": [BASE], "extra": 1}))
    with pytest.raises(InputError, match="unknown top-level field 'extra'"):
        load_jobs(bad)


def test_durations_and_epochs():
    assert parse_duration("500ms", "x") == timedelta(milliseconds=500)
    assert parse_duration("2h", "x") == timedelta(hours=2) and parse_duration(30, "x") == timedelta(seconds=30)
    job = one(policy_interval="30s")
    end = datetime(2026, 11, 21, 12, 0, 30, tzinfo=UTC)
    epoch = job.epoch_of(end)
    assert job.epoch_start(epoch + 1) == end and job.epoch_start(epoch) == end - timedelta(seconds=30)
    assert job.epoch_of(end + timedelta(seconds=29.9)) == epoch  # a run that starts late still decides its epoch


def test_paths():
    job = one(savepoint_dir="file:///flink/savepoints")
    assert job.deployment.savepoint_dir == "file:///flink/savepoints"
    job = one(savepoint_dir="data/sp")
    assert job.deployment.savepoint_dir.endswith("/data/sp") and job.deployment.savepoint_dir.startswith("/")
    assert str(job.deployment.jar_path).startswith("/") and str(job.deployment.jar_path).endswith("build/ds2-testjob.jar")


def test_lateness_defaults_to_one_interval():
    assert one(policy_interval="5m").lateness_s == 300
    assert one(policy_interval="10s", collect={"short_window": "4s"}).lateness_s == 30
    assert one(validation={"lateness_s": 7}).lateness_s == 7
    assert one(policy_interval="1m").max_boundary_age_s == 120


def test_two_registrations_of_one_flink_job_are_a_config_error():
    other = BASE | {"name": "wc-copy"}
    with pytest.raises(InputError) as err:
        parse_jobs({"jobs": [BASE, other]}, "jobs.yaml")
    assert str(err.value) == (
        "jobs.yaml: job 'wc-copy': flink_job_name: registers Flink job 'wordcount' on 'flink_default', as job 'wc' does"
    )
    # The same Flink job name on another cluster is another job.
    assert len(parse_jobs({"jobs": [BASE, other | {"flink_conn_id": "flink_other"}]}, "jobs.yaml")) == 2


@pytest.mark.parametrize("period", ["25:00-01:00", "2:00-04:00", "02:00-02:00", "02:00 - 04:00", "02:00-04:00x"])
def test_an_excluded_period_must_be_a_daily_window(period):
    with pytest.raises(InputError, match="excluded_periods:"):
        one(excluded_periods=[period])


def sql_job(sql_path, **changes):
    entry = {"name": "counts", "flink_job_name": "ds2-sql-user-counts", "sql_file": str(sql_path), **changes}
    return parse_jobs({"jobs": [entry]}, "jobs.yaml")[0]


def test_a_sql_job_needs_no_flags():
    """The shipped SQL script runs on the SQL runner jar with its text as the argument; no flags."""
    from autoscaler.flink import sql

    job = sql_job("flink-job/sql/user-counts.sql")
    assert job.deployment.parallelism_args == {} and job.deployment.entry_class == sql.RUNNER_CLASS
    assert job.deployment.jar_path == sql.RUNNER_JAR and job.deployment.base_args[0] == "--sql"
    assert "GROUP BY user_id" in job.deployment.base_args[1]


def test_a_sql_file_outside_the_sql_folder_is_refused(tmp_path, monkeypatch):
    """Whoever edits the jobs file chooses what is submitted to Flink; it may name only the SQL folder's files."""
    outside = tmp_path / "elsewhere.sql"
    outside.write_text("SET 'pipeline.name' = 'ds2-sql-user-counts';\nINSERT INTO t SELECT 1;\n")
    with pytest.raises(InputError, match=r"sql_file: .*elsewhere.sql is outside the SQL folder .* \(setting sql_dir\)"):
        sql_job(outside)
    # A link inside the folder to a file outside it is followed, and refused.
    folder = tmp_path / "sql"
    folder.mkdir()
    (folder / "link.sql").symlink_to(outside)
    monkeypatch.setenv("DS2_SQL_DIR", str(folder))
    with pytest.raises(InputError, match="is outside the SQL folder"):
        sql_job(folder / "link.sql")
    (folder / "link.sql").unlink()
    (folder / "q.sql").write_text(outside.read_text())
    assert sql_job(folder / "q.sql").deployment.base_args[0] == "--sql"


def test_a_sql_job_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("DS2_SQL_DIR", str(tmp_path))
    script = tmp_path / "q.sql"
    script.write_text("SET 'pipeline.name' = 'other';\nINSERT INTO t SELECT 1;\n")
    with pytest.raises(InputError, match=r"the script names its job 'other'.*but flink_job_name is 'ds2-sql-user-counts'"):
        sql_job(script)
    with pytest.raises(InputError, match=r"job 'counts': parallelism_args: a job given by sql_file runs the SQL runner"):
        sql_job("flink-job/sql/user-counts.sql", parallelism_args={"Count": "--count"})
    with pytest.raises(InputError, match=r"sql_file: .*missing.sql: the SQL script cannot be read"):
        sql_job(tmp_path / "missing.sql")
    script.write_text("SET 'pipeline.name' = 'ds2-sql-user-counts';\nSELECT 1;\n")
    with pytest.raises(InputError, match="no INSERT INTO statement"):
        sql_job(script)


def nexmark_job(query: str, **changes):
    files = ["flink-job/sql/nexmark/tables.sql", f"flink-job/sql/nexmark/{query}.sql"]
    entry = {"name": query, "flink_job_name": f"nexmark-{query}", "sql_file": files, **changes}
    return parse_jobs({"jobs": [entry]}, "jobs.yaml")[0]


@pytest.mark.parametrize("query", ["q1", "q2", "q5", "q8"])
def test_a_nexmark_query_is_its_tables_then_its_own_script_with_the_kafka_login_by_path(query):
    job = nexmark_job(query, kafka_client_config="/etc/ds2/kafka-client.properties")
    args = job.deployment.base_args
    assert list(args[:3]) == ["--kafka-client-config", "/etc/ds2/kafka-client.properties", "--sql"]
    assert args[3].index("CREATE TABLE bid") < args[3].index(f"SET 'pipeline.name' = 'nexmark-{query}'")
    assert "${kafka.sasl.jaas.config}" in args[3]  # the runner fills it from the file; no secret in the arguments


def test_a_kafka_login_is_asked_for_where_the_script_needs_one_and_refused_elsewhere(tmp_path):
    with pytest.raises(InputError, match=r"kafka_client_config: the script uses \$\{kafka\.<key>\} placeholders"):
        nexmark_job("q1")
    with pytest.raises(InputError, match="kafka_client_config: only a job given by sql_file takes it"):
        one(kafka_client_config="/etc/kafka.properties")
    with pytest.raises(InputError, match="sql_file: must be a path or a list of paths"):
        nexmark_job("q1", sql_file=[])


def test_planner_node_numbers_are_not_part_of_an_operators_name():
    from autoscaler.flink.models import stable_vertex_names

    assert stable_vertex_names(["Source: clicks[1] -> Calc[2]", "GroupAggregate[4] -> Sink: counts[5]", "Count"]) == [
        "Source: clicks -> Calc", "GroupAggregate -> Sink: counts", "Count"]  # fmt: skip
    assert stable_vertex_names(["Calc[3]", "Calc[7]"]) == ["Calc", "Calc #2"]


def test_scale_down_to_is_the_kinds_own_unless_set(tmp_path):
    path = tmp_path / "jobs.yaml"
    base = {"name": "wc", "flink_job_name": "wc", "jar": "wc.jar", "base_args": [], "parallelism_args": {}}
    for policy, largest in (({"kind": "utilization"}, True), ({"kind": "ds2_plus"}, False),
                            ({"kind": "ds2_plus", "scale_down_to": "largest"}, True)):  # fmt: skip
        path.write_text(yaml.safe_dump({"jobs": [base | {"policy": policy}]}))
        assert load_jobs(path)[0].policy.scale_down_largest() is largest
    path.write_text(yaml.safe_dump({"jobs": [base | {"policy": {"scale_down_to": "smallest"}}]}))
    with pytest.raises(InputError, match=r"policy\.scale_down_to: must be one of largest, latest, got 'smallest'"):
        load_jobs(path)
