"""The one interface every policy kind implements, as in DS2's controller: a pure function.

A policy reads one epoch of a job -- per operator, its metrics summed over its instances
(:class:`OperatorWindow`) -- and returns one :class:`Decision` per operator of the topology,
in topological order, each with its reason. It keeps no state and does no I/O. A kind that
needs the past (N back-pressured epochs in a row, a deferred scale-down) receives the job's
previous epochs as an argument (:class:`EpochWindows`, oldest first), as many as
:func:`history_epochs` says it looks back; stability rules and acting still belong to the
decide and rescale stages. A new kind is a module with such a function, registered in
:data:`POLICIES` under the name a job's config selects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from autoscaler.config.options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.topology import Topology


@dataclass(frozen=True)
class OperatorWindow:
    """One operator's metrics in one epoch, summed over its instances."""

    parallelism: int
    instances_observed: int
    true_processing_rate: float
    true_output_rate: float
    observed_output_rate: float
    max_parallelism: int | None = None
    warmup_instances: int = 0
    # Read by the utilization and rules kinds (DS2 needs only the rates above):
    observed_processing_rate: float = 0.0  # records in per second of wall time, summed
    busy_ratio_max: float = 0.0  # busiest instance's busy time / its window (the Flink autoscaler's MAX)
    backpressure_ratio_max: float = 0.0  # most back-pressured instance's back-pressured time / its window
    pending_records: float | None = None  # sources: records owed at the window's end (FLIP-33), if reported


@dataclass(frozen=True)
class EpochWindows:
    """One earlier epoch of the job, as the policy saw it: its number and windows by operator id.

    A run passes the stored epochs among the :func:`history_epochs` before the decided one, oldest
    first; an epoch with no stored metrics (quarantined, never collected) is simply absent.
    """

    epoch: int
    windows: Mapping[str, OperatorWindow]


@dataclass(frozen=True)
class Decision:
    operator_id: str
    operator_name: str
    is_source: bool
    status: str
    current_parallelism: int
    instances_observed: int
    true_processing_rate: float | None
    true_output_rate: float | None
    capacity_per_instance: float | None
    target_input_rate: float | None
    target_output_rate: float | None
    optimal_parallelism: float | None
    target_parallelism: int
    source_rate_ratio: float | None
    reason: str


class Policy(Protocol):
    """``(topology, windows by operator id, options, source-rate overrides, earlier epochs) -> decisions``."""

    def __call__(
        self,
        topology: Topology,
        windows: Mapping[str, OperatorWindow],
        options: PolicyOptions,
        source_rates: Mapping[str, float] | None = None,
        history: Sequence[EpochWindows] = (),
    ) -> list[Decision]: ...


def unusable_epoch(topology: Topology, windows: Mapping[str, OperatorWindow]) -> list[Decision] | None:
    """ "No change" decisions when an epoch lacks instances or spans a restart; None when it is usable.

    Every kind starts with this check: a decision needs every instance of every operator, and a
    window that overlaps a restart measures the restart, not the job.
    """
    missing = [
        f"{topology.operators[op].name} has {windows[op].instances_observed if op in windows else 0}"
        f" of {windows[op].parallelism if op in windows else topology.operators[op].parallelism} instances"
        for op in topology.order
        if op not in windows or windows[op].instances_observed != windows[op].parallelism
    ]
    warm = [topology.operators[op].name for op in topology.order if op in windows and windows[op].warmup_instances]
    if not missing and not warm:
        return None
    status = "incomplete" if missing else "warmup"
    if missing:
        reason = "incomplete metrics, no change: " + "; ".join(missing)
    else:
        reason = "warm-up window (the job restarted), no change: " + ", ".join(warm)
    return [keep(topology, windows, op, reason, status) for op in topology.order]


def keep(topology: Topology, windows: Mapping[str, OperatorWindow], op: str, reason: str, status: str = "ok") -> Decision:
    """A decision that keeps ``op`` at its parallelism, with no estimate."""
    w = windows.get(op)
    current = w.parallelism if w else topology.operators[op].parallelism
    meta = topology.operators[op]
    rate = w.true_processing_rate if w and status == "ok" else None
    out = w.true_output_rate if w and status == "ok" else None
    return Decision(op, meta.name, meta.is_source, status, current, w.instances_observed if w else 0, rate, out,
                    None, None, None, None, current, None, reason)  # fmt: skip


def verdict(current: int, target: int) -> str:
    """ " -> scale up 2 -> 4", " -> scale down ..." or " -> keep 2": how every reason ends."""
    if target > current:
        return f" -> scale up {current} -> {target}"
    if target < current:
        return f" -> scale down {current} -> {target}"
    return f" -> keep {current}"


def history_epochs(options: PolicyOptions) -> int:
    """How many earlier epochs a run of ``options.kind`` reads as its history."""
    if options.kind == "rules":
        return max(options.rules_epochs - 1, 0)
    if options.kind == "utilization":
        return math.ceil(options.scale_down_interval / options.interval - 1e-9)
    return 0


def _ds2() -> Policy:
    from autoscaler.policy.ds2 import evaluate_epoch

    return evaluate_epoch


def _utilization() -> Policy:
    from autoscaler.policy.utilization import evaluate_epoch

    return evaluate_epoch


def _rules() -> Policy:
    from autoscaler.policy.rules import evaluate_epoch

    return evaluate_epoch


# kind -> a loader of its function (imported on first use).
POLICIES: dict[str, Callable[[], Policy]] = {"ds2": _ds2, "utilization": _utilization, "rules": _rules}


def policy_for(kind: str) -> Policy:
    """The policy function registered as ``kind``."""
    if kind not in POLICIES:
        raise InputError("policy kind", f"{kind!r} is not one of {', '.join(sorted(POLICIES))}")
    return POLICIES[kind]()
