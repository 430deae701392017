"""The expectation suites, defined once: what an epoch's metrics must satisfy for DS2 to decide on them.

Every expectation belongs to a named rule (``meta["rule"]``) of one of five categories -- schema,
ranges, completeness, consistency, freshness -- and carries the rule in plain words
(``description``, shown in the Data Docs and in failure messages). Two suites, because GX
validates one batch per suite: ``metrics`` over the metrics rows (see :mod:`.view` for the
derived columns) and ``slots`` over the expected-instance grid.

Severity: every rule is critical (the epoch is rejected) except ``no_warmup``, a warning: a
warm-up window is a correct measurement of an unusual moment (a restart), not bad data, so the
epoch passes validation but is *not decidable* -- nothing to fix, nothing to quarantine, and the
policy records it as ``warmup`` with no change (see :attr:`EpochValidation.decidable`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import great_expectations as gx
import great_expectations.expectations as gxe
from great_expectations.expectations.row_conditions import Column

from autoscaler.store.schemas import METRICS
from autoscaler.validate.config import ValidationConfig
from autoscaler.validate.expectations import ExpectColumnPairRatioToBeBetween
from autoscaler.validate.view import DERIVED, FLEET_DERIVED, SLOT_COLUMNS

SUITE_VERSION = 2  # bump when a rule changes meaning: the version goes into every validation record

RATES = ("true_processing_rate", "true_output_rate", "observed_processing_rate", "observed_output_rate")
TIMES = ("busy_ms", "idle_ms", "backpressured_ms")

# Accepted type names per logical type: the pandas batch's dtype (value type for object columns; GX's
# pandas check resolves names through numpy and pandas, so nullable integers are "Int64Dtype" and
# timestamps are zone-less UTC, see view.pandas_metrics), then Spark's type class name.
TYPE_NAMES = {
    "string": ["str", "StringType"],
    "int": ["Int32Dtype", "IntegerType"],
    "long": ["Int64Dtype", "LongType"],
    "double": ["float64", "DoubleType"],
    "boolean": ["bool", "BooleanType"],
    "timestamp": ["datetime64[us]", "TimestampType"],
}


@dataclass(frozen=True)
class Rule:
    id: str
    category: str  # schema, ranges, completeness, consistency, freshness
    words: str  # what must hold, in plain words
    severity: str = "critical"


RULES = {
    r.id: r
    for r in (
        Rule("schema_columns", "schema", "every metrics column is present, and no other"),
        Rule("schema_types", "schema", "every column has its type"),
        Rule("keys_not_null", "schema", "keys and required fields are never null"),
        Rule("keys_match", "schema", "rows belong to the job and epochs being validated"),
        Rule("rates_valid", "ranges", "rates are numbers >= 0 and finite"),
        Rule("times_within_window", "ranges", "busy, idle and back-pressured time lie within [0, window]"),
        Rule("times_sum_to_window", "ranges", "busy + idle + back-pressured time add up to the window"),
        Rule("window_positive", "ranges", "windows have a positive length"),
        Rule("window_length", "ranges", "windows are as long as the policy interval"),
        Rule("instances_present", "completeness", "every instance of every operator of the topology has a row"),
        Rule("instances_unique", "completeness", "no operator instance has two rows in an epoch"),
        Rule("operators_known", "completeness", "every operator is in the topology"),
        Rule("instance_in_range", "completeness", "instance ids lie within 1..parallelism"),
        Rule("topology_matches", "completeness", "parallelism and source flag agree with the topology"),
        Rule("observed_within_true", "consistency", "observed rates do not exceed true rates (useful time <= wall time)"),
        Rule("windows_ordered", "consistency", "each instance's windows are ordered and do not overlap across epochs"),
        Rule("no_warmup", "consistency", "no window is marked warm-up (used for decisions)", severity="warning"),
        Rule("windows_in_interval", "freshness", "windows lie inside the epoch's data interval"),
    )
}


def _stamp(rule: str, description: str, **extra: Any) -> dict[str, Any]:
    """The fields every expectation of a rule carries."""
    r = RULES[rule]
    meta = {"rule": rule, "category": r.category, "suite_version": SUITE_VERSION, **extra}
    return {"meta": meta, "description": description, "severity": r.severity, "catch_exceptions": True}


def _metrics_expectations(
    config: ValidationConfig, epochs: tuple[int, int], job: str, fleet: Sequence[str] = ()
) -> Iterator[gxe.Expectation]:
    """The metrics suite. ``fleet``: the jobs of one batch (one epoch of many jobs, each with its own
    topology and window): the checks that name one job's topology or window read per-row columns instead
    (``topology_parallelism``, ``expected_window_ms``); every other threshold is the config's, shared."""
    topo = config.topology
    view_columns = [*METRICS.names, *DERIVED, *(FLEET_DERIVED if fleet else ())]
    jobs = list(fleet) or [job]
    yield gxe.ExpectTableColumnsToMatchSet(
        column_set=view_columns,
        exact_match=True,
        **_stamp("schema_columns", f"the {len(METRICS.names)} metrics columns (+ {len(DERIVED)} derived) are present, no other"),
    )
    for c in METRICS.columns:
        yield gxe.ExpectColumnValuesToBeInTypeList(
            column=c.name, type_list=TYPE_NAMES[c.type], **_stamp("schema_types", f"{c.name} is of type {c.type}", column=c.name)
        )
    for c in METRICS.columns:
        if not c.nullable and c.name not in RATES:
            yield gxe.ExpectColumnValuesToNotBeNull(column=c.name, **_stamp("keys_not_null", f"{c.name} is never null"))
    yield gxe.ExpectColumnValuesToBeInSet(
        column="job", value_set=jobs, **_stamp("keys_match", f"job is {job!r}" if not fleet else "job is one of the batch's")
    )
    first, last = epochs
    yield gxe.ExpectColumnValuesToBeBetween(
        column="epoch", min_value=first, max_value=last, **_stamp("keys_match", f"epoch is within {first}..{last}")
    )

    # ranges
    for rate in RATES:
        yield gxe.ExpectColumnValuesToNotBeNull(column=rate, **_stamp("rates_valid", f"{rate} is a number (not NaN or null)"))
        yield gxe.ExpectColumnValuesToBeBetween(
            column=rate,
            min_value=0,
            max_value=config.max_rate,
            **_stamp("rates_valid", f"{rate} is >= 0 and finite (at most {config.max_rate:g} records/s)"),
        )
    high = 1 + config.time_tolerance
    slack_ms = config.time_slack_s * 1000
    for t in TIMES:
        yield gxe.ExpectColumnValuesToBeBetween(column=t, min_value=0, **_stamp("times_within_window", f"{t} is >= 0"))
        yield ExpectColumnPairRatioToBeBetween(
            column_A=t,
            column_B="window_ms",
            max_ratio=high,
            slack=slack_ms,
            **_stamp("times_within_window", f"{t} <= window x {high:g} + {config.time_slack_s:g} s"),
        )
    low = 1 - config.time_tolerance
    # A window spanning a restart (warm-up) cannot account for its time: the old job's counters
    # are gone, the new job's started at zero mid-window. Collection writes zero times for it;
    # such rows are valid measurements of a restart (never decided on), not bad data.
    yield ExpectColumnPairRatioToBeBetween(
        column_A="accounted_ms",
        column_B="window_ms",
        min_ratio=low,
        max_ratio=high,
        slack=slack_ms,
        row_condition=Column("warmup") == False,  # noqa: E712 (a GX condition, not a comparison)
        **_stamp(
            "times_sum_to_window",
            f"busy + idle + back-pressured time is within window x [{low:g}, {high:g}] +/- {config.time_slack_s:g} s",
        ),
    )
    yield gxe.ExpectColumnValuesToBeBetween(
        column="window_ms", min_value=0, strict_min=True, **_stamp("window_positive", "window_end - window_start > 0")
    )
    if fleet:
        low_w, high_w = 1 - config.window_tolerance, 1 + config.window_tolerance
        yield ExpectColumnPairRatioToBeBetween(
            column_A="window_ms",
            column_B="expected_window_ms",
            min_ratio=low_w,
            max_ratio=high_w,
            **_stamp("window_length", f"the window lasts the job's measured window +/- {config.window_tolerance:.0%}"),
        )
    elif config.window_s is not None:
        lo_ms = config.window_s * 1000 * (1 - config.window_tolerance)
        hi_ms = config.window_s * 1000 * (1 + config.window_tolerance)
        yield gxe.ExpectColumnValuesToBeBetween(
            column="window_ms",
            min_value=lo_ms,
            max_value=hi_ms,
            **_stamp(
                "window_length",
                f"the window lasts {config.window_s:g} s +/- {config.window_tolerance:.0%} ({lo_ms:g}..{hi_ms:g} ms)",
            ),
        )

    # completeness (the missing-instance rule runs on the slots batch)
    yield gxe.ExpectCompoundColumnsToBeUnique(
        column_list=[*(["job"] if fleet else []), "epoch", "operator_id", "instance"],
        **_stamp("instances_unique", "one row per (epoch, operator, instance)" + (" of each job" if fleet else "")),
    )
    if fleet:  # each row's own topology: a known operator has a parallelism there
        yield gxe.ExpectColumnValuesToNotBeNull(
            column="topology_parallelism", **_stamp("operators_known", "operator_id is one of the job's topology")
        )
    else:
        yield gxe.ExpectColumnValuesToBeInSet(
            column="operator_id",
            value_set=list(topo.order),
            **_stamp("operators_known", "operator_id is one of " + ", ".join(topo.order)),
        )
    yield gxe.ExpectColumnValuesToBeBetween(column="instance", min_value=1, **_stamp("instance_in_range", "instance is >= 1"))
    yield gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="topology_parallelism",
        column_B="instance",
        or_equal=True,
        ignore_row_if="either_value_is_missing",
        **_stamp("instance_in_range", "instance is <= the operator's parallelism (" + _parallelism(config, fleet) + ")"),
    )
    yield gxe.ExpectColumnPairValuesToBeEqual(
        column_A="parallelism",
        column_B="topology_parallelism",
        ignore_row_if="either_value_is_missing",
        **_stamp("topology_matches", "parallelism is the topology's (" + _parallelism(config, fleet) + ")"),
    )
    yield gxe.ExpectColumnPairValuesToBeEqual(
        column_A="is_source",
        column_B="topology_is_source",
        ignore_row_if="either_value_is_missing",
        **_stamp(
            "topology_matches",
            "is_source agrees with the topology (sources: " + ("the job's" if fleet else ", ".join(topo.sources)) + ")",
        ),
    )

    # consistency
    high = 1 + config.rate_tolerance
    # Processing: every row, sources too (what a source took in, per busy and per wall second; both 0 when
    # it reports no busy time). Output: not for sources: their "true" output is their arrival -- the
    # target-rate gauge (an instantaneous value: after a step down mid-window the window's observed rate
    # is above it, found by the demo), or emitted plus backlog growth, or out / unblocked time.
    operators = Column("is_source") == False  # noqa: E712 (a GX condition, not a comparison)
    yield ExpectColumnPairRatioToBeBetween(
        column_A="observed_processing_rate",
        column_B="true_processing_rate",
        max_ratio=high,
        slack=config.rate_slack,
        **_stamp("observed_within_true", f"observed processing rate <= true processing rate x {high:g}"),
    )
    yield ExpectColumnPairRatioToBeBetween(
        column_A="observed_output_rate",
        column_B="true_output_rate",
        max_ratio=high,
        slack=config.rate_slack,
        row_condition=operators,
        **_stamp("observed_within_true", f"observed output rate <= true output rate x {high:g} (operators)"),
    )
    yield gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="window_start",
        column_B="previous_window_start",
        ignore_row_if="either_value_is_missing",
        **_stamp("windows_ordered", "window_start is after the instance's previous window_start"),
    )
    yield gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="window_start",
        column_B="previous_window_end",
        or_equal=True,
        ignore_row_if="either_value_is_missing",
        **_stamp("windows_ordered", "window_start is not before the instance's previous window_end (no overlap)"),
    )
    yield gxe.ExpectColumnValuesToBeInSet(
        column="warmup", value_set=[False], **_stamp("no_warmup", "warmup is false (a warm-up window is never decided on)")
    )

    # freshness
    late = config.lateness_s
    yield gxe.ExpectColumnValuesToBeBetween(
        column="start_offset_s",
        min_value=-late,
        **_stamp("windows_in_interval", f"the window starts no earlier than the data interval (- {late:g} s)"),
    )
    yield gxe.ExpectColumnValuesToBeBetween(
        column="end_offset_s",
        max_value=late,
        **_stamp("windows_in_interval", f"the window ends no later than the data interval (+ {late:g} s)"),
    )


