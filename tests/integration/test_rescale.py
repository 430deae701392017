"""Rescaling the test job on a real Flink 2.3 cluster: savepoint-restart and in place.

State continuity is checked with the job's own gauge ``Count.firstCountSeen``: the count of the
first record a Count subtask processed since it started; 1 on a fresh start, > 1 only when the
keyed state was restored. The failure paths live in ``test_rescale_failures.py``.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from autoscaler import testjob
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkRestClient
from autoscaler.flink.deployment import JobDeployment, program_args, resolve_jar
from autoscaler.rescale.in_place import rescale_in_place
from autoscaler.rescale.result import RescaleResult
from autoscaler.rescale.savepoint import pending_savepoint, rescale_with_savepoint
from autoscaler.store.schemas import ACTIONS
from tests.integration.conftest import TESTJOB_JAR, FlinkCluster

pytestmark = pytest.mark.flink

PARALLELISM_ARGS = testjob.PARALLELISM_ARGS
# Light load: 100 keys at 1,000 records/s give every key a count > 1 within a second.
LIGHT = ["--rate", "1000", "--keys", "100"]


# -- helpers (also used by test_rescale_failures.py) ---------------------------------------------


def base_args(name: str) -> list[str]:
    return ["--job-name", name, *LIGHT]


def deployment(name: str, folder: Path, **overrides: object) -> JobDeployment:
    values: dict[str, object] = {
        "job_name": name,
        "savepoint_dir": f"file://{folder}",
        "parallelism_args": PARALLELISM_ARGS,
        "base_args": base_args(name),
        "jar_path": TESTJOB_JAR,
    }
    values.update(overrides)
    return JobDeployment(**values)  # type: ignore[arg-type]


def start(cluster: FlinkCluster, name: str, count: int = 1) -> str:
    """Start the test job at Count = ``count`` and wait until Count holds state for every key.

    15 records per key on average: the chance that any of the 100 keys is still unseen (and a
    restored subtask then legitimately starts one at count 1) is ~100 * e^-15, nil.
    """
    details = cluster.start_job([*base_args(name), "--count-parallelism", str(count)])
    wait_counted(cluster.client, details.id, 1500)
    return details.id


def count_metric(client: FlinkRestClient, job_id: str, metric: str, timeout_s: float = 30.0) -> list[float]:
    """``metric`` of every Count subtask, once every subtask reports a value > 0."""
    details = client.job(job_id)
    vertex = details.vertex("Count")
    deadline = time.monotonic() + timeout_s
    values: list[float | None] = []
    while time.monotonic() < deadline:
        values = [client.subtask_metrics(job_id, vertex.id, n, [metric]).get(metric) for n in range(vertex.parallelism)]
        if all(v is not None and v > 0 for v in values):
            return [float(v) for v in values if v is not None]
        time.sleep(0.25)
    raise AssertionError(f"{metric} of job {job_id}'s Count subtasks stayed {values} for {timeout_s} s")


def wait_counted(client: FlinkRestClient, job_id: str, records: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(count_metric(client, job_id, "Count.countedRecords", timeout_s)) >= records:
            return
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not count {records} records in {timeout_s} s")


def assert_state_continued(client: FlinkRestClient, job_id: str, timeout_s: float = 15.0) -> None:
    """Every Count subtask's first count after the restart is > 1: it restored its keys' state.

    After an in-place rescale (same job id) Flink's REST metric store can still serve a subtask
    index's gauge from the attempt before the restart (seen in CI: [1.0, 39.0, 43.0], subtask 0
    still showing the fresh start's 1) until its next fetch. A lost state shows 1 for good, a
    stale value is replaced within a fetch interval (2 s): so the check polls for a while.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        first = count_metric(client, job_id, "Count.firstCountSeen")
        if all(v > 1 for v in first):
            return
        if time.monotonic() >= deadline:
            lost = f"firstCountSeen {first} for {timeout_s:g} s"
            raise AssertionError(f"a Count subtask started from scratch ({lost}): state was lost")
        time.sleep(0.5)


