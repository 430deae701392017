"""A Flink SQL job nobody here wrote, scaled per operator through Flink alone (no program flags).

What Flink 2.3 honours, measured on these clusters: ``pipeline.jobvertex-parallelism-overrides`` is
ignored on a restore from a savepoint, whether passed in the jar-run request's configuration or
with SQL ``SET`` (the job came back at parallelism 1). The adaptive scheduler's per-vertex resource
requirements are honoured, also right after a restore: so a job with no flags is restarted from its
savepoint unchanged and then taken to its target, vertex by vertex.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.errors import InputError
from autoscaler.flink import sql
from autoscaler.flink.deployment import JobDeployment
from autoscaler.rescale.in_place import rescale_in_place
from autoscaler.rescale.savepoint import rescale_with_savepoint
from autoscaler.store.schemas import SUCCEEDED
from tests.integration.conftest import FlinkCluster, wait_running

pytestmark = pytest.mark.flink
NAME = "ds2-sql-counts"
# A keyed GROUP BY with state; the print sink lets the test read the counts on (few keys, a low rate).
SQL = f"""
SET 'pipeline.name' = '{NAME}';
CREATE TABLE clicks (user_id INT, url STRING) WITH (
  'connector' = 'datagen', 'rows-per-second' = '40', 'fields.user_id.min' = '1', 'fields.user_id.max' = '4');
CREATE TABLE counts (user_id INT, clicks BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'counts');
INSERT INTO counts SELECT user_id, COUNT(*) AS clicks FROM clicks GROUP BY user_id;
"""
AGGREGATE = "GroupAggregate -> Sink: counts"
PRINTED = re.compile(r"counts(?::\d+)?> \+[IU]\[(\d+), (\d+)\]")


def deployment(cluster: FlinkCluster, script: str = SQL) -> JobDeployment:
    return JobDeployment(job_name=NAME, savepoint_dir=cluster.savepoint_dir, jar_path=sql.RUNNER_JAR,
                         entry_class=sql.RUNNER_CLASS, base_args=sql.runner_args(script))  # fmt: skip


def printed_counts(cluster: FlinkCluster) -> list[tuple[int, int]]:
    """Every (user_id, count) the print sink wrote so far, in order, from the TaskManagers' stdout."""
    rows: list[tuple[int, int]] = []
    for out in sorted(Path(cluster.data_dir, "log").glob("*taskexecutor*.out")):
        rows += [(int(m[1]), int(m[2])) for m in PRINTED.finditer(out.read_text(errors="replace"))]
    return rows


def wait_for_counts(cluster: FlinkCluster, more_than: int, timeout_s: float = 60) -> list[tuple[int, int]]:
    deadline = time.monotonic() + timeout_s
    while len(rows := printed_counts(cluster)) <= more_than:
        assert time.monotonic() < deadline, f"the print sink wrote no more than {more_than} rows in {timeout_s} s"
        time.sleep(0.5)
    return rows


def assert_counts_went_on(before: list[tuple[int, int]], after: list[tuple[int, int]]) -> None:
    """Each key's first count after the restart continues its last one before (state restored)."""
    last = {key: count for key, count in before}
    first_after: dict[int, int] = {}
    for key, count in after:
        first_after.setdefault(key, count)
    assert first_after, "no count after the restart"
    for key, count in first_after.items():
        assert count > last.get(key, 0), f"user {key}: {count} after the restart, {last.get(key)} before: state lost"
    assert any(count > 1 for count in first_after.values())


@pytest.fixture
def sql_job(flink_adaptive: FlinkCluster) -> Iterator[FlinkCluster]:
    flink_adaptive.cancel_all()
    job_id = sql.submit(flink_adaptive.client, SQL)
    details = wait_running(flink_adaptive.client, job_id)
    assert details.parallelism == {"Source: clicks -> Calc": 1, AGGREGATE: 1}  # the planner's operators
    yield flink_adaptive
    flink_adaptive.cancel_all()


