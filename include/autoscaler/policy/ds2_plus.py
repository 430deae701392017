"""The ds2_plus policy (kind ``ds2_plus``): DS2's one-step, whole-graph sizing, plus what the lab showed it lacks.

DS2 (:mod:`autoscaler.policy.ds2`) is exact on linear steps and loses on backlog, skew, sublinear
scaling, ramps, sines, spikes and CPU-bound operators (``docs/policy-lab.md``). This kind keeps its
model -- the sources' rates flow through the graph at the observed selectivities, each operator
sized from its true processing rate in one step -- and sizes for more than one window's rate:

- **demand**: each source's arrival rate, or, once it has risen two epochs in a row, where its trend
  (:func:`~autoscaler.policy.signals.damped_holt` over the history) says it is heading by the time
  a further change could take effect (two intervals, the first after a rescale being its warm-up,
  plus a restart); plus its backlog worked off within ``catch_up_duration``; plus, for a change,
  the input that arrives during the restart (``restart_time``: the policy run fills it with the
  median of the job's measured downtimes) and room for the load's usual sway
  (:func:`~autoscaler.policy.signals.typical_change`: none for steps and spikes, one epoch's move
  for a sine or a random walk), unless the trend already asks for more. While the history holds too
  few changes to read that sway (a new job's first three epochs) and no trend sizes ahead, a new
  size also takes the arrival at ``COLD_UTILIZATION`` (62.5 %) busy at most: the first window of a
  sine or of a random walk looks like a step. A backlog's catch-up usually asks for more than that
  already, and is then sized as before;
- **capacity at p**: linear as DS2's, corrected by the operator's observed scalability
  (:func:`~autoscaler.policy.signals.scalability`) and limited by its busiest instance: one hot key
  sends ``s + (1 - s) / p`` of the input to one instance (:func:`~autoscaler.policy.signals.hot_share`).
  Where no parallelism reaches the demand, the proposal stops where one more instance would add
  less than 5 % of capacity;
- **hysteresis both ways**: a size that takes the demand without a restart, draining the backlog
  within 1.5 catch-ups, is kept (no scale-up for the restart term alone, nor for a drain on track);
  a scale-down is proposed only when the smaller size takes the demand with the restart term;
- **effectiveness**: a scale-up that bought less than ``effectiveness_threshold`` of the capacity it
  promised blocks further scale-ups of that operator until the load changes by 20 %;
- **time**: no scale-down while a source owes more than 1 s of its input; a scale-down waits until
  it has been proposed for ``scale_down_interval`` at that size, then takes the largest proposal of
  that window (a scale-up in between starts the wait again). With ``settled_scale_down_interval``
  set (off by default: the lab found it costs a rescale when the next step comes), on a settled
  load, whose arrival typically moves under 5 % an epoch (:func:`~autoscaler.policy.signals.settled`)
  and has not fallen 20 % below its highest of the history, the wait is that interval: what
  is shed is the surplus of a drain, not capacity a load that fell (a burst's end, a step down, a
  sine's descent) may need again.

Bounds, limits and alignment are every kind's (:func:`autoscaler.policy.base.bounded`).
Sources are not rescaled, as with every kind so far.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.base import (
    Decision,
    EpochWindows,
    OperatorWindow,
    bounded,
    keep,
    source_arrival,
    source_decision,
    unusable_epoch,
    verdict,
)
from autoscaler.policy.signals import (
    VARIATION_CHANGES,
    damped_holt,
    hot_share,
    last_scale_up,
    scalability,
    settled,
    typical_change,
)
from autoscaler.topology import Topology

MEASURED_RESTART = True  # a run fills an unset restart_time with the job's measured downtimes (policy.restarts)
# An ineffective scale-up blocks further ones until the arrival rate moves this much; a load this far
# below its highest of the history has fallen (its scale-down waits scale_down_interval).
LOAD_CHANGE = 0.2
# The words of a reason that holds a scale-up back as ineffective (record.alerts looks for them).
INEFFECTIVE = "of the capacity it promised"
REACTION_EPOCHS = 2  # intervals before a further change can take effect: the decided one and the warm-up after it
RISING_EPOCHS = 2  # the arrival must have risen this many epochs in a row before its trend is sized for
# A rise smaller than this share of the rate is noise, not a trend: a steady load read over 30 s moves
# up to 4 % an epoch (the lab's noise), and a flat 20,005 -> 20,070 before a step to 30,000 was read as
# a trend heading to 35,000 (step-up-down, 2026-11-26: one rescale too many).
RISE = 0.05
# While the load's sway is still unknown, a new size takes the arrival at most this busy, once its backlog
# is drained (the utilization kind's target is 0.7). The lab's stores, replayed, give the same sizes from
# 0.61 to 0.665: diurnal-sine's first window needs 6 at its crest (0.70 or more sizes 5), random-walk's
# needs 6 for its later rise (0.67 or more sizes 5); at 0.60 backlog-restarts' and two-bottlenecks'
# backlog-driven first sizes grow, and near 0.59 cosine's 7 becomes 8, which d9e6e3c's run showed
# reversed by a second rescale (scripts/ds2_lab.py replay, 2026-11-27).
COLD_UTILIZATION = 0.625
MARGINAL_GAIN = 0.05  # past an unreachable demand: stop where one more instance adds less than this
KEEP_DRAIN = 1.5  # the current size is kept while it drains the backlog within this many catch-ups
DRAINED_S = 1.0  # a source owing at most this many seconds of its input has no backlog (the lab's measure)
SEARCH_LIMIT = 4096  # the highest parallelism searched when no bound is set


def history_epochs(options: PolicyOptions) -> int:
    """The epochs of the history window or of the scale-down interval before the decided one, whichever is longer."""
    span = max(options.effective("scale_down_interval") or 0.0, options.history_window)
    return math.ceil(span / options.interval - 1e-9)


@dataclass(frozen=True)
class Demand:
    """The sources' rates that the sizing flows through the graph."""

    keep: dict[str, float]  # per source: the rate a size must take to be kept (forecast + backlog catch-up)
    change: dict[str, float]  # the same plus the input of a restart: what a new size must take
    arrival: float  # the sources' total arrival rate, as measured
    backlog: str | None  # which source owes more than DRAINED_S of its input, in words (None: none)
    settled: bool  # every source's arrival typically moves under RISE of its rate an epoch, none fell LOAD_CHANGE
    words: dict[str, str]  # per source, how its demand was made


