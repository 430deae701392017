"""Replay a lab run's stored epochs through the policy as it is now: which proposals would change?

A lab run keeps its store (``data/lab/<scenario>-<kind>/store``). Each decided epoch is decided
again here from the stored metrics, with the options the run recorded for it (so a measured restart
time is the one the run used), and its proposals are set beside the stored ones. With the code
unchanged every proposal must match: that is the check that the replay is faithful. After a policy
change the differences are the epochs whose proposals the change moves.

It is an open loop: the job's parallelism and load are what the run measured. An epoch whose
proposals do not move keeps its decision, so a run with no moved epoch would have been the same
run. A moved epoch says only that the closed loop differs from there on: the scenario needs a
lab run again.

    scripts/lab_replay.py data/lab/*-ds2_plus          # one line per run, then each moved epoch
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.spark.decisions import RunInfo, decide_job
from autoscaler.policy.windows import operator_windows
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import read_topology_csv

RUN = RunInfo("lab-replay", "replay", datetime(2026, 1, 1, tzinfo=UTC))


def replay(folder: Path) -> tuple[str, list[str]]:
    """The run's summary line and one line per epoch whose proposals moved."""
    store = folder / "store"
    topologies = sorted((store / "topologies").glob("*.csv"))
    if len(topologies) != 1:
        raise SystemExit(f"{store}: expected one job's topology, found {len(topologies)}")
    job = topologies[0].stem
    topology = read_topology_csv(topologies[0])
    windows = operator_windows(read_epochs(store, METRICS, job))
    stored = read_epochs(store, DECISIONS, job).to_pylist()
    by_epoch: dict[int, list[dict]] = {}
    for row in stored:
        by_epoch.setdefault(row["epoch"], []).append(row)
    moved = []
    for epoch in sorted(by_epoch):
        options = PolicyOptions.from_json(by_epoch[epoch][0]["options"])
        rows = windows.filter(pc.less_equal(windows.column("epoch"), epoch))
        again = decide_job(rows, topology, options, RUN, {}, epoch).to_pylist()
        before = {r["operator_id"]: r["target_parallelism"] for r in by_epoch[epoch] if not r["is_source"]}
        after = {r["operator_id"]: r["target_parallelism"] for r in again if r["epoch"] == epoch and not r["is_source"]}
        if before != after:
            names = {r["operator_id"]: r["operator_name"] for r in by_epoch[epoch]}
            change = ", ".join(f"{names[op]} {before.get(op)} -> {after.get(op)}" for op in before if before[op] != after.get(op))
            moved.append(f"  epoch {epoch - min(by_epoch)}: proposal {change}")
    return f"{folder.name}: {len(by_epoch)} epochs, {len(moved)} moved", moved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="lab run folders (each with its store)")
    args = parser.parse_args(argv)
    any_moved = False
    for folder in args.runs:
        line, moved = replay(folder)
        print(line)
        print("\n".join(moved)) if moved else None
        any_moved = any_moved or bool(moved)
    return 1 if any_moved else 0


if __name__ == "__main__":
    pa.set_cpu_count(1)
    sys.exit(main())