def running(client: FlinkRestClient, name: str) -> list[str]:
    """Ids of the live jobs called ``name`` (there must never be more than one)."""
    return [j.id for j in client.jobs() if j.name == name and j.state in ("RUNNING", "CREATED", "INITIALIZING")]


def assert_runs_at(client: FlinkRestClient, name: str, expected: dict[str, int]) -> str:
    ids = running(client, name)
    assert len(ids) == 1, f"expected one running {name}, found {ids}"
    summary = next(j for j in client.jobs() if j.id == ids[0])
    assert summary.state == "RUNNING" and summary.tasks_running == summary.tasks_total
    parallelism = client.job(ids[0]).parallelism
    assert {k: parallelism[k] for k in expected} == expected
    return ids[0]


def savepoints(folder: Path) -> list[Path]:
    return sorted(folder.glob("savepoint-*")) if folder.exists() else []


def local_path(uri: str) -> Path:
    return Path(uri.removeprefix("file://").removeprefix("file:"))


# -- no cluster needed --------------------------------------------------------------------------


def test_program_args_render_base_args_then_flags(tmp_path):
    dep = deployment("j", tmp_path)
    assert program_args(dep, {"Sink: Writer": 2, "Count": 4}) == [
        *base_args("j"),
        "--count-parallelism",
        "4",
        "--sink-parallelism",
        "2",
    ]
    with pytest.raises(InputError, match="Source: Source"):
        program_args(dep, {"Source: Source": 3})
    for bad in (0, -1, 2.0, True, "3"):
        with pytest.raises(InputError, match="integer >= 1"):
            program_args(dep, {"Count": bad})


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"parallelism_args": {"Count": "count-parallelism"}}, "must look like '--name'"),
        ({"parallelism_args": {"Count": "--p", "Parse": "--p"}}, "used for both"),
        ({"parallelism_args": ["--count-parallelism"]}, "must map operator names to program-argument flags"),
        ({"base_args": ["--count-parallelism", "2"]}, "parallelism_args controls"),
        ({"jar_id": "x_y.jar"}, "exactly one of jar_path"),
        ({"jar_path": None}, "exactly one of jar_path"),
        ({"savepoint_dir": "relative/dir"}, "absolute path"),
        ({"job_name": " "}, "job_name"),
    ],
)
def test_deployment_validation(tmp_path, overrides, problem):
    with pytest.raises(InputError, match=problem):
        deployment("j", tmp_path, **overrides)


def test_result_row_matches_the_actions_table():
    result = RescaleResult(
        action_id="a",
        mechanism="savepoint-restart",
        outcome="succeeded",
        old_flink_job_id="0" * 32,
        new_flink_job_id="1" * 32,
        old_parallelism={"Count": 1, "Parse": 1},
        new_parallelism={"Count": 4},
        savepoint_path="file:/sp",
        downtime_s=0.5,
        message="ok",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        finished_at=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
    )
    row = result.to_row("wordcount", 2049, approved_by="ops")
    assert list(row) == ACTIONS.names
    assert row["epoch_block"] == 2049 // 1024 and json.loads(row["new_parallelism"]) == {"Count": 4}
    assert RescaleResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


# -- savepoint-restart ----------------------------------------------------------------------------


