"""Every other rule of the suite, one bad input each, validated in memory (no store): the exact rule fails."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pyarrow as pa
import pytest

from autoscaler.store.schemas import METRICS
from autoscaler.validate import validate_rows
from autoscaler.validate.suite import RULES
from tests.unit.test_validation_builders import JOB, change, config, epoch_rows, table


def validate(rows: pa.Table, previous: list[dict] | None = None, **kw):
    before = table(previous if previous is not None else epoch_rows(4))
    return validate_rows(JOB, rows, config(5, **kw), epochs=[5], previous=before)[5]


def rules(result) -> set[str]:
    return {f.rule for f in result.failures}


def test_every_rule_has_words_and_a_category():
    assert {r.category for r in RULES.values()} == {"schema", "ranges", "completeness", "consistency", "freshness"}
    assert [r.id for r in RULES.values() if r.severity != "critical"] == ["no_warmup"]


def test_a_missing_column_is_named_and_the_checks_on_it_cannot_run():
    rows = table(epoch_rows(5)).drop_columns(["busy_ms"])
    result = validate(rows)
    columns = next(f for f in result.failures if f.expectation == "expect_table_columns_to_match_set")
    assert columns.rule == "schema_columns" and columns.detail == "missing columns ['busy_ms']"
    assert {f.rule for f in result.failures} == {"schema_columns", "schema_types", "times_within_window"}
    assert all("could not be evaluated" in f.detail for f in result.failures if f.rule != "schema_columns")


def test_a_column_of_the_wrong_type():
    rows = table(epoch_rows(5))
    rows = rows.set_column(
        rows.schema.get_field_index("busy_ms"), "busy_ms", pa.array([str(v) for v in rows["busy_ms"].to_pylist()])
    )
    result = validate(rows)
    assert "schema_types" in rules(result)
    types = [f for f in result.failures if f.rule == "schema_types"]
    assert [f.expected for f in types] == ["busy_ms is of type double"]
    assert types[0].offenders[0].values == {"busy_ms": "3000.0"}


def test_a_null_key():
    schema = pa.schema([f.with_nullable(True) for f in METRICS.arrow_schema()])
    rows = pa.Table.from_pylist(change(epoch_rows(5), "count", 2, operator_name=None), schema=schema)
    result = validate(rows)
    assert rules(result) == {"keys_not_null"}
    assert [o.where() for f in result.failures for o in f.offenders] == ["Count#2 (epoch 5)"]


def test_rows_of_another_job_or_epoch():
    result = validate(table(change(epoch_rows(5), "sink", 1, job="other", epoch=6)))
    assert rules(result) == {"keys_match", "instances_present"}  # Sink#1 of epoch 5 is then missing too
    assert sorted(f.expected for f in result.failures if f.rule == "keys_match") == ["epoch is within 5..5", "job is 'vjob'"]


def test_a_window_of_zero_length():
    rows = epoch_rows(5)
    zero = change(rows, "parse", 1, window_end=rows[2]["window_start"], busy_ms=None, idle_ms=None, backpressured_ms=None)
    result = validate(table(zero))
    assert rules(result) == {"window_positive", "window_length"}


def test_a_window_longer_than_the_policy_interval():
    rows = [{**r, "window_end": r["window_end"] + timedelta(seconds=20)} for r in epoch_rows(5)]
    rows = [
        {
            **r,
            "busy_ms": r["busy_ms"] * 80 / 60,
            "idle_ms": r["idle_ms"] * 80 / 60,
            "backpressured_ms": r["backpressured_ms"] * 80 / 60,
        }
        for r in rows
    ]
    result = validate(table(rows))
    assert rules(result) == {"window_length"}
    assert "the window lasts 60 s +/- 20% (48000..72000 ms)" in result.message()
    assert validate(table(rows), window_s=80).success  # the job's configured interval decides


def test_times_that_do_not_add_up_to_the_window():
    result = validate(table(change(epoch_rows(5), "sink", 1, idle_ms=0.0)))  # 30 s of 60 s accounted for
    assert rules(result) == {"times_sum_to_window"}
    assert result.failures[0].offenders[0].values == {"accounted_ms": 30000.0, "window_ms": 60000.0}


def test_observed_rate_above_the_true_rate():
    result = validate(table(change(epoch_rows(5), "count", 1, observed_processing_rate=500.0)))  # true: 200
    assert rules(result) == {"observed_within_true"}
    assert "observed processing rate <= true processing rate x 1.25" in result.message()


def test_a_source_rate_step_down_within_the_window_passes():
    """A source's target-rate gauge is instantaneous: after a step down mid-window it reads below the window's rate."""
    rows = epoch_rows(5)
    source = next(r for r in rows if r["is_source"])
    stepped = change(rows, source["operator_id"], source["instance"], true_output_rate=source["observed_output_rate"] / 3)
    assert rules(validate(table(stepped))) == set()


def test_a_source_that_took_in_more_per_wall_second_than_per_busy_second():
    result = validate(table(change(epoch_rows(5), "src", 2, observed_processing_rate=500.0)))
    assert rules(result) == {"observed_within_true"}
    assert [o.where() for o in result.failures[0].offenders] == ["Source#2 (epoch 5)"]


def test_a_window_that_overlaps_the_previous_epoch():
    previous = [{**r, "window_end": r["window_end"] + timedelta(seconds=5)} for r in epoch_rows(4)]
    previous = change(previous, "parse", 1, window_end=epoch_rows(4)[2]["window_end"])  # only Parse#1 does not overlap
    result = validate(table(epoch_rows(5)), previous=previous)
    assert rules(result) == {"windows_ordered"}
    overlapping = sorted(o.where().split(" ")[0] for o in result.failures[0].offenders)
    assert overlapping == ["Count#1", "Count#2", "Count#3", "Sink#1", "Source#1", "Source#2"]


def test_a_window_that_is_not_after_the_previous_one():
    result = validate(table(epoch_rows(5)), previous=[{**r, "epoch": 4} for r in epoch_rows(5)])  # same windows again
    assert rules(result) == {"windows_ordered"}
    assert {f.expectation for f in result.failures} == {"expect_column_pair_values_a_to_be_greater_than_b"}
    assert len(result.failures) == 2  # starts not after the previous start, and before the previous end


def test_parallelism_or_source_flag_disagreeing_with_the_topology():
    result = validate(table(change(epoch_rows(5), "sink", 1, parallelism=2, is_source=True)))
    assert rules(result) == {"topology_matches"}
    assert sorted(f.expected.split(" (")[0] for f in result.failures if f.rule == "topology_matches") == [
        "is_source agrees with the topology",
        "parallelism is the topology's",
    ]


def test_freshness_is_skipped_without_a_data_interval():
    late = [
        {**r, "window_start": r["window_start"] + timedelta(hours=1), "window_end": r["window_end"] + timedelta(hours=1)}
        for r in epoch_rows(5)
    ]
    assert rules(validate(table(late))) == {"windows_in_interval"}
    cfg = replace(config(5), data_interval=None)
    assert validate_rows(JOB, table(late), cfg, previous=table(epoch_rows(4)))[5].success


@pytest.mark.parametrize(
    "bad", [{"time_tolerance": 1.5}, {"rate_tolerance": -0.1}, {"max_rate": float("inf")}, {"window_s": 0}, {"window_s": "60"}]
)
def test_bad_thresholds_are_input_errors(bad):
    from autoscaler.errors import InputError

    with pytest.raises(InputError, match=r"validation\."):
        config(5, **bad)


def test_a_short_window_tolerates_the_counters_staleness():
    """Flink's counters may be 2 s stale at each boundary: over a 6 s window 4 s accounted is fine (found in CI)."""

    def window(rows, seconds, accounted_s):
        out = []
        for r in rows:
            total = sum(r[t] or 0 for t in ("busy_ms", "idle_ms", "backpressured_ms"))
            scale = accounted_s * 1000 / total
            times = {t: (r[t] or 0) * scale for t in ("busy_ms", "idle_ms", "backpressured_ms")}
            out.append({**r, **times, "window_end": r["window_start"] + timedelta(seconds=seconds)})
        return out

    assert "times_sum_to_window" not in rules(validate(table(window(epoch_rows(5), 6, 4))))
    assert "times_sum_to_window" in rules(validate(table(window(epoch_rows(5), 60, 30))))  # half a long window: caught
