"""The utilization and rules kinds: pure functions of an epoch's windows and the epochs before it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.policy.base import EpochWindows, OperatorWindow, history_epochs, policy_for
from tests.helpers import topology

# source -> parse -> count, as the test job (Count the expensive one).
TOPO = topology([("src", "parse"), ("parse", "count")], {"src": 2, "parse": 1, "count": 1})
RATE = 20_000.0


def epoch(count_p: int, count_busy: float, parse_bp: float = 0.0, rate: float = RATE, pending: float | None = None,
          parse_busy: float = 0.2, count_capacity: float = 5_700.0) -> dict[str, OperatorWindow]:  # fmt: skip
    """One epoch of the chain: the source asks for ``rate``; Count gets what it can take."""
    taken = min(rate, count_p * count_capacity * count_busy)
    return {
        "src": OperatorWindow(2, 2, 0.0, rate, taken, backpressure_ratio_max=parse_bp, pending_records=pending),
        "parse": OperatorWindow(1, 1, taken / parse_busy, taken / parse_busy, taken, observed_processing_rate=taken,
                                busy_ratio_max=parse_busy, backpressure_ratio_max=parse_bp),
        "count": OperatorWindow(count_p, count_p, count_p * count_capacity, count_p * count_capacity, taken,
                                observed_processing_rate=taken, busy_ratio_max=count_busy),
    }  # fmt: skip


def targets(kind: str, windows, history=(), **options) -> dict[str, int]:
    decisions = policy_for(kind)(TOPO, windows, PolicyOptions(kind=kind, **options), None, history)
    return {d.operator_id: d.target_parallelism for d in decisions}


def reasons(kind: str, windows, history=(), **options) -> dict[str, str]:
    decisions = policy_for(kind)(TOPO, windows, PolicyOptions(kind=kind, **options), None, history)
    return {d.operator_id: d.reason for d in decisions}


# -- utilization ---------------------------------------------------------------------------------


def test_utilization_sizes_for_the_target_utilization():
    # Count takes 5,700 r/s at 100 % busy on 1 instance; 20,000 r/s at 0.7 needs 20000 / 0.7 / 5700 = 5.01 -> 6.
    assert targets("utilization", epoch(1, 1.0, parse_bp=0.8))["count"] == 6
    # DS2 on the same epoch sizes for 100 %: 20000 / 5700 = 3.5 -> 4.
    assert targets("ds2", epoch(1, 1.0, parse_bp=0.8))["count"] == 4


def test_utilization_inside_the_band_changes_nothing():
    # 6 instances at 20,000 r/s: 20000 / 34200 = 58 % busy, inside 0.7 +- 0.3.
    out = reasons("utilization", epoch(6, 20_000 / 34_200))
    assert targets("utilization", epoch(6, 20_000 / 34_200))["count"] == 6
    assert "within the utilization band" in out["count"]


def test_utilization_defers_a_scale_down_for_its_interval_then_takes_the_largest():
    options = {"scale_down_interval": 120.0, "interval": 30.0}  # 4 epochs of history
    low = epoch(8, 5_000 / 45_600, rate=5_000)  # 11 % busy: wants 2 (bounded by -40 % per step: 5)
    assert history_epochs(PolicyOptions(kind="utilization", **options)) == 4
    assert targets("utilization", low, [], **options)["count"] == 8
    assert "a scale-down to 5 waits: 0 of the 4 epochs" in reasons("utilization", low, [], **options)["count"]
    history = [EpochWindows(e, epoch(8, 6_000 / 45_600, rate=6_000)) for e in range(1, 5)]
    assert targets("utilization", low, history, **options)["count"] == 5  # max(-40 % floor 5, ...)
    gap = history[:2] + history[3:]  # one quarantined epoch: not recommended for the whole interval
    assert targets("utilization", low, gap, **options)["count"] == 8


def test_utilization_works_off_a_backlog_and_never_scales_down_under_one():
    big = epoch(4, 1.0, parse_bp=0.9, pending=36_000_000.0)  # 20,000 r/s more over the 30 min catch-up
    plain = epoch(4, 1.0, parse_bp=0.9)
    assert targets("utilization", big)["count"] > targets("utilization", plain)["count"]
    idle = epoch(8, 0.05, rate=2_000, pending=RATE * 400)  # backlog of 4,000 s of input: no scale-down trigger
    assert targets("utilization", idle, scale_down_interval=0.0)["count"] == 8
    assert "band widened to [0, 1]" in reasons("utilization", idle, scale_down_interval=0.0)["count"]


# -- the utilization kind against the Flink autoscaler's own behaviour, one test per difference fixed


def chain(parse_p: int, parse_busy: float, count_p: int, count_busy: float, rate: float, count_capacity: float = 5_700.0,
          pending: float | None = None) -> dict[str, OperatorWindow]:  # fmt: skip
    """The chain with both operators' parallelism and busy fraction set; every record reaches Count."""
    return {
        "src": OperatorWindow(2, 2, 0.0, rate, rate, pending_records=pending),
        "parse": OperatorWindow(parse_p, parse_p, rate / parse_busy, rate / parse_busy, rate, observed_processing_rate=rate,
                                busy_ratio_max=parse_busy),
        "count": OperatorWindow(count_p, count_p, count_p * count_capacity, count_p * count_capacity, rate,
                                observed_processing_rate=rate, busy_ratio_max=count_busy),
    }  # fmt: skip


