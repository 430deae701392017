"""Every policy kind on Spark decides as its pure function does, with the epochs before as history."""

from __future__ import annotations

import pytest

from autoscaler.config.options import PolicyOptions
from autoscaler.policy.base import EpochWindows, history_epochs, policy_for
from autoscaler.policy.spark.run import StoreRun, decide_stored_epochs
from autoscaler.store import parquet as store
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import write_topology_csv
from tests.helpers import metrics_rows
from tests.unit.test_policy_kinds import TOPO, epoch

pytestmark = pytest.mark.spark

# Six epochs: back-pressured at Count 1 (three in a row), then Count 3, then quiet at 8.
EPOCHS = {
    1: epoch(1, 1.0, parse_bp=0.8),
    2: epoch(1, 1.0, parse_bp=0.8),
    3: epoch(1, 1.0, parse_bp=0.8, pending=50_000.0),
    4: epoch(3, 1.0, parse_bp=0.4),
    6: epoch(8, 0.1, rate=4_000),  # epoch 5 is missing (quarantined)
    7: epoch(8, 0.1, rate=4_000),
}


@pytest.mark.parametrize("kind", ["rules", "utilization", "ds2_plus"])
def test_kind_on_spark_matches_its_pure_function(spark, tmp_path, kind):
    root = tmp_path / "store"
    store.write_epochs(root, METRICS, "t", metrics_rows(TOPO, EPOCHS))
    topo_csv = tmp_path / "topology.csv"
    write_topology_csv(TOPO, topo_csv)
    options = PolicyOptions(kind=kind, scale_down_interval=60.0, interval=30.0)
    run = StoreRun(str(root), "t", 3, 7, "backfill", "r1", str(topo_csv), options)
    assert decide_stored_epochs(spark, run) == 4
    rows = store.read_epochs(root, DECISIONS, "t").to_pylist()
    got = {(r["epoch"], r["operator_id"]): (r["target_parallelism"], r["reason"], r["status"]) for r in rows}
    assert {e for e, _ in got} == {3, 4, 6, 7}  # epochs before 3 were read as history only
    policy = policy_for(kind)
    depth = history_epochs(options)
    for e in (3, 4, 6, 7):
        history = [EpochWindows(h, EPOCHS[h]) for h in range(e - depth, e) if h in EPOCHS]
        for d in policy(TOPO, EPOCHS[e], options, None, history, e):
            assert got[(e, d.operator_id)] == (d.target_parallelism, d.reason, d.status), (e, d.operator_id)
    if kind == "rules":
        assert got[(3, "count")][0] == 3  # three back-pressured epochs in a row, two of them history
        assert got[(7, "count")][0] == 8  # epoch 5 missing: only two quiet epochs in a row
