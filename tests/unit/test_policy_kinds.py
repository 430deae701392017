"""The utilization and rules kinds: pure functions of an epoch's windows and the epochs before it."""

from __future__ import annotations

import pytest

from autoscaler.config.options import PolicyOptions
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
    assert "deferred" in reasons("utilization", low, [], **options)["count"]
    history = [EpochWindows(e, epoch(8, 6_000 / 45_600, rate=6_000)) for e in range(1, 5)]
    assert targets("utilization", low, history, **options)["count"] == 5  # max(-40 % floor 5, ...)
    gap = history[:2] + history[3:]  # one quarantined epoch: not recommended for the whole interval
    assert targets("utilization", low, gap, **options)["count"] == 8


def test_utilization_works_off_a_backlog_and_never_scales_down_under_one():
    big = epoch(4, 1.0, parse_bp=0.9, pending=36_000_000.0)  # 20,000 r/s more over the 30 min catch-up
    plain = epoch(4, 1.0, parse_bp=0.9)
    assert targets("utilization", big)["count"] > targets("utilization", plain)["count"]
    idle = epoch(8, 0.05, rate=2_000, pending=RATE * 400)  # backlog of 400 s of input: no scale-down
    assert targets("utilization", idle, scale_down_interval=0.0)["count"] == 8
    assert "no scale-down while the backlog" in reasons("utilization", idle, scale_down_interval=0.0)["count"]


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
