"""The utilization policy (kind ``utilization``): the Flink Kubernetes Operator autoscaler's model.

A baseline to measure DS2 against, as faithful to that autoscaler as one epoch's windows allow
(``JobVertexScaler``, ``ScalingMetricEvaluator``, ``AutoScalerUtils``; ``../shared/reference/peers.md``),
with its defaults:

- capacity: an operator's true processing rate is its observed input rate divided by the busy
  fraction of its *busiest* instance (Flink aggregates busy time with MAX, for skew);
- demand: each source's arrival rate flows through the graph at the observed selectivities, and
  so does its backlog's catch-up rate, ``pending records / catch-up duration``;
- target capacity: ``round(lag catch-up + input * restart time / catch-up duration + input /
  target utilization)``; the new parallelism is ``ceil(target / capacity * parallelism)``, limited
  to ``-max_scale_down_factor`` (0.4 for this kind) and ``+max_scale_up_factor``, bounded, and
  (``align_to_key_groups``) aligned to the key groups as Flink aligns them, all in
  :func:`autoscaler.policy.base.bounded`;
- the band: an operator is outside it when its capacity is below what ``target + boundary``
  needs or above what ``target - boundary`` needs, both *without* the restart term (Flink keeps
  it out of the thresholds). While any source owes more than ``backlog_threshold`` of its own
  input, the band widens to [0, 1]: no scale-up short of saturation, no scale-down trigger;
- a scale-down waits until it has been recommended for ``scale_down_interval``, then takes the
  largest recommendation seen in it; a scale-up or a "no change" clears it (every kind's one wait,
  :func:`autoscaler.policy.base.scale_down_wait`);
- acting: only when an operator that changes *after* that deferral is outside the band (Flink's
  check over the deferred targets).

A source the job lets move (:func:`autoscaler.policy.base.source_kept`) is sized as any operator,
as Flink sizes it: its input is its arrival, its capacity what it took in over its busiest instance's busy
fraction, capped at the splits it reads.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.policy.base import (
    Decision,
    EpochWindows,
    OperatorWindow,
    PastProposal,
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
from autoscaler.topology import Topology


def history_epochs(options: PolicyOptions) -> int:
    """The epochs of one scale-down interval before the decided one."""
    return math.ceil(options.effective("scale_down_interval") / options.interval - 1e-9)


@dataclass(frozen=True)
class Sizing:
    """One operator's sizing in one epoch."""

    input_rate: float  # records/s the operator must take at the sources' arrival rate
    lag_rate: float  # records/s more while the sources' backlog is caught up
    capacity: float  # records/s at the current parallelism (nan: unknown)
    target: float  # target capacity (rounded to a whole rate), with the restart term
    proposal: int  # parallelism for ``target``: limited, bounded and aligned, before the deferral
    outside: bool  # outside the utilization band
    why: str


def target_capacity(input_rate: float, lag_rate: float, utilization: float, options: PolicyOptions, restart: bool) -> float:
    """Flink's ``getTargetProcessingCapacity``: the rate an operator needs, rounded to a whole record/s."""
    at_utilization = input_rate / utilization if utilization > 0 else math.inf
    catch_up = options.effective("catch_up_duration")
    restart_rate = input_rate * options.effective("restart_time") / catch_up if restart else 0.0
    total = lag_rate + restart_rate + at_utilization
    return float(round(total)) if math.isfinite(total) else math.inf


def processing_backlog(topology: Topology, windows: Mapping[str, OperatorWindow], options: PolicyOptions,
                       source_rates: Mapping[str, float]) -> str | None:  # fmt: skip
    """Which source owes more than ``backlog_threshold`` seconds of its own input, in words (None: none)."""
    for op in topology.sources:
        rate, _ = source_arrival(windows[op], source_rates.get(op))
        pending = windows[op].pending_records or 0.0
        if pending > 0 and (rate <= 0 or pending / rate > options.backlog_threshold):
            owed = f"{pending / rate:,.0f} s" if rate > 0 else "an unbounded time"
            return f"{topology.operators[op].name} owes {pending:,.0f} records ({owed} of its input)"
    return None


def _sizings(
    topology: Topology, windows: Mapping[str, OperatorWindow], options: PolicyOptions, source_rates: Mapping[str, float]
) -> tuple[dict[str, Sizing], str | None]:
    """Per operator it sizes (a source where :func:`source_kept` allows) its sizing, and the backlog that widens
    the band (None: none)."""
    out: dict[str, Sizing] = {}
    backlog = processing_backlog(topology, windows, options, source_rates)
    u, b = options.target_utilization, options.utilization_boundary
    upper_u, lower_u = (1.0, 0.0) if backlog else (u + b, u - b)
    catch_up = options.effective("catch_up_duration")
    at_sources = {op: {"input": arrival_rate(windows[op], source_rates.get(op)),
                       "lag": (windows[op].pending_records or 0.0) / catch_up} for op in topology.sources}  # fmt: skip
    into = flow(topology, windows, at_sources)
    for op in topology.order:
        w = windows[op]
        if topology.operators[op].is_source and source_kept(topology, op, options) is not None:
            continue
        input_rate, lag_rate = into[op]["input"], into[op]["lag"]
        capacity = w.observed_processing_rate / w.busy_ratio_max if w.busy_ratio_max > 0 else math.nan
        target = target_capacity(input_rate, lag_rate, u, options, restart=True)
        if not capacity > 0:
            why = f"input {input_rate:.1f} r/s, no busy time observed: capacity unknown"
            out[op] = Sizing(input_rate, lag_rate, capacity, target, w.parallelism, False, why)
            continue
        raw = math.ceil(target / capacity * w.parallelism - 1e-9)
        proposal, limits = bounded(op, raw, w, options)
        scale_up_at = target_capacity(input_rate, lag_rate, upper_u, options, restart=False)
        scale_down_at = target_capacity(input_rate, lag_rate, lower_u, options, restart=False)
        outside = capacity < scale_up_at or capacity > scale_down_at
        why = (
            f"capacity {capacity:.1f} r/s (busiest instance {w.busy_ratio_max:.0%} busy) for input {input_rate:.1f} r/s"
            + (f" + backlog catch-up {lag_rate:.1f} r/s" if lag_rate else "")
            + f": utilization {input_rate / capacity:.0%}, target capacity {target:.0f} r/s at {u:g} = {raw}{limits}"
        )
        out[op] = Sizing(input_rate, lag_rate, capacity, target, proposal, outside, why)
    return out, backlog


