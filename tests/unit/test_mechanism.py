"""The mechanism a rescale takes, by its downtime predicted at the job's state size (autoscaler.rescale.mechanism)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from autoscaler.capacity.inventory import ClusterView, Inventory
from autoscaler.config.jobs import parse_jobs_each
from autoscaler.decide.mechanism_rule import choose_for_plan
from autoscaler.decide.plan import NOOP, RESCALE, OperatorPlan, ScalingPlan
from autoscaler.policy.restarts import measured_restart_time
from autoscaler.rescale.mechanism import (
    GIB,
    PRIOR_FILE,
    DowntimeLine,
    MeasuredRescale,
    choose_mechanism,
    downtime_lines,
    fit_line,
    load_prior,
    predicted_restart_s,
)
from autoscaler.store.parquet import write_epochs
from autoscaler.store.schemas import ACTIONS, STATE

HOUR = 3600.0


def test_the_benchmark_prior_covers_both_backends_and_mechanisms():
    prior = load_prior()
    assert set(prior) == {(b, m) for b in ("rocksdb", "forst") for m in ("savepoint-restart", "in-place")}
    body = json.loads(PRIOR_FILE.read_text())
    assert body["source"] == "benchmarks/results/state-size.json"
    # More state never makes a restart faster, and every line was fitted from at least 4 sizes.
    assert all(line.b >= 0 and line.n >= 4 for line in prior.values())


@pytest.mark.parametrize("backend", ["rocksdb", "forst"])
def test_the_rule_picks_by_state_size_on_the_benchmark_curves(backend):
    lines = downtime_lines([], backend, 3)
    assert {line.source.split()[0] for line in lines.values()} == {"benchmark"}
    small, large = 0.1 * GIB, 2 * GIB
    both = ("savepoint-restart", "in-place")
    kwargs = {"old_instances": 4, "new_instances": 8, "payback_horizon_s": HOUR, "max_downtime_s": None}
    # A cluster without the adaptive scheduler offers only savepoint-and-restart, at any size.
    assert choose_mechanism(lines, small, ("savepoint-restart",), **kwargs).mechanism == "savepoint-restart"
    # With both offered, the rule takes the shorter predicted downtime at each size.
    for size in (small, large):
        choice = choose_mechanism(lines, size, both, **kwargs)
        assert choice.mechanism == min(both, key=lambda m: lines[m].predict(size)), choice.reason
        assert f"{size / GIB:.2f} GiB of state" in choice.reason
    # A stated downtime limit between the two sizes' predictions: taken at 0.1 GiB, refused at 2 GiB.
    limit = (lines["savepoint-restart"].predict(small) + lines["savepoint-restart"].predict(large)) / 2
    at_small = choose_mechanism(lines, small, ("savepoint-restart",), **{**kwargs, "max_downtime_s": limit})
    at_large = choose_mechanism(lines, large, ("savepoint-restart",), **{**kwargs, "max_downtime_s": limit})
    assert at_small.mechanism == "savepoint-restart"
    assert at_large.mechanism is None and f"over the job's max_downtime {limit:g} s" in at_large.reason


def test_a_crossing_of_the_jobs_own_lines_changes_the_pick_with_the_state():
    # A job whose savepoint-and-restart is cheaper on small state (as an earlier bench_rescale series measured:
    # 0.4 s against 1.1 s in place) and grows faster: its own rescales put the crossing at 1 GiB.
    own = [MeasuredRescale("savepoint-restart", x * GIB, 0.4 + 3.0 * x) for x in (0.0, 0.5, 2.0)]
    own += [MeasuredRescale("in-place", x * GIB, 1.1 + 2.3 * x) for x in (0.0, 0.5, 2.0)]
    lines = downtime_lines(own, "rocksdb", 3)
    assert lines["savepoint-restart"].source == "job" and lines["savepoint-restart"].b == pytest.approx(3.0)
    both = ("savepoint-restart", "in-place")
    kwargs = {"old_instances": 2, "new_instances": 4, "payback_horizon_s": HOUR, "max_downtime_s": None}
    assert choose_mechanism(lines, 0.2 * GIB, both, **kwargs).mechanism == "savepoint-restart"
    assert choose_mechanism(lines, 1.5 * GIB, both, **kwargs).mechanism == "in-place"
    # Fewer than min_own rescales of a mechanism: its line is the benchmark's until there are enough.
    assert downtime_lines(own[:2], "rocksdb", 3)["savepoint-restart"].source.startswith("benchmark")


def test_a_scale_down_that_cannot_earn_its_downtime_back_is_not_made():
    lines = {"savepoint-restart": DowntimeLine(2.0, 300.0, 4, "job")}  # 5 min per GiB
    kwargs = {"payback_horizon_s": HOUR, "max_downtime_s": None}
    cheap = choose_mechanism(lines, 0.01 * GIB, ("savepoint-restart",), old_instances=8, new_instances=6, **kwargs)
    assert cheap.mechanism == "savepoint-restart"
    dear = choose_mechanism(lines, 10 * GIB, ("savepoint-restart",), old_instances=8, new_instances=6, **kwargs)
    assert dear.mechanism is None and "would save 7,200 instance-s over the 3600-s payback horizon" in dear.reason
    # A scale-up always pays: the job falls further behind without it.
    up = choose_mechanism(lines, 10 * GIB, ("savepoint-restart",), old_instances=6, new_instances=8, **kwargs)
    assert up.mechanism == "savepoint-restart"


def test_fit_line_never_falls_and_needs_two_sizes():
    assert fit_line([(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]) == pytest.approx((1.0, 2.0))
    assert fit_line([(1.0, 2.0), (1.0, 4.0)]) == (3.0, 0.0)
    assert fit_line([(0.0, 5.0), (2.0, 1.0)]) == (3.0, 0.0)


def _job(**extra):
    entry = {"name": "wc", "flink_job_name": "wc", "jar_id": "0b5ef4a1-2b3c-4d5e-8f90-123456789abc_x.jar", **extra}
    jobs, errors = parse_jobs_each({"jobs": [entry]}, "test")
    assert not errors
    return jobs[0]


def _plan(current: int, final: int) -> ScalingPlan:
    op = OperatorPlan("c", "Count", False, current, final, final, 1.0, 1.0, "DS2")
    return ScalingPlan("wc", 10, RESCALE, f"rescale Count {current}→{final}", [op])


def _state(store, epoch: int, size: float, backend: str = "rocksdb") -> None:
    row = {"job": "wc", "epoch": epoch, "operator_id": "c", "operator_name": "Count", "checkpoint_id": 1,
           "checkpoint_at": pa.scalar(0, pa.timestamp("us", tz="UTC")).as_py(), "state_bytes": int(size),
           "checkpointed_bytes": None, "state_backend": backend}  # fmt: skip
    write_epochs(store, STATE, "wc", pa.Table.from_pylist([row], schema=STATE.arrow_schema()).drop_columns(["epoch_block"]))


def test_the_decide_step_records_the_choice_and_its_reason(tmp_path):
    _state(tmp_path, 9, 2 * GIB)
    adaptive = ClusterView(Inventory(()), adaptive=True)
    plan = choose_for_plan(_plan(2, 4), _job(), tmp_path, adaptive)
    lines = downtime_lines([], "rocksdb", 3)
    assert plan.mechanism == min(lines, key=lambda m: lines[m].predict(2 * GIB))
    assert (
        plan.mechanism_reason.startswith(f"{plan.mechanism}: predicted downtime") and "2.00 GiB of state" in plan.mechanism_reason
    )
    assert f"Mechanism: {plan.mechanism_reason}" in plan.markdown()
    assert choose_for_plan(_plan(2, 4), _job(), tmp_path, None).mechanism == "savepoint-restart"
    named = choose_for_plan(_plan(2, 4), _job(mechanism="in-place"), tmp_path, None)
    assert named.mechanism == "in-place" and named.mechanism_reason == "in-place: the job's mechanism option"
    limited = choose_for_plan(_plan(2, 4), _job(rescale={"max_downtime": "1s"}), tmp_path, adaptive)
    assert limited.action == NOOP and limited.target == {} and limited.summary.startswith("not worth a rescale: none:")


def test_the_policys_restart_term_reads_the_same_prediction(tmp_path):
    base = {"job": "wc", "approved_by": None, "old_flink_job_id": None, "new_flink_job_id": None, "old_parallelism": "{}",
            "new_parallelism": "{}", "savepoint_path": None, "outcome": "succeeded", "message": "",
            "started_at": pa.scalar(0, pa.timestamp("us", tz="UTC")).as_py(), "finished_at": None}  # fmt: skip
    rows = [
        {**base, "epoch": e, "action_id": f"a{e}", "mechanism": "savepoint-restart", "downtime_s": d}
        for e, d in ((3, 1.0), (5, 3.0))
    ]
    write_epochs(tmp_path, ACTIONS, "wc", pa.Table.from_pylist(rows, schema=ACTIONS.arrow_schema()).drop_columns(["epoch_block"]))
    # No state recorded: the median of the measured downtimes, as before.
    assert measured_restart_time(tmp_path, "wc", 8) == 2.0
    # State recorded: the benchmark's line for the mechanism the job used, at its state now.
    _state(tmp_path, 7, 2 * GIB)
    expected = predicted_restart_s(downtime_lines([], "rocksdb", 3), 2 * GIB, ["savepoint-restart"])
    assert measured_restart_time(tmp_path, "wc", 8) == pytest.approx(expected)
