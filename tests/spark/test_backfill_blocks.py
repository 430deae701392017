"""A long range decided block by block where it is stored (engine.spark.blocks) keeps the store's contract.

Writing epochs replaces exactly those epochs: a block's decisions of other epochs are carried over, a
second run over the same range replaces the first's rows, a failed check commits nothing and leaves no
staging behind, and a block that cannot be read is set aside rather than failing the run.
"""

from __future__ import annotations

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.run import COLLECT_EPOCHS, StoreRun, decide_stored_epochs
from autoscaler.store import parquet as store
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import write_topology_csv
from tests.helpers import metrics_rows
from tests.spark.test_policy_kinds_spark import ACROSS
from tests.unit.test_policy_kinds import TOPO

pytestmark = pytest.mark.spark

FIRST, LAST = min(ACROSS), max(ACROSS)  # 1015..1030, across blocks 0 and 1


@pytest.fixture
def stored(tmp_path):
    root = tmp_path / "store"
    store.write_epochs(root, METRICS, "t", metrics_rows(TOPO, ACROSS))
    topo_csv = tmp_path / "topology.csv"
    write_topology_csv(TOPO, topo_csv)

    def run(first: int, last: int, run_id: str) -> StoreRun:
        return StoreRun(str(root), "t", first, last, "backfill", run_id, str(topo_csv), PolicyOptions())

    return root, run


def _run_ids(root) -> dict[int, str]:
    rows = store.read_epochs(root, DECISIONS, "t", columns=["run_id"]).to_pylist()
    by_epoch: dict[int, set[str]] = {}
    for r in rows:
        by_epoch.setdefault(r["epoch"], set()).add(r["run_id"])
    assert all(len(ids) == 1 for ids in by_epoch.values()), by_epoch
    return {e: ids.pop() for e, ids in by_epoch.items()}


def test_a_long_range_replaces_its_epochs_and_keeps_the_others(spark, stored):
    root, run = stored
    assert decide_stored_epochs(spark, run(FIRST, FIRST + 4, "short")) == 5  # collected and written by the client
    long_range = (FIRST + 3, FIRST + 3 + COLLECT_EPOCHS)
    assert decide_stored_epochs(spark, run(*long_range, "long-1")) == LAST - FIRST - 2
    want = {e: "short" if e < FIRST + 3 else "long-1" for e in range(FIRST, LAST + 1)}
    assert _run_ids(root) == want
    rows = store.read_epochs(root, DECISIONS, "t").num_rows
    assert decide_stored_epochs(spark, run(*long_range, "long-2")) == LAST - FIRST - 2  # again: replaced, not added
    assert store.read_epochs(root, DECISIONS, "t").num_rows == rows
    assert _run_ids(root) == {e: "long-2" if r == "long-1" else r for e, r in want.items()}


def test_a_failed_check_before_the_commit_commits_nothing(spark, stored):
    root, run = stored
    decide_stored_epochs(spark, run(FIRST, FIRST + 4, "short"))

    def refuse() -> None:
        raise RuntimeError("the check before the commit failed")

    with pytest.raises(RuntimeError, match="before the commit"):
        decide_stored_epochs(spark, run(FIRST, FIRST + COLLECT_EPOCHS, "long"), before_commit=refuse)
    assert _run_ids(root) == {e: "short" for e in range(FIRST, FIRST + 5)}
    assert not list((root / DECISIONS.name).glob(".staging-*"))  # nothing staged is left behind


def test_a_torn_decisions_block_is_set_aside_and_rewritten(spark, stored):
    root, run = stored
    decide_stored_epochs(spark, run(FIRST, FIRST + 4, "short"))
    block = store.block_dir(root, DECISIONS, "t", 0)
    (part,) = block.glob("*.parquet")
    part.write_bytes(b"not parquet")  # torn by a crash without fsync
    assert decide_stored_epochs(spark, run(FIRST + 3, FIRST + 3 + COLLECT_EPOCHS, "long")) == LAST - FIRST - 2
    assert _run_ids(root) == {e: "long" for e in range(FIRST + 3, LAST + 1)}  # the torn rows are gone from the table
    assert len(list((block.parent / ".torn").iterdir())) == 1  # and kept aside, not deleted
