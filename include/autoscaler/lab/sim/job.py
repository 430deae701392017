"""The simulated test job: its source's backlog, each operator's measured capacity, and its counters.

A fluid model, solved exactly between events (a load step, a snapshot, a decision, a restart), of the job the lab runs on Flink
(``flink-job/``: a partitioned source, Parse, Count keyed by word, a sink, one record in per record
out). Everything in it is measured or follows from how the job is written:

- **the source** owes what the schedule asked for and it did not emit (``PartitionReader``'s
  ``pendingRecords``): arrivals accumulate while the job is stopped or back-pressured, and a source
  that owes records emits as fast as the job takes them. A source with ``backlog: false`` forgives
  what is older than its credit (``MAX_CREDIT_MS``);
- **each operator's capacity** at parallelism ``p`` is its measured throughput (the ground-truth
  curve of its cost, :mod:`autoscaler.lab.ground_truth`: CPU contention on the machine's cores and
  sublinear scaling included). Past the last measured point a curve that was still growing keeps its
  last per-instance rate, one that had flattened stays flat;
- **keys**: Count's records go to its instances by key group, as Flink assigns them
  (:mod:`autoscaler.lab.sim.keys`); the hot key of a skewed load goes to one instance. An instance
  serves at the one-instance rate, so an unmeasured parallelism takes that rate over its busiest
  instance's share: from the one-instance rate alone this gives every measured point of Count's
  curves, skewed or not, within 1 %;
- **what an instance books**: busy time for the records it served at its rate; the rest of its
  time is back-pressured when an operator downstream limits the job, idle otherwise (Flink's
  ``busyTimeMsPerSecond``, ``backPressuredTimeMsPerSecond``, ``idleTimeMsPerSecond``).

The counters are Flink's cumulative ones (:class:`~autoscaler.flink.models.SubtaskCounters`), reset
by a restart under a new job id: the collector's own code turns two snapshots into the epoch's rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from autoscaler.flink.models import SubtaskCounters, VertexInfo
from autoscaler.lab.ground_truth import Curve, GroundTruth
from autoscaler.lab.scenario import SCALED, Scenario
from autoscaler.lab.sim.keys import instance_shares

SOURCE = "Source: Source"
OPERATORS = (SOURCE, *SCALED)  # the test job's chain, in order
VERTEX_IDS = {SOURCE: "source", "Parse": "parse", "Count": "count", "Sink: Writer": "sink"}
KEY_GROUPS = 128  # Flink's default max parallelism for a job of at most 128: what the real vertices report
CREDIT_S = 0.1  # PartitionReader.MAX_CREDIT_MS: what a source without backlog may owe before it forgives
# PartitionReader.REFRESH_NS: a subtask recomputes what it owes every millisecond and emits it, so a source that
# keeps up still owes what arrived since (the real gauge reads 28-40 records at 20,000 r/s on 2 subtasks)
REFRESH_S = 0.001


@dataclass(frozen=True)
class OperatorModel:
    """One scaled operator: its measured curve, how its records spread over its instances, and its cores."""

    name: str
    curve: Mapping[int, float]
    keyed: bool = False  # Count: records go to instances by key group (keys.py); the others: round-robin
    skew: float = 0.0
    keys: int = 10_000
    cpu: bool = False  # the per-record cost spins a core: the machine's cores bound the operator

    def shares(self, p: int) -> tuple[float, ...]:
        """Each instance's share of the operator's records."""
        if not self.keyed:
            return (1.0 / p,) * p
        return instance_shares(p, self.keys, KEY_GROUPS, self.skew)

    def capacity(self, p: int) -> float:
        """Records/s the operator takes at parallelism ``p``: measured, else its busiest instance's limit at the
        one-instance rate (for a CPU-bound operator, no more than the most its curve ever took)."""
        if p in self.curve:
            return self.curve[p]
        q = min(self.curve)
        limit = self.curve[q] * max(self.shares(q)) / max(self.shares(p))
        return min(limit, max(self.curve.values())) if self.cpu else limit

    def service_rate(self, p: int) -> float:
        """Records/s one instance serves while busy: its busiest instance is busy all the time at capacity."""
        return self.capacity(p) * max(self.shares(p))


@dataclass
class Counters:
    """One subtask's cumulative counters since its job started."""

    records_in: float = 0.0
    records_out: float = 0.0
    busy_ms: float = 0.0
    idle_ms: float = 0.0
    backpressured_ms: float = 0.0


