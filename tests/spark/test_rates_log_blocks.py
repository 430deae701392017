"""A rates log in timestamp order is decided block by block (engine.spark.rates_log) as Spark's general path decides it.

Its byte ranges are parsed apart, so a line can begin in one range and end in the next, and an
instance's epochs are counted across ranges: small ranges put every such case in a short log. What the
block path cannot take exactly (an instance out of timestamp order, within a range or across two; a
line the checks refuse) returns None, and the general path decides it or names the bad line.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark import blocks, decisions, inputs
from autoscaler.engine.spark import rates_log as by_ranges
from autoscaler.store import parquet as store
from autoscaler.store import spark as spark_store
from autoscaler.store.schemas import DECISIONS
from autoscaler.topology import read_topology_csv
from tests.conftest import TOPOLOGY_CSV

pytestmark = pytest.mark.spark
TOPO = read_topology_csv(TOPOLOGY_CSV)
EPOCHS = 2_100  # past COLLECT_EPOCHS, across three epoch blocks
VOLATILE = {"run_id", "decided_at"}


def _log(path, epochs: int = EPOCHS, swap: tuple[int, int] | None = None, bad_epoch: int | None = None,
         first: int = 0) -> None:  # fmt: skip
    """A rates log in time order: each epoch a line per instance, in a shuffled instance order."""
    rnd = random.Random(7)
    lines = ["# operator_id,instance,total,ts,tpr,tor,opr,oor"]
    for e in range(first, first + epochs):
        epoch_lines = []
        for op in TOPO.operators.values():
            for instance in range(1, op.parallelism + 1):
                ts = 1_000_000_000 * (e + 1) + 1000 * instance
                rate = rnd.uniform(1_000, 50_000)
                tpr = -5 if e == bad_epoch else 0 if op.is_source else rate
                epoch_lines.append(f"{op.id},{instance},{op.parallelism},{ts},{tpr},{rate},{rate / 2},{rate / 3}")
        rnd.shuffle(epoch_lines)
        lines += epoch_lines
        if e % 500 == 0:
            lines.append("# a comment between windows")
    if swap is not None:
        lines[swap[0]], lines[swap[1]] = lines[swap[1]], lines[swap[0]]
    path.write_text("\n".join(lines) + "\n")


def _run(root: str, run_id: str) -> blocks.BlockRun:
    info = decisions.RunInfo(run_id, "offline", datetime(2026, 1, 1, tzinfo=UTC))
    return blocks.BlockRun("", root, "wc", TOPO, PolicyOptions().resolved(TOPO), info, {}, None, None)


def _decisions(root) -> list[dict]:
    rows = store.read_epochs(root, DECISIONS, "wc").to_pylist()
    return sorted(({k: v for k, v in r.items() if k not in VOLATILE} for r in rows), key=lambda r: (r["epoch"], r["operator_id"]))


def test_a_log_in_time_order_is_decided_by_ranges_as_by_sparks_general_path(spark, tmp_path, monkeypatch):
    log = tmp_path / "rates.log"
    _log(log)
    monkeypatch.setattr(by_ranges, "RANGE_BYTES", 4099)  # about 40 ranges; lines and epochs cut across them
    assert by_ranges.decide_rates_log(spark, _run(str(tmp_path / "ranges"), "r1"), str(log)) == EPOCHS
    metrics, counts = inputs.rates_log(spark, str(log), TOPO, "wc")
    general = decisions.policy_decisions(metrics, TOPO, PolicyOptions(), decisions.RunInfo("r2", "offline", datetime.now(UTC)))
    spark_store.write_epochs(general.drop("op_index"), str(tmp_path / "general"), DECISIONS, "wc")
    inputs.raise_for_bad_lines(counts, str(log), TOPO)
    want = _decisions(tmp_path / "general")
    assert len(want) == EPOCHS * len(TOPO.operators)
    assert _decisions(tmp_path / "ranges") == want
    assert not list((tmp_path / "ranges").glob(".rates-log-*"))  # the scratch store is gone


@pytest.mark.parametrize(
    "case",
    ["out of order within a range", "out of order across ranges", "a bad line", "no data lines"],
)
def test_what_the_ranges_cannot_take_exactly_goes_to_the_general_path(spark, tmp_path, monkeypatch, case):
    log = tmp_path / "rates.log"
    lines_per_epoch = sum(op.parallelism for op in TOPO.operators.values())
    if case == "out of order within a range":
        _log(log, 40, swap=(1 + 3 * lines_per_epoch, 1 + 5 * lines_per_epoch))
    elif case == "out of order across ranges":
        # Epochs 20-39, then 0-19: each range in order by itself, the second's earlier than the first's.
        _log(tmp_path / "later", 20, first=20)
        _log(tmp_path / "earlier", 20)
        later = (tmp_path / "later").read_bytes()
        log.write_bytes(later + (tmp_path / "earlier").read_bytes())
        monkeypatch.setattr(by_ranges, "RANGE_BYTES", len(later))
    elif case == "a bad line":
        _log(log, 40, bad_epoch=20)
    else:
        log.write_text("# only a header\n\n")
    assert by_ranges.decide_rates_log(spark, _run(str(tmp_path / "ranges"), "r1"), str(log)) is None
    assert not (tmp_path / "ranges" / DECISIONS.name).exists() or not list((tmp_path / "ranges").rglob("*.parquet"))
