"""The ds2_plus policy (kind ``ds2_plus``): DS2's one-step, whole-graph sizing, for a steady size and a drain.

DS2 (:mod:`autoscaler.policy.ds2`) sizes each operator for one window's rate. This kind keeps its
model -- the sources' rates flow through the graph at the observed selectivities
(:func:`autoscaler.policy.base.flow`), each operator sized from its true processing rate -- and sizes
for two quantities kept apart:

- **steady size**: the load the job must carry until a further decision can take effect, the
  *reaction horizon* (:class:`Clock`: decision latency + restart + one interval). It is the arrival
  times ``1 + r``, where ``r`` is the ``steady_quantile`` of the job's own rises over one horizon in
  its history (:func:`steady_rise`); while the history holds too few rises to read that quantile,
  ``r`` leans on ``steady_prior_rise`` (the Flink autoscaler's headroom), less with every rise
  measured. Where the arrival has risen two epochs in a row by more than its typical move, the
  trend (:func:`~autoscaler.policy.signals.damped_holt`) says where it will be by the horizon's end,
  and the steady size takes that if it is more;
- **drain capacity**: what clears the sources' backlog by the catch-up deadline (``catch_up_duration``,
  by default two intervals: the backlog found now is gone by the end of the first epoch decided after
  the rescale). A new size owes, besides the backlog, the input that arrives while the decision is
  made and the job restarts (``decision_latency`` + the measured ``restart_time``), and has the rest
  of the deadline to work it off. The current size is kept while it carries the steady load and drains
  the backlog by the deadline without a restart.

A size carries the larger of the two, the steady load or the arrival plus the drain, not their sum:
the steady headroom stands idle until a rise uses it, so it drains the backlog meanwhile (a sum plans
for the rise and the backlog at once, and buys drain capacity the release must give back).

Capacity at ``p`` is linear as DS2's, corrected by the operator's observed scalability
(:func:`~autoscaler.policy.signals.scalability`) and limited by its busiest instance (one hot key
sends ``s + (1 - s) / p`` of the input to one instance: :func:`~autoscaler.policy.signals.hot_share`).
Where no parallelism reaches the need, the proposal stops where one more instance would add less than
``effectiveness_threshold`` of an instance's capacity; a scale-up that bought less than that share of
what it promised blocks further scale-ups until the load moves beyond its steady rise.

Scale-downs, never while a source owes more than ``drained_lag`` of its input:

- **release**: once the backlog is drained, capacity the last scale-up bought beyond the steady size
  of its own epoch is returned at once, to the larger of that steady size and today's: it was bought
  for a known, finished purpose;
- **steady**: a load that fell is followed once the job's rises are its own (not the prior's) and the
  operator has waited ``scale_down_interval`` at its size, every epoch of it proposing less (each at
  today's steady rise); it then goes to today's size (``scale_down_to`` latest: the steady size already
  carries the job's own rises, so the wait's largest would count its sway twice): every kind's one
  wait, :func:`autoscaler.policy.base.scale_down_wait`.

Bounds, limits and alignment are every kind's (:func:`autoscaler.policy.base.bounded`). A source the
job lets move (:func:`autoscaler.policy.base.source_kept`) is sized as any operator, for its own
steady arrival and backlog, within the splits it reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np

from autoscaler.config.policy_options import PolicyOptions, catch_up_deadline
from autoscaler.policy.base import (
    INEFFECTIVE_SCALE_UP,
    Decision,
    EpochWindows,
    OperatorWindow,
    PastProposal,
    arrival_measured,
    arrival_rate,
    bounded,
    flow,
    keep,
    scale_down_wait,
    source_arrival,
    source_decision,
    source_kept,
    unusable_epoch,
    verdict,
)
from autoscaler.policy.signals import Scalability, damped_holt, hot_share, last_scale_up, scalability, typical_change
from autoscaler.topology import Topology

MEASURED_RESTART = True  # a run fills an unset restart_time with the job's measured downtimes (policy.restarts)
# One rise is a step; a trend has risen this many epochs in a row, each by more than the load's typical move.
RISING_EPOCHS = 2
SEARCH_LIMIT = 4096  # the highest parallelism searched when no bound is set


def history_epochs(options: PolicyOptions) -> int:
    """The epochs of the history window or of the scale-down interval before the decided one, whichever is longer."""
    span = max(options.effective("scale_down_interval") or 0.0, options.history_window)
    return math.ceil(span / options.interval - 1e-9)


@dataclass(frozen=True)
class Clock:
    """The job's timings, in seconds: what a decision waits for and what a change owes."""

    interval: float
    latency: float  # epoch end -> the rescale starts
    restart: float  # the rescale's downtime (measured, else the prior)
    catch_up: float  # the deadline a backlog found now is worked off by
    stretched: bool = False  # the set deadline passed before a change took effect: the kind's own deadline instead

    @classmethod
    def of(cls, options: PolicyOptions) -> Clock:
        restart = options.effective("restart_time") or 0.0
        owed = options.decision_latency + restart
        catch_up = options.effective("catch_up_duration") or catch_up_deadline(options.interval, owed)
        # Options refuse a set deadline shorter than a set restart; a measured restart can still outgrow it.
        stretched = catch_up <= owed
        if stretched:
            catch_up = catch_up_deadline(options.interval, owed)
        return cls(options.interval, options.decision_latency, restart, catch_up, stretched)

    def horizon(self, change: bool) -> float:
        """Until a further decision can take effect: the next decided epoch's end, then its decision and restart.

        After a change the next epoch is the new size's warm-up, which decides nothing: one interval more.
        """
        return (2 if change else 1) * self.interval + self.latency + self.restart

    def horizon_epochs(self, change: bool) -> int:
        """The horizon in whole epochs, rounded up: a rise within a part of an epoch arrives in time too."""
        return max(1, math.ceil(self.horizon(change) / self.interval - 1e-9))

    @property
    def owed(self) -> float:
        """Seconds of input a change owes: it arrives while the decision is made and the job restarts."""
        return self.latency + self.restart

    @property
    def drain(self) -> float:
        """Seconds a new size has to work its backlog off in: the deadline less what the change takes (> 0 by
        :meth:`of`)."""
        return self.catch_up - self.owed

    def words(self) -> str:
        """How a new size drains, for the decision's reason."""
        text = f"which owes {self.owed:g} s of input and drains in {self.drain:g} s"
        if self.stretched:
            text += " (the set catch-up deadline passes before a change takes effect: the first decided epoch's end)"
        return text