def test_flink_keeps_the_restart_term_out_of_the_band():
    # Count at 1 instance takes 10,000 r/s and gets 9,000: 90 % busy, inside 0.7 + 0.3 without the restart
    # term (ScalingMetricEvaluator computes the thresholds with withRestart=false). With the restart's
    # 1,500 r/s added (9,000 * 300 s / 1,800 s) it would read as outside and scale up to 2.
    w = chain(1, 0.9 * 9_000 / 45_000, 1, 0.9, 9_000, count_capacity=10_000)
    assert targets("utilization", w)["count"] == 1
    assert "within the utilization band" in reasons("utilization", w)["count"]


def test_flink_aligns_to_key_groups_when_asked():
    # 20,000 r/s at 0.7 on 5,700 per instance: 6; 6 does not divide 128 key groups, 8 does (JobVertexScaler.scale).
    w = epoch(1, 1.0, parse_bp=0.8)
    assert targets("utilization", w, job_max_parallelism=128)["count"] == 6
    assert targets("utilization", w, job_max_parallelism=128, align_to_key_groups=True)["count"] == 8
    why = reasons("utilization", w, job_max_parallelism=128, align_to_key_groups=True)["count"]
    assert "aligned to 8 (128 key groups)" in why


def test_flink_caps_a_scale_up_by_its_max_factor():
    # scale-up.max-factor 1.0: at most 200 % of the current parallelism (1 -> 2, not 6).
    w = epoch(1, 1.0, parse_bp=0.8)
    assert targets("utilization", w, max_scale_up_factor=1.0)["count"] == 2
    assert "scale-up limited to +100%: 2" in reasons("utilization", w, max_scale_up_factor=1.0)["count"]


def test_flink_rounds_the_target_capacity_to_a_whole_rate():
    from autoscaler.policy.utilization import target_capacity

    # AutoScalerUtils.getTargetProcessingCapacity returns Math.round(...): 3,990.3 / 0.7 = 5,700.4 -> 5,700.
    options = PolicyOptions(kind="utilization", restart_time=0.0)
    assert target_capacity(3_990.28, 0.0, 0.7, options, restart=True) == 5_700.0
    w = chain(1, 0.1, 1, 3_990.28 / 5_700, 3_990.28)
    count = next(d for d in policy_for("utilization")(TOPO, w, options) if d.operator_id == "count")
    assert count.optimal_parallelism == 1.0  # exactly one instance of 5,700 r/s, not 1.00007 (-> 2)


