"""The ds2_plus kind: DS2's sizing plus backlog, skew, scalability, effectiveness and time, each shown alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.base import EpochWindows, OperatorWindow, history_epochs, policy_for
from autoscaler.policy.signals import damped_holt, hot_share, scalability, settled, typical_change
from tests.helpers import topology

TOPO = topology([("src", "count")], {"src": 2, "count": 1})
CAPACITY = 5_700.0  # one Count instance, records/s (175 us a record)


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


def decide(windows, history=(), epoch=None, **options) -> dict[str, tuple[int, str]]:
    # The mechanisms' arithmetic below is in 60-s catch-ups; the kind's own default has its own test.
    options.setdefault("catch_up_duration", 60.0)
    opts = PolicyOptions(kind="ds2_plus", interval=30.0, **options)
    decisions = policy_for("ds2_plus")(TOPO, windows, opts, None, history, epoch)
    return {d.operator_id: (d.target_parallelism, d.reason) for d in decisions}


def count(windows, history=(), epoch=None, **options) -> int:
    return decide(windows, history, epoch, **options)["count"][0]


def steady(count_p: int, rate: float, epochs: range, **kw) -> list[EpochWindows]:
    return [EpochWindows(e, chain(count_p, rate, **kw)) for e in epochs]


def seen(windows: dict[str, OperatorWindow]) -> dict:
    """Arguments that decide ``windows`` as epoch 3 of a load flat for three epochs before it: its sway is
    known (none), so a new size leaves no cold-start room (``test_a_new_jobs_first_size_leaves_room``)."""
    src = windows["src"]
    return {"history": steady(windows["count"].parallelism, src.true_output_rate, range(3)), "epoch": 3}


def test_a_linear_step_is_sized_as_ds2_sizes_it_plus_the_restart_input():
    # 20,000 r/s on 5,700 per instance: DS2 says 3.5 -> 4; the restart's 10 s of input over a 60 s catch-up
    # adds 3,333 r/s: 23,333 / 5,700 = 4.09 -> 5 (the backlog a restart leaves is worked off too).
    assert count(chain(1, 20_000), **seen(chain(1, 20_000)), restart_time=0.0) == 4
    assert count(chain(1, 20_000), **seen(chain(1, 20_000))) == 5
    assert policy_for("ds2")(TOPO, chain(1, 20_000), PolicyOptions())[1].target_parallelism == 4


def test_a_backlog_is_worked_off_within_the_catch_up():
    # 600,000 records owed over 60 s: 10,000 r/s more than the 20,000 arriving.
    assert count(chain(1, 20_000, pending=600_000), **seen(chain(1, 20_000)), restart_time=0.0) == 6
    assert "backlog 600,000 records / 60 s catch-up = 10,000 r/s" in decide(chain(1, 20_000, pending=600_000))["src"][1]


def test_no_scale_up_for_the_restart_input_alone():
    # 4 instances take 22,800 r/s: enough for 20,000 now, not with a restart's 3,333 more. Keep 4.
    target, why = decide(chain(4, 20_000))["count"]
    assert target == 4 and "no scale-up for the restart alone" in why


def test_a_drain_on_track_is_not_rescaled_again():
    # 6 instances (34,200 r/s) for 20,000 arriving and 1,000,000 owed: drained in 70 s. A new size would
    # have to drain it in 60 s (36,667 r/s: 7), but the current one is kept while it drains it within 90 s.
    decided = decide(chain(6, 20_000, pending=1_000_000))
    assert decided["count"][0] == 6 and "kept while it drains it within 90 s" in decided["src"][1]
    # Beyond 90 s (1,500,000 owed: 106 s), it is sized to drain within the catch-up again.
    assert count(chain(6, 20_000, pending=1_500_000), **seen(chain(6, 20_000))) == 9


def test_no_scale_down_while_a_backlog_drains():
    # 8 instances for 10,000 r/s would go to 3, but the sources owe 2 s of input.
    history = steady(8, 10_000, range(1, 21))
    assert count(chain(8, 10_000), history, epoch=21) == 3
    target, why = decide(chain(8, 10_000, pending=20_000), history, epoch=21)["count"]
    assert target == 8 and "no scale-down while a backlog drains" in why


def test_the_kind_works_off_a_backlog_in_45_s_by_default():
    # The lab's 90-s drain target, less the epoch that sees the backlog and the restart (2026-11-26: drains
    # of 90-92 s with 60 s). 600,000 owed over 45 s: 13,333 r/s more than the 20,000 arriving -> 6 (5.85).
    assert PolicyOptions(kind="ds2_plus").effective("catch_up_duration") == 45.0
    assert "/ 45 s catch-up = 13,333 r/s" in decide(chain(1, 20_000, pending=600_000), catch_up_duration=None)["src"][1]


def test_a_scale_down_waits_its_interval_then_takes_the_largest_proposal():
    # A flat history is a settled load: both waits the same here, for the mechanism alone.
    options = {"scale_down_interval": 120.0, "settled_scale_down_interval": 120.0}  # 4 epochs before this one
    assert history_epochs(PolicyOptions(kind="ds2_plus", interval=30.0, **options)) == 20  # the 10-min history is longer
    low = chain(8, 10_000)  # wants 3
    target, why = decide(low, steady(8, 10_000, range(18, 20)), epoch=20, **options)["count"]
    assert target == 8 and "scale-down waits: proposed for 3 epochs at 8, needs 5" in why
    history = steady(8, 15_000, range(16, 18)) + steady(8, 10_000, range(18, 20))  # 15,000 wants 4
    assert count(low, history, epoch=20, **options) == 4  # the largest of the window
    # An epoch of the window missing (quarantined, never collected): it did not propose the scale-down.
    gap = [e for e in history if e.epoch != 17]
    assert count(low, gap, epoch=20, **options) == 8
    # An epoch proposing no scale-down (46,000 r/s needs all 8) starts the wait again.
    busy = [EpochWindows(17, chain(8, 44_000)) if e.epoch == 17 else e for e in history]
    assert count(low, busy, epoch=20, **options) == 8


def test_a_settled_load_scales_down_after_a_minute_a_moving_one_after_its_interval():
    low = chain(8, 10_000)  # 8 take 45,600 r/s; 10,000 wants 3
    # Off by default: every load waits scale_down_interval (5 min).
    assert PolicyOptions(kind="ds2_plus").settled_scale_down_interval is None
    target, why = decide(low, steady(8, 10_000, range(17, 20)), epoch=20)["count"]
    assert target == 8 and "needs 11 (scale_down_interval 300 s)" in why
    decide_at = partial(decide, settled_scale_down_interval=60.0)
    # Settled: flat for 3 epochs, the last two proposing 3 at 8 -> down after one minute (step-up-down's fall).
    target, why = decide_at(low, steady(8, 10_000, range(17, 20)), epoch=20)["count"]
    assert target == 3 and "proposed for 3 epochs at 8 (the load moves under 5% an epoch)" in why
    # Two changes tell a step's end from a sine's crest no better than one: the long wait.
    target, why = decide_at(low, steady(8, 10_000, range(18, 20)), epoch=20)["count"]
    assert target == 8 and "needs 11 (the load moves, or fell from its high)" in why
    # Moving: 10,000 and 12,500 in turn (25 % an epoch) wait the 5 min of scale_down_interval.
    # (From epoch 0: the window's first epochs have seen the sway too, none sizes with the cold-start room.)
    swaying = [EpochWindows(e, chain(8, 12_500 if e % 2 else 10_000)) for e in range(20)]
    target, why = decide_at(low, swaying[15:], epoch=20)["count"]
    assert target == 8 and "proposed for 6 epochs at 8, needs 11 (the load moves, or fell from its high)" in why
    # After 5 min: down to the largest of the window (12,500 + a 2,500 sway + a restart's 2,083: 3 take 17,100).
    assert decide_at(low, swaying, epoch=20)["count"][0] == 3
    # Settled but fallen: a burst's end (36,000 for one epoch, 12,000 after it) is not a drain's surplus.
    burst = [EpochWindows(15, chain(3, 12_000)), EpochWindows(16, chain(3, 36_000)), *steady(8, 12_000, range(17, 20))]
    target, why = decide_at(chain(8, 12_000), burst, epoch=20)["count"]
    assert target == 8 and "needs 11 (the load moves, or fell from its high)" in why
    # The same minute after a drain, the load where it was: the surplus goes.
    drained = [EpochWindows(15, chain(3, 12_000, pending=500_000)), *steady(8, 12_000, range(16, 20))]
    assert decide_at(chain(8, 12_000), drained, epoch=20)["count"][0] == 3


def test_a_hot_key_is_sized_by_the_busiest_instance():
    # 13,000 r/s, one key 30 % of it. DS2 sums the instances: 3 take 17,100. But the busiest instance gets
    # 0.3 + 0.7 / p of the input: it keeps up only from p = 6 (13,000 * 0.4167 = 5,417 <= 5,700).
    w = chain(3, 13_000, hot=0.3)
    assert abs(hot_share(w["count"]) - 0.3) < 1e-9
    assert policy_for("ds2")(TOPO, w, PolicyOptions())[1].target_parallelism == 3
    target, why = decide(w, restart_time=0.0)["count"]
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
    # The load moves 30 %: the block lifts.
    assert count(chain(4, 28_600, capacity=18_900), history, epoch=3, restart_time=0.0) > 4


def test_a_ramp_is_met_ahead():
    # The arrival rose 2,000 r/s an epoch for 5 epochs, to 22,000 now: 4 instances take 22,800, DS2 keeps 4;
    # sized for where the ramp is heading over the next epoch, 5.
    history = [EpochWindows(e, chain(8, 12_000 + 2_000 * e)) for e in range(0, 5)]
    now = chain(4, 22_000)
    assert damped_holt([12_000, 14_000, 16_000, 18_000, 20_000, 22_000], 1.0) > 23_000
    target = count(now, history, epoch=5, restart_time=0.0)
    assert target > count(now, restart_time=0.0) and "heading to" in decide(now, history, epoch=5)["src"][1]


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
    # Flat at 12,000, then one jump to 22,000: a step. Sized for 22,000 (4 take 22,800), not a trend's 25,000+.
    history = [EpochWindows(e, chain(8, 12_000)) for e in range(0, 5)]
    assert "heading to" not in decide(chain(4, 22_000), history, epoch=5, restart_time=0.0)["src"][1]
    assert count(chain(4, 22_000), history, epoch=5, restart_time=0.0) == 4


def test_the_typical_change_ignores_steps_and_spikes_and_reads_a_sway():
    assert typical_change([20_000, 20_000, 30_000, 30_000, 30_000, 10_000, 10_000]) == 0  # two steps
    assert typical_change([12_000, 12_000, 36_000, 12_000, 12_000, 12_000]) == 0  # a spike
    assert typical_change([18_000, 21_000, 24_000, 21_500, 18_000]) == 3_000  # a sway: changes 3,000/3,000/2,500/3,500
    assert typical_change([18_000, 21_000, 24_000]) == 0  # two changes tell nothing
    assert settled([20_000, 30_000, 30_000, 30_000, 10_000, 10_000], 0.05)  # steps: settled between them
    assert not settled([18_000, 21_000, 24_000, 21_500, 18_000], 0.05)  # a sway of 3,000 on 18,000
    assert not settled([10_000, 10_000, 10_000], 0.05)  # two changes: unknown


def test_a_new_size_leaves_room_for_the_sway_but_the_sway_alone_rescales_nothing():
    # The load sways 4,000 r/s an epoch around 16,000 (not rising two epochs in a row at the end).
    swaying = [16_000, 20_000, 16_000, 12_000, 16_000, 20_000, 16_000]
    history = [EpochWindows(e, chain(5, rate)) for e, rate in enumerate(swaying)]
    # 3 instances take 17,100 r/s: they take 17,000 now, so they are kept, sway or not.
    assert count(chain(3, 17_000), history, epoch=7, restart_time=0.0) == 3
    # 2 do not: the new size is made for 17,000 + 4,000 = 21,000 -> 4 (3.68), not DS2's 3 (2.98).
    target, _ = decide(chain(2, 17_000), history, epoch=7, restart_time=0.0)["count"]
    assert target == 4 and count(chain(2, 17_000), **seen(chain(2, 17_000)), restart_time=0.0) == 3
    assert "moving 4,000 r/s an epoch" in decide(chain(2, 17_000), history, epoch=7, restart_time=0.0)["src"][1]
    # A flat history leaves no room: DS2's size.
    flat = [EpochWindows(e, chain(5, 17_000)) for e in range(7)]
    assert count(chain(2, 17_000), flat, epoch=7, restart_time=0.0) == 3


def test_a_step_after_a_rise_within_the_noise_is_not_read_as_a_ramp():
    # 20,005 -> 20,070 (+0.3 %, noise) -> 30,000: a step, not a trend heading past 35,000 (step-up-down, 2026-11-26).
    history = [EpochWindows(0, chain(6, 20_005)), EpochWindows(1, chain(6, 20_070))]
    assert "heading to" not in decide(chain(6, 30_000), history, epoch=2, restart_time=0.0)["src"][1]
    assert count(chain(6, 30_000), history, epoch=2, restart_time=0.0) == 6  # 6 take 34,200 r/s
    # Two real rises in a row are a trend.
    rising = [EpochWindows(0, chain(6, 18_000)), EpochWindows(1, chain(6, 24_000))]
    assert "heading to" in decide(chain(6, 30_000), rising, epoch=2, restart_time=0.0)["src"][1]


def test_a_new_jobs_first_size_leaves_room_until_its_sway_is_known():
    # 20,000 r/s and no history: DS2's size with the restart's input is 5 (23,333 r/s, test above). Whether
    # the load is a step or the first window of a sine is unknown, so a new size takes the arrival at most
    # 62.5 % busy: 32,000 r/s -> 6.
    decided = decide(chain(1, 20_000))
    assert decided["count"][0] == 6
    words = "0 epoch-to-epoch changes seen (too few to read its sway: a new size takes it at most 62.5% busy)"
    assert words in decided["src"][1]
    # The same with two changes seen; from three on, the flat history reads as no sway: DS2's size.
    assert count(chain(1, 20_000), steady(1, 20_000, range(1, 3)), epoch=3) == 6
    assert count(chain(1, 20_000), steady(1, 20_000, range(0, 3)), epoch=3) == 5
    # A backlog's catch-up that asks for more is sized as before: 20,000 + 900,000 / 60 s + 3,333 -> 7 (6.7).
    assert count(chain(1, 20_000, pending=900_000)) == 7
    # The room is for a new size only: a size that takes the load without a restart is kept (4 take 22,800).
    assert count(chain(4, 20_000)) == 4
    # A trend sizes ahead instead: rising 12,000 -> 15,000 -> 18,000 is forecast, not given the room too.
    rising = [EpochWindows(0, chain(1, 12_000)), EpochWindows(1, chain(1, 15_000))]
    why = decide(chain(1, 18_000), rising, epoch=2)["src"][1]
    assert "heading to" in why and "busy" not in why


def test_an_old_jobs_scale_down_window_is_not_sized_as_a_new_jobs():
    # 8 instances, 11,000 r/s for the whole history. The scale-down window's first epochs, sized again
    # inside the window, see a cut-off history. Sized as a new job's, they would take 11,000 at 62.5 % busy
    # (17,600 r/s: 4); as the decided epoch knows the load, 12,833 with the restart: 3 (17,100). The largest: 3.
    history = steady(8, 11_000, range(0, 20))
    assert count(chain(8, 11_000), history[10:], epoch=20) == 3
