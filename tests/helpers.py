"""Builders for test inputs: metrics rows from per-operator aggregates, DS2 files on disk."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from autoscaler.policy.base import OperatorWindow
from autoscaler.store.parquet import epoch_block
from autoscaler.store.schemas import METRICS
from autoscaler.topology import Operator, Topology

T = TypeVar("T")


def poll(what: str, check: Callable[[], T], timeout_s: float = 180.0, every_s: float = 0.5) -> T:
    """``check()``'s first truthy value, asked every ``every_s``; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)


def topology(edges: list[tuple[str, str]], parallelism: Mapping[str, int]) -> Topology:
    names = dict.fromkeys(n for e in edges for n in e)
    return Topology.from_edges([Operator(n, n.upper(), parallelism.get(n, 1)) for n in names], edges)


def window(p: int, tp: float, to: float, oo: float | None = None, **kw) -> OperatorWindow:
    return OperatorWindow(p, kw.pop("n", p), tp, to, to if oo is None else oo, **kw)


def metrics_rows(topo: Topology, epochs: Mapping[int, Mapping[str, OperatorWindow]], job: str = "t") -> pa.Table:
    """Instance rows whose sums are the given aggregates (rates split evenly over instances).

    ``instances_observed`` below ``parallelism`` drops the last instances; ``warmup_instances``
    marks the first ones as warm-up.
    """
    cols: dict[str, list] = {c.name: [] for c in METRICS.columns}
    for epoch, windows in epochs.items():
        for op, w in windows.items():
            timed = bool(w.busy_ratio_max or w.backpressure_ratio_max)
            for i in range(1, w.instances_observed + 1):
                share = 1.0 / w.parallelism
                row = {
                    "job": job,
                    "epoch": epoch,
                    "epoch_block": epoch_block(epoch),
                    "operator_id": op,
                    "operator_name": topo.operators[op].name if op in topo.operators else op,
                    "instance": i,
                    "parallelism": w.parallelism,
                    "max_parallelism": w.max_parallelism,
                    "is_source": topo.operators[op].is_source if op in topo.operators else False,
                    "window_start": (1_700_000_000 + epoch * 60) * 1_000_000,
                    "window_end": None,
                    "records_in": None,
                    "records_out": None,
                    # Every instance equally busy and back-pressured: the maxima are the window's ratios.
                    "busy_ms": 1000 * w.busy_ratio_max if timed else None,
                    "idle_ms": 1000 * (1 - w.busy_ratio_max - w.backpressure_ratio_max) if timed else None,
                    "backpressured_ms": 1000 * w.backpressure_ratio_max if timed else None,
                    "true_processing_rate": w.true_processing_rate * share,
                    "true_output_rate": w.true_output_rate * share,
                    "observed_processing_rate": (w.observed_processing_rate or w.true_processing_rate / 2) * share,
                    "observed_output_rate": w.observed_output_rate * share,
                    "warmup": i <= w.warmup_instances,
                    "pending_records": None if w.pending_records is None else w.pending_records * share,
                    "source_format": "test",
                    "source_rate_basis": w.rate_basis,
                }
                for k, v in row.items():
                    cols[k].append(v)
    return pa.table(cols, schema=METRICS.arrow_schema())


def run_script(script: Path, args: Sequence[str], env: Mapping[str, str], check: bool = True,
               timeout: float = 400) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run one of the project's ``scripts/*.sh`` with an instance's environment; AssertionError with its output."""
    res = subprocess.run([str(script), *args], cwd=script.parents[1], env=dict(env), capture_output=True, text=True,
                         timeout=timeout)  # fmt: skip
    if check and res.returncode != 0:
        raise AssertionError(f"scripts/{script.name} {' '.join(args)} exited {res.returncode}:\n{res.stdout}{res.stderr}")
    return res


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
