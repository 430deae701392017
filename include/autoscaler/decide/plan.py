"""What the decide step produces: a plan per epoch, with a line per operator (:mod:`autoscaler.decide.rules`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

RESCALE = "rescale"
NOOP = "noop"
RECOMMEND = "recommend"  # a rescale decided and recorded, never acted on (recommendation-only job, excluded period)


@dataclass(frozen=True)
class LastRescale:
    """The newest epoch after which the job restarted: a rescale, or a failover (recorded failing-over)."""

    epoch: int
    finished_at: datetime | None
    what: str = "rescale"  # "rescale" or "failover", for the reasons' words


@dataclass
class OperatorPlan:
    operator_id: str
    operator_name: str
    is_source: bool
    current: int
    proposed: int  # DS2's proposal (after the policy's factor, threshold, bounds and alignment)
    final: int  # what will be applied
    input_rate: float | None
    capacity_per_instance: float | None
    reason: str  # DS2's reason
    notes: list[str] = field(default_factory=list)  # what the rules here changed, and why

    @property
    def changes(self) -> bool:
        return self.final != self.current


@dataclass
class ScalingPlan:
    job: str
    epoch: int
    action: str  # rescale, noop or recommend
    summary: str
    operators: list[OperatorPlan]
    validation: str | None = None  # the validation verdict / Data Docs page, for the approval body
    add_taskmanagers: int = 0  # TaskManagers the capacity provider adds before the rescale
    mechanism: str | None = None  # how the rescale moves the state (savepoint-restart or in-place); None: not chosen
    mechanism_reason: str = ""  # why that one (the predicted downtimes), or why none pays

    @property
    def target(self) -> dict[str, int]:
        """Operator name -> new parallelism, for the operators that change."""
        return {op.operator_name: op.final for op in self.operators if op.changes}

    @property
    def current(self) -> dict[str, int]:
        return {op.operator_name: op.current for op in self.operators}

    @property
    def slots_taken(self) -> int:
        """Task slots a rescale takes beyond what the job holds (one slot-sharing group: its largest
        operator's parallelism); 0 for a plan that does not act, or one that needs no more."""
        if self.action != RESCALE or not self.operators:
            return 0
        return max(0, max(op.final for op in self.operators) - max(op.current for op in self.operators))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["target"] = self.target
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScalingPlan:
        ops = [OperatorPlan(**op) for op in data["operators"]]
        return cls(data["job"], data["epoch"], data["action"], data["summary"], ops, data.get("validation"),
                   int(data.get("add_taskmanagers") or 0), data.get("mechanism"), data.get("mechanism_reason") or "")  # fmt: skip

    def markdown(self) -> str:
        """The decision as a Markdown table (the approval form's body)."""
        lines = [
            f"**{self.job}**, epoch {self.epoch}: {self.summary}",
            "",
            "| Operator | Parallelism | Input rate (rec/s) | Capacity per instance (rec/s) | Reason |",
            "|---|---|---|---|---|",
        ]
        for op in self.operators:
            arrow = f"{op.current} → **{op.final}**" if op.changes else f"{op.current}"
            if op.proposed != op.final:
                arrow += f" (DS2: {op.proposed})"
            why = "; ".join([op.reason, *op.notes]).replace("|", "\\|")
            lines.append(f"| {op.operator_name} | {arrow} | {_rate(op.input_rate)} | {_rate(op.capacity_per_instance)} | {why} |")
        if self.mechanism_reason:
            lines += ["", f"Mechanism: {self.mechanism_reason}"]
        if self.validation:
            lines += ["", f"Validation: {self.validation}"]
        return "\n".join(lines)

    def log_lines(self) -> list[str]:
        out = [f"{self.job} epoch {self.epoch}: {self.action}: {self.summary}"]
        if self.mechanism_reason:
            out.append(f"  mechanism: {self.mechanism_reason}")
        for op in self.operators:
            notes = f" [{'; '.join(op.notes)}]" if op.notes else ""
            out.append(f"  {op.operator_name}: {op.current} -> {op.final} (proposed {op.proposed}){notes}")
        return out


def _rate(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "∞" if math.isinf(value) else f"{value:,.0f}"