def rises(series: Sequence[float], horizon: int) -> list[float]:
    """Each epoch's relative rise to the highest of the ``horizon`` epochs after it (full horizons only; falls are 0)."""
    return [max(0.0, max(series[t + 1 : t + 1 + horizon]) / series[t] - 1)
            for t in range(len(series) - horizon) if series[t] > 0]  # fmt: skip


def steady_rise(series: Sequence[float], horizon: int, options: PolicyOptions) -> tuple[float, bool]:
    """The rise the steady size carries, and whether it is the job's own (enough rises measured; see the module's doc)."""
    measured = rises(series, horizon)
    q = options.steady_quantile
    needed = math.ceil(1 / (1 - q) - 1e-9)
    quantile = float(np.quantile(measured, q)) if measured else 0.0
    weight = max(0.0, 1 - len(measured) / needed)
    return weight * options.steady_prior_rise + (1 - weight) * quantile, weight == 0


@dataclass(frozen=True)
class SourceDemand:
    arrival: float
    steady: float  # the arrival the current size must carry to be kept
    steady_change: float  # the arrival a new size must carry: its horizon includes the warm-up epoch
    backlog: float  # records owed
    rise: float  # the steady rise over a change's horizon
    known: bool  # the rise is the job's own: enough rises measured (a steady scale-down waits for that)
    words: str