def _parallelism(config: ValidationConfig, fleet: Sequence[str] = ()) -> str:
    if fleet:
        return "the job's topology"
    ops = config.topology.operators
    return ", ".join(f"{ops[o].name} {ops[o].parallelism}" for o in config.topology.order)


def _slots_expectations(fleet: Sequence[str] = ()) -> Iterator[gxe.Expectation]:
    columns = [*SLOT_COLUMNS, *(["job"] if fleet else [])]
    yield gxe.ExpectTableColumnsToMatchSet(
        column_set=columns, exact_match=True, **_stamp("instances_present", "the slot grid is well-formed")
    )
    yield gxe.ExpectColumnValuesToBeBetween(
        column="rows", min_value=1, **_stamp("instances_present", "every (epoch, operator, instance) of the topology has a row")
    )


def suite_names(job: str) -> tuple[str, str]:
    return f"ds2-metrics.{job}", f"ds2-slots.{job}"


def build_suites(
    config: ValidationConfig, job: str, epochs: tuple[int, int], fleet: Sequence[str] = ()
) -> tuple[gx.ExpectationSuite, gx.ExpectationSuite]:
    """The (metrics, slots) suites for one job and an inclusive epoch range, from ``config``.

    ``fleet``: the suites of a batch of many jobs' epoch instead, named ``job`` (see :func:`_metrics_expectations`).
    """
    meta = {"suite_version": SUITE_VERSION, "thresholds": config.thresholds()}
    metrics_name, slots_name = suite_names(job)
    expectations = list(_metrics_expectations(config, epochs, job, fleet))
    metrics = gx.ExpectationSuite(name=metrics_name, expectations=expectations, meta=meta)
    slots = gx.ExpectationSuite(name=slots_name, expectations=list(_slots_expectations(fleet)), meta=meta)
    return metrics, slots
