"""The Spark engine runs the same suites: every bad input fails the same rule as with pandas, epoch by epoch."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import METRICS, VALIDATIONS
from autoscaler.validate import quarantined_epochs, validate_range, validate_rows
from tests.unit.test_validation_builders import JOB, change, config, drop, epoch_rows, interval, row, table

pytestmark = pytest.mark.spark


def corpus() -> tuple[list[dict], dict[int, set[str]]]:
    """One epoch per bad input (epoch 0 is good), and the rules each must fail."""
    e = {k: epoch_rows(k) for k in range(14)}
    e[1] = drop(e[1], lambda r: (r["operator_id"], r["instance"]) != ("count", 2))
    e[2] = [*e[2], dict(e[2][3])]
    e[3] = change(e[3], "count", 2, observed_processing_rate=-5.0)
    e[4] = change(e[4], "count", 1, true_output_rate=math.nan)
    e[5] = change(e[5], "parse", 1, true_processing_rate=math.inf)
    e[6] = change(e[6], "count", 3, busy_ms=90_000.0, idle_ms=0.0)
    e[7] = [*e[7], {**row(7, "count", 3), "instance": 4}]
    e[8] = [*e[8], {**row(8, "parse", 1), "operator_id": "mystery", "operator_name": "Mystery"}]
    e[9] = change(e[9], "count", 1, warmup=True)
    e[10] = change(e[10], "src", 2, observed_processing_rate=500.0)
    e[11] = change(e[11], "count", 1, observed_processing_rate=500.0)
    e[12] = []  # empty epoch
    late = row(13, "parse", 1)
    e[13] = change(
        e[13],
        "parse",
        1,
        window_start=late["window_start"] + timedelta(minutes=5),
        window_end=late["window_end"] + timedelta(minutes=5),
    )
    expected = {
        0: set(),
        1: {"instances_present"},
        2: {"instances_unique"},
        3: {"rates_valid"},
        4: {"rates_valid"},
        5: {"rates_valid"},
        6: {"times_within_window", "times_sum_to_window"},
        7: {"instance_in_range"},
        8: {"operators_known"},
        9: set(),  # warm-up: a warning, not a failure
        10: {"observed_within_true"},
        11: {"observed_within_true"},
        12: {"instances_present"},
        13: {"windows_in_interval"},
    }
    return [r for k in sorted(e) for r in e[k]], expected


def test_spark_and_pandas_agree_on_the_corpus_and_a_spark_backfill_quarantines_the_bad_epochs(spark, tmp_path):
    rows, expected = corpus()
    epochs = sorted(expected)
    intervals = {k: interval(k) for k in epochs}
    cfg = config(0)
    data = table(rows)
    by_pandas = validate_rows(JOB, data, cfg, epochs=epochs, intervals=intervals)
    write_epochs(tmp_path, METRICS, JOB, data)
    by_spark = validate_range(tmp_path, JOB, 0, 13, cfg, intervals=intervals, engine="spark", spark=spark, docs=False)

    stored = [k for k in epochs if k != 12]  # a range validates the epochs that have rows
    assert sorted(by_spark) == stored and {r.engine for r in by_spark.values()} == {"spark"}
    for k in stored:
        assert {f.rule for f in by_spark[k].failures} == expected[k], (k, by_spark[k].message())
        named = sorted(o.where() for f in by_spark[k].failures for o in f.offenders)
        assert named == sorted(o.where() for f in by_pandas[k].failures for o in f.offenders), k
    for k in epochs:
        assert {f.rule for f in by_pandas[k].failures} == expected[k], (k, by_pandas[k].message())
    assert [w.rule for w in by_spark[9].warnings] == ["no_warmup"] and not by_spark[9].decidable
    assert by_spark[1].failures[0].offenders[0].where() == "Count#2 (epoch 1)"
    assert by_pandas[12].rows == 0 and by_spark[0].rows == 7 and by_spark[2].rows == 8

    bad = sorted(k for k in stored if expected[k])
    assert quarantined_epochs(tmp_path, JOB) == bad
    assert sorted(set(read_epochs(tmp_path, METRICS, JOB).column("epoch").to_pylist())) == [0, 9]
    statuses = {r["epoch"]: r["status"] for r in read_epochs(tmp_path, VALIDATIONS, JOB).to_pylist()}
    assert statuses == {k: ("passed" if k == 0 else "not-decidable" if k == 9 else "failed") for k in stored}