@dataclass(frozen=True)
class Sizing:
    """One operator's sizing in one epoch, before the scale-down wait."""

    keep_input: float  # records/s it must take at its size
    change_input: float  # records/s a new size must take
    capacity: float  # per instance, measured (nan: unknown)
    optimal: float  # change_input / capacity: DS2's linear estimate
    parallelism: int  # the size it was made at
    proposal: int  # limited, bounded and aligned
    why: str


def _usable(topology: Topology, history: Sequence[EpochWindows]) -> list[EpochWindows]:
    return [e for e in history if unusable_epoch(topology, e.windows) is None]


def _total_arrival(topology: Topology, windows: Mapping[str, OperatorWindow], source_rates: Mapping[str, float]) -> float:
    return sum(source_arrival(windows[op], source_rates.get(op))[0] for op in topology.sources)


def _demand(topology: Topology, windows: Mapping[str, OperatorWindow], options: PolicyOptions,
            source_rates: Mapping[str, float], past: Sequence[EpochWindows], new_job: bool) -> Demand:  # fmt: skip
    catch_up, restart = options.effective("catch_up_duration"), options.effective("restart_time")
    # In epochs: a change decided now takes effect after the restart, and the epoch after it is the
    # new size's warm-up, which decides nothing: the next change comes two intervals later at best.
    horizon = (REACTION_EPOCHS * options.interval + restart) / options.interval
    keep_rates, change_rates, words = {}, {}, {}
    backlog, steady = None, True
    for op in topology.sources:
        rate, basis = source_arrival(windows[op], source_rates.get(op))
        series = [source_arrival(e.windows[op], source_rates.get(op))[0] for e in past] + [rate]
        # Only a rise over two epochs in a row is a trend, each above the noise: one jump is a step,
        # which the trend would carry on as a ramp (a step 20k -> 25k read as heading to 28k).
        last = series[-RISING_EPOCHS - 1 :]
        rising = len(last) == RISING_EPOCHS + 1 and all(b > a * (1 + RISE) for a, b in pairwise(last))
        forecast = damped_holt(series, horizon) if rising else rate
        pending = windows[op].pending_records or 0.0
        sized = max(rate, forecast)
        # Room for the sway, for a new size only: the size that takes the load now is kept (no rescale
        # for the sway alone), but one that is chosen anyway is chosen with room to spare. The trend,
        # where there is one, already covers the sway.
        moves = typical_change(series)
        sway = max(0.0, rate + moves - sized)
        # Settled, and not fallen: with settled_scale_down_interval set, a drain's surplus is shed sooner,
        # but a load that fell (a burst's end, a step down, a sine's descent) may come back, and waits
        # scale_down_interval (spike, 2026-11-26: 3 -> 8 for a 30-s burst, back to 3 a minute after it).
        fell = rate < (1 - LOAD_CHANGE) * max(series)
        steady = steady and settled(series, RISE) and not fell
        # Hysteresis on the catch-up too: a new size must drain the backlog within catch_up, the current
        # one is kept while it drains it within KEEP_DRAIN times that. Otherwise a drain on track (a
        # restart's own backlog, say, worked off in 70 s of a 60-s catch-up) is rescaled again, and the
        # restart that buys adds backlog of its own.
        keep_rates[op] = sized + pending / (catch_up * KEEP_DRAIN)
        change_rates[op] = sized + sway + pending / catch_up + rate * restart / catch_up
        # A history too short to tell a step from a sway (a new job's first epochs): the sway is unknown,
        # so a new size leaves room for the arrival to grow, as a target utilization does. A trend, where
        # there is one, already sizes ahead; a backlog's catch-up mostly asks for more than the room.
        # (Room on the whole demand instead, 25 % of it, oversized the backlog-driven first sizes: cosine
        # went 2 -> 8 where 7 drained in time, then 8 -> 6, a second rescale; lab-ds2plus-r12.)
        cold = new_job and forecast <= rate
        if cold:
            change_rates[op] = max(change_rates[op], rate / COLD_UTILIZATION)
        text = f"arrival {rate:,.0f} r/s ({basis})"
        if forecast > rate:
            ahead = horizon * options.interval
            text += (f", heading to {forecast:,.0f} r/s over the next {ahead:.0f} s "
                     f"(rising over {RISE:.0%} an epoch for {RISING_EPOCHS}+ epochs)")  # fmt: skip
        if sway:
            text += (f", moving {moves:,.0f} r/s an epoch (the median of its last {len(series) - 1} changes): "
                     f"a new size leaves room for it")  # fmt: skip
        if cold:
            text += (f", {len(series) - 1} epoch-to-epoch changes seen (too few to read its sway: "
                     f"a new size takes it at most {COLD_UTILIZATION:.1%} busy)")  # fmt: skip
        if pending:
            text += (f"; backlog {pending:,.0f} records / {catch_up:g} s catch-up = {pending / catch_up:,.0f} r/s "
                     f"(a size is kept while it drains it within {catch_up * KEEP_DRAIN:g} s)")  # fmt: skip
        text += f"; a restart ({restart:g} s) adds {rate * restart / catch_up:,.0f} r/s"
        words[op] = text
        if backlog is None and pending > rate * DRAINED_S:
            backlog = f"{topology.operators[op].name} owes {pending:,.0f} records"
    arrival = _total_arrival(topology, windows, source_rates)
    return Demand(keep_rates, change_rates, arrival, backlog, steady, words)


