"""The read API of the job and fleet views: every epoch of a range, its state, rates, proposals and actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from autoscaler.observe.views import fleet_view, job_view
from autoscaler.record.audit import record_action
from autoscaler.store.parquet import epoch_block, write_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS, VALIDATIONS
from tests.helpers import metrics_rows, topology, window

TOPO = topology([("src", "count")], {"src": 2, "count": 1})
INTERVAL = 60.0
T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
E0 = int(T0.timestamp() // INTERVAL)  # the first epoch of the range


def windows(count_p: int, rate: float, pending: float | None = None, warm: int = 0):
    return {"src": window(2, 0.0, rate, rate * 0.9, pending_records=pending),
            "count": window(count_p, count_p * 5_700.0, rate, warmup_instances=warm)}  # fmt: skip


def decisions(epoch: int, current: int, target: int, status: str = "ok") -> list[dict]:
    base = {c.name: None for c in DECISIONS.columns} | {
        "job": "j", "epoch": epoch, "epoch_block": epoch_block(epoch), "status": status, "instances_observed": 1,
        "options": '{"kind": "ds2_plus"}', "run_id": f"scheduled__{epoch}", "run_type": "live",
        "decided_at": datetime.fromtimestamp((epoch + 1) * INTERVAL + 5, tz=UTC),
    }  # fmt: skip
    return [base | {"operator_id": "src", "operator_name": "SRC", "is_source": True, "current_parallelism": 2,
                    "target_parallelism": 2, "reason": "source"},
            base | {"operator_id": "count", "operator_name": "COUNT", "is_source": False, "current_parallelism": current,
                    "target_parallelism": target, "reason": f"count needs {target}"}]  # fmt: skip


def action(epoch: int, outcome: str, new: int = 1, downtime: float | None = None, by: str | None = None) -> dict:
    return {c.name: None for c in ACTIONS.columns} | {
        "job": "j", "epoch": epoch, "action_id": f"a{epoch}", "mechanism": "savepoint-restart", "outcome": outcome,
        "old_parallelism": '{"COUNT": 1}', "new_parallelism": f'{{"COUNT": {new}}}', "message": outcome,
        "started_at": T0, "finished_at": datetime.fromtimestamp((epoch + 1) * INTERVAL + 20, tz=UTC),
        "downtime_s": downtime, "approved_by": by,
    }  # fmt: skip


def validation(epoch: int, status: str) -> dict:
    return {c.name: None for c in VALIDATIONS.columns} | {
        "job": "j", "epoch": epoch, "epoch_block": epoch_block(epoch), "status": status, "decidable": status == "passed",
        "rows": 3, "expectations": 10, "failed": int(status == "failed"), "failed_rules": "", "summary": f"{status}!",
        "engine": "pandas", "suite_version": 1, "thresholds": "{}", "docs_page": f"e{epoch}/index.html",
        "validated_at": T0,
    }  # fmt: skip


def store(tmp_path):
    # E0: decided, rescaled 1 -> 4 (approved); E0+1: warm-up; E0+2: quarantined; E0+3: lost; E0+4: recommendation only.
    metrics = {E0: windows(1, 20_000, pending=50_000), E0 + 1: windows(4, 20_000, warm=4), E0 + 2: windows(4, 20_000),
               E0 + 4: windows(4, 30_000)}  # fmt: skip
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, metrics, job="j"))
    rows = decisions(E0, 1, 4) + decisions(E0 + 1, 4, 4, "warmup") + decisions(E0 + 4, 4, 6)
    write_epochs(tmp_path, DECISIONS, "j", pa.Table.from_pylist(rows, schema=DECISIONS.arrow_schema()))
    write_epochs(tmp_path, VALIDATIONS, "j", pa.Table.from_pylist(
        [validation(E0, "passed"), validation(E0 + 2, "failed")], schema=VALIDATIONS.arrow_schema()))  # fmt: skip
    record_action(tmp_path, action(E0, "succeeded", 4, 3.5, "alice"))
    record_action(tmp_path, action(E0 + 4, "recommended"))
    return tmp_path


def test_a_jobs_view_lists_every_epoch_with_its_state_rates_proposals_and_actions(tmp_path):
    view = job_view(store(tmp_path), "j", INTERVAL, E0, E0 + 4)
    assert [e.state for e in view] == ["decided", "warm-up", "quarantined", "lost", "recommendation-only"]
    first = view[0]
    assert (first.arrival_rate, first.throughput, first.backlog) == (20_000, 18_000, 50_000)
    assert first.parallelism == {"SRC": 2, "COUNT": 1} and first.recommended == {"COUNT": 4}
    assert first.outcome == "succeeded" and first.applied == {"COUNT": 4} and first.downtime_s == 3.5
    assert first.approved_by == "alice" and first.kind == "ds2_plus" and first.reasons["COUNT"] == "count needs 4"
    assert first.validation == "passed!" and first.docs_page == f"e{E0}/index.html" and first.run_id == f"scheduled__{E0}"
    assert view[3].arrival_rate is None and view[3].start == T0 + timedelta(minutes=3)


def test_the_fleet_view_gives_each_job_its_gap_age_losses_and_lag(tmp_path):
    now = T0 + timedelta(minutes=5, seconds=30)
    (row,) = fleet_view(store(tmp_path), [("j", INTERVAL)], now)
    assert row.current == {"SRC": 2, "COUNT": 4} and row.recommended == {"COUNT": 6} and row.gap == 2
    assert row.last_decision_epoch == E0 + 4 and row.last_decision_age_s == 25.0
    assert row.last_rescale == T0 + timedelta(seconds=80)
    assert (row.lost_last_day, row.quarantined_last_day, row.failures_last_day) == (1, 1, 0)
    assert row.decision_lag_s == 5.0


def test_a_job_not_measured_for_a_day_shows_what_it_last_ran_with_and_how_old_that_is(tmp_path):
    # A stopped job, or a copied store: the row keeps its last parallelism and proposal, not an empty row.
    now = T0 + timedelta(days=3)
    (row,) = fleet_view(store(tmp_path), [("j", INTERVAL)], now)
    assert row.current == {"SRC": 2, "COUNT": 4} and row.recommended == {"COUNT": 6} and row.gap == 2
    assert row.last_decision_epoch == E0 + 4 and row.last_decision_age_s == (now - T0).total_seconds() - 305
    assert (row.lost_last_day, row.quarantined_last_day, row.decision_lag_s) == (0, 0, None)