def _source_demand(op: str, series: Sequence[float], pending: float, basis: str, clock: Clock,
                   options: PolicyOptions) -> SourceDemand:  # fmt: skip
    """One source's demand from its arrival series (oldest first, the decided epoch last)."""
    rate = series[-1]
    rise_keep, known = steady_rise(series, clock.horizon_epochs(False), options)
    rise, _ = steady_rise(series, clock.horizon_epochs(True), options)
    measured = len(rises(series, clock.horizon_epochs(True)))
    steady, steady_change = rate * (1 + rise_keep), rate * (1 + rise)
    moves = typical_change(series)
    last = series[-RISING_EPOCHS - 1 :]
    rising = len(last) == RISING_EPOCHS + 1 and all(b - a > moves for a, b in pairwise(last))
    ahead = clock.horizon(True)
    forecast = damped_holt(series, ahead / clock.interval) if rising else rate
    text = (f"arrival {rate:,.0f} r/s ({basis}); steady {1 + rise_keep:.3f}x to keep a size, {1 + rise:.3f}x for a "
            f"new one: ")  # fmt: skip
    needed = math.ceil(1 / (1 - options.steady_quantile) - 1e-9)
    if known:
        text += (f"the {options.steady_quantile:.0%} quantile of its rises over {clock.horizon(False):.0f} s and "
                 f"{ahead:.0f} s")  # fmt: skip
    else:
        text += (f"{measured} of {needed} rises over {ahead:.0f} s measured, "
                 f"the rest taken at the prior {options.steady_prior_rise:.0%}")  # fmt: skip
    if forecast > steady_change:
        steady_change = forecast
        steady = max(steady, damped_holt(series, clock.horizon(False) / clock.interval))
        text += f"; rising for {RISING_EPOCHS}+ epochs: heading to {forecast:,.0f} r/s in {ahead:.0f} s"
    if pending:
        text += f"; backlog {pending:,.0f} records"
    return SourceDemand(rate, steady, steady_change, pending, rise, known, text)


def _demands(topology: Topology, epochs: Sequence[EpochWindows], source_rates: Mapping[str, float], clock: Clock,
             options: PolicyOptions) -> dict[str, SourceDemand]:  # fmt: skip
    """Per source its demand at the last of ``epochs`` (usable epochs, oldest first)."""
    out = {}
    now = epochs[-1].windows
    for op in topology.sources:
        rate, basis = source_arrival(now[op], source_rates.get(op))
        # Earlier epochs whose arrival was only bounded (a Kafka reader's first window reports no backlog at its
        # start) are left out of the series the rises are read from: a bound taken for a value is a rise never had.
        series = [arrival_rate(e.windows[op], source_rates.get(op)) for e in epochs[:-1]
                  if source_rates.get(op) is not None or arrival_measured(e.windows[op])] + [rate]  # fmt: skip
        out[op] = _source_demand(op, series, now[op].pending_records or 0.0, basis, clock, options)
    return out


def _capacity_fn(w: OperatorWindow, fit: Scalability):  # noqa: ANN202 - (p -> r/s, words)
    share = hot_share(w)
    total, current = w.true_processing_rate, w.parallelism

    def capacity(p: int) -> float:
        # The scaled capacity, as far as the busiest instance allows.
        return total * fit.ratio(p, current) / (share * p + 1 - share)

    why = fit.words() + (f"; one key sends {share:.0%} of the input to the busiest instance" if share else "")
    return capacity, why


def _size(op: str, w: OperatorWindow, need: float, options: PolicyOptions, fit: Scalability) -> tuple[int, str]:
    """The smallest parallelism whose capacity takes ``need`` records/s, and the words for it (``fit``: the
    operator's observed scalability over the epochs read, :func:`~autoscaler.policy.signals.scalability`)."""
    capacity, why = _capacity_fn(w, fit)
    current = w.parallelism
    _, high = options.bounds(op, w.max_parallelism)
    limit = min(high, SEARCH_LIMIT)
    if w.true_processing_rate <= 0:
        return current, why + "; no processing observed: capacity unknown"
    gain = options.effectiveness_threshold
    for p in range(1, limit + 1):
        if capacity(p) >= need:
            return p, why + f"; {p} take {capacity(p):,.0f} r/s"
        if p >= current and capacity(p + 1) - capacity(p) < gain * capacity(p) / p:
            return p, why + (f"; no parallelism takes {need:,.0f} r/s: {p} take {capacity(p):,.0f}, one more adds "
                             f"< {gain:.0%} of an instance")  # fmt: skip
    return limit, why + f"; {limit} (the highest allowed) take {capacity(limit):,.0f} r/s"


