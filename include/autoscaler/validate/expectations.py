"""One custom GX expectation: column A lies within a ratio of column B (with an absolute slack).

Why custom: the built-in column-pair comparisons (``ExpectColumnPairValuesAToBeGreaterThanB``)
have no tolerance, and DS2's inputs need one: busy time may exceed the wall-clock window by the
counters' staleness, and observed rates exceed true rates by the same jitter. The rule is a
row-wise condition ``min_ratio * B - slack <= A <= max_ratio * B + slack`` implemented for the
pandas and the Spark engines, so the same suite runs on both and the offending rows are reported
like any built-in map expectation (counts, values, index columns). Rows where A or B is missing
are skipped (``ignore_row_if="either_value_is_missing"``).

Importing this module registers the expectation and its metric with GX.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd
from great_expectations.execution_engine import PandasExecutionEngine, SparkDFExecutionEngine
from great_expectations.expectations.expectation import ColumnPairMapExpectation, render_suite_parameter_string
from great_expectations.expectations.metrics.map_metric_provider import (
    ColumnPairMapMetricProvider,
    column_pair_condition_partial,
)
from great_expectations.render import LegacyRendererType, RenderedStringTemplateContent
from great_expectations.render.renderer.renderer import renderer

METRIC = "column_pair_values.a_within_ratio_of_b"


class ColumnPairValuesAWithinRatioOfB(ColumnPairMapMetricProvider):
    """The row-wise condition, per engine."""

    condition_metric_name = METRIC
    condition_domain_keys = ("batch_id", "table", "column_A", "column_B", "row_condition", "condition_parser", "ignore_row_if")
    condition_value_keys = ("min_ratio", "max_ratio", "slack")

    @column_pair_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column_A: pd.Series, column_B: pd.Series, **kwargs: Any) -> pd.Series:
        ok = pd.Series(True, index=column_A.index)
        slack = kwargs.get("slack") or 0.0
        if kwargs.get("min_ratio") is not None:
            ok &= column_A >= column_B * kwargs["min_ratio"] - slack
        if kwargs.get("max_ratio") is not None:
            ok &= column_A <= column_B * kwargs["max_ratio"] + slack
        return ok

    @column_pair_condition_partial(engine=SparkDFExecutionEngine)
    def _spark(cls, column_A: Any, column_B: Any, **kwargs: Any) -> Any:
        from pyspark.sql import functions as F

        ok = F.lit(True)
        slack = kwargs.get("slack") or 0.0
        if kwargs.get("min_ratio") is not None:
            ok = ok & (column_A >= column_B * kwargs["min_ratio"] - slack)
        if kwargs.get("max_ratio") is not None:
            ok = ok & (column_A <= column_B * kwargs["max_ratio"] + slack)
        # pandas treats NaN as a missing value (the row is skipped); Spark sorts NaN above every
        # number. Skip NaN rows here too, so both engines agree (the range rules report NaN).
        return ok | F.isnan(column_A) | F.isnan(column_B)


class ExpectColumnPairRatioToBeBetween(ColumnPairMapExpectation):
    """Expect ``min_ratio * B - slack <= A <= max_ratio * B + slack`` in every row where A and B are present."""

    min_ratio: float | None = None
    max_ratio: float | None = None
    slack: float = 0.0
    ignore_row_if: str = "either_value_is_missing"

    map_metric: ClassVar[str] = METRIC
    success_keys: ClassVar[tuple[str, ...]] = ("min_ratio", "max_ratio", "slack", "ignore_row_if", "mostly")
    args_keys: ClassVar[tuple[str, ...]] = ("column_A", "column_B", "min_ratio", "max_ratio")

    @classmethod
    def template(cls, kwargs: dict[str, Any]) -> str:
        """The rule in words, e.g. ``busy_ms <= 1.25 x window_ms``."""
        a, b = kwargs.get("column_A"), kwargs.get("column_B")
        slack = kwargs.get("slack") or 0
        tail = f" (+/- {slack:g})" if slack else ""
        low, high = kwargs.get("min_ratio"), kwargs.get("max_ratio")
        if low is not None and high is not None:
            return f"{low:g} x {b} <= {a} <= {high:g} x {b}{tail}"
        if high is not None:
            return f"{a} <= {high:g} x {b}{tail}"
        return f"{a} >= {low:g} x {b}{tail}"

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    @render_suite_parameter_string
    def _prescriptive_renderer(
        cls, configuration: Any = None, result: Any = None, runtime_configuration: dict | None = None, **kwargs: Any
    ) -> list[RenderedStringTemplateContent]:
        config_kwargs = configuration.kwargs if configuration else {}
        styling = (runtime_configuration or {}).get("styling")
        return [
            RenderedStringTemplateContent(
                content_block_type="string_template",
                string_template={"template": f"In every row: {cls.template(config_kwargs)}.", "params": {}, "styling": styling},
            )
        ]
