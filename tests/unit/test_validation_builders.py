"""Builders for validation tests: consistent epochs of a Flink-like job, and ways to break them.

The job mimics the test job's shape -- Source (2) -> Parse (1) -> Count (3) -> Sink (1) -- with
60-second windows aligned to the epochs' data intervals. Every row is self-consistent: busy +
idle + back-pressured time = window, observed rates <= true rates, sources process nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from autoscaler.store.parquet import epoch_block
from autoscaler.store.schemas import METRICS
from autoscaler.topology import Operator, Topology
from autoscaler.validate import ValidationConfig

JOB = "vjob"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
WINDOW_S = 60
TOPO = Topology.from_edges(
    [Operator("src", "Source", 2), Operator("parse", "Parse", 1), Operator("count", "Count", 3), Operator("sink", "Sink", 1)],
    [("src", "parse"), ("parse", "count"), ("count", "sink")],
)
SLOTS = sum(op.parallelism for op in TOPO.operators.values())


def interval(epoch: int) -> tuple[datetime, datetime]:
    start = T0 + timedelta(seconds=WINDOW_S * epoch)
    return start, start + timedelta(seconds=WINDOW_S)


def config(epoch: int, **kw: Any) -> ValidationConfig:
    kw.setdefault("window_s", WINDOW_S)
    return ValidationConfig(topology=kw.pop("topology", TOPO), data_interval=interval(epoch), **kw)


def row(epoch: int, op_id: str, instance: int) -> dict[str, Any]:
    op = TOPO.operators[op_id]
    start, end = interval(epoch)
    window_ms = WINDOW_S * 1000.0
    if op.is_source:
        busy, idle, bp = 3000.0, 0.0, window_ms - 3000.0
        rin, rout = 0, 6000
        true_in, true_out = 0.0, 150.0  # the rate the source is asked for
    else:
        busy, idle, bp = window_ms / 2, window_ms / 2, 0.0
        rin, rout = 6000, 0 if op_id == "sink" else 6000
        true_in, true_out = rin / (busy / 1000), rout / (busy / 1000)
    return {
        "job": JOB,
        "epoch": epoch,
        "epoch_block": epoch_block(epoch),
        "operator_id": op_id,
        "operator_name": op.name,
        "instance": instance,
        "parallelism": op.parallelism,
        "max_parallelism": 128,
        "is_source": op.is_source,
        "window_start": start,
        "window_end": end,
        "records_in": rin,
        "records_out": rout,
        "busy_ms": busy,
        "idle_ms": idle,
        "backpressured_ms": bp,
        "true_processing_rate": true_in,
        "true_output_rate": true_out,
        "observed_processing_rate": rin / WINDOW_S,
        "observed_output_rate": rout / WINDOW_S,
        "warmup": False,
        "source_format": "flink-rest",
        "source_rate_basis": "emitted+lag" if op.is_source else None,
    }


def epoch_rows(epoch: int) -> list[dict[str, Any]]:
    return [row(epoch, op, i) for op in TOPO.order for i in range(1, TOPO.operators[op].parallelism + 1)]


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=METRICS.arrow_schema())


def change(rows: list[dict[str, Any]], op_id: str, instance: int, **values: Any) -> list[dict[str, Any]]:
    """A copy of ``rows`` with new values in the row of (op_id, instance)."""
    return [{**r, **values} if (r["operator_id"], r["instance"]) == (op_id, instance) else dict(r) for r in rows]


def drop(rows: list[dict[str, Any]], keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    return [dict(r) for r in rows if keep(r)]


def test_builders_make_consistent_epochs():
    rows = epoch_rows(5)
    assert len(rows) == SLOTS == 7
    for r in rows:
        window_ms = (r["window_end"] - r["window_start"]).total_seconds() * 1000
        assert r["busy_ms"] + r["idle_ms"] + r["backpressured_ms"] == window_ms
        assert r["observed_processing_rate"] <= r["true_processing_rate"]
        assert r["observed_output_rate"] <= r["true_output_rate"]
    assert table(rows).num_rows == 7
    assert change(rows, "count", 2, busy_ms=1.0)[4]["busy_ms"] == 1.0 and rows[4]["busy_ms"] != 1.0