def evaluate_epoch(
    topology: Topology,
    windows: Mapping[str, OperatorWindow],
    options: PolicyOptions,
    source_rates: Mapping[str, float] | None = None,
    history: Sequence[EpochWindows] = (),
    epoch: int | None = None,
) -> list[Decision]:
    """Decisions for every operator of ``topology`` for one epoch; ``history``: the epochs before."""
    options = options.resolved(topology)
    source_rates = source_rates or {}
    unusable = unusable_epoch(topology, windows)
    if unusable is not None:
        return unusable
    if epoch is None:
        epoch = history[-1].epoch + 1 if history else 0
    sizings, backlog = _sizings(topology, windows, options, source_rates)
    same = (tuple(topology.operators.items()), topology.edges, repr(options), tuple(sorted(source_rates.items())))
    earlier = [(e.epoch, _past_proposals(topology, e.windows, options, source_rates, same)) for e in history]
    needed = history_epochs(options)
    # Each operator's target after the scale-down deferral, with its words.
    targets: dict[str, tuple[int, str, bool]] = {}  # op -> (target, why, outside)
    for op, s in sizings.items():
        current = windows[op].parallelism
        target, why, outside = current, s.why, s.outside
        if s.proposal > current:
            target = s.proposal
        elif s.proposal < current:
            past = [PastProposal(e, p[op][0], p[op][1]) for e, p in earlier if op in p]
            target, words = scale_down_wait(
                current, s.proposal, past, epoch, needed, options.effective("scale_down_interval"), options.scale_down_largest()
            )
            why += words
            if target < current:  # the band check looks at the size taken (Flink's, over the deferred targets)
                flags = [s.outside] if s.proposal == target else []
                outside = any([*flags, *(p[op][2] for _, p in earlier if op in p and p[op][1] == target)])
        targets[op] = (target, why, outside)
    # As Flink's allChangedVerticesWithinUtilizationTarget, over the deferred targets: act only if an
    # operator that changes is outside the band.
    act = any(outside and target != windows[op].parallelism for op, (target, _, outside) in targets.items())
    decisions = []
    for op in topology.order:
        w = windows[op]
        if op not in sizings:
            kept = source_kept(topology, op, options) or "never rescaled"
            decisions.append(source_decision(topology, windows, op, *source_arrival(w, source_rates.get(op)), kept))
            continue
        s = sizings[op]
        target, why, _ = targets[op]
        if backlog:
            why += f"; processing a backlog ({backlog}): band widened to [0, 1]"
        if not act and target != w.parallelism:
            why += "; every operator that would change is within the utilization band: no change"
            target = w.parallelism
        elif not act:
            why += "; within the utilization band" if not s.outside else ""
        per_instance = s.capacity / w.parallelism if s.capacity > 0 else None
        arrival = None
        if topology.operators[op].is_source:
            arrival, basis = source_arrival(w, source_rates.get(op))
            why = f"source: arrival {arrival:,.1f} r/s ({basis}); {why}"
        decisions.append(
            replace(
                keep(topology, windows, op, why + verdict(w.parallelism, target)),
                true_output_rate=w.true_output_rate if arrival is None else arrival,
                capacity_per_instance=per_instance,
                target_input_rate=s.input_rate + s.lag_rate,
                optimal_parallelism=s.target / per_instance if per_instance else None,
                target_parallelism=target,
            )
        )
    return decisions


# An earlier epoch's proposals are a pure function of its windows and the run's options: a run that decides
# epoch after epoch (a backfill, the simulated loop) reads each epoch again for the whole scale-down interval,
# so they are kept by value (LRU, bounded) instead of sized again up to an hour of epochs times.
_PAST: OrderedDict[tuple, dict[str, tuple[int, int, bool]]] = OrderedDict()
_PAST_ENTRIES = 4096


def _past_proposals(
    topology: Topology,
    windows: Mapping[str, OperatorWindow],
    options: PolicyOptions,
    source_rates: Mapping[str, float],
    same: tuple,
) -> dict[str, tuple[int, int, bool]]:
    """Operator -> (parallelism, proposal, outside the band) of an earlier epoch; empty when it was not decidable.
    ``same``: what besides ``windows`` the proposals depend on, by value (the run's topology, options, rates)."""
    key = (same, tuple(windows.items()))
    if key in _PAST:
        _PAST.move_to_end(key)
        return _PAST[key]
    if unusable_epoch(topology, windows) is not None:
        out: dict[str, tuple[int, int, bool]] = {}
    else:
        sizings, _ = _sizings(topology, windows, options, source_rates)
        out = {op: (windows[op].parallelism, s.proposal, s.outside) for op, s in sizings.items()}
    _PAST[key] = out
    if len(_PAST) > _PAST_ENTRIES:
        _PAST.popitem(last=False)
    return out
