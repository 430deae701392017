"""The job view's chart series: every epoch's load, parallelism and state, downsampled on the server."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from autoscaler.config.sections import ExcludedPeriod
from autoscaler.observe.series import job_series
from autoscaler.store.parquet import epoch_span, write_epochs
from autoscaler.store.schemas import METRICS
from tests.helpers import metrics_rows
from tests.unit.test_views import E0, INTERVAL, T0, TOPO, store, windows


def test_series_per_epoch_carry_load_parallelism_events_and_shaded_states(tmp_path):
    s = job_series(store(tmp_path), "j", INTERVAL, E0, E0 + 4)
    assert s.step == 1
    assert [p["epoch"] for p in s.load] == [E0, E0 + 1, E0 + 2, E0 + 4]  # the lost epoch has no point: a gap
    assert s.load[0] | {"time": None} == {"time": None, "epoch": E0, "arrival": 20_000, "throughput": 18_000, "backlog": 50_000}
    assert s.load[1]["backlog"] is None  # no source reported pendingRecords
    count = [(p["epoch"], p["parallelism"], p["recommended"]) for p in s.parallelism if p["operator"] == "COUNT"]
    assert count == [(E0, 1, 4), (E0 + 1, 4, 4), (E0 + 2, 4, None), (E0 + 4, 4, 6)]
    assert [(e["epoch"], e["outcome"], e["new_parallelism"], e["approved_by"]) for e in s.events] == [
        (E0, "succeeded", {"COUNT": 4}, "alice"),
        (E0 + 4, "recommended", {"COUNT": 1}, None),
    ]
    assert [(r["state"], r["start"], r["end"]) for r in s.shading] == [
        (state, (T0 + timedelta(minutes=a)).isoformat(), (T0 + timedelta(minutes=b)).isoformat())
        for state, a, b in [("warm-up", 1, 2), ("quarantined", 2, 3), ("lost", 3, 4), ("recommendation-only", 4, 5)]
    ]
    assert s.states == {"decided": 1, "warm-up": 1, "quarantined": 1, "lost": 1, "recommendation-only": 1}


def test_excluded_periods_are_shaded_from_the_jobs_config(tmp_path):
    period = ExcludedPeriod.parse("12:02-12:05")
    s = job_series(store(tmp_path), "j", INTERVAL, E0, E0 + 4, excluded=period.contains)
    # An epoch is judged at its end, when it is decided: E0+1 ends 12:02, E0+4 at 12:05 (outside). Lost and
    # quarantined epochs keep their state.
    assert s.states == {"decided": 1, "excluded": 1, "quarantined": 1, "lost": 1, "recommendation-only": 1}


def test_a_long_range_comes_back_in_at_most_max_points_buckets(tmp_path):
    n = 1_000
    rows = {E0 + i: windows(1 + i // 500, 10_000 + 10 * i, pending=float(i)) for i in range(n)}
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, rows, job="j"))
    s = job_series(tmp_path, "j", INTERVAL, E0, E0 + n - 1, max_points=100)
    assert s.step == 10 and len(s.load) == 100
    assert s.load[0]["arrival"] == pytest.approx(10_045)  # the mean of 10,000 .. 10,090
    assert s.load[0]["backlog"] == 9  # the maximum
    count = [p["parallelism"] for p in s.parallelism if p["operator"] == "COUNT"]
    assert count == [1] * 50 + [2] * 50
    assert s.states == {"measured": n} and s.shading == []
    assert datetime.fromisoformat(s.load[-1]["time"]) == T0 + timedelta(minutes=990)


def test_an_empty_range_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="an empty range"):
        job_series(tmp_path, "j", INTERVAL, E0, E0 - 1)


def test_the_newest_epochs_without_a_trace_are_pending_and_the_span_is_known(tmp_path):
    root = store(tmp_path)
    s = job_series(root, "j", INTERVAL, E0, E0 + 5, pending_from=E0 + 3)
    assert s.states["pending"] == 2 and "lost" not in s.states  # E0+3 and E0+5: their runs may still come
    assert all(r["state"] != "pending" for r in s.shading)
    assert epoch_span(root, METRICS, "j") == (E0, E0 + 4)
    assert epoch_span(root, METRICS, "nobody") is None
