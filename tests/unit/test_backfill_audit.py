"""Backfill batching helpers and the audit trail's history queries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from autoscaler.decide import history
from autoscaler.engine import backfill
from autoscaler.record import audit, outcomes
from autoscaler.rescale.result import RescaleResult


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 100, 4096])
def test_contiguous_extent_finds_the_last_queued_follower(n):
    calls = []

    def exist(k):
        calls.append(k)
        return k <= n

    assert backfill.contiguous_extent(exist) == n
    assert len(calls) <= 2 * 13 + 2  # logarithmic


def test_claims_are_consumed_once_and_need_the_same_fingerprint(tmp_path):
    backfill.write_claims(tmp_path, "wc", ["2026-11-21T12:01:00+00:00", "2026-11-21T12:02:00+00:00"], "run-1", "fp")
    with backfill.batch_lock(tmp_path, "wc"):
        assert backfill.take_claim(tmp_path, "wc", "2026-11-21T12:01:00+00:00", "fp") == "run-1"
    assert backfill.take_claim(tmp_path, "wc", "2026-11-21T12:01:00+00:00", "fp") is None  # consumed
    assert backfill.take_claim(tmp_path, "wc", "2026-11-21T12:02:00+00:00", "other options") is None  # stale


def _result(outcome):
    t = datetime(2026, 11, 21, 12, tzinfo=UTC)
    return RescaleResult("a", "savepoint-restart", outcome, "j1", "j2", {"Count": 1}, {"Count": 4}, "/sp", 0.6, "ok", t, t)


def _noop(epoch, action_id, message):
    return outcomes.action_row("wc", epoch, action_id=action_id, mechanism="m", outcome="noop", message=message, parallelism={})


def test_history_from_the_actions_and_decisions_tables(tmp_path):
    assert history.last_rescale(tmp_path, "wc", 100) is None
    audit.record_action(tmp_path, _result("succeeded").to_row("wc", 10))
    audit.record_action(tmp_path, _noop(11, "b", "x"))
    audit.record_action(tmp_path, _result("failed").to_row("wc", 12))
    last = history.last_rescale(tmp_path, "wc", 100)
    assert last is not None and last.epoch == 10  # a failed attempt did not restart the job
    assert history.last_rescale(tmp_path, "wc", 10) is None
    # re-recording an epoch replaces its row
    audit.record_action(tmp_path, _noop(11, "c", "y"))
    log = audit.actions_log(tmp_path, "wc")
    assert [r["epoch"] for r in log] == [10, 11, 12] and log[1]["message"] == "y"
    with pytest.raises(ValueError, match="RescaleResult"):
        outcomes.action_row("wc", 1, action_id="d", mechanism="m", outcome="succeeded", message="", parallelism={})


def test_the_key_groups_an_epochs_proposals_were_aligned_to(tmp_path):
    """The slot check keeps a cut target aligned to these (decide.rules._fit_slots): the largest
    max_parallelism over the epoch's instances, per operator, as the policy's window takes it."""
    from autoscaler.store.parquet import write_epochs
    from autoscaler.store.schemas import METRICS
    from tests.helpers import metrics_rows, topology, window

    topo = topology([("src", "count")], {"src": 2, "count": 2})
    seven = {"src": window(2, 10.0, 10.0, max_parallelism=8), "count": window(2, 10.0, 10.0, max_parallelism=128)}
    eight = {"src": window(2, 10.0, 10.0, max_parallelism=4), "count": window(2, 10.0, 10.0)}
    rows = metrics_rows(topo, {7: seven, 8: eight}, job="wc")
    write_epochs(tmp_path, METRICS, "wc", rows)
    assert history.key_groups(tmp_path, "wc", 7) == {"src": 8, "count": 128}
    assert history.key_groups(tmp_path, "wc", 8) == {"src": 4}  # unknown key groups are left out
    assert history.epoch_history(tmp_path, "wc", 7, 2).key_groups == {"src": 8, "count": 128}
