"""Counter snapshots of a running job and the metrics rows of the window between two of them.

Rates come from counter deltas, never from Flink's ``*PerSecond`` gauges (60 s moving
averages that lag a change by a minute). Per instance and window W:

- true processing rate = Δrecords in / Δbusy time, true output rate = Δrecords out / Δbusy time
  (a mostly idle task whose busy time did not grow counts 1 ms: no bottleneck, large capacity);
- observed rates = the same deltas / the instance's own window: Δ(busy + idle + back-pressured
  time). Flink books those three so that they add up to the task's running time when its
  metrics were sampled, and all of a subtask's values come from one sample. The REST metric
  store serves samples up to ``metrics.fetcher.update-interval`` old, so one snapshot's values
  can be seconds older than the other's: dividing by our own read times W then inflated the
  observed rate (a 4 s window whose samples were 6.1 s apart read Count at 7,662 r/s observed
  against 5,681 r/s true). W is used only when an instance reports no time at all;
- a source's records in are what it took in: what its task put out, or, for a task whose chain
  ends in a sink, what the source operator emitted; its processing rates are those per busy and
  per wall second (both 0 with no busy time reported: capacity unknown), so that a kind can size a
  source as any operator. Its true output rate is its **arrival rate**: what reaches them per second, whether or not the job
  keeps up. Four ways to know it, best first, each named in the row's ``source_rate_basis``:

  - ``emitted+lag``: records emitted per second plus the growth of FLIP-33's ``pendingRecords``
    per second over the window (the Flink autoscaler's ``inputRate + lagRate``, floored at 0).
    A Kafka or Pulsar source, and the test job's partitioned source, report it. Records that
    arrived and were not emitted are exactly the backlog's growth, so a back-pressured source's
    arrival rate is known, not only what it managed to send;
  - ``emitted+end-lag``: ``pendingRecords`` known at the window's end only (a Kafka reader reports
    none before its first fetch: the window after a restart). The backlog at the start was not below
    0, so the arrival was at most what was emitted plus the backlog at the end, per second. That bound
    is taken where the fallback below says more: while a restarted source works off the backlog the
    restart left, what it emits unblocked is its catch-up, not its arrival (a demo run's first window
    after a restart read 26,835 r/s for one reader of 15,000 that way);
  - ``emitted-unblocked`` (fallback, no ``pendingRecords``): Δrecords out / (window −
    Δback-pressured time), what it emitted while not blocked. A source blocked for more than
    95 % of the window gives no usable estimate that way (the few records it sent were
    bursts); then ``emitted``: its observed rate. Either way the policy sees no more than the
    job already does and can only grow it step by step;
  - ``gauge (oracle)``: a per-subtask gauge that says what the source is asked to emit
    (``source_rate_metric``, e.g. the test job's ``scheduledRate``). No production source has
    one: it is for runs labelled as an oracle, an upper bound on what honest inputs give.

Sources that report ``pendingRecords`` have it read at each snapshot: the backlog at the window's
end, for the policies that work it off.

A window that spans a restart (the job id changed, the parallelism changed, or a counter went
down) is marked warm-up: kept for the record, never used for a decision.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

import pyarrow as pa

from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.models import JobDetails, SubtaskCounters, VertexInfo
from autoscaler.store.files import StorePath, write_text_atomic
from autoscaler.store.parquet import epoch_block
from autoscaler.store.schemas import METRICS
from autoscaler.topology import Operator, Topology


@dataclass(frozen=True)
class Snapshot:
    job_name: str
    flink_job_id: str
    taken_at: datetime  # UTC, when the counters were read (mid-point of the reads)
    vertices: tuple[VertexInfo, ...]
    edges: tuple[tuple[str, str], ...]
    counters: tuple[SubtaskCounters, ...]
    restarts: int | None = None  # the job's numRestarts when the counters were read (None: not reported, older snapshots)

    def to_json(self) -> str:
        data = asdict(self)
        data["taken_at"] = self.taken_at.isoformat()
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str, source: str = "snapshot") -> Snapshot:
        try:
            data = json.loads(text)
            return cls(
                job_name=data["job_name"],
                flink_job_id=data["flink_job_id"],
                taken_at=datetime.fromisoformat(data["taken_at"]),
                vertices=tuple(VertexInfo(**v) for v in data["vertices"]),
                edges=tuple(tuple(e) for e in data["edges"]),  # type: ignore[misc]
                counters=tuple(SubtaskCounters(**c) for c in data["counters"]),
                restarts=data.get("restarts"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(source, f"not a valid counter snapshot: {exc}") from None

    def topology(self) -> Topology:
        """The job graph as a DS2 topology (vertex ids as operator ids)."""
        operators = [Operator(v.id, v.name, v.parallelism) for v in self.vertices]
        return Topology.from_edges(operators, self.edges, source=f"job graph of {self.job_name}")


# Flink's REST metric store is refreshed on demand: a request after a quiet period triggers a
# fetch but is answered from the old values (seen: a source's counters 15 s stale). So a first
# read primes the fetch, and the counters are read again until every subtask's accumulated
# time (busy + idle + back-pressured, which grows with wall time for any running subtask) has
# moved past the primed values: then the store holds values fetched after the prime.
METRICS_REFRESH_TIMEOUT_S = 10.0
TIME_JITTER_MS = 1000.0
MIN_BUSY_MS = 1.0


def _read_counters(client: FlinkRestClient, details: JobDetails) -> list[SubtaskCounters]:
    return [c for v in details.vertices for c in client.subtask_counters(details.id, v.id)]


def _accounted_ms(c: SubtaskCounters) -> float:
    """Busy + idle + back-pressured time: the subtask's running time when it was sampled."""
    return c.busy_ms + c.idle_ms + c.backpressured_ms


