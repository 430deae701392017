"""From GX's validation results to :class:`Failure` objects per epoch (or per job, for a fleet's batch).

The suites run once over a whole batch (one epoch, or a backfill range); the offending rows of a
row-wise expectation come back with their (epoch, operator, instance) -- the result format's
``unexpected_index_column_names`` -- so a failure can be charged to exactly the epochs it concerns.
A table-level finding (a missing column, a column type) or an expectation that could not be
evaluated concerns every epoch of the batch.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from autoscaler.validate.result import Failure, Offender
from autoscaler.validate.suite import RULES
from autoscaler.validate.view import INDEX_COLUMNS

PerEpoch = dict[int, list[Failure]]


def plain(value: Any) -> Any:
    """numpy / pandas scalars as plain Python values (None for missing)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.datetime64):
        value = pd.Timestamp(value)
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, datetime | int | float | str | bool):
        return value
    return str(value)


def failures_by_epoch(results: Iterable[Any], epochs: list[int], names: Mapping[str, str], single: bool) -> tuple[PerEpoch, int]:
    """Failed expectations of one suite result, charged to epochs; also the number evaluated."""
    return _charge(results, epochs, lambda row: row.get("epoch"), names, single)


def failures_by_job(
    results: Iterable[Any], jobs: Sequence[str], names: Mapping[str, str]
) -> tuple[dict[str, list[Failure]], int]:
    """Failed expectations of a fleet batch (one epoch of many jobs), charged to the jobs they concern."""
    return _charge(results, list(jobs), lambda row: row.get("job"), names, single=False)


def merge_charges(
    charged: Iterable[tuple[Mapping[Any, list[Failure]], int]], keys: Sequence[Any]
) -> tuple[dict[Any, list[Failure]], int]:
    """The failures of several suite runs (each charged by :func:`failures_by_epoch` or :func:`failures_by_job`)
    per key, in run order, with every key present; and the expectations evaluated in all."""
    out: dict[Any, list[Failure]] = {k: [] for k in keys}
    evaluated = 0
    for found, n in charged:
        evaluated += n
        for key, failures in found.items():
            out[key].extend(failures)
    return out, evaluated


def _charge(
    results: Iterable[Any], keys: list[Any], key_of: Callable[[dict[str, Any]], Hashable], names: Mapping[str, str], single: bool
) -> tuple[dict[Any, list[Failure]], int]:
    out: dict[Any, list[Failure]] = defaultdict(list)
    evaluated = 0
    for r in results:
        evaluated += 1
        if r.success:
            continue
        config = r.expectation_config
        meta = config.meta or {}
        rule = RULES.get(meta.get("rule", ""))
        base = {
            "rule": rule.id if rule else "unknown",
            "category": rule.category if rule else "unknown",
            "expectation": config.type,
            "expected": config.description or (rule.words if rule else config.type),
            "severity": getattr(config.severity, "value", str(config.severity)),
        }
        result = r.result or {}
        index = result.get("unexpected_index_list")
        if (message := _exception(r.exception_info)) is not None:
            failure = Failure(**base, unexpected_count=None, element_count=None, detail=f"could not be evaluated: {message}")
            for k in keys:
                out[k].append(failure)
        elif isinstance(index, list) and len(index) >= (result.get("unexpected_count") or 0):
            for key, offenders in _offenders(index, keys, key_of, names).items():
                count = result.get("element_count") if single else None
                out[key].append(Failure(**base, unexpected_count=len(offenders), element_count=count, offenders=tuple(offenders)))
        else:
            failure = Failure(**base, unexpected_count=None, element_count=None, detail=_table_detail(result))
            for k in keys:
                out[k].append(failure)
    return out, evaluated


def _exception(info: Any) -> str | None:
    """The first line of the error that kept an expectation from being evaluated, if any.

    GX reports it flat (``raised_exception``) or, when a metric failed, per metric id.
    """
    if not isinstance(info, dict):
        return None
    candidates = [info, *(v for v in info.values() if isinstance(v, dict))]
    for c in candidates:
        if c.get("raised_exception"):
            lines = (c.get("exception_message") or "error").strip().splitlines()
            return lines[0] if lines else "error"
    return None


def _offenders(
    index: list[dict[str, Any]], keys: list[Any], key_of: Callable[[dict[str, Any]], Hashable], names: Mapping[str, str]
) -> dict[Any, list[Offender]]:
    """Offending rows grouped by key (epoch, or job); a row without a known key concerns every key."""
    grouped: dict[Any, list[Offender]] = defaultdict(list)
    for raw in index:
        row = {k: plain(v) for k, v in raw.items()} if isinstance(raw, dict) else {"value": plain(raw)}
        epoch = row.get("epoch")
        op = row.get("operator_id")
        offender = Offender(
            epoch=epoch if isinstance(epoch, int) else None,
            operator=names.get(op, op) if isinstance(op, str) else None,
            instance=row.get("instance") if isinstance(row.get("instance"), int) else None,
            values={k: v for k, v in row.items() if k not in INDEX_COLUMNS and k != "job"},
        )
        key = key_of(row)
        for k in [key] if key is not None and key in keys else keys:
            grouped[k].append(offender)
    return grouped


def _table_detail(result: dict[str, Any]) -> str:
    if result.get("unexpected_count"):  # counted but not listed: cannot be charged to one epoch
        return f"{result['unexpected_count']} of {result.get('element_count')} rows fail (rows not listed by GX)"
    mismatched = (result.get("details") or {}).get("mismatched")
    if isinstance(mismatched, dict):
        parts = [f"{k} columns {sorted(v)}" for k, v in mismatched.items() if v]
        return "; ".join(parts) or "columns differ"
    observed = result.get("observed_value")
    if isinstance(observed, float) and math.isnan(observed):
        observed = "NaN"
    return f"observed {observed}"
