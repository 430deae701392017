"""The DS2 policy (kind ``ds2``) for one epoch: the one implementation, run as is on Python and on Spark.

Per window, in topological order: sources emit their aggregated true output rate (or an
override); a non-source operator's target input is the sum of its upstreams' outputs at
their optimal parallelism; its optimal parallelism is target input / (aggregated true
processing rate / current parallelism); its output at that parallelism is
true output / true processing * target input (from the unrounded estimate). The proposal then
passes the bounds, alignment and limits every kind shares (:func:`autoscaler.policy.base.bounded`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.base import (
    Decision,
    EpochWindows,
    OperatorWindow,
    bounded,
    source_arrival,
    source_decision,
    unusable_epoch,
    verdict,
)
from autoscaler.policy.rounding import round_up, threshold_adjust
from autoscaler.topology import Topology


def history_epochs(options: PolicyOptions) -> int:
    """DS2 decides from one epoch's rates alone."""
    return 0


def evaluate_epoch(
    topology: Topology,
    windows: Mapping[str, OperatorWindow],
    options: PolicyOptions,
    source_rates: Mapping[str, float] | None = None,
    history: Sequence[EpochWindows] = (),
    epoch: int | None = None,
) -> list[Decision]:
    """Decisions for every operator of ``topology`` (in topological order) for one epoch.

    DS2 needs no history: one epoch's rates decide (``history`` is accepted and ignored).
    """
    options = options.resolved(topology)
    source_rates = source_rates or {}
    unusable = unusable_epoch(topology, windows)
    if unusable is not None:
        return unusable

    output: dict[str, float] = {}
    basis: dict[str, str] = {}
    estimate: dict[str, tuple[float, float, float, int]] = {}  # op -> (input, capacity, optimal, raw)
    ratios = []
    for op in topology.order:
        w = windows[op]
        if topology.operators[op].is_source:
            output[op], basis[op] = source_arrival(w, source_rates.get(op))
            if w.observed_output_rate > 0:
                ratios.append(output[op] / w.observed_output_rate)
            continue
        target_input = sum(output[up] for up in topology.upstream(op))
        capacity = w.true_processing_rate / w.parallelism
        if capacity > 0:
            optimal = target_input / capacity
        else:
            optimal = math.inf if target_input > 0 else math.nan
        selectivity = w.true_output_rate / w.true_processing_rate if w.true_processing_rate > 0 else 0.0
        output[op] = selectivity * target_input
        estimate[op] = (target_input, capacity, optimal, round_up(optimal, options.factor))

    ratio = max(ratios) if ratios else None
    no_scale_up = all(raw <= windows[op].parallelism for op, (_, _, _, raw) in estimate.items())
    apply_threshold = options.threshold is not None and ratio is not None and ratio > options.threshold and no_scale_up

    decisions = []
    for op in topology.order:
        w = windows[op]
        meta = topology.operators[op]
        if meta.is_source:
            decisions.append(replace(source_decision(topology, windows, op, output[op], basis[op]), source_rate_ratio=ratio))
            continue
        target_input, capacity, optimal, raw = estimate[op]
        if math.isnan(optimal):
            why = "no input and no processing observed: optimal 0"
        elif math.isinf(optimal):
            why = f"input {target_input:.1f} r/s but no processing observed: capacity unknown, estimate saturates"
        else:
            why = f"input {target_input:.1f} r/s / capacity {capacity:.1f} r/s per instance = {optimal:.4f}"
        why += f"; x(1+{options.factor:g}) rounded up = {raw}"
        proposal = raw
        if apply_threshold:
            proposal = threshold_adjust(raw, ratio)
            why += f"; no scale-up and source ratio {ratio:.4f} > threshold {options.threshold:g}: x{ratio:.4f} = {proposal}"
        target, limits = bounded(op, proposal, w, options)
        why += limits
        why += verdict(w.parallelism, target)
        decisions.append(
            Decision(
                op,
                meta.name,
                False,
                "ok",
                w.parallelism,
                w.instances_observed,
                w.true_processing_rate,
                w.true_output_rate,
                capacity,
                target_input,
                output[op],
                optimal,
                target,
                ratio,
                why,
            )
        )
    return decisions