def _advanced(primed: list[SubtaskCounters], fresh: list[SubtaskCounters]) -> bool:
    total = {(c.vertex_id, c.subtask): _accounted_ms(c) for c in primed}
    return all(_accounted_ms(c) > total.get((c.vertex_id, c.subtask), -1.0) for c in fresh)


def take_snapshot(
    client: FlinkRestClient,
    job_name: str,
    source_rate_metric: str | None = None,
    refresh_timeout_s: float = METRICS_REFRESH_TIMEOUT_S,
) -> Snapshot:
    """Counters of every subtask of the running job called ``job_name``.

    ``source_rate_metric`` names a per-subtask gauge of the source vertices that says what
    rate they are asked to emit (read into :attr:`SubtaskCounters.target_rate`);
    ``refresh_timeout_s`` bounds the wait for fresh values (0: read once, as cached).
    """
    summary = client.running_job(job_name)
    details: JobDetails = client.job(summary.id)
    sources = {v.id for v in details.vertices} - {down for _, down in details.edges}
    primed = _read_counters(client, details)
    deadline = time.monotonic() + refresh_timeout_s
    while True:
        before = datetime.now(UTC)
        counters = _read_counters(client, details) if refresh_timeout_s > 0 else primed
        after = datetime.now(UTC)
        if refresh_timeout_s <= 0 or _advanced(primed, counters) or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    counters = _with_source_gauges(client, details.id, sources, counters, source_rate_metric)
    return Snapshot(
        job_name=job_name,
        flink_job_id=details.id,
        taken_at=before + (after - before) / 2,
        vertices=details.vertices,
        edges=details.edges,
        counters=tuple(counters),
        restarts=client.restarts(details.id),
    )


PENDING_RECORDS = ".pendingRecords"  # FLIP-33's standard source metric, prefixed with the operator's name
RECORDS_OUT = ".numRecordsOut"  # an operator's own records out, with the same prefix
# The Kafka source's per-partition metric, registered when a subtask is assigned the partition (a topic name may
# hold dots): counted over the vertex, the splits it reads.
KAFKA_SPLIT = re.compile(r".*\.KafkaSourceReader\.topic\.(.+)\.partition\.(\d+)\.currentOffset")