@dataclass
class JobModel:
    """The job's state: its parallelism, what its source owes, whether it runs, and its counters."""

    scenario: Scenario
    operators: Mapping[str, OperatorModel]
    source_capacity: float
    parallelism: dict[str, int]
    backlog: float = 0.0
    arrival: float = 0.0  # the load's rate now, records/s
    running: bool = True
    job_number: int = 0
    counters: dict[str, list[Counters]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.counters = {op: [Counters() for _ in range(self.parallelism[op])] for op in OPERATORS}

    @property
    def job_id(self) -> str:
        return f"{self.job_number:032x}"

    def capacity(self) -> tuple[float, int]:
        """Records/s the job takes at its parallelism, and the index in :data:`OPERATORS` of what limits it."""
        limits = [self.source_capacity] + [self.operators[op].capacity(self.parallelism[op]) for op in SCALED]
        k = min(range(len(limits)), key=limits.__getitem__)
        return limits[k], k

    def advance(self, dt: float, arrival: float) -> None:
        """``dt`` seconds at a constant ``arrival`` records/s, solved exactly: a job that owes records runs at its
        capacity until they are worked off (or the time is up), then at the arrival rate."""
        if dt <= 0:
            return
        self.arrival = arrival
        if not self.running:  # stopped: the input waits in the source's partitions
            self._owe(self.backlog + arrival * dt, arrival)
            return
        cap, limiter = self.capacity()
        if arrival >= cap or self.backlog <= 0:
            rate = min(arrival, cap)
            self._run(rate, dt, arrival, arrival > cap, limiter)
            return
        drained_in = self.backlog / (cap - arrival)  # owing, with room to spare: at capacity until drained
        first = min(drained_in, dt)
        self._run(cap, first, arrival, True, limiter)
        if first < dt:
            self.backlog = 0.0
            self._run(arrival, dt - first, arrival, False, limiter)

    def _run(self, rate: float, dt: float, arrival: float, limited: bool, limiter: int) -> None:
        """``dt`` seconds of the job taking ``rate`` records/s (``limited``: at the capacity ``limiter`` sets)."""
        self._owe(self.backlog + (arrival - rate) * dt, arrival)
        for k, op in enumerate(OPERATORS):
            blocked = limited and k < limiter  # upstream of what limits the job: waiting on its output
            self._book(op, rate * dt, dt, blocked)

    def _owe(self, owed: float, arrival: float) -> None:
        owed = max(owed, 0.0)
        self.backlog = owed if self.scenario.backlog else min(owed, arrival * CREDIT_S)

    def _book(self, op: str, records: float, dt: float, blocked: bool) -> None:
        p = self.parallelism[op]
        window_ms = dt * 1000.0
        if op == SOURCE:
            shares, rate = [1.0 / p] * p, math.inf
        else:
            model = self.operators[op]
            shares, rate = model.shares(p), model.service_rate(p)
        for c, share in zip(self.counters[op], shares, strict=True):
            n = records * share
            busy = min(window_ms, 1000.0 * n / rate) if op != SOURCE else 0.0
            c.records_in += 0.0 if op == SOURCE else n
            c.records_out += n
            c.busy_ms += busy
            if blocked:
                c.backpressured_ms += window_ms - busy
            else:
                c.idle_ms += window_ms - busy

    def stop(self) -> None:
        self.running = False

    def start(self, parallelism: Mapping[str, int]) -> None:
        """Running again, as a new Flink job, at ``parallelism`` (counters from zero)."""
        self.parallelism = {**self.parallelism, **parallelism}
        self.running = True
        self.job_number += 1
        self._reset_counters()

    def subtask_counters(self) -> list[SubtaskCounters]:
        """The counters as the REST API serves them (whole records; the sources' pendingRecords)."""
        out = []
        for op in OPERATORS:
            subtasks = self.counters[op]
            for i, c in enumerate(subtasks):
                owed = self.backlog + self.arrival * REFRESH_S
                pending = round(owed / len(subtasks)) if op == SOURCE else None
                out.append(SubtaskCounters(VERTEX_IDS[op], i, int(c.records_in), int(c.records_out), c.busy_ms, c.idle_ms,
                                           c.backpressured_ms, "RUNNING", None, pending))  # fmt: skip
        return out

    def vertices(self) -> tuple[VertexInfo, ...]:
        return tuple(VertexInfo(VERTEX_IDS[op], op, self.parallelism[op], KEY_GROUPS, "RUNNING") for op in OPERATORS)


EDGES = tuple((VERTEX_IDS[a], VERTEX_IDS[b]) for a, b in itertools.pairwise(OPERATORS))


def operator_models(scenario: Scenario, truth: GroundTruth) -> dict[str, OperatorModel]:
    """Each scaled operator of ``scenario`` with the measured curve of its cost."""
    out = {}
    for op in SCALED:
        cost = scenario.cost(op)
        curve: Curve = truth.curve(op, cost)
        out[op] = OperatorModel(op, dict(curve.throughput), op == "Count", cost.skew, scenario.keys, cost.mode == "cpu")
    return out


def source_capacity(truth: GroundTruth) -> float:
    """What the source (2 subtasks) emits at most: the job's measured throughput with no operator cost."""
    free = [c.throughput.get(1, 0.0) for k, c in truth.curves.items() if c.cost.cost_us == 0]
    return min(free) if free else math.inf
