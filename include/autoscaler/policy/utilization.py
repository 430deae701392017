"""The utilization policy (kind ``utilization``): the Flink Kubernetes Operator autoscaler's model.

A baseline to measure DS2 against, with that autoscaler's defaults (``../shared/reference/peers.md``):

- capacity: an operator's true processing rate is its observed input rate divided by the busy
  fraction of its *busiest* instance (Flink aggregates busy time with MAX, for skew);
- demand: the sources' target rate flows through the graph at the observed selectivities; a
  backlog adds ``pending records / catch-up duration`` and the input of a restart
  (``rate * restart time / catch-up duration``);
- sizing: ``ceil(demand / target utilization + catch-up) / capacity per instance``;
- acting: only when an operator whose parallelism would change has an expected utilization
  outside ``target +- boundary``; a
  scale-down removes at most ``max_scale_down_factor`` of the instances, waits until it has been
  recommended for ``scale_down_interval`` (then takes the largest recommendation seen), and never
  happens while the backlog exceeds 5 minutes of input.

Sources are never rescaled here (the test job's source parallelism is fixed), as with DS2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.base import Decision, EpochWindows, OperatorWindow, history_epochs, keep, unusable_epoch, verdict
from autoscaler.policy.ds2 import source_output
from autoscaler.topology import Topology

# No scale-down while the sources owe more than this many seconds of their input (Flink's guard).
BACKLOG_GUARD_S = 300.0


@dataclass(frozen=True)
class Sizing:
    """One operator's sizing in one epoch."""

    steady_input: float  # records/s the operator must take at the target rate
    catch_up_input: float  # records/s more while a backlog (and a restart's input) is caught up
    capacity: float  # records/s at the current parallelism (nan: unknown)
    required: float  # capacity it should have: steady / target utilization + catch-up
    proposal: int  # parallelism for ``required``, bounded, before the band and the deferral
    in_band: bool
    why: str


def _sizings(
    topology: Topology, windows: Mapping[str, OperatorWindow], options: PolicyOptions, source_rates: Mapping[str, float]
) -> tuple[dict[str, Sizing], float, float]:
    """Per non-source operator its sizing; plus the sources' total target rate and backlog."""
    steady: dict[str, float] = {}
    catch_up: dict[str, float] = {}
    total_rate = total_backlog = 0.0
    out: dict[str, Sizing] = {}
    u, b = options.target_utilization, options.utilization_boundary
    for op in topology.order:
        w = windows[op]
        if topology.operators[op].is_source:
            rate = source_output(w, source_rates.get(op))
            backlog = w.pending_records or 0.0
            total_rate += rate
            total_backlog += backlog
            steady[op] = rate
            catch_up[op] = (backlog + rate * options.restart_time) / options.catch_up_duration
            continue
        steady_in = sum(steady[up] for up in topology.upstream(op))
        catch_in = sum(catch_up[up] for up in topology.upstream(op))
        selectivity = w.true_output_rate / w.true_processing_rate if w.true_processing_rate > 0 else 0.0
        steady[op], catch_up[op] = steady_in * selectivity, catch_in * selectivity
        capacity = w.observed_processing_rate / w.busy_ratio_max if w.busy_ratio_max > 0 else math.nan
        required = steady_in / u + catch_in
        low, high = options.bounds(op, w.max_parallelism)
        if not capacity > 0:
            proposal, in_band = w.parallelism, True
            why = f"input {steady_in:.1f} r/s, no busy time observed: capacity unknown"
        else:
            per_instance = capacity / w.parallelism
            raw = math.ceil(required / per_instance - 1e-9)
            floor = math.ceil(w.parallelism * (1 - options.max_scale_down_factor))
            proposal = min(max(raw, floor, low), high)
            upper = steady_in / (u + b) + catch_in  # below this capacity: over target + boundary
            lower = steady_in / (u - b) + catch_in if u > b else math.inf  # above: under target - boundary
            in_band = upper <= capacity <= lower
            why = (
                f"capacity {capacity:.1f} r/s (busiest instance {w.busy_ratio_max:.0%} busy) for input {steady_in:.1f} r/s"
                + (f" + catch-up {catch_in:.1f} r/s" if catch_in else "")
                + f": utilization {steady_in / capacity:.0%}, needs {required:.1f} r/s at {u:g} = {raw}"
            )
            if proposal != raw:
                why += f", bounded to {proposal}"
        out[op] = Sizing(steady_in, catch_in, capacity, required, proposal, in_band, why)
    return out, total_rate, total_backlog