def _capacity(total_now: float, p: int, alpha_ratio: float, share: float) -> float:
    """The input rate ``p`` instances take: the scaled capacity, as far as the busiest instance allows."""
    return total_now * alpha_ratio / (share * p + 1 - share)


def _size(op: str, w: OperatorWindow, need: float, options: PolicyOptions, epochs: Sequence[EpochWindows]) -> tuple[int, str]:
    """The smallest parallelism whose capacity takes ``need`` records/s, and the words for it."""
    fit = scalability(op, epochs)
    share = hot_share(w)
    current, total = w.parallelism, w.true_processing_rate
    _, high = options.bounds(op, w.max_parallelism)
    limit = min(high, SEARCH_LIMIT)

    def capacity(p: int) -> float:
        return _capacity(total, p, fit.ratio(p, current), share)

    why = fit.words()
    if share:
        why += f"; one key sends {share:.0%} of the input to the busiest instance"
    if total <= 0:
        return current, why + "; no processing observed: capacity unknown"
    for p in range(1, limit + 1):
        if capacity(p) >= need:
            return p, why + f"; {p} take {capacity(p):,.0f} r/s"
        if p >= current and capacity(p + 1) < capacity(p) * (1 + MARGINAL_GAIN) and capacity(p) < need:
            # Beyond here no instance adds 5 %: the hot key or the operator's scaling is the limit.
            return p, why + f"; no parallelism takes {need:,.0f} r/s: {p} take {capacity(p):,.0f}, one more adds < 5 %"
    return limit, why + f"; {limit} (the highest allowed) take {capacity(limit):,.0f} r/s"


