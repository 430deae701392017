"""What the Flink REST API tells us, as small typed records."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# States in which a job is (or is about to be) alive; anything else means it is gone.
ACTIVE_STATES = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "RECONCILING", "FAILING", "CANCELLING")
ENDED_STATES = ("FAILED", "CANCELED", "FINISHED", "SUSPENDED")
# States of a job that failed and is restarting by its restart strategy (a rescale is not a failure).
FAILOVER_STATES = ("FAILING", "RESTARTING")


# The planner numbers a SQL job's nodes ("GroupAggregate[4] -> Sink: counts[5]") from a counter that
# lives as long as the JobManager: the same query restarted from its savepoint comes back as
# "GroupAggregate[14] -> Sink: counts[15]". The numbers are not part of an operator's identity.
_PLANNER_NODE_NUMBER = re.compile(r"\[\d+\]")


def stable_vertex_names(names: Sequence[str]) -> list[str]:
    """Vertex names as operators are known here: the planner's node numbers dropped, so that a job's
    operators keep their names across restarts; two left alike are told apart by order (" #2")."""
    stripped = [_PLANNER_NODE_NUMBER.sub("", name) for name in names]
    seen: dict[str, int] = {}
    stable = []
    for name in stripped:
        seen[name] = seen.get(name, 0) + 1
        stable.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return stable


@dataclass(frozen=True)
class JobSummary:
    id: str
    name: str
    state: str
    tasks_running: int
    tasks_total: int
    start_time_ms: int

    @property
    def all_running(self) -> bool:
        """The job is RUNNING and so is every one of its tasks."""
        return self.state == "RUNNING" and 0 < self.tasks_total == self.tasks_running


@dataclass(frozen=True)
class VertexInfo:
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    status: str


@dataclass(frozen=True)
class JobDetails:
    id: str
    name: str
    state: str
    vertices: tuple[VertexInfo, ...]
    edges: tuple[tuple[str, str], ...] = field(default=())  # (upstream vertex id, downstream vertex id)

    def vertex(self, key: str) -> VertexInfo:
        """A vertex by id or by name."""
        for v in self.vertices:
            if key in (v.id, v.name):
                return v
        raise KeyError(key)

    @property
    def parallelism(self) -> dict[str, int]:
        return {v.name: v.parallelism for v in self.vertices}


@dataclass(frozen=True)
class SubtaskCounters:
    """Cumulative counters of one subtask at one moment (ms are accumulated times)."""

    vertex_id: str
    subtask: int
    records_in: int
    records_out: int
    busy_ms: float
    idle_ms: float
    backpressured_ms: float
    status: str
    target_rate: float | None = None  # sources: the rate they are asked to emit, when a metric says so
    pending_records: float | None = None  # sources: records they owe (FLIP-33 pendingRecords), when reported
    # Sources: the records the source operator itself emitted (its own numRecordsOut, beside its pendingRecords).
    # A task's records_out is its chain's last operator's: a SQL source chained with a filter and a partial
    # aggregate puts out far fewer records than it reads.
    source_records_out: int | None = None
    # Sources: the splits (Kafka partitions) the whole vertex reads, from its per-split metrics, when it reports them.
    source_splits: int | None = None


@dataclass(frozen=True)
class OperationStatus:
    """An asynchronous operation (savepoint, checkpoint trigger): IN_PROGRESS or COMPLETED."""

    status: str
    location: str | None = None
    failure: str | None = None

    @property
    def completed(self) -> bool:
        return self.status == "COMPLETED"

    @property
    def succeeded(self) -> bool:
        return self.completed and self.failure is None