def _needs(topology: Topology, windows: Mapping[str, OperatorWindow], demands: Mapping[str, SourceDemand], clock: Clock,
           options: PolicyOptions, steady: Mapping[str, float] | None = None) -> dict[str, dict[str, float]]:  # fmt: skip
    """Per operator: ``keep`` (the steady load, or the arrival + the backlog by the deadline with no restart, whichever
    is more) and ``change`` (the same for a new size, with the input a change owes) in records/s into it.
    ``steady``: per source, a steady arrival instead of its own."""
    at = {}
    for op, d in demands.items():
        s = d.steady_change if steady is None else steady[op]
        # The larger, not the sum: see the module's doc.
        at[op] = {"keep": max(d.steady, d.arrival + d.backlog / clock.catch_up),
                  "change": max(s, d.arrival + (d.backlog + d.arrival * clock.owed) / clock.drain)}  # fmt: skip
    return flow(topology, windows, at, options.factor)


def _usable(topology: Topology, history: Sequence[EpochWindows]) -> list[EpochWindows]:
    return [e for e in history if unusable_epoch(topology, e.windows) is None]


def _last_scale_up_epoch(op: str, epochs: Sequence[EpochWindows]) -> int | None:
    """The index in ``epochs`` of the last epoch before ``op``'s newest change, if that change was a scale-up."""
    for k in range(len(epochs) - 1, 0, -1):
        before, after = epochs[k - 1].windows[op].parallelism, epochs[k].windows[op].parallelism
        if after != before:
            return k - 1 if after > before else None
    return None


