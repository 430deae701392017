"""The whole chain over a stored range: the policy's decisions through the decide rules, epoch by epoch.

A what-if asks "how often would this option set have rescaled?", which the policy's proposals
alone do not answer: warm-up, activation, hysteresis and cooldown hold most of them back. This
replays :func:`autoscaler.decide.rules.decide` over a range of stored decision rows, with the
rescales it decides as its own history (warm-up and activation count from them, cooldown from the
end of their epoch).

It is an open loop, and says so: the job kept its real parallelism, so after a simulated rescale
each later row's current parallelism is replaced by the simulated one, and the policy's target is
taken as what it would have proposed at that size (exact for DS2, whose target is absolute for
the measured load; an estimate for kinds that look back). The cluster's free slots are unknown
for the past, so the capacity rule is not applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from autoscaler.config.jobs import JobConfig
from autoscaler.decide.rules import RESCALE, LastRescale, ScalingPlan, agreeing_epochs, decide


@dataclass(frozen=True)
class Replay:
    """What the chain would have done over a range: the plans, and the rescales among them."""

    plans: list[ScalingPlan]

    @property
    def rescales(self) -> list[ScalingPlan]:
        return [p for p in self.plans if p.action == RESCALE]

    def summary(self) -> str:
        moves = "; ".join(f"epoch {p.epoch}: {p.summary.removeprefix('rescale ')}" for p in self.rescales)
        return f"{len(self.rescales)} rescales over {len(self.plans)} epochs" + (f" ({moves})" if moves else "")


def replay(job: JobConfig, rows: Iterable[Mapping[str, Any]]) -> Replay:
    """Run the decide rules over decision rows (any order; grouped by epoch), as the live DAG would have."""
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_epoch.setdefault(int(row["epoch"]), []).append(dict(row))
    simulated: dict[str, int] = {}  # operator id -> parallelism after the simulated rescales
    last: LastRescale | None = None
    since: list[list[dict[str, Any]]] = []  # the decision rows of each epoch since the last rescale
    plans = []
    for epoch in sorted(by_epoch):
        decisions = by_epoch[epoch]
        for d in decisions:
            if d["operator_id"] in simulated:
                d["current_parallelism"] = simulated[d["operator_id"]]
        since.append(decisions)
        count = agreeing_epochs(since)
        end = datetime.fromtimestamp((epoch + 1) * job.interval_s, tz=UTC)
        plan = decide(job, epoch, decisions, last_rescale=last, decided_epochs_since_rescale=count, now=end)
        plans.append(plan)
        if plan.action == RESCALE:
            for op in plan.operators:
                simulated[op.operator_id] = op.final
            last, since = LastRescale(epoch, end), []
    return Replay(plans)