def test_a_sql_job_without_flags_rescales_by_savepoint_and_in_place_keeping_its_state(sql_job, tmp_path):
    client, journal = sql_job.client, tmp_path / "journal"
    before = wait_for_counts(sql_job, 20)
    up = rescale_with_savepoint(client, deployment(sql_job), {AGGREGATE: 3}, "sql-up", journal, start_timeout_s=60)
    assert up.outcome == SUCCEEDED, up.message
    assert up.new_flink_job_id != up.old_flink_job_id and up.savepoint_path
    details = client.job(up.new_flink_job_id)
    assert details.parallelism[AGGREGATE] == 3 and details.parallelism["Source: clicks -> Calc"] == 1
    assert client.checkpoints(up.new_flink_job_id)["latest"]["restored"]  # from the savepoint, then the rescale's checkpoint
    after = wait_for_counts(sql_job, len(before) + 20)
    assert_counts_went_on(before, after[len(before) :])

    down = rescale_in_place(client, NAME, {AGGREGATE: 1}, "sql-down", journal, timeout_s=60)
    assert down.outcome == SUCCEEDED, down.message
    assert down.new_flink_job_id in (None, up.new_flink_job_id) and client.job(up.new_flink_job_id).parallelism[AGGREGATE] == 1
    later = wait_for_counts(sql_job, len(after) + 20)
    assert_counts_went_on(after, later[len(after) :])


def test_a_changed_query_is_refused_before_the_job_is_stopped(sql_job, tmp_path):
    running = sql_job.client.running_job(NAME)
    changed = SQL.replace("GROUP BY user_id", "GROUP BY user_id, url")  # another key: other state
    with pytest.raises(InputError, match=r"no longer builds the running job: operator\(s\) \['GroupAggregate"):
        rescale_with_savepoint(sql_job.client, deployment(sql_job, changed), {AGGREGATE: 2}, "sql-changed", tmp_path / "j")
    assert sql_job.client.running_job(NAME).id == running.id  # still running, untouched


def test_a_job_without_flags_on_the_default_scheduler_is_refused_before_it_is_stopped(clean_flink, tmp_path):
    job_id = sql.submit(clean_flink.client, SQL)
    wait_running(clean_flink.client, job_id)
    with pytest.raises(InputError, match="needs the adaptive scheduler"):
        rescale_with_savepoint(clean_flink.client, deployment(clean_flink), {AGGREGATE: 2}, "sql-default", tmp_path / "j")
    assert clean_flink.client.running_job(NAME).id == job_id


def test_what_flink_honours_on_a_restore_overrides_no_per_vertex_requirements_yes(sql_job, tmp_path):
    """The evidence for the design: FLINK-38770 holds on this cluster for a restore from a savepoint,
    through the jar-run request's configuration and through SQL SET alike; the adaptive scheduler's
    per-vertex requirements take effect. (Should a Flink release honour the overrides, this fails and
    the restart can pass them instead.)"""
    client = sql_job.client
    jar = client.upload_jar(sql.RUNNER_JAR)
    job = client.running_job(NAME)
    aggregate = client.job(job.id).vertex(AGGREGATE).id
    overrides = {"pipeline.jobvertex-parallelism-overrides": f"{aggregate}:3"}

    def stop(job_id: str) -> str:
        request = client.stop_with_savepoint(job_id, sql_job.savepoint_dir)
        return client.wait_operation(lambda: client.savepoint_status(job_id, request), 60).location

    by_config = client.run_jar(jar, sql.RUNNER_CLASS, ["--sql", SQL], savepoint_path=stop(job.id), flink_configuration=overrides)
    assert wait_running(client, by_config).parallelism[AGGREGATE] == 1
    set_first = f"SET 'pipeline.jobvertex-parallelism-overrides' = '{aggregate}:3';\n{SQL}"
    by_set = client.run_jar(jar, sql.RUNNER_CLASS, ["--sql", set_first], savepoint_path=stop(by_config))
    details = wait_running(client, by_set)
    assert details.parallelism[AGGREGATE] == 1 and details.vertex(AGGREGATE).id == aggregate  # same plan, same ids
    assert client.checkpoints(by_set)["latest"]["restored"]["is_savepoint"]
