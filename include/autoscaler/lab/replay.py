"""A lab run's stored epochs decided again by the policy as it is now: which proposals does a change move?

A lab run keeps its store (``data/lab/<scenario>-<kind>/store``). Each decided epoch is decided
again from the stored metrics, with the options the run recorded for that epoch (so a measured
restart time is the one the run used), and its proposals are set beside the stored ones. With the
code unchanged every proposal matches: that is the check that the replay is faithful. After a
policy change the differences are the epochs whose proposals the change moves.

It is an open loop: the job's parallelism and load are what the run measured. The decide rules
read only the proposals and the run's own rescales, so a run with no moved proposal would have
been the same run: its scenario need not be run again for the change. A moved epoch says only that
the closed loop differs from there on; later moves are not predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.compute as pc

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.decisions import RunInfo, decide_job
from autoscaler.engine.windows import operator_windows
from autoscaler.errors import InputError
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import read_topology_csv

RUN = RunInfo("lab-replay", "replay", datetime(2026, 1, 1, tzinfo=UTC))


@dataclass(frozen=True)
class Moved:
    """One epoch whose proposals differ: per operator name, (stored, now)."""

    epoch: int  # counted from the run's first decided epoch
    proposals: dict[str, tuple[int, int | None]]

    def words(self) -> str:
        return f"epoch {self.epoch}: " + ", ".join(f"{op} {a} -> {b}" for op, (a, b) in sorted(self.proposals.items()))


@dataclass(frozen=True)
class Replayed:
    job: str
    epochs: int  # decided epochs in the store
    moved: list[Moved]


def replay(store: Path) -> Replayed:
    """Every decided epoch of the one job in ``store`` decided again; the epochs whose proposals moved."""
    topologies = sorted((store / "topologies").glob("*.csv"))
    if len(topologies) != 1:
        raise InputError(str(store), f"a lab run's store holds one job's topology, found {len(topologies)}")
    job = topologies[0].stem
    topology = read_topology_csv(topologies[0])
    windows = operator_windows(read_epochs(store, METRICS, job))
    by_epoch: dict[int, list[dict]] = {}
    for row in read_epochs(store, DECISIONS, job).to_pylist():
        by_epoch.setdefault(row["epoch"], []).append(row)
    first = min(by_epoch, default=0)
    moved = []
    for epoch, stored in sorted(by_epoch.items()):
        options = PolicyOptions.from_json(stored[0]["options"], f"{store}: epoch {epoch}'s options")
        rows = windows.filter(pc.less_equal(windows.column("epoch"), epoch))
        decided = decide_job(rows, topology, options, RUN, {}, epoch).to_pylist()
        again = {r["operator_id"]: r["target_parallelism"] for r in decided}
        differ = {r["operator_name"]: (r["target_parallelism"], again.get(r["operator_id"]))
                  for r in stored if not r["is_source"] and again.get(r["operator_id"]) != r["target_parallelism"]}  # fmt: skip
        if differ:
            moved.append(Moved(epoch - first, differ))
    return Replayed(job, len(by_epoch), moved)