def _sizings(topology: Topology, windows: Mapping[str, OperatorWindow], options: PolicyOptions,
             source_rates: Mapping[str, float], past: Sequence[EpochWindows],
             epoch: int, new_job: bool) -> tuple[dict[str, Sizing], Demand]:  # fmt: skip
    """Per non-source operator its sizing (past: the usable epochs before this one, oldest first;
    new_job: the decided epoch's history is too short to read the load's sway)."""
    demand = _demand(topology, windows, options, source_rates, past, new_job)
    epochs = [*past, EpochWindows(epoch, windows)]
    arrivals = [_total_arrival(topology, e.windows, source_rates) for e in epochs]
    keep_out, change_out = dict(demand.keep), dict(demand.change)
    out: dict[str, Sizing] = {}
    for op in topology.order:
        if topology.operators[op].is_source:
            continue
        w = windows[op]
        keep_in = sum(keep_out[up] for up in topology.upstream(op)) * (1 + options.factor)
        change_in = sum(change_out[up] for up in topology.upstream(op)) * (1 + options.factor)
        selectivity = w.true_output_rate / w.true_processing_rate if w.true_processing_rate > 0 else 0.0
        keep_out[op], change_out[op] = selectivity * keep_in, selectivity * change_in
        current = w.parallelism
        capacity = w.true_processing_rate / current
        optimal = change_in / capacity if capacity > 0 else (math.inf if change_in > 0 else math.nan)
        # Hysteresis both ways: a new size must take the input with the restart's (so a scale-down is
        # not undone by its own restart), and a size that takes it without a restart is kept.
        kept, _ = _size(op, w, keep_in, options, epochs)
        raw, why = _size(op, w, change_in, options, epochs)
        why = f"input {change_in:,.0f} r/s with a restart, {keep_in:,.0f} without; capacity {capacity:,.1f} r/s each" + why
        if raw > current >= kept:
            raw, why = current, why + f"; {current} take it without a restart: no scale-up for the restart alone"
        scale_up = last_scale_up(op, epochs, arrivals)
        if raw > current and scale_up and scale_up.gain < options.effectiveness_threshold:
            moved = abs(demand.arrival / scale_up.arrival - 1) if scale_up.arrival > 0 else math.inf
            if moved <= LOAD_CHANGE:
                why += (f"; the scale-up {scale_up.before} -> {scale_up.after} (epoch {scale_up.epoch}) bought "
                        f"{scale_up.gain:.0%} {INEFFECTIVE}, under {options.effectiveness_threshold:.0%}: "
                        f"no further scale-up until the load moves {LOAD_CHANGE:.0%} (it moved {moved:.0%})")  # fmt: skip
                raw = current
        if raw < current and demand.backlog:
            why += f"; no scale-down while a backlog drains ({demand.backlog})"
            raw = current
        proposal, limits = bounded(op, raw, w, options)
        out[op] = Sizing(keep_in, change_in, capacity, optimal, current, proposal, why + f" = {raw}" + limits)
    return out, demand