def source_splits(names: list[str]) -> int | None:
    """How many splits (Kafka topic partitions) a source vertex's metric names show it reads; None: it reports none."""
    splits = {m.groups() for m in map(KAFKA_SPLIT.fullmatch, names) if m}
    return len(splits) or None


def _vertex_splits(client: FlinkRestClient, job_id: str, vertex: str) -> int | None:
    """The splits a source vertex reads; None when unknown. A Flink whose REST API has no aggregated subtask metrics
    (404) leaves them unknown: the source is then capped by its key groups alone, as before splits were counted."""
    try:
        return source_splits(client.vertex_metric_names(job_id, vertex))
    except FlinkError as exc:
        if exc.status == 404:
            return None
        raise


def _with_source_gauges(
    client: FlinkRestClient, job_id: str, sources: set[str], counters: list[SubtaskCounters], rate_metric: str | None
) -> list[SubtaskCounters]:
    """Source counters with their target rate (``rate_metric``) and pending records, when reported."""
    names: dict[str, list[str]] = {}
    splits = {vertex: _vertex_splits(client, job_id, vertex) for vertex in sorted(sources)}
    for vertex in sorted(sources):
        listed = client.subtask_metric_names(job_id, vertex, 0)
        pending = [n for n in listed if n.endswith(PENDING_RECORDS)][:1]
        # The source operator's own records out, named with the same operator prefix as its pendingRecords.
        own_out = [
            n[: -len(PENDING_RECORDS)] + RECORDS_OUT for n in pending if n[: -len(PENDING_RECORDS)] + RECORDS_OUT in listed
        ]
        names[vertex] = pending + own_out + ([rate_metric] if rate_metric else [])
    out = []
    for c in counters:
        wanted = names.get(c.vertex_id)
        if c.vertex_id in splits:
            c = replace(c, source_splits=splits[c.vertex_id])
        if not wanted:
            out.append(c)
            continue
        values = client.subtask_metrics(job_id, c.vertex_id, c.subtask, wanted)
        pending = next((v for k, v in values.items() if k.endswith(PENDING_RECORDS)), None)
        own = next((v for k, v in values.items() if k.endswith(RECORDS_OUT)), None)
        out.append(replace(c, target_rate=values.get(rate_metric) if rate_metric else None, pending_records=pending,
                           source_records_out=int(own) if own is not None else None))  # fmt: skip
    return out


def failovers_between(previous: Snapshot, current: Snapshot) -> int:
    """How often the job failed over between two snapshots: the growth of its ``numRestarts`` while it kept
    its id and parallelism (a rescale restarts it too, in place or as a new job; that is not a failure)."""
    if previous.flink_job_id != current.flink_job_id or previous.restarts is None or current.restarts is None:
        return 0
    if {v.id: v.parallelism for v in previous.vertices} != {v.id: v.parallelism for v in current.vertices}:
        return 0
    return max(0, current.restarts - previous.restarts)


def restart_between(previous: Snapshot, current: Snapshot) -> str | None:
    """Why the window between two snapshots spans a restart, or None."""
    if previous.flink_job_id != current.flink_job_id:
        return f"job id changed {previous.flink_job_id} -> {current.flink_job_id}"
    before = {v.id: v.parallelism for v in previous.vertices}
    for v in current.vertices:
        if before.get(v.id) != v.parallelism:
            return f"vertex {v.name} parallelism {before.get(v.id)} -> {v.parallelism}"
    # Counters restart from zero on a failover, but can pass their old values again before the window ends.
    if failovers := failovers_between(previous, current):
        return f"the job failed over {failovers} times (numRestarts {previous.restarts} -> {current.restarts})"
    old = {(c.vertex_id, c.subtask): c for c in previous.counters}
    for c in current.counters:
        o = old.get((c.vertex_id, c.subtask))
        if o is None:
            return f"subtask {c.subtask} of vertex {c.vertex_id} is new"
        # A task failover in the same job restarts its counters from zero. Accumulated times are
        # sampled gauges that can step back by a few ms between reads: only a large drop counts.
        if c.records_in < o.records_in or c.records_out < o.records_out or c.busy_ms < o.busy_ms - TIME_JITTER_MS:
            return f"counters of vertex {c.vertex_id} subtask {c.subtask} went down"
    return None