def test_savepoint_rescale_up_then_down_keeps_state(clean_flink, tmp_path):
    client, name = clean_flink.client, "rs-updown"
    old_id = start(clean_flink, name)
    dep = deployment(name, tmp_path / "sp")

    up = rescale_with_savepoint(client, dep, {"Count": 4}, "up-1", tmp_path / "journal", start_timeout_s=30)
    assert up.outcome == "succeeded", up.message
    assert up.mechanism == "savepoint-restart"
    assert up.old_flink_job_id == old_id and up.new_flink_job_id not in (None, old_id)
    assert up.old_parallelism == {"Source: Source": 2, "Parse": 1, "Count": 1, "Sink: Writer": 1}
    assert up.new_parallelism == {"Count": 4}
    assert up.savepoint_path and local_path(up.savepoint_path).is_dir()
    assert up.downtime_s is not None and 0 < up.downtime_s < 30
    assert up.savepoint_duration_s is not None and 0 < up.savepoint_duration_s <= up.downtime_s
    assert up.started_at <= up.finished_at
    assert assert_runs_at(client, name, {"Count": 4, "Parse": 1, "Sink: Writer": 1, "Source: Source": 2}) == up.new_flink_job_id
    assert next(j for j in client.jobs() if j.id == old_id).state == "FINISHED"
    assert_state_continued(client, up.new_flink_job_id)

    down = rescale_with_savepoint(client, dep, {"Count": 2}, "down-1", tmp_path / "journal", start_timeout_s=30)
    assert down.outcome == "succeeded", down.message
    assert down.old_flink_job_id == up.new_flink_job_id and down.old_parallelism["Count"] == 4
    assert assert_runs_at(client, name, {"Count": 2}) == down.new_flink_job_id
    assert_state_continued(client, down.new_flink_job_id)
    assert len(savepoints(tmp_path / "sp")) == 2

    # The journal holds the final result: asking again changes nothing.
    again = rescale_with_savepoint(client, dep, {"Count": 4}, "up-1", tmp_path / "journal")
    assert again == up
    assert running(client, name) == [down.new_flink_job_id] and len(savepoints(tmp_path / "sp")) == 2


def test_deferred_wait_for_the_savepoint(clean_flink, tmp_path):
    """A deferrable task: request the savepoint, wait elsewhere, then carry on with the same action id."""
    client, name = clean_flink.client, "rs-deferred"
    old_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id
    dep, journal = deployment(name, tmp_path / "sp"), tmp_path / "journal"
    assert rescale_with_savepoint(client, dep, {"Count": 3}, "def-1", journal, wait_for_savepoint=False) is None
    job_id, request_id = pending_savepoint(journal, "def-1")
    assert job_id == old_id
    # A retry of the deferring task does not ask for a second savepoint: while the first is being taken it
    # defers again on the same request; once it is done (0.1 s here, so a CI run saw it) it carries on with it.
    retry = rescale_with_savepoint(client, dep, {"Count": 3}, "def-1", journal, wait_for_savepoint=False)
    if retry is None:
        assert pending_savepoint(journal, "def-1") == (job_id, request_id)
        client.wait_operation(lambda: client.savepoint_status(job_id, request_id), 30, 0.05, "savepoint")  # the trigger's job
        result = rescale_with_savepoint(client, dep, {"Count": 3}, "def-1", journal, start_timeout_s=30)
    else:
        result = retry
    assert result.outcome == "succeeded", result.message
    assert assert_runs_at(client, name, {"Count": 3}) == result.new_flink_job_id
    assert len(savepoints(tmp_path / "sp")) == 1
    with pytest.raises(InputError, match="no savepoint pending"):
        pending_savepoint(journal, "def-1")


def test_noop_when_already_at_target(clean_flink, tmp_path):
    client, name = clean_flink.client, "rs-noop"
    job_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "2"]).id
    dep = deployment(name, tmp_path / "sp", jar_path=None, jar_id=clean_flink.jar_id)
    result = rescale_with_savepoint(client, dep, {"Count": 2, "Parse": 1}, "noop-1", tmp_path / "journal")
    assert result.outcome == "noop" and result.downtime_s is None and result.savepoint_path is None
    assert result.old_flink_job_id == result.new_flink_job_id == job_id
    assert running(client, name) == [job_id] and savepoints(tmp_path / "sp") == []


