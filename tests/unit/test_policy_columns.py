"""DS2 over columns: many epochs in one call decide exactly as each epoch alone, and a backfill block
mixes column-wise epochs with the ones only the one-epoch path can decide (warm-up, missing, duplicated)."""

from __future__ import annotations

import math
import random
from dataclasses import asdict, replace
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.decisions import RunInfo, decide_job
from autoscaler.policy.base import OperatorWindow, columns_for, policy_for
from autoscaler.policy.columns import WindowColumns
from autoscaler.policy.ds2 import evaluate_columns, evaluate_epoch
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE
from tests.helpers import topology

TOPO = topology([("src", "a"), ("src2", "a"), ("a", "b"), ("a", "c"), ("b", "sink"), ("c", "sink")],
                {"src": 2, "src2": 1, "a": 3, "b": 1, "c": 2, "sink": 4})  # fmt: skip
RUN = RunInfo("r", "backfill", datetime(2026, 1, 1, tzinfo=UTC))


def _windows(rnd: random.Random) -> dict[str, OperatorWindow]:
    out = {}
    for op in TOPO.order:
        p = TOPO.operators[op].parallelism
        source = TOPO.operators[op].is_source
        processing = 0.0 if source else rnd.choice([0.0, rnd.uniform(10, 1e5), rnd.uniform(10, 1e5)])
        output = rnd.choice([0.0, rnd.uniform(0, 2) * (processing or rnd.uniform(10, 1e5))])
        basis = rnd.choice([None, "emitted+lag", "emitted", "emitted/emitted+lag"]) if source else None
        out[op] = OperatorWindow(p, p, processing, output, output * rnd.uniform(0.3, 1.0),
                                 max_parallelism=rnd.choice([None, 128]), rate_basis=basis)  # fmt: skip
    return out


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@pytest.mark.parametrize("options", [PolicyOptions(), PolicyOptions(threshold=1.05, factor=0.1, align_to_key_groups=True,
                                     max_parallelism={"c": 3}, max_scale_up_factor=1.0)])  # fmt: skip
def test_many_epochs_in_one_call_decide_as_each_epoch_alone(options):
    rnd = random.Random(7)
    epochs = [_windows(rnd) for _ in range(200)]
    together = evaluate_columns(TOPO, WindowColumns.of(TOPO, epochs), options, {"src2": -1})
    thresholded = 0
    for k, windows in enumerate(epochs):
        alone = evaluate_epoch(TOPO, windows, options, {"src2": -1})
        pairs = zip(together.decisions(TOPO, k), alone, strict=True)
        assert all(_same(getattr(x, f), getattr(y, f)) for x, y in pairs for f in x.__dataclass_fields__), k
        thresholded += any("threshold" in d.reason for d in alone)
    assert thresholded or options.threshold is None  # the threshold rule was exercised


def test_ds2_has_a_column_wise_model_and_the_kinds_with_history_do_not():
    assert columns_for("ds2") is evaluate_columns
    assert columns_for("ds2_plus") is None and columns_for("rules") is None


def _rows(epochs: dict[int, dict[str, OperatorWindow]]) -> pa.Table:
    rows = [{"job": "j", "epoch": e, "operator_id": op, **asdict(w)} for e, ws in epochs.items() for op, w in ws.items()]
    return pa.Table.from_pylist(rows)


def test_a_block_decides_usable_epochs_by_column_and_the_rest_one_by_one():
    rnd = random.Random(3)
    epochs = {e: _windows(rnd) for e in range(EPOCH_BLOCK_SIZE - 5, EPOCH_BLOCK_SIZE + 5)}
    first = EPOCH_BLOCK_SIZE - 5
    epochs[first + 1]["b"] = replace(epochs[first + 1]["b"], warmup_instances=1)
    epochs[first + 2]["c"] = replace(epochs[first + 2]["c"], instances_observed=1)
    epochs[first + 3]["a"] = replace(epochs[first + 3]["a"], duplicated_instances=1)
    del epochs[first + 4]["sink"]
    options = PolicyOptions().resolved(TOPO)
    table = decide_job(_rows(epochs), TOPO, options, RUN, {}, decide_from=first + 1, block=0)
    got = table.to_pylist()
    # Block 0 from decide_from on: 4 epochs, all unusable but one, each with every operator in order.
    assert [(r["epoch"], r["op_index"]) for r in got] == [(e, k) for e in range(first + 1, EPOCH_BLOCK_SIZE)
                                                          for k in range(len(TOPO.order))]  # fmt: skip
    assert {r["status"] for r in got if r["epoch"] in (first + 1,)} == {"warmup"}
    assert {r["status"] for r in got if r["epoch"] in (first + 2, first + 3, first + 4)} == {"incomplete"}
    whole = decide_job(_rows(epochs), TOPO, options, RUN, {}, decide_from=None, block=None).to_pylist()
    assert len(whole) == 10 * len(TOPO.order)
    policy = policy_for("ds2")
    for row in whole:
        want = next(d for d in policy(TOPO, epochs[row["epoch"]], options) if d.operator_id == row["operator_id"])
        assert all(_same(row[f], getattr(want, f)) for f in want.__dataclass_fields__), row
        assert row["epoch_block"] == row["epoch"] // EPOCH_BLOCK_SIZE and row["run_type"] == "backfill"
        assert row["options"] == options.to_json() and row["decided_at"] == RUN.decided_at


def test_rows_in_several_record_batches_decide_as_in_one():
    # Spark hands a worker its group in batches of spark.sql.execution.arrow.maxRecordsPerBatch rows.
    rnd = random.Random(5)
    table = _rows({e: _windows(rnd) for e in range(300)})
    batches = pa.concat_tables([table.slice(0, 777), table.slice(777, 1000), table.slice(1777)])
    assert batches.column("epoch").num_chunks == 3
    options = PolicyOptions().resolved(TOPO)
    one, several = (decide_job(t, TOPO, options, RUN, {}, None).to_pylist() for t in (table, batches))
    assert len(one) == 300 * len(TOPO.order)
    assert all(_same(a[k], b[k]) for a, b in zip(one, several, strict=True) for k in a)


def test_one_epoch_decided_as_a_row_is_the_epoch_decided_among_many_by_column():
    rnd = random.Random(11)
    epochs = {e: _windows(rnd) for e in range(20)}
    options = PolicyOptions().resolved(TOPO)
    many = decide_job(_rows(epochs), TOPO, options, RUN, {}, None).to_pylist()
    for epoch in (0, 7, 19):
        one = decide_job(_rows({epoch: epochs[epoch]}), TOPO, options, RUN, {}, None).to_pylist()
        same_epoch = [r for r in many if r["epoch"] == epoch]
        assert len(one) == len(same_epoch) == len(TOPO.order)
        assert all(_same(a[k], b[k]) for a, b in zip(one, same_epoch, strict=True) for k in a)
