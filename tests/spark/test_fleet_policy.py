"""The fleet's one Spark query decides every job as its own run would, and one job's bad input stays its own."""

from __future__ import annotations

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.fleet import decide_fleet_epochs
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
from autoscaler.store import parquet as store
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import write_topology_csv
from tests.helpers import metrics_rows
from tests.spark.test_policy_kinds_spark import EPOCHS
from tests.unit.test_policy_kinds import TOPO

pytestmark = pytest.mark.spark

KINDS = {"plain": "ds2", "rules": "rules", "util": "utilization", "plus": "ds2_plus"}


def _decisions(root, job: str, epoch: int) -> dict:
    rows = store.read_epochs(root, DECISIONS, job, [epoch]).to_pylist()
    return {r["operator_id"]: (r["target_parallelism"], r["reason"], r["status"]) for r in rows}


def test_one_query_decides_each_job_as_its_own_run_does(spark, tmp_path):
    fleet_root, alone_root = tmp_path / "fleet", tmp_path / "alone"
    topo_csv = tmp_path / "topology.csv"
    write_topology_csv(TOPO, topo_csv)
    runs = []
    for job, kind in KINDS.items():
        for root in (fleet_root, alone_root):
            store.write_epochs(root, METRICS, job, metrics_rows(TOPO, EPOCHS, job=job))
        options = PolicyOptions(kind=kind, scale_down_interval=60.0, interval=30.0)
        runs.append(StoreRun(str(fleet_root), job, 7, 7, "live", "fleet-1", str(topo_csv), options))
        assert decide_stored_epochs(spark, StoreRun(str(alone_root), job, 7, 7, "live", "alone", str(topo_csv), options)) == 1
    # Bad inputs, each its own verdict: an unknown operator, no metrics in the epoch, an unreadable topology.
    ghost = {**EPOCHS[7], "ghost": EPOCHS[7]["count"]}
    store.write_epochs(fleet_root, METRICS, "stranger", metrics_rows(TOPO, {7: ghost}, job="stranger"))
    runs.append(StoreRun(str(fleet_root), "stranger", 7, 7, "live", "fleet-1", str(topo_csv), PolicyOptions()))
    runs.append(StoreRun(str(fleet_root), "empty", 7, 7, "live", "fleet-1", str(topo_csv), PolicyOptions()))
    store.write_epochs(fleet_root, METRICS, "notopo", metrics_rows(TOPO, {7: EPOCHS[7]}, job="notopo"))
    runs.append(StoreRun(str(fleet_root), "notopo", 7, 7, "live", "fleet-1", str(tmp_path / "missing.csv"), PolicyOptions()))

    verdicts = decide_fleet_epochs(spark, runs)

    assert {job: verdicts[job] for job in KINDS} == dict.fromkeys(KINDS)
    for job in KINDS:
        assert _decisions(fleet_root, job, 7) == _decisions(alone_root, job, 7), job
        assert set(store.read_epochs(fleet_root, DECISIONS, job).column("epoch").to_pylist()) == {7}
    assert "ghost" in verdicts["stranger"] and "not in the topology" in verdicts["stranger"]
    assert "no metrics" in verdicts["empty"]
    assert "missing.csv" in verdicts["notopo"]
    for job in ("stranger", "empty", "notopo"):
        assert store.read_epochs(fleet_root, DECISIONS, job).num_rows == 0
