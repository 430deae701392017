"""The bad-input corpus: each bad epoch fails exactly the named expectation, is stopped, and nothing is lost.

Every case writes a good predecessor epoch (4), the bad epoch (5) and a good successor (6) --
all in one store block -- validates epoch 5 and checks: the failed rules, the operator/instance
and values named, that epoch 5 left the store for quarantine with its exact rows and the result
JSON, that epochs 4 and 6 were not touched, and that ``release_quarantine`` brings the rows back.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import METRICS, VALIDATIONS
from autoscaler.validate import (
    EpochValidation,
    ValidationFailed,
    read_quarantine,
    release_quarantine,
    validate_epoch,
)
from autoscaler.validate.quarantine import quarantine_dir
from tests.unit.test_validation_builders import JOB, SLOTS, change, config, drop, epoch_rows, row, table

ORDER = [("operator_id", "ascending"), ("instance", "ascending"), ("window_start", "ascending")]


def store_with(root: Path, bad: list[dict] | None) -> pa.Table | None:
    """Epochs 4 and 6 good, epoch 5 = ``bad`` (None: no rows at all)."""
    rows = epoch_rows(4) + epoch_rows(6) + (bad or [])
    write_epochs(root, METRICS, JOB, table(rows))
    return table(bad) if bad is not None else None


def run(root: Path, **kw) -> EpochValidation:
    return validate_epoch(root, JOB, 5, config(5, **kw), docs=False)


def same(a: pa.Table, b: pa.Table) -> bool:
    """Equal rows in any order (NaN equal to NaN)."""
    return a.sort_by(ORDER).to_pandas().equals(b.sort_by(ORDER).to_pandas())


def assert_kept_and_restorable(root: Path, original: pa.Table | None, result: EpochValidation) -> None:
    """Epoch 5 is out of the store, in quarantine with its result, neighbours intact, restorable."""
    assert read_epochs(root, METRICS, JOB, [5]).num_rows == 0
    assert read_epochs(root, METRICS, JOB, [4, 6]).num_rows == 2 * SLOTS
    quarantined, saved = read_quarantine(root, JOB, 5)
    expected = original if original is not None else METRICS.arrow_schema().empty_table()
    assert same(quarantined, expected)
    assert saved["status"] == "failed" and saved["failures"] and saved["epoch"] == 5
    assert result.quarantine == str(quarantine_dir(root, JOB, 5))
    assert release_quarantine(root, JOB, 5, replace=True) == expected.num_rows
    assert same(read_epochs(root, METRICS, JOB, [5]), expected)
    assert read_quarantine(root, JOB, 5) is None


def failed(result: EpochValidation) -> set[tuple[str, str]]:
    return {(f.rule, f.expectation) for f in result.failures}


def offenders(result: EpochValidation, rule: str) -> list[str]:
    return [o.where() for f in result.failures if f.rule == rule for o in f.offenders]


def test_a_good_epoch_passes_and_stays(tmp_path):
    store_with(tmp_path, epoch_rows(5))
    result = run(tmp_path)
    assert result.success and result.decidable and result.status == "passed", result.message()
    assert result.rows == SLOTS and result.evaluated > 40
    assert read_epochs(tmp_path, METRICS, JOB, [5]).num_rows == SLOTS
    assert read_quarantine(tmp_path, JOB, 5) is None
    record = read_epochs(tmp_path, VALIDATIONS, JOB, [5]).to_pylist()
    assert [(r["status"], r["failed"], r["rows"], r["quarantine"]) for r in record] == [("passed", 0, SLOTS, None)]
    assert result.summary() == f"job {JOB} epoch 5: metrics passed {result.evaluated} expectations, {SLOTS} rows"


def test_missing_instance(tmp_path):
    original = store_with(tmp_path, drop(epoch_rows(5), lambda r: (r["operator_id"], r["instance"]) != ("count", 2)))
    result = run(tmp_path)
    assert failed(result) == {("instances_present", "expect_column_values_to_be_between")}
    assert offenders(result, "instances_present") == ["Count#2 (epoch 5)"]
    assert "rows=0" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_duplicated_instance(tmp_path):
    rows = epoch_rows(5)
    original = store_with(tmp_path, [*rows, dict(rows[3])])  # Count#1 twice
    result = run(tmp_path)
    assert failed(result) == {("instances_unique", "expect_compound_columns_to_be_unique")}
    assert offenders(result, "instances_unique") == ["Count#1 (epoch 5)", "Count#1 (epoch 5)"]
    assert_kept_and_restorable(tmp_path, original, result)


def test_negative_rate(tmp_path):
    original = store_with(tmp_path, change(epoch_rows(5), "count", 2, observed_processing_rate=-5.0))
    result = run(tmp_path)
    assert failed(result) == {("rates_valid", "expect_column_values_to_be_between")}
    (failure,) = result.failures
    assert failure.offenders[0].where() == "Count#2 (epoch 5)"
    assert failure.offenders[0].values == {"observed_processing_rate": -5.0}
    assert "observed_processing_rate is >= 0 and finite" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_nan_rate(tmp_path):
    original = store_with(tmp_path, change(epoch_rows(5), "count", 1, true_output_rate=math.nan))
    result = run(tmp_path)
    # pandas holds NaN as "missing": the not-null half of the rule catches it (Spark: the range half).
    assert failed(result) == {("rates_valid", "expect_column_values_to_not_be_null")}
    assert offenders(result, "rates_valid") == ["Count#1 (epoch 5)"]
    assert "true_output_rate is a number (not NaN or null)" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_infinite_rate(tmp_path):
    original = store_with(tmp_path, change(epoch_rows(5), "parse", 1, true_processing_rate=math.inf))
    result = run(tmp_path)
    assert failed(result) == {("rates_valid", "expect_column_values_to_be_between")}
    (failure,) = result.failures
    assert failure.offenders[0].values == {"true_processing_rate": math.inf}
    assert "Parse#1 (epoch 5): true_processing_rate=inf" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_busy_time_longer_than_the_window(tmp_path):
    original = store_with(tmp_path, change(epoch_rows(5), "count", 3, busy_ms=90_000.0, idle_ms=0.0))
    result = run(tmp_path)
    # more busy time than the window also makes the three times overshoot the window
    assert failed(result) == {
        ("times_within_window", "expect_column_pair_ratio_to_be_between"),
        ("times_sum_to_window", "expect_column_pair_ratio_to_be_between"),
    }
    within = next(f for f in result.failures if f.rule == "times_within_window")
    assert within.offenders[0].where() == "Count#3 (epoch 5)"
    assert within.offenders[0].values == {"busy_ms": 90000.0, "window_ms": 60000.0}
    assert "busy_ms <= window x 1.25 + 4 s" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_instance_id_out_of_range(tmp_path):
    original = store_with(tmp_path, [*epoch_rows(5), {**row(5, "count", 3), "instance": 4}])
    result = run(tmp_path)
    assert failed(result) == {("instance_in_range", "expect_column_pair_values_a_to_be_greater_than_b")}
    assert offenders(result, "instance_in_range") == ["Count#4 (epoch 5)"]
    assert "Count#4 (epoch 5): topology_parallelism=3" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_unknown_operator(tmp_path):
    stranger = {**row(5, "parse", 1), "operator_id": "mystery", "operator_name": "Mystery"}
    original = store_with(tmp_path, [*epoch_rows(5), stranger])
    result = run(tmp_path)
    assert failed(result) == {("operators_known", "expect_column_values_to_be_in_set")}
    assert offenders(result, "operators_known") == ["mystery#1 (epoch 5)"]
    assert_kept_and_restorable(tmp_path, original, result)


def test_empty_epoch(tmp_path):
    store_with(tmp_path, None)
    result = run(tmp_path)
    assert failed(result) == {("instances_present", "expect_column_values_to_be_between")}
    (failure,) = result.failures
    assert failure.unexpected_count == SLOTS and result.rows == 0
    assert_kept_and_restorable(tmp_path, None, result)


def test_window_outside_the_epoch(tmp_path):
    shift = timedelta(minutes=5)
    late = row(5, "parse", 1)
    original = store_with(
        tmp_path,
        change(epoch_rows(5), "parse", 1, window_start=late["window_start"] + shift, window_end=late["window_end"] + shift),
    )
    result = run(tmp_path)
    assert failed(result) == {("windows_in_interval", "expect_column_values_to_be_between")}
    (failure,) = result.failures  # it starts inside the interval but ends 300 s after it
    assert [(o.where(), o.values) for o in failure.offenders] == [("Parse#1 (epoch 5)", {"end_offset_s": 300.0})]
    assert "the window ends no later than the data interval (+ 30 s)" in result.message()
    assert_kept_and_restorable(tmp_path, original, result)


def test_a_warmup_window_passes_but_is_not_decidable(tmp_path):
    """A warm-up window is a correct measurement of a restart, not bad data: kept in the store, never decided on."""
    store_with(tmp_path, change(epoch_rows(5), "count", 1, warmup=True))
    result = run(tmp_path)
    assert result.success and not result.decidable and result.status == "not-decidable"
    assert [(w.rule, w.expectation, w.severity) for w in result.warnings] == [
        ("no_warmup", "expect_column_values_to_be_in_set", "warning")
    ]
    assert [o.where() for o in result.warnings[0].offenders] == ["Count#1 (epoch 5)"]
    assert read_epochs(tmp_path, METRICS, JOB, [5]).num_rows == SLOTS  # nothing moved
    assert read_quarantine(tmp_path, JOB, 5) is None
    record = read_epochs(tmp_path, VALIDATIONS, JOB, [5]).to_pylist()[0]
    assert (record["status"], record["decidable"], record["failed_rules"]) == ("not-decidable", False, "no_warmup")
    result.raise_for_failure()  # does not raise: the task goes on, the policy marks the epoch warmup


def test_a_window_spanning_a_restart_is_warmup_not_failed(tmp_path):
    """Collection writes zero times for every row of a window that spans a restart (found live, after a rescale)."""
    restart = {"busy_ms": 0.0, "idle_ms": 0.0, "backpressured_ms": 0.0, "warmup": True}
    store_with(tmp_path, [{**r, **restart} for r in epoch_rows(5)])
    result = run(tmp_path)
    assert result.success and not result.decidable, result.message()
    assert [w.rule for w in result.warnings] == ["no_warmup"]


def test_the_message_lists_each_failed_expectation_in_words(tmp_path):
    bad = change(epoch_rows(5), "count", 2, observed_processing_rate=-5.0)
    bad = change(bad, "parse", 1, true_processing_rate=math.inf)
    store_with(tmp_path, drop(bad, lambda r: (r["operator_id"], r["instance"]) != ("src", 2)))
    result = run(tmp_path)
    text = result.message()
    lines = [line for line in text.splitlines() if line.startswith("  - ")]
    assert len(lines) == len(result.failures) == 3
    assert lines[0].startswith("  - [ranges/rates_valid] true_processing_rate is >= 0 and finite")
    assert "Source#2 (epoch 5): rows=0" in text
    assert "ExpectationValidationResult" not in text and "{" not in text
    assert result.summary().startswith(f"job {JOB} epoch 5: metrics FAILED validation (3 of ")
    assert "instances_present, rates_valid" in result.summary()
    with pytest.raises(ValidationFailed) as err:
        result.raise_for_failure()
    assert str(err.value) == f"metrics of job {JOB} epoch 5: {text}"


def test_validating_again_is_idempotent(tmp_path):
    original = store_with(tmp_path, change(epoch_rows(5), "count", 2, observed_processing_rate=-5.0))
    first = run(tmp_path)
    second = run(tmp_path)  # the rows are in quarantine now: the re-run validates them there
    assert failed(first) == failed(second)
    assert read_epochs(tmp_path, VALIDATIONS, JOB).num_rows == 1
    saved = json.loads((quarantine_dir(tmp_path, JOB, 5) / "validation.json").read_text())
    assert saved["summary"] == second.summary()
    assert_kept_and_restorable(tmp_path, original, second)


def test_a_rerun_after_a_fix_uses_the_quarantined_rows(tmp_path):
    """Windows of 75 s fail a 60 s policy interval; with the job's real interval configured they pass and move back."""
    slow = [{**r, "window_end": r["window_start"] + timedelta(seconds=75)} for r in epoch_rows(5)]
    slow = [
        {**r, "busy_ms": r["busy_ms"] * 1.25, "idle_ms": r["idle_ms"] * 1.25, "backpressured_ms": r["backpressured_ms"] * 1.25}
        for r in slow
    ]
    original = store_with(tmp_path, slow)
    result = run(tmp_path, lateness_s=20.0)
    assert {f.rule for f in result.failures} == {"window_length"}
    assert read_epochs(tmp_path, METRICS, JOB, [5]).num_rows == 0
    fixed = validate_epoch(tmp_path, JOB, 5, config(5, lateness_s=20.0).for_epoch(config(5).data_interval), docs=False)
    assert not fixed.success  # same thresholds: still rejected, still in quarantine
    from dataclasses import replace

    fixed = validate_epoch(tmp_path, JOB, 5, replace(config(5), window_s=75), docs=False)
    assert fixed.success, fixed.message()
    assert same(read_epochs(tmp_path, METRICS, JOB, [5]), original)
    assert read_quarantine(tmp_path, JOB, 5) is None
    assert read_epochs(tmp_path, VALIDATIONS, JOB, [5]).column("status").to_pylist() == ["passed"]
