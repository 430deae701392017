"""The one interface every policy kind implements, as in DS2's controller: a pure function.

A policy reads one epoch of a job -- per operator, its metrics summed over its instances
(:class:`OperatorWindow`) -- and returns one :class:`Decision` per operator of the topology,
in topological order, each with its reason. It keeps no state and does no I/O: history,
stability rules and acting belong to the decide and rescale stages. A new kind is a module
with such a function, registered in :data:`POLICIES` under the name a job's config selects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    """``(topology, windows by operator id, options, source-rate overrides) -> decisions``."""

    def __call__(
        self,
        topology: Topology,
        windows: Mapping[str, OperatorWindow],
        options: PolicyOptions,
        source_rates: Mapping[str, float] | None = None,
    ) -> list[Decision]: ...


def _ds2() -> Policy:
    from autoscaler.policy.ds2 import evaluate_epoch

    return evaluate_epoch


# kind -> a loader of its function (imported on first use).
POLICIES: dict[str, Callable[[], Policy]] = {"ds2": _ds2}


def policy_for(kind: str) -> Policy:
    """The policy function registered as ``kind``."""
    if kind not in POLICIES:
        raise InputError("policy kind", f"{kind!r} is not one of {', '.join(sorted(POLICIES))}")
    return POLICIES[kind]()
