"""The rule-based policy (kind ``rules``): a baseline in the style of Dhalion and the thesis rescaler.

Symptoms, diagnosis, resolution, one operator at a time:

- **symptom**: an operator whose most back-pressured instance was back-pressured for more than
  ``backpressure_threshold`` of the epoch (its output is blocked: something downstream is slow);
- **diagnosis**: the bottleneck is the busiest operator that is not back-pressured itself but
  has a back-pressured upstream (Dhalion's "slow instances"); failing that, the busiest one;
- **resolution**: after ``rules_epochs`` consecutive back-pressured epochs at the same
  parallelism, add ``rules_step`` instances to the bottleneck. After as many epochs without
  back-pressure in which an operator's busiest instance stayed below ``low_utilization``
  busy, remove ``rules_step`` from the least busy such operator.

Easy to explain, slow to converge (one step per ``rules_epochs`` epochs), blind to how far
off it is, and tuned by thresholds: that is what it is measured for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from autoscaler.config.policy_options import PolicyOptions
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
from autoscaler.topology import Topology


def history_epochs(options: PolicyOptions) -> int:
    """The epochs before the decided one that complete a run of ``rules_epochs``."""
    return max(options.rules_epochs - 1, 0)


def _backpressured(topology: Topology, windows: Mapping[str, OperatorWindow], threshold: float) -> list[str]:
    return [op for op in topology.order if windows[op].backpressure_ratio_max > threshold]


def bottleneck(topology: Topology, windows: Mapping[str, OperatorWindow], threshold: float) -> str | None:
    """The operator to scale up for a back-pressured epoch, or None when nothing is back-pressured."""
    pressed = set(_backpressured(topology, windows, threshold))
    if not pressed:
        return None
    candidates = [op for op in topology.order if not topology.operators[op].is_source]
    blocked_by = [op for op in candidates if op not in pressed and pressed & set(topology.upstream(op))]
    pool = blocked_by or candidates
    return max(pool, key=lambda op: windows[op].busy_ratio_max) if pool else None


def _same_parallelism(a: Mapping[str, OperatorWindow], b: Mapping[str, OperatorWindow]) -> bool:
    return a.keys() == b.keys() and all(a[op].parallelism == b[op].parallelism for op in a)


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
    unusable = unusable_epoch(topology, windows)
    if unusable is not None:
        return unusable
    n, threshold = options.rules_epochs, options.backpressure_threshold
    # The run of epochs that count: this one and the earlier ones at the same parallelism, all decidable.
    run = [windows]
    for earlier in reversed(history):
        if unusable_epoch(topology, earlier.windows) is not None or not _same_parallelism(earlier.windows, windows):
            break
        run.append(earlier.windows)
    run = run[:n]
    pressed_now = _backpressured(topology, windows, threshold)
    pressed_epochs = sum(1 for w in run if _backpressured(topology, w, threshold))
    changes: dict[str, tuple[int, str]] = {}
    if pressed_now:
        names = ", ".join(f"{topology.operators[op].name} {windows[op].backpressure_ratio_max:.0%}" for op in pressed_now)
        culprit = bottleneck(topology, windows, threshold)
        if pressed_epochs >= n and culprit is not None:
            w = windows[culprit]
            target, limits = bounded(culprit, w.parallelism + options.rules_step, w, options)
            why = (f"back-pressured {n} epochs in a row ({names}); bottleneck {topology.operators[culprit].name} "
                   f"(busiest instance {w.busy_ratio_max:.0%} busy): +{options.rules_step}")  # fmt: skip
            changes[culprit] = (target, why + limits)
        reason = f"back-pressured ({names}) {pressed_epochs} of the {n} epochs in a row needed"
    else:
        quiet = pressed_epochs == 0 and len(run) >= n
        idle = [
            op
            for op in topology.order
            if not topology.operators[op].is_source
            and windows[op].parallelism > options.bounds(op, windows[op].max_parallelism)[0]
            and all(w[op].busy_ratio_max < options.low_utilization for w in run)
        ]
        if quiet and idle:
            op = min(idle, key=lambda o: windows[o].busy_ratio_max)
            w = windows[op]
            target, limits = bounded(op, w.parallelism - options.rules_step, w, options)
            why = (f"no back-pressure and {topology.operators[op].name} below {options.low_utilization:.0%} busy "
                   f"for {n} epochs in a row (now {w.busy_ratio_max:.0%}): -{options.rules_step}")  # fmt: skip
            changes[op] = (target, why + limits)
        reason = f"no back-pressure for {len(run)} epochs in a row" + ("" if idle else "; no operator under-used")
    decisions = []
    for op in topology.order:
        w = windows[op]
        if topology.operators[op].is_source:
            decisions.append(source_decision(topology, windows, op, *source_arrival(w, (source_rates or {}).get(op))))
            continue
        target, why = changes.get(op, (w.parallelism, reason))
        why = f"{why}; busiest instance {w.busy_ratio_max:.0%} busy{verdict(w.parallelism, target)}"
        decisions.append(replace(keep(topology, windows, op, why), target_parallelism=target))
    return decisions
