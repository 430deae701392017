"""The glue that hands a job's measured downtimes to the policy: a run's options as its kind reads them."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.run import StoreRun, run_options
from autoscaler.record.audit import record_action
from autoscaler.store.schemas import ACTIONS
from tests.helpers import topology

TOPO = topology([("src", "count")], {"src": 2, "count": 1})


def store_run(root, kind: str, from_epoch: int | None = None, **options) -> StoreRun:
    return StoreRun(str(root), "j", from_epoch, None, "live", "r1", "unused.csv",
                    PolicyOptions(kind=kind, max_parallelism={"COUNT": 8}, **options))  # fmt: skip


def downtimes(root, *pairs: tuple[int, float | None]) -> None:
    blank = {c.name: None for c in ACTIONS.columns} | {"mechanism": "savepoint-restart", "old_parallelism": "{}",
             "new_parallelism": "{}", "message": "", "started_at": datetime(2026, 11, 27, tzinfo=UTC)}  # fmt: skip
    for epoch, downtime in pairs:
        record_action(root, blank | {"job": "j", "epoch": epoch, "action_id": f"a{epoch}", "outcome": "succeeded",
                                     "downtime_s": downtime})  # fmt: skip


def test_a_kind_that_sizes_for_restarts_gets_the_median_measured_before_the_decided_epochs(tmp_path):
    downtimes(tmp_path, (3, 4.0), (9, 3.0), (21, 12.0))
    options = run_options(store_run(tmp_path, "ds2_plus", from_epoch=10), TOPO)
    assert options.restart_time == 3.5  # 4 and 3: the rescale at epoch 21 comes after the decided epochs
    assert options.max_parallelism == {"count": 8}  # operator names resolved to ids
    assert run_options(store_run(tmp_path, "ds2_plus"), TOPO).restart_time == 4.0  # all three


def test_nothing_measured_leaves_the_kinds_prior_and_a_set_value_wins(tmp_path):
    assert run_options(store_run(tmp_path, "ds2_plus"), TOPO).restart_time is None
    assert run_options(store_run(tmp_path, "ds2_plus"), TOPO).effective("restart_time") == 10.0
    downtimes(tmp_path, (3, 4.0))
    assert run_options(store_run(tmp_path, "ds2_plus", restart_time=30.0), TOPO).restart_time == 30.0


def test_kinds_that_do_not_size_for_measured_restarts_keep_their_own(tmp_path):
    downtimes(tmp_path, (3, 4.0))
    assert run_options(store_run(tmp_path, "utilization"), TOPO).effective("restart_time") == 300.0
    assert run_options(store_run(tmp_path, "ds2"), TOPO).restart_time is None