# How a source's arrival rate was known (the metrics column ``source_rate_basis``), best first.
BASIS_LAG, BASIS_UNBLOCKED, BASIS_EMITTED, BASIS_ORACLE = "emitted+lag", "emitted-unblocked", "emitted", "gauge (oracle)"
BASIS_END_LAG = "emitted+end-lag"


def arrival_rate(
    c: SubtaskCounters, o: SubtaskCounters | None, d_out: float, d_bp_ms: float, window_s: float, terminal: bool = False
) -> tuple[float, str]:
    """One source subtask's arrival rate over a window and how it was known (see the module's doc).

    In the units of what the subtask's task puts out (what flows to the next vertex). A source chained
    with more operators (Kafka source -> filter -> partial aggregate) reads records the chain then
    filters or combines: its arrival is counted in the source operator's own records, emitted plus its
    backlog's growth, and carried into the task's units by the chain's measured ratio of records out to
    records the source emitted. A task whose chain ends in a sink (``terminal``: no vertex after it, as a
    SQL query chained into one task) puts out nothing: its arrival stays in the source's own records.
    """
    if c.target_rate is not None:
        return c.target_rate, BASIS_ORACLE
    own = source_emitted(c, o)
    d_read = own if own is not None else d_out
    chain = d_out / d_read if own is not None and d_read > 0 and not terminal else 1.0
    if o is not None and c.pending_records is not None and o.pending_records is not None:
        return max(0.0, (d_read + c.pending_records - o.pending_records) / window_s) * chain, BASIS_LAG
    unblocked_s = window_s - d_bp_ms / 1000.0
    rate, basis = (d_out / unblocked_s, BASIS_UNBLOCKED) if unblocked_s > 0.05 * window_s else (d_out / window_s, BASIS_EMITTED)
    if o is not None and c.pending_records is not None:
        bound = (d_read + c.pending_records) / window_s * chain  # the backlog at the start taken at its least, 0
        if bound < rate:
            return bound, BASIS_END_LAG
    return rate, basis


def source_emitted(c: SubtaskCounters, o: SubtaskCounters | None) -> float | None:
    """What the source operator itself emitted over the window (its own ``numRecordsOut``), None when unknown."""
    if o is None or c.source_records_out is None or o.source_records_out is None:
        return None
    return float(c.source_records_out - o.source_records_out)


def taken_in(c: SubtaskCounters, o: SubtaskCounters | None, d_out: float, terminal: bool) -> float:
    """What one source subtask took in over a window, in its arrival's units: what its task put out, or, for a
    chain that ends in a sink (it puts out nothing), what the source operator itself emitted."""
    own = source_emitted(c, o) if terminal else None
    return own if own is not None else d_out


def useful_parallelism(key_groups: int, splits: int | None) -> int | None:
    """The highest parallelism at which each instance has work of its own (the metrics' ``max_parallelism``): the
    operator's key groups, or, for a source that reads fewer splits (Kafka partitions), their count."""
    caps = [n for n in (key_groups, splits) if n is not None and n > 0]
    return min(caps) if caps else None


