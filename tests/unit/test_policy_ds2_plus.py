"""The ds2_plus kind: a steady size from the job's own rises, drain capacity, and DS2's sizing with skew,
scalability and effectiveness, each shown alone.

The arithmetic below uses a 60-s interval, a 7-s decision latency and a 4-s restart: a change owes 11 s of
input and has 120 - 11 = 109 s to drain it (the catch-up is two intervals).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.policy.base import EpochWindows, OperatorWindow, history_epochs, policy_for
from autoscaler.policy.ds2_plus import Clock, rises, steady_rise
from autoscaler.policy.signals import damped_holt, hot_share, scalability, typical_change
from tests.helpers import topology

TOPO = topology([("src", "count")], {"src": 2, "count": 1})
CAPACITY = 5_700.0  # one Count instance, records/s (175 us a record)
RESTART = 11 / 109  # the input a change owes, per record/s of arrival, in records/s


def chain(count_p: int, rate: float, *, pending: float = 0.0, capacity: float | None = None, hot: float = 0.0,
          warm: bool = False) -> dict[str, OperatorWindow]:  # fmt: skip
    """Source -> Count. ``capacity``: Count's total capacity (default linear); ``hot``: one key's share."""
    total = count_p * CAPACITY if capacity is None else capacity
    taken = min(rate, total)
    busiest = taken * (hot + (1 - hot) / count_p)
    return {
        "src": OperatorWindow(2, 2, 0.0, rate, taken, pending_records=pending),
        "count": OperatorWindow(count_p, count_p, total, total, taken, observed_processing_rate=taken,
                                observed_processing_rate_max=busiest, busy_ratio_max=min(1.0, taken / total),
                                warmup_instances=count_p if warm else 0),
    }  # fmt: skip


def options(**kw) -> PolicyOptions:
    kw = {"interval": 60.0, "restart_time": 4.0, "decision_latency": 7.0} | kw
    return PolicyOptions(kind="ds2_plus", **kw)


def decide(windows, history=(), epoch=None, **kw) -> dict[str, tuple[int, str]]:
    decisions = policy_for("ds2_plus")(TOPO, windows, options(**kw), None, history, epoch)
    return {d.operator_id: (d.target_parallelism, d.reason) for d in decisions}


def count(windows, history=(), epoch=None, **kw) -> int:
    return decide(windows, history, epoch, **kw)["count"][0]


def flat(count_p: int, rate: float, epochs: range, **kw) -> list[EpochWindows]:
    return [EpochWindows(e, chain(count_p, rate, **kw)) for e in epochs]


KNOWN = range(12)  # flat epochs enough to know the rises: 10 (1 / (1 - 0.9)) over a 3-epoch horizon


def test_a_new_job_is_sized_with_the_prior_rise_and_the_restart_it_owes():
    # 20,000 r/s, no history: the prior rise (1 / 0.7 - 1) and 11 s of input over 109 s:
    # 20,000 * 1.4286 + 2,018 = 30,590 r/s on 5,700 each -> 6 (DS2: 4).
    assert decide(chain(1, 20_000))["count"][0] == 6
    assert policy_for("ds2")(TOPO, chain(1, 20_000), PolicyOptions())[1].target_parallelism == 4
    assert "the rest taken at the prior 43%" in decide(chain(1, 20_000))["src"][1]


def test_a_known_flat_load_is_sized_for_the_arrival_and_the_restart_only():
    # 12 flat epochs: every rise is 0, the steady size is the arrival. 22,018 r/s -> 4 (22,800).
    assert count(chain(1, 20_000), flat(1, 20_000, KNOWN), epoch=12) == 4
    assert steady_rise([20_000.0] * 13, 3, options()) == (0.0, True)


def test_the_steady_size_carries_the_jobs_own_rises_over_the_reaction_horizon():
    # A sway: each third epoch 10 % higher. The 90 % quantile of the rises over 3 epochs is 10 %.
    series = [22_000.0 if e % 3 == 0 else 20_000.0 for e in range(30)]
    assert max(rises(series, 3)) == pytest.approx(0.1) and steady_rise(series, 3, options())[0] == pytest.approx(0.1)
    # A step within the hour's 60 epochs is a surprise (3 rises of 50 % of 57, under 10 %): it is not carried.
    step = [20_000.0] * 30 + [30_000.0] * 30
    assert steady_rise(step, 3, options())[0] == 0.0


def test_a_backlog_is_drained_by_the_deadline():
    # 1,090,000 owed and 220,000 more during the change, over 109 s: 12,018 r/s on top of 20,000 -> 6.
    target, why = decide(chain(1, 20_000, pending=1_090_000), flat(1, 20_000, KNOWN), epoch=12)["count"]
    assert target == 6 and "scale up to 6" in why


def test_the_current_size_is_kept_while_it_drains_by_the_deadline_and_does_not_shrink():
    # 6 take 34,200: 20,000 + 1,000,000 / 120 s = 28,333 without a restart. Kept; and no scale-down while owed.
    target, why = decide(chain(6, 20_000, pending=1_000_000), flat(6, 20_000, KNOWN), epoch=12)["count"]
    assert target == 6 and "no scale-down while SRC owe input" in why


def test_drain_capacity_is_released_as_soon_as_the_backlog_is_drained():
    # Scaled up 1 -> 6 at epoch 12 for a backlog; epoch 13 was the warm-up; at epoch 14 the backlog is gone.
    # The steady size then and now is 20,000 (+ the restart): 4, at once, not after the 5-min wait.
    history = [*flat(1, 20_000, KNOWN), EpochWindows(12, chain(1, 20_000, pending=1_090_000)),
               EpochWindows(13, chain(6, 20_000, warm=True))]  # fmt: skip
    target, why = decide(chain(6, 20_000), history, epoch=14)["count"]
    assert target == 4 and "drain capacity of the scale-up decided at epoch 12 is released" in why


def test_a_load_that_fell_waits_the_scale_down_interval():
    # 30,000 for 20 epochs at 6, then 15,000 from epoch 20: 16,514 r/s with a restart -> 3, after 5 minutes.
    history = [*flat(6, 30_000, range(20)), *flat(6, 15_000, range(20, 26))]
    waiting = decide(chain(6, 15_000), history[:23], epoch=23)["count"]
    assert waiting[0] == 6 and "waits: the load of epoch 18 needed 6" in waiting[1]
    target, why = decide(chain(6, 15_000), history, epoch=26)["count"]
    assert target == 3 and "each epoch of it proposing less" in why


def test_a_scale_down_waits_until_the_rises_are_known():
    # Three epochs at 8 instances: the prior still weighs in; what it would shed may be needed.
    target, why = decide(chain(8, 12_000), flat(8, 12_000, range(3)), epoch=3)["count"]
    assert target == 8 and "waits until SRC's rises are measured" in why


def test_the_kind_reads_its_history_window_and_drains_in_two_intervals():
    assert history_epochs(options()) == 60
    assert options().effective("catch_up_duration") == 120.0
    assert options(catch_up_duration=300.0).effective("catch_up_duration") == 300.0


def test_the_own_deadline_is_the_first_decided_epoch_after_the_change_takes_effect():
    # 7 s + 4 s < one 60-s interval: the epoch spanning the restart is a warm-up, the next one ends drained.
    assert Clock.of(options()).catch_up == 120.0 and Clock.of(options()).drain == 109.0
    # At a 10-s interval the change takes 11 s: it ends in the second epoch, and the third is the first decided.
    assert Clock.of(options(interval=10.0)).catch_up == 30.0 and Clock.of(options(interval=10.0)).drain == 19.0


def test_a_set_deadline_no_change_can_meet_is_refused_or_stretched_and_said():
    with pytest.raises(InputError, match=r"--catch-up-duration.*10 s is not longer than what a change takes"):
        options(catch_up_duration=10.0).check_catch_up()
    # A measured restart that outgrows a set deadline: the kind's own deadline, and the reason says so.
    clock = Clock.of(replace(options(catch_up_duration=20.0), restart_time=30.0))
    assert clock.stretched and clock.catch_up == 120.0 and clock.drain == 83.0
    assert "the set catch-up deadline passes before a change takes effect" in clock.words()


def test_a_hot_key_is_sized_by_the_busiest_instance():
    # 13,000 r/s, one key 30 % of it. DS2 sums the instances: 3 take 17,100. But the busiest instance gets
    # 0.3 + 0.7 / p of the input: it keeps up only from p = 6 (13,000 * 0.4167 = 5,417 <= 5,700).
    w = chain(3, 13_000, hot=0.3)
    assert abs(hot_share(w["count"]) - 0.3) < 1e-9
    assert policy_for("ds2")(TOPO, w, PolicyOptions())[1].target_parallelism == 3
    target, why = decide(w, flat(3, 13_000, KNOWN, hot=0.3), epoch=12, restart_time=0.0, decision_latency=0.0)["count"]
    assert target == 6 and "one key sends 30% of the input to the busiest instance" in why


def test_a_hot_key_no_parallelism_can_help_is_not_chased():
    # One key 60 % of 13,000 r/s: 7,800 r/s to one instance of 5,700. No p helps; stop where one more adds < 5 %.
    target, why = decide(chain(3, 13_000, hot=0.6), restart_time=0.0)["count"]
    assert target < 8 and "no parallelism takes" in why


def test_even_key_groups_are_not_a_hot_key():
    # 43/43/42 of 128 key groups on 3 instances: the busiest has 33.6 %, not a hot key.
    w = chain(3, 12_000)["count"]
    assert hot_share(replace(w, observed_processing_rate_max=12_000 * 43 / 128)) == 0.0


def test_observed_scalability_gives_a_sublinear_operator_its_extra_instance():
    # Count measured at 3, 4 and 5 instances, each further instance adding 0.8 of one (alpha 0.8): 5 take
    # 27,623 r/s, 5,525 each. For 33,000 r/s DS2, linear from 5,525 each, says 5.97 -> 6; the fit says 6
    # take 32,884 r/s, not 33,147: 7.
    def at(p: int) -> float:
        return 3 * CAPACITY * (1 + 0.8 * (p - 1)) / (1 + 0.8 * 2)

    history = [EpochWindows(e, chain(p, 20_000, capacity=at(p))) for e, p in enumerate((3, 3, 4, 4, 5), start=1)]
    fit = scalability("count", history)
    assert abs(fit.alpha - 0.8) < 1e-6 and fit.points == 5
    now = chain(5, 33_000, capacity=at(5))
    linear = policy_for("ds2")(TOPO, now, PolicyOptions())[1].target_parallelism
    fitted = count(now, history, epoch=6, restart_time=0.0)
    assert fitted > linear
    assert "observed scalability 0.80" in decide(now, history, epoch=6)["count"][1]


def test_a_scale_up_that_bought_nothing_blocks_the_next_until_the_load_moves():
    # CPU-bound Count: 3 instances take 18,400, 4 take 18,900 (promised 24,500): 8 % of the promise.
    history = [EpochWindows(1, chain(3, 22_000, capacity=18_400)), EpochWindows(2, chain(4, 22_000, capacity=18_900))]
    now = chain(4, 22_000, capacity=18_900)
    target, why = decide(now, history, epoch=3, restart_time=0.0)["count"]
    assert target == 4 and "bought 8% of the capacity it promised" in why
    findings = {d.operator_id: d.findings for d in policy_for("ds2_plus")(TOPO, now, options(restart_time=0.0), None, history, 3)}
    assert findings == {"src": None, "count": "ineffective-scale-up"}
    # The load moves 50 %, beyond the steady rise (the prior's 43 % here): the block lifts.
    assert count(chain(4, 33_000, capacity=18_900), history, epoch=3, restart_time=0.0) > 4


def test_a_ramp_is_met_ahead():
    # Flat at 12,000 for 27 epochs, then 14,000 and now 16,000: too few rises for the quantile to carry, but two
    # rises in a row above the typical move (none) are a trend, sized for where it heads over a change's horizon.
    history = [*flat(4, 12_000, range(27)), EpochWindows(27, chain(4, 14_000))]
    assert damped_holt([12_000, 12_000, 14_000, 16_000], 131 / 60) > 18_000
    ramp = decide(chain(3, 16_000), history, epoch=28)
    assert "heading to" in ramp["src"][1]
    assert ramp["count"][0] > count(chain(3, 16_000), flat(3, 16_000, range(28)), epoch=28)


def test_warm_up_and_incomplete_epochs_decide_nothing():
    target, why = decide(chain(4, 20_000, warm=True))["count"]
    assert target == 4 and why.startswith("warm-up window")


def test_the_restart_time_is_the_median_of_the_measured_downtimes(tmp_path):
    from autoscaler.policy.restarts import measured_restart_time
    from autoscaler.record.audit import record_action
    from autoscaler.store.schemas import ACTIONS

    assert measured_restart_time(tmp_path, "j", None) is None
    blank = {c.name: None for c in ACTIONS.columns} | {"mechanism": "savepoint-restart", "old_parallelism": "{}",
             "new_parallelism": "{}", "message": "", "started_at": datetime(2026, 11, 25, tzinfo=UTC)}  # fmt: skip
    for epoch, downtime in ((3, 4.0), (9, 3.0), (15, None), (21, 12.0)):
        record_action(tmp_path, blank | {"job": "j", "epoch": epoch, "action_id": f"a{epoch}", "outcome": "succeeded",
                                         "downtime_s": downtime})  # fmt: skip
    assert measured_restart_time(tmp_path, "j", None) == 4.0  # median of 4, 3 and 12
    assert measured_restart_time(tmp_path, "j", 10) == 3.5  # only the rescales before epoch 10


def test_a_step_is_not_read_as_a_ramp():
    # Flat at 12,000, then one jump to 22,000: a step, not a trend heading on.
    history = flat(8, 12_000, range(12))
    assert "heading to" not in decide(chain(4, 22_000), history, epoch=12)["src"][1]


def test_the_typical_change_ignores_steps_and_spikes_and_reads_a_sway():
    assert typical_change([10.0, 10.0, 20.0, 20.0, 20.0]) == 0.0
    assert typical_change([10.0, 12.0, 10.0, 12.0]) == 2.0
    assert typical_change([10.0, 12.0]) == 0.0  # too few changes


def test_after_the_wait_a_fallen_load_goes_to_todays_size_or_the_waits_largest_as_set():
    # 30,000 at 6 for 20 epochs, then 20,000, 19,000, ... 15,000 through the 5-min wait. Today's 15,000 needs 3;
    # the wait's first epoch, 19,000 with a restart, needs 4. ds2_plus's own choice is today's (its steady size
    # carries the job's rises); scale_down_to: largest, the utilization kind's, takes 4.
    falling = [20_000, 19_000, 18_000, 17_000, 16_000, 15_000]
    history = [*flat(6, 30_000, range(20)), *(EpochWindows(20 + k, chain(6, r)) for k, r in enumerate(falling))]
    target, why = decide(chain(6, 15_000), history, epoch=26)["count"]
    assert target == 3 and "each epoch of it proposing less: today's size, 3" in why
    target, why = decide(chain(6, 15_000), history, epoch=26, scale_down_to="largest")["count"]
    assert target == 4 and "the largest of the wait's proposals and today's, 4" in why


def test_the_shared_wait_needs_every_epoch_of_it_at_the_size_and_proposing_less():
    from autoscaler.policy.base import PastProposal, scale_down_wait

    past = [PastProposal(e, 6, p) for e, p in zip(range(5, 10), (4, 3, 5, 3, 3), strict=True)]
    assert scale_down_wait(6, 3, past, 10, 5, 300.0)[0] == 5  # the largest of the wait's
    assert scale_down_wait(6, 3, past, 10, 5, 300.0, largest=False)[0] == 3  # today's
    gap = scale_down_wait(6, 3, past[:2] + past[3:], 10, 5, 300.0)  # epoch 7 quarantined
    assert gap == (6, "; a scale-down to 3 waits: 2 of the 5 epochs of scale_down_interval (300 s) ran at 6")
    rescaled = [*past[:4], PastProposal(9, 8, 3)]
    assert "0 of the 5 epochs" in scale_down_wait(6, 3, rescaled, 10, 5, 300.0)[1]
    needing = [*past[:2], PastProposal(7, 6, 6), *past[3:]]
    assert scale_down_wait(6, 3, needing, 10, 5, 300.0) == (6, "; a scale-down to 3 waits: the load of epoch 7 needed 6")
    assert scale_down_wait(6, 3, [], 10, 0, 0.0)[0] == 3  # no wait
    assert scale_down_wait(6, 7, past, 10, 5, 300.0) == (7, "")  # not a scale-down


def test_an_arrival_only_bounded_is_not_a_rise_the_steady_size_learns_from():
    # make demo, 2026-12-04: a Kafka reader reports no pendingRecords before its first fetch, so the job's first window
    # knew only what the blocked source emitted (5,696 r/s of 20,000). Read as a value, the next epochs' 20,000 was a
    # rise of 250 % that the steady size then carried (1.64-1.81x); read as the bound it is, it is no rise at all.
    from autoscaler.policy.base import arrival_measured

    def src_window(rate: float, basis: str) -> dict[str, OperatorWindow]:
        w = chain(4, rate)
        return {**w, "src": replace(w["src"], rate_basis=basis)}

    bounded_first = [EpochWindows(0, src_window(5_696, "emitted")),
                     *(EpochWindows(e, src_window(20_000, "emitted+lag")) for e in range(1, 4))]  # fmt: skip
    assert not arrival_measured(bounded_first[0].windows["src"]) and arrival_measured(bounded_first[1].windows["src"])
    assert not arrival_measured(replace(bounded_first[1].windows["src"], rate_basis="emitted+lag/emitted+end-lag"))
    now = src_window(20_000, "emitted+lag")
    # One rise measured, of 0 (three flat epochs after the bound), leaning less on the prior: 1.343x, Count 5.
    said = decide(now, bounded_first, epoch=4)
    assert "steady 1.343x to keep a size, 1.386x for a new one: 1 of 10 rises" in said["src"][1] and said["count"][0] == 5
    # Had the bound been a value, its 250 % would be one of two rises measured: 1.903x, and Count 7 (the demo's).
    measured_first = [EpochWindows(0, src_window(5_696, "emitted+lag")), *bounded_first[1:]]
    taken = decide(now, measured_first, epoch=4)
    assert "steady 1.903x to keep a size, 1.795x for a new one: 2 of 10 rises" in taken["src"][1] and taken["count"][0] == 7