def evaluate_epoch(
    topology: Topology,
    windows: Mapping[str, OperatorWindow],
    options: PolicyOptions,
    source_rates: Mapping[str, float] | None = None,
    history: Sequence[EpochWindows] = (),
    epoch: int | None = None,
) -> list[Decision]:
    """Decisions for every operator of ``topology`` for one epoch; ``history``: the epochs before, oldest first."""
    options = options.resolved(topology)
    source_rates = source_rates or {}
    unusable = unusable_epoch(topology, windows)
    if unusable is not None:
        return unusable
    past = _usable(topology, history)
    if epoch is None:
        epoch = history[-1].epoch + 1 if history else 0
    # A new job: the decided epoch's history is too short to read the load's sway. The earlier epochs of
    # the scale-down window are sized again as the decided one knows the load, not with the cut-off
    # history each would have inside this window (which made an old job's first epochs look new).
    new_job = len(past) < VARIATION_CHANGES
    sizings, demand = _sizings(topology, windows, options, source_rates, past, epoch, new_job)
    # The scale-down wait: each of the previous epochs of the interval, at this size, proposed one too.
    shed, wait = options.settled_scale_down_interval, options.effective("scale_down_interval") or 0.0
    if shed is None:
        load = f"scale_down_interval {wait:g} s"
    elif demand.settled:
        wait, load = shed, f"the load moves under {RISE:.0%} an epoch"
    else:
        load = "the load moves, or fell from its high"
    needed = math.ceil(wait / options.interval - 1e-9)
    recent = {e.epoch: e for e in past}
    earlier = []
    for e in range(epoch - needed, epoch):
        if e in recent:
            before = [x for x in past if x.epoch < e]
            earlier.append(_sizings(topology, recent[e].windows, options, source_rates, before, e, new_job)[0])
        else:
            earlier.append(None)
    decisions = []
    for op in topology.order:
        w = windows[op]
        if topology.operators[op].is_source:
            rate, _ = source_arrival(w, source_rates.get(op))
            decisions.append(source_decision(topology, windows, op, rate, demand.words[op]))
            continue
        s, current = sizings[op], w.parallelism
        target, why = s.proposal, s.why
        if target < current:
            downs = [x[op].proposal for x in earlier if x and x[op].parallelism == current and x[op].proposal < current]
            if len(downs) >= needed:
                target = max([target, *downs])
                why += f"; scale-down proposed for {len(downs) + 1} epochs at {current} ({load}): the largest, {target}"
            else:
                why += (f"; scale-down waits: proposed for {len(downs) + 1} epochs at {current}, "
                        f"needs {needed + 1} ({load})")  # fmt: skip
                target = current
        decisions.append(
            replace(
                keep(topology, windows, op, why + verdict(current, target)),
                capacity_per_instance=s.capacity,
                target_input_rate=s.change_input if target != current else s.keep_input,
                target_output_rate=None,
                optimal_parallelism=s.optimal,
                target_parallelism=target,
            )
        )
    return decisions