def window_metrics(previous: Snapshot, current: Snapshot, job: str, epoch: int, source_format: str = "flink-rest") -> pa.Table:
    """Metrics rows (one per operator instance) for the window between two snapshots (read from ``source_format``)."""
    wall_s = (current.taken_at - previous.taken_at).total_seconds()
    if wall_s <= 0:
        raise InputError("snapshots", f"window length {wall_s:.3f} s is not positive")
    warmup = restart_between(previous, current) is not None
    old = {(c.vertex_id, c.subtask): c for c in previous.counters}
    sources = {v.id for v in current.vertices} - {down for _, down in current.edges}
    feeding = {up for up, _ in current.edges}
    vertices = {v.id: v for v in current.vertices}
    rows: dict[str, list] = {c.name: [] for c in METRICS.columns}
    for c in current.counters:
        v = vertices[c.vertex_id]
        o = old.get((c.vertex_id, c.subtask)) if not warmup else None
        d_in = c.records_in - o.records_in if o else 0
        d_out = c.records_out - o.records_out if o else 0
        d_busy = max(c.busy_ms - o.busy_ms, 0.0) if o else 0.0
        d_idle = max(c.idle_ms - o.idle_ms, 0.0) if o else 0.0
        d_bp = max(c.backpressured_ms - o.backpressured_ms, 0.0) if o else 0.0
        # The instance's window, as measured by the sample its values come from (see above).
        # Unclipped: busy time can step back by what idle time gains (see below), the sum cannot.
        sampled_s = (_accounted_ms(c) - _accounted_ms(o)) / 1000.0 if o else 0.0
        window_s = sampled_s if sampled_s > 0 else wall_s
        is_source = v.id in sources
        basis = None
        # Flink adds an idle period to the idle time only when it ends and reports busy time as
        # the rest: for a mostly idle task it can stand still or step back over a window. Such
        # a task is no bottleneck; its busy time counts as MIN_BUSY_MS (a very large capacity).
        busy_s = max(d_busy, MIN_BUSY_MS) / 1000.0
        if is_source:
            terminal = v.id not in feeding
            true_out, basis = arrival_rate(c, o, d_out, d_bp, window_s, terminal)
            # What it took in, in its arrival's units (see arrival_rate): a source's "records in".
            # With no busy time reported its capacity is unknown: both its processing rates are 0.
            # (A legacy source reports its busy time as NaN: that is no busy time either.)
            taken = taken_in(c, o, d_out, terminal) if d_busy > 0 else 0.0
            true_in = taken / busy_s if taken else 0.0
        else:
            taken = d_in
            true_in, true_out = d_in / busy_s, d_out / busy_s
        row = {
            "job": job,
            "epoch": epoch,
            "epoch_block": epoch_block(epoch),
            "operator_id": v.id,
            "operator_name": v.name,
            "instance": c.subtask + 1,
            "parallelism": v.parallelism,
            "max_parallelism": useful_parallelism(v.max_parallelism, c.source_splits if is_source else None),
            "is_source": is_source,
            "window_start": previous.taken_at,
            "window_end": current.taken_at,
            "records_in": d_in,
            "records_out": d_out,
            "busy_ms": d_busy,
            "idle_ms": d_idle,
            "backpressured_ms": d_bp,
            "true_processing_rate": true_in,
            "true_output_rate": true_out,
            "observed_processing_rate": taken / window_s,
            "observed_output_rate": d_out / window_s,
            "warmup": warmup,
            "pending_records": c.pending_records if is_source else None,
            "source_format": source_format,
            "source_rate_basis": basis,
        }
        for key, value in row.items():
            rows[key].append(value)
    return pa.table(rows, schema=METRICS.arrow_schema())


def save_snapshot(snapshot: Snapshot, path: StorePath) -> None:
    """Write atomically (a crash leaves the previous boundary, never half a file)."""
    write_text_atomic(path, snapshot.to_json())


def load_snapshot(path: StorePath) -> Snapshot | None:
    if not path.exists():
        return None
    return Snapshot.from_json(path.read_text(), source=str(path))