def test_the_jar_is_pinned_by_content_and_uploaded_only_when_missing(clean_flink, tmp_path):
    client = clean_flink.client
    jar = tmp_path / TESTJOB_JAR.name
    jar.write_bytes(TESTJOB_JAR.read_bytes())
    # The fixture uploaded a jar of the same file name: not made by this resolver, so never reused
    # (it stands for a planted jar).
    first = resolve_jar(client, deployment("rs-jar", tmp_path, jar_path=jar))
    assert first != clean_flink.jar_id and first.endswith(f"_{jar.name}")
    before = client.jars()
    assert resolve_jar(client, deployment("rs-jar", tmp_path, jar_path=jar)) == first  # reused, no upload
    assert client.jars() == before
    jar.write_bytes(jar.read_bytes() + b"\0")  # changed content: uploaded again
    second = resolve_jar(client, deployment("rs-jar", tmp_path, jar_path=jar))
    assert second not in (first, clean_flink.jar_id) and len(client.jars()) == len(before) + 1
    for jar_id in (first, second):
        client._request("DELETE", f"/jars/{jar_id}")


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ({"Nope": 2}, "has no operator"),
        ({"Source: Source": 3}, "no program argument"),
        ({"Count": 200}, "exceeds its max parallelism 128"),
        ({"Count": 0}, "integer >= 1"),
        ({}, "at least one operator"),
    ],
)
def test_bad_target_changes_nothing(clean_flink, tmp_path, target, problem):
    client, name = clean_flink.client, "rs-bad"
    job_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id
    with pytest.raises(InputError, match=problem):
        rescale_with_savepoint(client, deployment(name, tmp_path / "sp"), target, "bad-1", tmp_path / "journal")
    assert not (tmp_path / "journal" / "bad-1.json").exists()
    assert running(client, name) == [job_id] and savepoints(tmp_path / "sp") == []


def test_missing_job_is_a_flink_error(clean_flink, tmp_path):
    from autoscaler.flink.client import FlinkError

    with pytest.raises(FlinkError, match="no RUNNING Flink job named 'rs-absent'"):
        rescale_with_savepoint(
            clean_flink.client, deployment("rs-absent", tmp_path), {"Count": 2}, "absent-1", tmp_path / "journal"
        )


# -- in place ---------------------------------------------------------------------------------------


def test_in_place_rescale_keeps_job_id_and_state(flink_adaptive, tmp_path):
    flink_adaptive.cancel_all()
    client, name = flink_adaptive.client, "rs-inplace"
    job_id = start(flink_adaptive, name)
    try:
        result = rescale_in_place(client, name, {"Count": 3}, "ip-1", tmp_path / "journal", timeout_s=30)
        assert result.outcome == "succeeded", result.message
        assert result.mechanism == "in-place"
        assert result.old_flink_job_id == result.new_flink_job_id == job_id
        assert result.old_parallelism["Count"] == 1 and result.new_parallelism == {"Count": 3}
        assert result.savepoint_path is None and result.downtime_s is not None and 0 < result.downtime_s < 30
        assert assert_runs_at(client, name, {"Count": 3, "Parse": 1, "Sink: Writer": 1, "Source: Source": 2}) == job_id
        assert_state_continued(client, job_id)
        assert rescale_in_place(client, name, {"Count": 3}, "ip-1", tmp_path / "journal") == result
        noop = rescale_in_place(client, name, {"Count": 3}, "ip-2", tmp_path / "journal")
        assert noop.outcome == "noop" and noop.downtime_s is None
    finally:
        flink_adaptive.cancel_all()


def test_in_place_needs_the_adaptive_scheduler(clean_flink, tmp_path):
    client, name = clean_flink.client, "rs-inplace-default"
    job_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id
    t0 = time.monotonic()
    with pytest.raises(InputError, match="adaptive scheduler"):
        rescale_in_place(client, name, {"Count": 2}, "ipd-1", tmp_path / "journal")
    assert time.monotonic() - t0 < 3, "the refusal must not wait for the client's retries of HTTP 500"
    assert running(client, name) == [job_id]
