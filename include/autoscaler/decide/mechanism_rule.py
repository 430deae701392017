"""Rule 7 of the decide step: how a rescale moves the job's state, chosen per rescale (``mechanism: auto``).

A job that names its mechanism gets it. With ``auto`` (the default) the rescale takes the mechanism
with the shortest downtime predicted at the job's state size (:mod:`autoscaler.rescale.mechanism`):
in place only where the cluster runs the adaptive scheduler. When neither pays (a scale-down that
would not earn its downtime back, or a downtime over the job's ``rescale.max_downtime``) the plan
becomes a no-op that says so.
"""

from __future__ import annotations

from pathlib import Path

from autoscaler.capacity.inventory import ClusterView
from autoscaler.config.jobs import JobConfig
from autoscaler.config.options import AUTO, IN_PLACE, SAVEPOINT_RESTART
from autoscaler.decide.plan import NOOP, RECOMMEND, RESCALE, ScalingPlan
from autoscaler.rescale.mechanism import choose_mechanism, downtime_lines, latest_state, own_rescales


def offered(cluster: ClusterView | None) -> tuple[str, ...]:
    """The mechanisms the cluster can run: in place needs the adaptive scheduler."""
    return (SAVEPOINT_RESTART, IN_PLACE) if cluster is not None and cluster.adaptive else (SAVEPOINT_RESTART,)


def choose_for_plan(plan: ScalingPlan, job: JobConfig, store_root: str | Path, cluster: ClusterView | None) -> ScalingPlan:
    """The plan with its mechanism and the reason; a no-op when no mechanism pays."""
    if plan.action not in (RESCALE, RECOMMEND):
        return plan
    if job.mechanism != AUTO:
        plan.mechanism, plan.mechanism_reason = job.mechanism, f"{job.mechanism}: the job's mechanism option"
        return plan
    state_bytes, backend = latest_state(store_root, job.name, plan.epoch)
    lines = downtime_lines(own_rescales(store_root, job.name, plan.epoch), backend or "", job.rescale.min_own_rescales)
    max_downtime = job.rescale.max_downtime
    choice = choose_mechanism(
        lines, state_bytes, offered(cluster),
        old_instances=sum(op.current for op in plan.operators), new_instances=sum(op.final for op in plan.operators),
        payback_horizon_s=job.rescale.payback_horizon.total_seconds(),
        max_downtime_s=None if max_downtime is None else max_downtime.total_seconds(),
    )  # fmt: skip
    plan.mechanism_reason = choice.reason
    if choice.mechanism is None:
        proposal = ", ".join(f"{op.operator_name} {op.current}→{op.final}" for op in plan.operators if op.changes)
        for op in plan.operators:
            op.final = op.current
        plan.action, plan.add_taskmanagers = NOOP, 0
        plan.summary = f"not worth a rescale: {choice.reason} (held: {proposal})"
        return plan
    plan.mechanism = choice.mechanism
    return plan
