"""An epoch's counters read from Prometheus at its exact boundaries, instead of from Flink's REST API.

With Flink's Prometheus reporter on (``scripts/flink.sh up --prometheus``) and a Prometheus scraping
it, every subtask's cumulative counters are kept as time series. :func:`snapshot_at` reads them as
they were at any instant (an instant query at that time: the newest sample at or before it), so:

- a backfill can compute decisions for epochs that were never collected live;
- a late run reads exactly its own window, not the moment it happened to run.

The counters are the REST path's (:class:`autoscaler.flink.models.SubtaskCounters`), from the
reporter's task metrics (``numRecordsIn``/``Out``, ``accumulateBusyTimeMs``/``IdleTimeMs``/
``BackPressuredTimeMs``), the sources' FLIP-33 ``pendingRecords`` with their operator's own
``numRecordsOut``, and the partitions a Kafka source vertex reads; the window's rows come from
the same :func:`autoscaler.collect.snapshot.window_metrics`. What the reporter does not carry (the
operators' names as Flink shows them, the job graph's edges, max parallelism) comes from a snapshot
or topology the REST path stored. The snapshot's time is its samples' scrape time, so the window is
what the counters measured, within one scrape interval of the boundary.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from autoscaler.collect.flink import snapshot_path, topology_path
from autoscaler.collect.snapshot import Snapshot, load_snapshot, window_metrics
from autoscaler.errors import InputError
from autoscaler.flink.models import SubtaskCounters, VertexInfo
from autoscaler.store.parquet import write_epochs
from autoscaler.store.schemas import METRICS
from autoscaler.topology import Topology, read_topology_csv

TASK = "flink_taskmanager_job_task_"
COUNTERS = {  # SubtaskCounters field -> the reporter's metric
    "records_in": TASK + "numRecordsIn",
    "records_out": TASK + "numRecordsOut",
    "busy_ms": TASK + "accumulateBusyTimeMs",
    "idle_ms": TASK + "accumulateIdleTimeMs",
    "backpressured_ms": TASK + "accumulateBackPressuredTimeMs",
}
PENDING = TASK + "operator_pendingRecords"
# A source operator's own records out (a chained source: its task's numRecordsOut is the chain's last operator's).
OPERATOR_OUT = TASK + "operator_numRecordsOut"
# The Kafka source's per-partition metric: the reporter turns its key-value groups into labels topic and partition.
KAFKA_SPLIT = TASK + "operator_KafkaSourceReader_topic_partition_currentOffset"
# The reporter writes label values with every character but letters, digits, ':' and '_' as '_'.
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9:_]")


@dataclass(frozen=True)
class PrometheusConnection:
    url: str  # http(s)://host:port, no path
    user: str | None = None
    password: str | None = None
    timeout_s: float = 10.0


class PrometheusReader:
    """Instant queries against Prometheus's HTTP API; errors name the server, never the password."""

    def __init__(self, conn: PrometheusConnection, session: requests.Session | None = None) -> None:
        if not re.fullmatch(r"https?://[A-Za-z0-9.\-]+(:\d{1,5})?", conn.url):
            raise InputError("prometheus url", f"{conn.url!r} must be http(s)://host[:port]")
        self.conn = conn
        self.session = session or requests.Session()

    def instant(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        auth = (self.conn.user, self.conn.password) if self.conn.user else None
        try:
            r = self.session.get(f"{self.conn.url}/api/v1/query", params={"query": promql, "time": at.timestamp()},
                                 auth=auth, timeout=self.conn.timeout_s)  # fmt: skip
        except requests.RequestException as exc:
            raise InputError(self.conn.url, f"Prometheus did not answer: {type(exc).__name__}") from None
        if r.status_code in (401, 403):
            raise InputError(self.conn.url, f"Prometheus refused the credentials ({r.status_code})")
        try:
            body = r.json()
        except ValueError:
            body = {}
        if r.status_code != 200 or body.get("status") != "success":
            raise InputError(self.conn.url, f"query failed ({r.status_code}): {body.get('error', r.text[:200])}")
        return list(body["data"]["result"])


def label_value(name: str) -> str:
    """A name as Flink's Prometheus reporter writes it in a label value."""
    return _LABEL_UNSAFE.sub("_", name)


def snapshot_at(reader: PrometheusReader, job_name: str, at: datetime, graph: Snapshot | Topology) -> Snapshot:
    """The counters of ``job_name``'s subtasks as Prometheus had them at ``at``.

    ``graph`` gives what the reporter does not: a stored snapshot (names, edges, max parallelism) or
    the job's topology (names and edges). When the job ran under two job ids in the lookback (a
    restart), the one scraped last is taken.
    """
    selector = f'{{job_name="{label_value(job_name)}"}}'
    stamps = reader.instant(f"timestamp({COUNTERS['records_out']}{selector})", at)
    if not stamps:
        raise InputError("prometheus", f"no samples of job {job_name!r} at {at.isoformat()} (is the reporter scraped?)")
    newest: dict[str, float] = {}
    for s in stamps:
        job_id = s["metric"].get("job_id", "")
        newest[job_id] = max(newest.get(job_id, 0.0), float(s["value"][1]))
    job_id = max(newest, key=lambda j: newest[j])
    by_subtask: dict[tuple[str, int], dict[str, float]] = {}
    this_job = f'{{job_name="{label_value(job_name)}",job_id="{job_id}"}}'
    source_operator: dict[tuple[str, int], str] = {}  # the operator that reports pendingRecords, per source subtask
    for field, metric in [*COUNTERS.items(), ("pending_records", PENDING)]:
        for s in reader.instant(metric + this_job, at):
            key = (s["metric"]["task_id"], int(s["metric"]["subtask_index"]))
            by_subtask.setdefault(key, {})[field] = float(s["value"][1])
            if field == "pending_records":
                source_operator[key] = s["metric"].get("operator_name", "")
    for s in reader.instant(OPERATOR_OUT + this_job, at) if source_operator else ():
        key = (s["metric"]["task_id"], int(s["metric"]["subtask_index"]))
        if key in by_subtask and s["metric"].get("operator_name") == source_operator.get(key):
            by_subtask[key]["source_records_out"] = float(s["value"][1])
    per_split = f"count by (task_id, topic, partition) ({KAFKA_SPLIT}{this_job})"
    splits = {s["metric"]["task_id"]: int(float(s["value"][1])) for s in reader.instant(f"count by (task_id) ({per_split})", at)}
    counters = tuple(_counters(vertex, subtask, v, splits.get(vertex)) for (vertex, subtask), v in sorted(by_subtask.items()))
    parallelism: dict[str, int] = {}
    for c in counters:
        parallelism[c.vertex_id] = parallelism.get(c.vertex_id, 0) + 1
    return Snapshot(
        job_name=job_name,
        flink_job_id=job_id,
        taken_at=datetime.fromtimestamp(statistics.median(_scraped(stamps, job_id)), tz=UTC),
        vertices=_vertices(graph, parallelism),
        edges=tuple(graph.edges),
        counters=counters,
    )


def _counters(vertex: str, subtask: int, v: dict[str, float], splits: int | None) -> SubtaskCounters:
    own = v.get("source_records_out")
    return SubtaskCounters(
        vertex_id=vertex,
        subtask=subtask,
        records_in=int(v.get("records_in", 0)),
        records_out=int(v.get("records_out", 0)),
        busy_ms=v.get("busy_ms", 0.0),
        idle_ms=v.get("idle_ms", 0.0),
        backpressured_ms=v.get("backpressured_ms", 0.0),
        status="RUNNING",
        pending_records=v.get("pending_records"),
        source_records_out=int(own) if own is not None else None,
        source_splits=splits,
    )


def _scraped(stamps: list[dict[str, Any]], job_id: str) -> list[float]:
    """When the job's samples were scraped (unix seconds)."""
    return [float(s["value"][1]) for s in stamps if s["metric"].get("job_id", "") == job_id]


def _vertices(graph: Snapshot | Topology, parallelism: dict[str, int]) -> tuple[VertexInfo, ...]:
    known: Sequence[VertexInfo]
    if isinstance(graph, Snapshot):
        known = graph.vertices
    else:
        known = [VertexInfo(op.id, op.name, op.parallelism, 0, "RUNNING") for op in graph.operators.values()]
    missing = sorted(set(parallelism) - {v.id for v in known})
    if missing:
        raise InputError("prometheus", f"vertices {', '.join(missing)} are not in the job graph given: the job changed")
    return tuple(VertexInfo(v.id, v.name, parallelism.get(v.id, 0), v.max_parallelism, "RUNNING") for v in known)


def epoch_graph(store_root: str | Path, job: str, epoch: int) -> Snapshot | Topology:
    """What the reporter does not carry, for an epoch: its stored boundary snapshot (or the one before), else the
    job's stored topology (names and edges; max parallelism unknown)."""
    for e in (epoch, epoch - 1):
        snap = load_snapshot(snapshot_path(store_root, job, e))
        if snap is not None:
            return snap
    path = topology_path(store_root, job)
    if not path.exists():
        raise InputError(str(path), f"no stored job graph of {job!r}: collect one epoch from Flink's REST API first")
    return read_topology_csv(path)


def collect_epoch(reader: PrometheusReader, job_name: str, job: str, epoch: int, start: datetime, end: datetime,
                  store_root: str | Path) -> tuple[int, float, str]:  # fmt: skip
    """Write epoch ``epoch``'s rows, read from Prometheus at its boundaries ``start`` and ``end``.

    Returns (rows, the window's length in s, the Flink job id). Idempotent: a second call rewrites the same rows.
    """
    graph = epoch_graph(store_root, job, epoch)
    first, last = snapshot_at(reader, job_name, start, graph), snapshot_at(reader, job_name, end, graph)
    if last.taken_at <= first.taken_at:
        raise InputError("prometheus", f"no sample of {job_name!r} between {start.isoformat()} and {end.isoformat()}")
    rows = window_metrics(first, last, job, epoch, "prometheus")
    write_epochs(store_root, METRICS, job, rows)
    return rows.num_rows, (last.taken_at - first.taken_at).total_seconds(), last.flink_job_id