def _scale_down(topology: Topology, op: str, epochs: Sequence[EpochWindows], epoch: int,
                demands: Mapping[str, SourceDemand], source_rates: Mapping[str, float], clock: Clock,
                options: PolicyOptions, fit: Scalability) -> tuple[int, str] | None:  # fmt: skip
    """(target, words) of a release or a steady scale-down of ``op`` (None: neither applies)."""
    w = epochs[-1].windows[op]
    current = w.parallelism
    k = _last_scale_up_epoch(op, epochs)
    if k is not None:
        then = _demands(topology, epochs[: k + 1], source_rates, clock, options)
        steady = {s: max(d.steady_change, then[s].steady_change) for s, d in demands.items()}
        need = _needs(topology, epochs[-1].windows, demands, clock, options, steady)[op]["change"]
        target, why = _size(op, w, need, options, fit)
        if target < current:
            return target, (f"; the backlog is drained: the drain capacity of the scale-up decided at epoch "
                            f"{epochs[k].epoch} is released to the steady size then or now, {need:,.0f} r/s with "
                            f"a restart{why}")  # fmt: skip
    wait = options.effective("scale_down_interval") or 0.0
    needed = math.ceil(wait / options.interval - 1e-9)
    need = _needs(topology, epochs[-1].windows, demands, clock, options)[op]["change"]
    target, why = _size(op, w, need, options, fit)
    if target >= current:
        return None
    unknown = [topology.operators[s].name for s, d in demands.items() if not d.known]
    if unknown:
        # The prior is a guess on the safe side: what is shed on it may be needed once the rises are known.
        return current, f"; a scale-down to {target} waits until {', '.join(unknown)}'s rises are measured"
    # Each epoch of the wait at today's steady rise, as today's size would carry it.
    past = []
    for e in epochs[:-1]:
        if e.epoch < epoch - needed:
            continue
        then = {s: replace(d, arrival=(a := arrival_rate(e.windows[s], source_rates.get(s))), steady_change=a * (1 + d.rise),
                           backlog=e.windows[s].pending_records or 0.0) for s, d in demands.items()}  # fmt: skip
        proposal = _size(op, w, _needs(topology, epochs[-1].windows, then, clock, options)[op]["change"], options, fit)[0]
        past.append(PastProposal(e.epoch, e.windows[op].parallelism, proposal))
    target, words = scale_down_wait(current, target, past, epoch, needed, wait, options.scale_down_largest())
    return target, words + (f": sized for the steady load with a restart{why}" if target < current else "")


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
    if epoch is None:
        epoch = history[-1].epoch + 1 if history else 0
    epochs = [*_usable(topology, history), EpochWindows(epoch, windows)]
    clock = Clock.of(options)
    demands = _demands(topology, epochs, source_rates, clock, options)
    needs = _needs(topology, windows, demands, clock, options)
    arrival = sum(d.arrival for d in demands.values())
    rise = max((d.rise for d in demands.values()), default=0.0)
    owing = [topology.operators[s].name for s, d in demands.items() if d.backlog > d.arrival * options.drained_lag]
    arrivals = [sum(arrival_rate(e.windows[s], source_rates.get(s)) for s in topology.sources) for e in epochs]
    decisions = []
    for op in topology.order:
        w = windows[op]
        source = topology.operators[op].is_source
        if source and (kept_why := source_kept(topology, op, options)) is not None:
            decisions.append(source_decision(topology, windows, op, demands[op].arrival, demands[op].words, kept_why))
            continue
        current, need, findings = w.parallelism, needs[op], None
        fit = scalability(op, epochs)  # once per operator: every size below reads the same epochs
        kept, kept_words = _size(op, w, need["keep"], options, fit)
        capacity = w.true_processing_rate / current
        why = f"source: {demands[op].words}; " if source else ""
        why += (f"steady or arrival + drain {need['keep']:,.0f} r/s, {need['change']:,.0f} for a new size ({clock.words()}); "
               f"capacity {capacity:,.1f} r/s each")  # fmt: skip
        if kept > current:
            raw, words = _size(op, w, need["change"], options, fit)
            why += words + f": scale up to {raw}"
            scale_up = last_scale_up(op, epochs, arrivals)
            if scale_up and scale_up.gain < options.effectiveness_threshold:
                moved = abs(arrival / scale_up.arrival - 1) if scale_up.arrival > 0 else math.inf
                if moved <= rise:
                    why += (f"; the scale-up {scale_up.before} -> {scale_up.after} (epoch {scale_up.epoch}) bought "
                            f"{scale_up.gain:.0%} of the capacity it promised, under {options.effectiveness_threshold:.0%}: no "
                            f"further scale-up until the load moves beyond its steady rise {rise:.0%} "
                            f"(it moved {moved:.0%})")  # fmt: skip
                    raw, findings = current, INEFFECTIVE_SCALE_UP
        elif kept == current and _capacity_fn(w, fit)[0](current) < need["keep"]:
            raw = current  # short, and no more instances would help (bounds, splits, or no gain)
            why += kept_words
        elif owing:
            raw = current
            why += f"; {current} carry it and drain by the deadline; no scale-down while {', '.join(owing)} owe input"
        else:
            down = _scale_down(topology, op, epochs, epoch, demands, source_rates, clock, options, fit)
            raw, words = down if down else (current, f"; {current} carry it")
            why += words
        target, limits = bounded(op, raw, w, options)
        decisions.append(
            replace(
                keep(topology, windows, op, why + limits + verdict(current, target)),
                capacity_per_instance=capacity,
                target_input_rate=need["change"] if target != current else need["keep"],
                true_output_rate=demands[op].arrival if source else w.true_output_rate,
                target_output_rate=None,
                optimal_parallelism=need["change"] / capacity if capacity > 0 else None,
                target_parallelism=target,
                findings=findings,
            )
        )
    return decisions
