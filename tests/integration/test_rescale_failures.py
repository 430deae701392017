"""Every way a rescale can go wrong, on a real Flink 2.3 cluster; the job must end up RUNNING.

(a) the savepoint fails or is late, (b) the restart fails (submission error, the new job dies,
not enough slots, wrong parallelism) and the rollback -- or the rollback fails too, (c) the
worker crashes between any two steps and the orchestrator retries the same action. Crashes are
injected into a real client: the call reaches Flink (or not), then :class:`Crash`, a
BaseException nothing in the code under test may swallow, stands for the worker dying.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkConnection, FlinkError, FlinkRestClient
from autoscaler.flink.models import OperationStatus
from autoscaler.rescale.in_place import rescale_in_place
from autoscaler.rescale.savepoint import rescale_with_savepoint
from tests.integration.conftest import FlinkCluster, wait_running
from tests.integration.test_rescale import (
    assert_runs_at,
    assert_state_continued,
    base_args,
    deployment,
    local_path,
    running,
    savepoints,
    start,
)

# Injected crashes and failures at every step (make test-faults, with the process-level drills; ~95 s alone).
pytestmark = [pytest.mark.flink, pytest.mark.faults]

ALL_AT_1 = {"Source: Source": 2, "Parse": 1, "Count": 1, "Sink: Writer": 1}


class Crash(BaseException):
    """The worker running the rescale died here."""


def faulty(
    cluster: FlinkCluster,
    method: str,
    when: str = "after",
    error: BaseException | None = None,
    armed_by: str | None = None,
    fire_if: Callable[[Any], bool] | None = None,
) -> FlinkRestClient:
    """A real client whose ``method`` fails once: ``before`` or ``after`` the real call.

    ``armed_by``: only calls after this other method ran count; ``fire_if``: only fail after a
    call whose answer passes this test. The failure is ``error`` (default: a :class:`Crash`).
    """
    client = FlinkRestClient(cluster.client.connection)
    real = getattr(client, method)
    state = {"armed": armed_by is None, "fired": False}
    if armed_by is not None:
        real_arm = getattr(client, armed_by)

        def arming(*args: Any, **kwargs: Any) -> Any:
            out = real_arm(*args, **kwargs)
            state["armed"] = True
            return out

        setattr(client, armed_by, arming)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        fire = state["armed"] and not state["fired"]
        if fire and when == "before":
            state["fired"] = True
            raise error or Crash(f"before {method}")
        out = real(*args, **kwargs)
        if fire and when == "after" and (fire_if is None or fire_if(out)):
            state["fired"] = True
            raise error or Crash(f"after {method}")
        return out

    setattr(client, method, wrapper)
    return client


def dead_client() -> FlinkRestClient:
    """Fails on any call: proves a retry did not touch Flink."""
    return FlinkRestClient(FlinkConnection(base_url="http://127.0.0.1:9", retries=0, timeout_s=1))


def journal(tmp_path: Path, action_id: str) -> dict[str, Any]:
    return json.loads((tmp_path / "journal" / f"{action_id}.json").read_text())


def wait_state(client: FlinkRestClient, job_id: str, state: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if next(j for j in client.jobs() if j.id == job_id).state == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not become {state} in {timeout_s} s")


def names_seen(client: FlinkRestClient, name: str) -> int:
    return sum(j.name == name for j in client.jobs())


# -- (a) the savepoint fails or is late -------------------------------------------------------------


def test_failed_savepoint_leaves_the_job_running(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-badsp"
    job_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id
    dep = deployment(name, tmp_path, savepoint_dir="file:///etc/hostname/sp")  # a file: no folder in it
    result = rescale_with_savepoint(client, dep, {"Count": 4}, "a1", tmp_path / "journal", start_timeout_s=15)
    assert result.outcome == "failed"
    assert "savepoint" in result.message and "Failed to create savepoint directory" in result.message
    assert "keeps running unchanged" in result.message
    assert result.savepoint_path is None and result.downtime_s is None and result.new_flink_job_id == job_id
    assert assert_runs_at(client, name, ALL_AT_1) == job_id


def test_late_savepoint_restarts_the_job_unchanged(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-latesp"
    old_id = start(clean_flink, name)
    result = rescale_with_savepoint(
        client,
        deployment(name, tmp_path / "sp"),
        {"Count": 4},
        "a2",
        tmp_path / "journal",
        savepoint_timeout_s=0,  # nothing completes in 0 s: the savepoint is "late" every time
        start_timeout_s=15,
    )
    assert result.outcome == "failed", result.message
    assert "did not complete within 0 s" in result.message and "restarted unchanged" in result.message
    assert result.savepoint_path and local_path(result.savepoint_path).is_dir()
    assert result.new_flink_job_id not in (None, old_id) and result.downtime_s is not None
    assert assert_runs_at(client, name, ALL_AT_1) == result.new_flink_job_id
    assert_state_continued(client, result.new_flink_job_id)


def test_savepoint_still_in_progress_is_resolved_by_the_retry(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-pendingsp"
    old_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id
    dep = deployment(name, tmp_path / "sp")
    kwargs = {"savepoint_timeout_s": 0.5, "late_savepoint_grace_s": 0.5, "start_timeout_s": 15}
    # A savepoint slower than timeout + grace: the first attempt sees it in progress and the job
    # running until it gives up; the savepoint then completes and stops the job.
    slow = FlinkRestClient(client.connection)
    slow.savepoint_status = lambda job_id, request_id: OperationStatus("IN_PROGRESS")  # type: ignore[method-assign]
    slow.jobs = lambda: [  # type: ignore[method-assign]
        dataclasses.replace(j, state="RUNNING") if j.id == old_id else j for j in client.jobs()
    ]
    pending = rescale_with_savepoint(slow, dep, {"Count": 4}, "a3", tmp_path / "journal", **kwargs)
    assert pending.outcome == "failed" and "still in progress" in pending.message and "retry action 'a3'" in pending.message
    assert journal(tmp_path, "a3")["result"] is None  # not final: the retry must look again
    wait_state(client, old_id, "FINISHED")  # the savepoint completed after all, and stopped the job
    assert running(client, name) == []
    result = rescale_with_savepoint(client, dep, {"Count": 4}, "a3", tmp_path / "journal", **kwargs)
    assert result.outcome == "failed" and "restarted unchanged" in result.message
    assert assert_runs_at(client, name, ALL_AT_1) == result.new_flink_job_id != old_id
    assert len(savepoints(tmp_path / "sp")) == 1


# -- (b) the restart fails -----------------------------------------------------------------------------


def test_not_enough_slots_rolls_back(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-slots"
    old_id = start(clean_flink, name)
    # 12 Count subtasks need 12 slots; the TaskManager has 8: tasks stay SCHEDULED.
    result = rescale_with_savepoint(
        client, deployment(name, tmp_path / "sp"), {"Count": 12}, "b1", tmp_path / "journal", start_timeout_s=8
    )
    assert result.outcome == "rolled-back", result.message
    assert "did not run all tasks" in result.message and "Rolled back" in result.message
    assert result.savepoint_path and result.new_flink_job_id not in (None, old_id)
    assert result.downtime_s is not None
    assert assert_runs_at(client, name, ALL_AT_1) == result.new_flink_job_id
    assert_state_continued(client, result.new_flink_job_id)
    assert len(savepoints(tmp_path / "sp")) == 1


def test_submission_error_rolls_back(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-submit"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])
    broken = faulty(clean_flink, "run_jar", when="before", error=FlinkError("injected: HTTP 500 from /jars/run", 500))
    result = rescale_with_savepoint(broken, deployment(name, tmp_path / "sp"), {"Count": 4}, "b2", tmp_path / "journal")
    assert result.outcome == "rolled-back", result.message
    assert "could not be submitted: injected" in result.message
    assert assert_runs_at(client, name, ALL_AT_1) == result.new_flink_job_id
    assert [s["purpose"] for s in journal(tmp_path, "b2")["submissions"]] == ["rescale", "rollback"]


def test_new_job_dying_rolls_back(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-dies"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])
    killer = FlinkRestClient(client.connection)
    real_run = killer.run_jar
    killed: list[str] = []

    def run_then_cancel(*args: Any, **kwargs: Any) -> str:
        job_id = real_run(*args, **kwargs)
        if not killed:  # only the rescaled job dies, not the rollback
            killed.append(job_id)
            client.cancel(job_id)
        return job_id

    killer.run_jar = run_then_cancel  # type: ignore[method-assign]
    result = rescale_with_savepoint(killer, deployment(name, tmp_path / "sp"), {"Count": 4}, "b3", tmp_path / "journal")
    assert result.outcome == "rolled-back", result.message
    assert f"job {killed[0]} is CANCELED" in result.message
    assert assert_runs_at(client, name, ALL_AT_1) == result.new_flink_job_id != killed[0]


def test_wrong_parallelism_after_restart_rolls_back(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-mismatch"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])
    # A wrong mapping: the flag sets Parse, not Count. Flink runs what it was told; the check catches it.
    dep = deployment(name, tmp_path / "sp", parallelism_args={"Count": "--parse-parallelism"})
    result = rescale_with_savepoint(
        client, dep, {"Count": 2}, "b4", tmp_path / "journal", start_timeout_s=15, verify_window_s=1.5
    )
    assert result.outcome == "rolled-back", result.message
    assert "wrong parallelism" in result.message and "Count: 1 instead of 2" in result.message
    assert assert_runs_at(client, name, ALL_AT_1) == result.new_flink_job_id


def test_failed_rollback_says_the_job_is_stopped_and_which_savepoint_restores_it(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-norollback"
    old_id = start(clean_flink, name)
    # A changed max parallelism cannot restore the savepoint: the restart and the rollback both fail.
    dep = deployment(name, tmp_path / "sp", base_args=[*base_args(name), "--max-parallelism", "64"])
    result = rescale_with_savepoint(client, dep, {"Count": 4}, "b5", tmp_path / "journal", start_timeout_s=15)
    assert result.outcome == "failed", result.message
    assert "Max parallelism mismatch" in result.message and "failed the same way" in result.message
    assert "is STOPPED" in result.message and f"savepoint {result.savepoint_path} restores it" in result.message
    assert result.new_flink_job_id is None and result.downtime_s is None
    assert running(client, name) == []
    assert next(j for j in client.jobs() if j.id == old_id).state == "FINISHED"
    # What the message says works: restore from that savepoint with the previous arguments.
    restored = client.run_jar(
        clean_flink.jar_id, None, [*base_args(name), "--count-parallelism", "1"], savepoint_path=result.savepoint_path
    )
    wait_running(client, restored, 30)
    assert assert_runs_at(client, name, ALL_AT_1) == restored
    assert_state_continued(client, restored)


# -- (c) crash and retry with the same action id ----------------------------------------------------------


def _crash_then_retry(
    cluster: FlinkCluster, tmp_path: Path, name: str, action: str, broken: FlinkRestClient, before_retry: Callable[[], None]
) -> None:
    """Crash an attempt, then retry it with a healthy client: one savepoint, one new job, at Count 4."""
    dep = deployment(name, tmp_path / "sp")
    with pytest.raises(Crash):
        rescale_with_savepoint(broken, dep, {"Count": 4}, action, tmp_path / "journal", start_timeout_s=15)
    before_retry()
    result = rescale_with_savepoint(cluster.client, dep, {"Count": 4}, action, tmp_path / "journal", start_timeout_s=15)
    assert result.outcome == "succeeded", result.message
    assert assert_runs_at(cluster.client, name, {"Count": 4, "Parse": 1}) == result.new_flink_job_id
    assert len(savepoints(tmp_path / "sp")) == 1, "a retry took a second savepoint"
    assert names_seen(cluster.client, name) == 2, "a retry submitted the job twice"
    assert result.savepoint_path and local_path(result.savepoint_path) == savepoints(tmp_path / "sp")[0]
    # Done is done: a further retry returns the result without calling Flink.
    assert rescale_with_savepoint(dead_client(), dep, {"Count": 4}, action, tmp_path / "journal") == result


def test_crash_before_the_stop_request(clean_flink, tmp_path):
    name = "rsf-c-prestop"
    old_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id

    def check() -> None:
        recorded = journal(tmp_path, "c1")
        assert recorded["stop"]["request_id"] is None and recorded["old_job_id"] == old_id
        assert running(clean_flink.client, name) == [old_id]  # never stopped: the retry must stop it

    _crash_then_retry(clean_flink, tmp_path, name, "c1", faulty(clean_flink, "stop_with_savepoint", "before"), check)


def test_crash_after_the_stop_request_lost_its_answer(clean_flink, tmp_path):
    name = "rsf-c-stop"
    old_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id

    def check() -> None:
        assert journal(tmp_path, "c2")["stop"]["request_id"] is None  # the request id never reached the journal
        wait_state(clean_flink.client, old_id, "FINISHED")  # the stop did happen: found via checkpoint history

    _crash_then_retry(clean_flink, tmp_path, name, "c2", faulty(clean_flink, "stop_with_savepoint", "after"), check)


def test_crash_after_the_savepoint_completed(clean_flink, tmp_path):
    name = "rsf-c-sp"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])
    broken = faulty(clean_flink, "savepoint_status", "after", fire_if=lambda status: status.completed)

    def check() -> None:
        recorded = journal(tmp_path, "c3")
        assert recorded["stop"]["request_id"] and not recorded["savepoint"]  # known to Flink only

    _crash_then_retry(clean_flink, tmp_path, name, "c3", broken, check)


def test_crash_before_the_submission(clean_flink, tmp_path):
    name = "rsf-c-presubmit"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])

    def check() -> None:
        recorded = journal(tmp_path, "c4")
        assert recorded["savepoint"]["location"] and recorded["submissions"] == [
            {"purpose": "rescale", "job_id": None, "error": None}
        ]
        assert running(clean_flink.client, name) == []  # stopped: the retry restarts from the savepoint

    _crash_then_retry(clean_flink, tmp_path, name, "c4", faulty(clean_flink, "run_jar", "before"), check)


def test_crash_after_the_submission_lost_its_answer(clean_flink, tmp_path):
    name = "rsf-c-submit"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])
    submitted: list[str] = []

    def check() -> None:
        assert journal(tmp_path, "c5")["submissions"][-1]["job_id"] is None
        submitted.extend(running(clean_flink.client, name))
        assert len(submitted) == 1  # it was submitted: the retry must adopt it, not submit again

    _crash_then_retry(clean_flink, tmp_path, name, "c5", faulty(clean_flink, "run_jar", "after"), check)
    assert running(clean_flink.client, name) == submitted


def test_crash_while_the_new_job_starts(clean_flink, tmp_path):
    name = "rsf-c-starting"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "1"])
    recorded: list[str] = []

    def check() -> None:
        recorded.append(journal(tmp_path, "c6")["submissions"][-1]["job_id"])
        assert recorded[0] is not None

    _crash_then_retry(clean_flink, tmp_path, name, "c6", faulty(clean_flink, "jobs", "after", armed_by="run_jar"), check)
    assert running(clean_flink.client, name) == recorded  # verified, not resubmitted


def test_retry_must_ask_for_the_same_rescale(clean_flink, tmp_path):
    client, name = clean_flink.client, "rsf-other"
    clean_flink.start_job([*base_args(name), "--count-parallelism", "2"])
    dep = deployment(name, tmp_path / "sp")
    assert rescale_with_savepoint(client, dep, {"Count": 2}, "c7", tmp_path / "journal").outcome == "noop"
    with pytest.raises(InputError, match=re.escape("journaled as savepoint-restart of 'rsf-other' to {'Count': 2}")):
        rescale_with_savepoint(client, dep, {"Count": 3}, "c7", tmp_path / "journal")
    with pytest.raises(InputError, match="journaled as savepoint-restart"):
        rescale_in_place(client, name, {"Count": 2}, "c7", tmp_path / "journal")


def test_two_attempts_of_one_action_never_run_at_once(tmp_path):
    (tmp_path / "journal").mkdir()
    with (tmp_path / "journal" / ".c8.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(InputError, match="another attempt of action 'c8' is still running"):
            rescale_with_savepoint(dead_client(), deployment("x", tmp_path), {"Count": 2}, "c8", tmp_path / "journal")
    for bad in ("", "../x", "a/b", ".hidden", "x" * 201):
        with pytest.raises(InputError, match="action id"):
            rescale_with_savepoint(dead_client(), deployment("x", tmp_path), {"Count": 2}, bad, tmp_path / "journal")


# -- in place -------------------------------------------------------------------------------------------------


@pytest.fixture
def adaptive(flink_adaptive) -> Iterator[FlinkCluster]:
    flink_adaptive.cancel_all()
    yield flink_adaptive
    flink_adaptive.cancel_all()


def test_in_place_that_does_not_take_effect_is_reverted(adaptive, tmp_path):
    client, name = adaptive.client, "rsf-ip-slots"
    job_id = adaptive.start_job([*base_args(name), "--count-parallelism", "1"]).id
    # 12 > 8 slots: after its stabilization timeout (5 s) the scheduler runs Count at 8, not 12.
    result = rescale_in_place(client, name, {"Count": 12}, "ip-f1", tmp_path / "journal", timeout_s=7)
    assert result.outcome == "failed", result.message
    assert "did not take effect within 7 s" in result.message
    assert "Restored the previous resource requirements: it runs at its previous parallelism again" in result.message
    assert assert_runs_at(client, name, ALL_AT_1) == job_id
    bounds = {r["upperBound"] for r in client.resource_requirements(job_id).values()}
    assert bounds == {1, 2}


def test_in_place_crash_after_the_change_then_retry(adaptive, tmp_path):
    client, name = adaptive.client, "rsf-ip-crash"
    job_id = adaptive.start_job([*base_args(name), "--count-parallelism", "1"]).id
    broken = faulty(adaptive, "set_resource_requirements", "after")
    with pytest.raises(Crash):
        rescale_in_place(broken, name, {"Count": 2}, "ip-c1", tmp_path / "journal", timeout_s=30)
    result = rescale_in_place(client, name, {"Count": 2}, "ip-c1", tmp_path / "journal", timeout_s=30)
    assert result.outcome == "succeeded", result.message
    assert result.new_flink_job_id == job_id and result.downtime_s is not None
    assert assert_runs_at(client, name, {"Count": 2, "Parse": 1}) == job_id
    assert rescale_in_place(dead_client(), name, {"Count": 2}, "ip-c1", tmp_path / "journal") == result


# -- (e) nobody finishes the action: the deferred resume and the reconciler ------------------------


def test_a_deferred_resume_asks_flink_and_a_forgotten_savepoint_is_decided_by_the_job(clean_flink, tmp_path):
    """Flink answers 404 for a savepoint it forgot (JobManager restart, expiry): the resume does not
    defer again on the same ids (it did three times before), it decides by the job, which runs on."""
    client, name = clean_flink.client, "rsf-forgot"
    job_id = clean_flink.start_job([*base_args(name), "--count-parallelism", "1"]).id
    forgetful = FlinkRestClient(client.connection)
    forgetful.stop_with_savepoint = lambda *a, **k: "f" * 32  # type: ignore[method-assign]  # never sent to Flink
    dep = deployment(name, tmp_path / "sp")
    journals = tmp_path / "journal"
    assert rescale_with_savepoint(forgetful, dep, {"Count": 2}, "e1", journals, wait_for_savepoint=False) is None
    result = rescale_with_savepoint(client, dep, {"Count": 2}, "e1", journals, wait_for_savepoint=False, savepoint_timeout_s=3)
    assert result is not None and result.outcome == "failed" and "keeps running unchanged" in result.message, result
    assert running(client, name) == [job_id]


def test_the_reconciler_restarts_a_job_left_stopped_by_an_abandoned_action(clean_flink, tmp_path):
    """The task that requested the savepoint never came back (its run was failed, the worker died):
    the savepoint completed and stopped the job. The reconciler finds the stale journal and finishes
    the action from that savepoint; a fresh journal is left to its own task."""
    from autoscaler.rescale.reconcile import Watched, reconcile, reconcile_cluster, unfinished

    client, name = clean_flink.client, "rsf-abandoned"
    old_id = start(clean_flink, name)  # Count holds state for every key
    dep = deployment(name, tmp_path / "sp")
    journals = tmp_path / "journal"
    assert rescale_with_savepoint(client, dep, {"Count": 3}, "e2", journals, wait_for_savepoint=False) is None
    wait_state(client, old_id, "FINISHED")  # stopped by its savepoint; nothing restarts it
    assert running(client, name) == [] and [a.action_id for a in unfinished(journals, name)] == ["e2"]
    assert reconcile(client, dep, journals, stale_after_s=600, savepoint_timeout_s=30, start_timeout_s=30) == ([], [])
    old = time.time() - 3600
    os.utime(journals / "e2.json", (old, old))  # an hour without a step: nobody is finishing it
    # The fleet's pass: every job of the cluster at once; a job that does not run is named, unless it is
    # rescaled in place (a rescale of ours never stops it).
    watched = [Watched("abandoned", dep, "savepoint-restart", 30, 30),
               Watched("ghost", deployment("rsf-ghost", tmp_path / "sp"), "savepoint-restart", 30, 30),
               Watched("ghost-in-place", deployment("rsf-ghost-2", tmp_path / "sp"), "in-place", 30, 30)]  # fmt: skip
    results, problems = reconcile_cluster(client, watched, journals)
    assert [r.outcome for r in results] == ["succeeded"], results
    assert problems == {"ghost": [f"no job called 'rsf-ghost' runs on Flink ({client.base_url})"]}, problems
    assert assert_runs_at(client, name, {"Count": 3, "Parse": 1}) == results[0].new_flink_job_id
    assert_state_continued(client, results[0].new_flink_job_id)
    assert unfinished(journals, name) == []
