"""Every policy kind on Spark decides as its pure function does, with the epochs before as history."""

from __future__ import annotations

import pyarrow as pa
import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
from autoscaler.policy.base import EpochWindows, history_epochs, policy_for
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


def _across(k: int) -> dict:
    """Epoch 1015 + k: back-pressured at Count 1, then Count 3 at 60 % busy, then quiet at Count 8."""
    if k < 3:
        return epoch(1, 1.0, parse_bp=0.8)
    return epoch(3, 0.6) if k < 9 else epoch(8, 0.1, rate=4_000)


# Sixteen epochs across the boundary of epoch blocks 0 and 1 (epoch 1024).
ACROSS = {1015 + k: _across(k) for k in range(16)}


@pytest.mark.parametrize("kind", ["ds2", "utilization", "ds2_plus"])
@pytest.mark.parametrize("span", ["short", "long"])
def test_a_range_across_epoch_blocks_is_decided_as_in_one_pass(spark, tmp_path, kind, span):
    # "short" comes back to the client (one action); "long" reaches past COLLECT_EPOCHS and is decided
    # block by block where the blocks are stored. Either way each block is decided apart, with the
    # history its first epochs need.
    from autoscaler.engine.spark.run import COLLECT_EPOCHS

    root = tmp_path / "store"
    store.write_epochs(root, METRICS, "t", metrics_rows(TOPO, ACROSS))
    topo_csv = tmp_path / "topology.csv"
    write_topology_csv(TOPO, topo_csv)
    options = PolicyOptions(kind=kind, scale_down_interval=90.0, interval=30.0)
    last = 1030 if span == "short" else 1018 + COLLECT_EPOCHS
    assert decide_stored_epochs(spark, StoreRun(str(root), "t", 1018, last, "backfill", "r1", str(topo_csv), options)) == 13
    got = {(r["epoch"], r["operator_id"]): (r["target_parallelism"], r["reason"])
           for r in store.read_epochs(root, DECISIONS, "t").to_pylist()}  # fmt: skip
    assert {e for e, _ in got} == set(range(1018, 1031))
    policy, depth = policy_for(kind), history_epochs(options)
    for e in range(1018, 1031):
        history = [EpochWindows(h, ACROSS[h]) for h in range(e - depth, e) if h in ACROSS]
        for d in policy(TOPO, ACROSS[e], options, None, history, e):
            assert got[(e, d.operator_id)] == (d.target_parallelism, d.reason), (e, d.operator_id)


def test_a_long_range_with_an_unknown_operator_commits_nothing(spark, tmp_path):
    from autoscaler.engine.spark.run import COLLECT_EPOCHS
    from autoscaler.errors import InputError

    root = tmp_path / "store"
    rows = metrics_rows(TOPO, ACROSS)
    names = rows.column("operator_id").to_pylist()
    bad = rows.set_column(rows.schema.get_field_index("operator_id"), "operator_id",
                          pa.array([("ghost" if i == len(names) - 1 else n) for i, n in enumerate(names)]))  # fmt: skip
    store.write_epochs(root, METRICS, "t", bad)
    topo_csv = tmp_path / "topology.csv"
    write_topology_csv(TOPO, topo_csv)
    run = StoreRun(str(root), "t", 1015, 1015 + COLLECT_EPOCHS, "backfill", "r1", str(topo_csv), PolicyOptions(kind="ds2_plus"))
    with pytest.raises(InputError, match="ghost"):
        decide_stored_epochs(spark, run)
    assert not (root / "decisions").exists() or not list((root / "decisions").rglob("*.parquet"))
