"""What the Prometheus path reads for a chained Kafka source: its operator's own records out beside its
pendingRecords, and the partitions its vertex reads (the real reporter's names: test_prometheus_kafka.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from autoscaler.collect.prometheus import KAFKA_SPLIT, OPERATOR_OUT, PENDING, TASK, snapshot_at
from autoscaler.topology import Operator, Topology

SRC = "a" * 32
AT = datetime(2026, 11, 28, tzinfo=UTC)
OPERATOR = "Source__KafkaSource_bid"


class FakeReader:
    """Answers instant queries by their metric name, as Prometheus would for q1 at parallelism 2 on 3 partitions."""

    def instant(self, promql: str, at: datetime) -> list[dict]:
        labels = {"job_name": "q1", "job_id": "j" * 32, "task_id": SRC}
        if promql.startswith("timestamp("):
            return [{"metric": labels, "value": [0, str(AT.timestamp())]}]
        if promql.startswith("count by (task_id)"):
            assert KAFKA_SPLIT in promql and "topic, partition" in promql
            return [{"metric": {"task_id": SRC}, "value": [0, "3"]}]
        out = []
        for subtask in (0, 1):
            series = {**labels, "subtask_index": str(subtask)}
            if promql.startswith(PENDING):
                out.append({"metric": {**series, "operator_name": OPERATOR}, "value": [0, "100"]})
            elif promql.startswith(OPERATOR_OUT):
                # The chain's operators each report one: only the source's is its own.
                out.append({"metric": {**series, "operator_name": OPERATOR}, "value": [0, str(5000 + subtask)]})
                out.append({"metric": {**series, "operator_name": "Calc_2_"}, "value": [0, "7"]})
            elif promql.startswith(TASK + "numRecordsOut"):
                out.append({"metric": series, "value": [0, "0"]})
        return out


def test_a_chained_sources_own_records_and_its_partitions_are_read():
    graph = Topology.from_edges([Operator(SRC, "Source: bid -> Calc -> Sink", 2)], [])
    snap = snapshot_at(FakeReader(), "q1", AT, graph)  # type: ignore[arg-type]
    assert [(c.subtask, c.records_out, c.pending_records, c.source_records_out, c.source_splits) for c in snap.counters] == [
        (0, 0, 100.0, 5000, 3),
        (1, 0, 100.0, 5001, 3),
    ]