def evaluate_epoch(
    topology: Topology,
    windows: Mapping[str, OperatorWindow],
    options: PolicyOptions,
    source_rates: Mapping[str, float] | None = None,
    history: Sequence[EpochWindows] = (),
) -> list[Decision]:
    """Decisions for every operator of ``topology`` for one epoch; ``history``: the epochs before."""
    options = options.resolved(topology)
    source_rates = source_rates or {}
    unusable = unusable_epoch(topology, windows)
    if unusable is not None:
        return unusable
    sizings, total_rate, backlog = _sizings(topology, windows, options, source_rates)
    # As Flink's allChangedVerticesWithinUtilizationTarget: act only if an operator whose
    # parallelism would change is outside the band.
    act = any(not s.in_band and s.proposal != windows[op].parallelism for op, s in sizings.items())
    earlier = [_past_proposals(topology, e.windows, options, source_rates) for e in history]
    # The earlier epochs of the last scale-down interval must all have recommended it too; one
    # that is missing (quarantined, never collected) did not, so the run falls short.
    needed = history_epochs(options)
    decisions = []
    for op in topology.order:
        w = windows[op]
        if topology.operators[op].is_source:
            emits = source_output(w, source_rates.get(op))
            decisions.append(keep(topology, windows, op, f"source: never rescaled; emits {emits:.1f} r/s"))
            continue
        s = sizings[op]
        target, why = w.parallelism, s.why
        if not act:
            why += "; every operator that would change is within the utilization band: no change"
        elif s.proposal > w.parallelism:
            target = s.proposal
        elif s.proposal < w.parallelism:
            if backlog > BACKLOG_GUARD_S * total_rate:
                why += f"; no scale-down while the backlog ({backlog:,.0f} records) exceeds {BACKLOG_GUARD_S:g} s of input"
            else:
                seen = [p.get(op) for p in earlier if p.get(op, (0, 0))[0] == w.parallelism]
                downs = [proposal for parallelism, proposal in filter(None, seen) if proposal < parallelism]
                if len(downs) >= needed:
                    target = max([s.proposal, *downs])
                    why += f"; scale-down recommended for {len(downs) + 1} epochs in a row: the largest, {target}"
                else:
                    why += f"; scale-down deferred: recommended {len(downs) + 1} epochs in a row, needs {needed + 1}"
        per_instance = s.capacity / w.parallelism if s.capacity > 0 else None
        decisions.append(
            replace(
                keep(topology, windows, op, why + verdict(w.parallelism, target)),
                capacity_per_instance=per_instance,
                target_input_rate=s.steady_input + s.catch_up_input,
                optimal_parallelism=s.required / per_instance if per_instance else None,
                target_parallelism=target,
            )
        )
    return decisions


def _past_proposals(
    topology: Topology, windows: Mapping[str, OperatorWindow], options: PolicyOptions, source_rates: Mapping[str, float]
) -> dict[str, tuple[int, int]]:
    """Operator -> (parallelism, proposal) of an earlier epoch; empty when it was not decidable."""
    if unusable_epoch(topology, windows) is not None:
        return {}
    sizings, _, _ = _sizings(topology, windows, options, source_rates)
    return {op: (windows[op].parallelism, s.proposal) for op, s in sizings.items()}
