"""Rule 6 of the decide step: the plan must fit the cluster (:mod:`autoscaler.capacity.inventory`).

A plan that needs more than the cluster offers asks the capacity provider for TaskManagers first
(``ScalingPlan.add_taskmanagers``); what it still cannot get is cut, each target to the most the
cluster offers and aligned to its operator's key groups where the policy aligned it, never below what
the operator runs now. A plan left with no change is blocked, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.capacity.inventory import ClusterView, fit
from autoscaler.decide.plan import OperatorPlan
from autoscaler.policy.rounding import align


def fit_capacity(
    ops: list[OperatorPlan], view: ClusterView | None, key_groups: Mapping[str, int], job_key_groups: int | None
) -> tuple[str, int]:
    """Cut the targets to what the cluster offers; returns what was done in words ('' = fits) and the TaskManagers to add."""
    if view is None:
        return "", 0
    held = max(op.current for op in ops)
    capacity = fit(view, max(op.final for op in ops), held)
    if not capacity.note or capacity.available >= capacity.needed:
        return capacity.note, capacity.add_taskmanagers
    available = capacity.available
    for op in ops:
        if op.final > available:
            cut = max(available, op.current)
            groups = key_groups.get(op.operator_id) or job_key_groups
            if groups and cut > op.current:
                cut = align(cut, op.current, groups, 1, cut)
            aligned = f", aligned to {groups} key groups" if groups and cut != available else ""
            op.notes.append(f"reduced {op.final}→{cut}: {capacity.note}{aligned}")
            op.final = cut
    changes = any(op.changes for op in ops)
    return capacity.note, capacity.add_taskmanagers if changes else 0
