"""A job in a restart loop, on a real Flink 2.3 cluster: never rescaled, every epoch says why, and one alert.

The test job's Parse throws ``FAIL_AFTER_S`` after every start (``--parse-fail-after-s``), so Flink's
restart strategy restarts it again and again. Each epoch goes through the stages as the DAG's tasks
call them (collect, the record task's outcome and ACTIONS row, the alerts it sends), with the boundary
snapshots the triggerer would take while the job runs:

1. the job failed over inside the epoch's window and runs again at its end: the window is a warm-up
   (``numRestarts`` grew), never decided, and the epoch is recorded failing-over;
2. collection meets the job RESTARTING: a clear error naming the state and the injected failure, no
   metrics written, and a rescale asked for now refuses before it touches the job;
3. it failed over again: the third epoch in a row failing over raises the restart-loop alert, once,
   and the next epoch is held as a restart's warm-up.
"""

from __future__ import annotations

import time

import pytest

from autoscaler.collect.flink import collect_epoch_metrics, snapshot_path
from autoscaler.collect.snapshot import save_snapshot, take_snapshot
from autoscaler.decide.history import last_rescale
from autoscaler.flink.client import FlinkRestClient, JobNotRunning
from autoscaler.flink.models import ACTIVE_STATES
from autoscaler.observe.alerts import RESTART_LOOP, epoch_alerts
from autoscaler.observe.views import job_view
from autoscaler.record import audit, outcomes
from autoscaler.rescale.savepoint import rescale_with_savepoint
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import FAILING_OVER, METRICS
from tests.helpers import poll
from tests.integration.conftest import wait_running
from tests.integration.test_rescale import base_args, deployment

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.faults]

NAME, JOB, INTERVAL_S = "restart-loop", "loop", 30
FAIL_AFTER_S = 12  # time to take a snapshot of the running job between two failures
RESTART_DELAY_S = 8  # the job stays RESTARTING this long after each failure: collection meets it there
LOOP = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "1000",
    "restart-strategy.fixed-delay.delay": f"{RESTART_DELAY_S} s",
}


def runs_again(client: FlinkRestClient, job_id: str, restarts_before: int) -> bool:
    """The job failed over since ``restarts_before`` and every task runs again."""
    job = client.find_job(NAME)
    return job is not None and job.id == job_id and job.all_running and (client.restarts(job_id) or 0) > restarts_before


def record(store, epoch: int, failing_over: str | None, failed: tuple[str, ...] = ()) -> dict:
    """The record task's ACTIONS row for the epoch (the plan of a warm-up window is a no-op)."""
    plan = None if failed else f"not decidable: warm-up ({failing_over})"
    run = outcomes.EpochRun(f"loop-{epoch}", "savepoint-restart", {}, plan_summary=plan, failed_tasks=failed,
                            failing_over=failing_over)  # fmt: skip
    row = outcomes.epoch_row(JOB, epoch, run)
    audit.record_action(store, row)
    return row


def test_a_job_in_a_restart_loop_is_never_rescaled_and_raises_one_alert(flink, tmp_path):
    client, store = flink.client, tmp_path / "store"
    args = [*base_args(NAME), "--parse-fail-after-s", str(FAIL_AFTER_S)]
    job_id = client.run_jar(flink.jar_id, None, args, flink_configuration=LOOP)
    try:
        wait_running(client, job_id)
        save_snapshot(take_snapshot(client, NAME), snapshot_path(store, JOB, 0))  # the boundary the triggerer took

        # 1: the window spans a failover
        poll("the job failed over and runs again", lambda: runs_again(client, job_id, 0), FAIL_AFTER_S + RESTART_DELAY_S + 40)
        first = collect_epoch_metrics(client, NAME, JOB, 1, store, short_window_s=1)
        assert first.failovers >= 1 and "the job failed over" in (first.warmup_reason or ""), first.summary()
        assert all(r["warmup"] for r in read_epochs(store, METRICS, JOB, [1]).to_pylist())  # never decided on
        assert record(store, 1, first.failing_over)["outcome"] == FAILING_OVER

        # 2: collection meets the job restarting
        poll("the job RESTARTING", lambda: client.find_job(NAME, ("RESTARTING",)) is not None, FAIL_AFTER_S + 30, every_s=0.1)
        with pytest.raises(JobNotRunning) as caught:
            collect_epoch_metrics(client, NAME, JOB, 2, store, short_window_s=1)
        found = str(caught.value)
        assert caught.value.failing_over and "is RESTARTING, not RUNNING" in found and "injected failure" in found, found
        assert read_epochs(store, METRICS, JOB, [2]).num_rows == 0
        with pytest.raises(JobNotRunning):
            rescale_with_savepoint(client, deployment(NAME, tmp_path / "sp"), {"Count": 2}, "a2", tmp_path / "journal")
        assert [(j.id, j.state in ACTIVE_STATES) for j in client.jobs() if j.name == NAME] == [(job_id, True)]  # untouched
        row = record(store, 2, found, failed=("collect",))
        assert row["outcome"] == FAILING_OVER and "RESTARTING" in row["message"] and row["message"].endswith("fails over")
        assert epoch_alerts(JOB, job_view(store, JOB, INTERVAL_S, 1, 2), 3, 3) == []  # one failover marks two epochs

        # 3: it runs again (the triggerer takes epoch 2's boundary), then fails over again
        poll("the job runs again", lambda: runs_again(client, job_id, caught.value.restarts or 0), RESTART_DELAY_S + 40)
        save_snapshot(take_snapshot(client, NAME), snapshot_path(store, JOB, 2))
        restarts = client.restarts(job_id) or 0
        poll("the job failed over again", lambda: runs_again(client, job_id, restarts), FAIL_AFTER_S + RESTART_DELAY_S + 40)
        third = collect_epoch_metrics(client, NAME, JOB, 3, store, short_window_s=1)
        assert third.failovers >= 1, third.summary()
        record(store, 3, third.failing_over)

        views = job_view(store, JOB, INTERVAL_S, 1, 3)
        assert [v.outcome for v in views] == [FAILING_OVER] * 3
        alerts = epoch_alerts(JOB, views, 3, 3)
        assert [(a.kind, a.epoch) for a in alerts] == [(RESTART_LOOP, 3)], alerts
        assert "failing over in 3 epochs in a row" in alerts[0].problem
        held = last_rescale(store, JOB, 4)
        assert held is not None and (held.epoch, held.what) == (3, "failover")  # warm-up and cooldown count from it
    finally:
        client.cancel(job_id)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(j.id == job_id and j.state in ACTIVE_STATES for j in client.jobs()):
            time.sleep(0.2)