def test_flink_judges_each_sources_backlog_against_its_own_input_and_widens_the_band():
    topo = topology([("small", "count"), ("big", "count")], {"count": 8})
    windows = {
        # 1,000 r/s owing 1,000,000 records: 1,000 s of its own input, though only 48 s of all input.
        "small": OperatorWindow(1, 1, 0.0, 1_000.0, 1_000.0, pending_records=1_000_000.0),
        "big": OperatorWindow(1, 1, 0.0, 20_000.0, 20_000.0, pending_records=0.0),
        "count": OperatorWindow(8, 8, 80_000.0, 80_000.0, 21_000.0, observed_processing_rate=21_000.0, busy_ratio_max=0.21),
    }
    options = PolicyOptions(kind="utilization", scale_down_interval=0.0)
    count = next(d for d in policy_for("utilization")(topo, windows, options) if d.operator_id == "count")
    assert count.target_parallelism == 8 and "SMALL owes 1,000,000 records (1,000 s of its input)" in count.reason
    windows["small"] = replace(windows["small"], pending_records=100_000.0)  # 100 s: not a backlog
    count = next(d for d in policy_for("utilization")(topo, windows, options) if d.operator_id == "count")
    assert count.target_parallelism < 8  # 21 % busy is under 0.7 - 0.3: the scale-down is taken


def test_flink_checks_the_band_over_the_deferred_targets():
    # Parse at 4 instances, 10 % busy, is outside the band, but its scale-down is deferred (1 h), so it
    # does not change now; Count (88 % busy, inside the band) would change 4 -> 6. Flink's
    # allChangedVerticesWithinUtilizationTarget sees only Count's change, inside the band: no scaling.
    w = chain(4, 0.1, 4, 20_000 / 22_800, 20_000)
    got = targets("utilization", w)
    assert got == {"src": 2, "parse": 4, "count": 4}
    assert "a scale-down to 3 waits" in reasons("utilization", w)["parse"]
    assert targets("utilization", w, scale_down_interval=0.0) == {"src": 2, "parse": 3, "count": 6}  # both change now


# -- rules ---------------------------------------------------------------------------------------


def test_rules_wait_for_n_back_pressured_epochs_then_step_the_bottleneck():
    pressed = epoch(1, 1.0, parse_bp=0.8)
    assert targets("rules", pressed)["count"] == 1
    history = [EpochWindows(e, pressed) for e in (1, 2)]
    out = targets("rules", pressed, history)
    assert out == {"src": 2, "parse": 1, "count": 3}  # Count is the busiest not back-pressured: +2
    assert "bottleneck COUNT" in reasons("rules", pressed, history)["count"]
    # A rescale in between restarts the count.
    assert targets("rules", pressed, [EpochWindows(1, pressed), EpochWindows(2, epoch(2, 1.0, 0.8))])["count"] == 1


def test_rules_scale_down_one_operator_after_n_quiet_epochs():
    quiet = epoch(8, 0.1, rate=4_000)
    history = [EpochWindows(e, quiet) for e in (1, 2)]
    out = targets("rules", quiet, history)
    assert out["count"] == 6 and out["parse"] == 1  # parse is at its minimum already
    assert targets("rules", quiet, history[:1])["count"] == 8


def test_kinds_skip_incomplete_and_warm_up_epochs():
    warm = epoch(1, 1.0, parse_bp=0.8)
    warm["count"] = OperatorWindow(1, 1, 5_700, 5_700, 5_700, warmup_instances=1)
    for kind in ("utilization", "rules"):
        decisions = policy_for(kind)(TOPO, warm, PolicyOptions(kind=kind))
        assert {d.status for d in decisions} == {"warmup"}


def test_unknown_kind_and_bad_kind_options_are_named():
    with pytest.raises(InputError, match="policy kind"):
        PolicyOptions(kind="magic")
    with pytest.raises(InputError, match="target-utilization"):
        PolicyOptions(kind="utilization", target_utilization=0)
    with pytest.raises(InputError, match="rules-epochs"):
        PolicyOptions(kind="rules", rules_epochs=0)
