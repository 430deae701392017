"""A real lab run's compact per-epoch record (``epochs.json``): what the collector measured, what was decided, what was done.

A run's store stays on the machine that ran it; its report prints only the sources' rates and the
parallelism. This record is committed with the run, so that the simulator can replay it, open loop
and closed, on any machine and after any cleanup: per epoch its window, per operator the sums over
its instances (records, busy, idle and back-pressured time, pending records) and the busiest
instance's ratios, each operator's proposal, and the action with its timings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoscaler.store.memory import MemoryStore
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS

SUMMED = ("records_in", "records_out", "busy_ms", "idle_ms", "backpressured_ms", "pending_records")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def epoch_record(store: str | Path | MemoryStore, job: str, epochs: range) -> list[dict[str, Any]]:
    """One entry per epoch of ``epochs`` (an epoch nothing was stored for has only its number)."""
    wanted = list(epochs)
    metrics = read_epochs(store, METRICS, job, wanted).to_pylist()
    decisions = read_epochs(store, DECISIONS, job, wanted, columns=["operator_name", "target_parallelism", "status"]).to_pylist()
    actions = {a["epoch"]: a for a in read_epochs(store, ACTIONS, job, wanted).to_pylist()}
    out: dict[int, dict[str, Any]] = {e: {"epoch": e} for e in wanted}
    for row in metrics:
        entry = out[row["epoch"]]
        entry.setdefault("window", [_iso(row["window_start"]), _iso(row["window_end"])])
        entry["warmup"] = entry.get("warmup", False) or bool(row["warmup"])
        op = entry.setdefault("operators", {}).setdefault(row["operator_name"], {"parallelism": row["parallelism"],
                                                                                  "instances": 0, "busy_max": 0.0})  # fmt: skip
        op["instances"] += 1
        for key in SUMMED:
            if row[key] is not None:
                op[key] = op.get(key, 0) + row[key]
        window = (row["busy_ms"] or 0) + (row["idle_ms"] or 0) + (row["backpressured_ms"] or 0)
        if window > 0:
            op["busy_max"] = max(op["busy_max"], round((row["busy_ms"] or 0) / window, 4))
        if row["is_source"]:
            entry["arrival"] = entry.get("arrival", 0.0) + row["true_output_rate"]
    for row in decisions:
        out[row["epoch"]].setdefault("proposed", {})[row["operator_name"]] = row["target_parallelism"]
    for epoch, action in actions.items():
        out[epoch]["action"] = {"outcome": action["outcome"], "started_at": _iso(action["started_at"]),
                                "finished_at": _iso(action["finished_at"]), "downtime_s": action["downtime_s"],
                                "new_parallelism": action["new_parallelism"]}  # fmt: skip
    return [out[e] for e in wanted]
