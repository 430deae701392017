"""A job's history as chart series over any range, downsampled on the server: what the job view draws.

:func:`job_series` reads the same tables as :func:`autoscaler.observe.views.job_view`, but column-wise
(pyarrow and pandas, no row objects), so 30 days of 1-minute epochs (43,200) come back as at most
``max_points`` buckets per series. Each bucket covers ``step`` whole epochs:

- **load**: the sources' arrival rate and throughput (bucket means) and the backlog (bucket maximum);
- **parallelism**: per operator, the instances while measured and the policy's proposal (bucket maximum,
  so a short rescale is never averaged away);
- **events**: every epoch whose action was more than "no change" (rescales, failures, rejections,
  recommendations), never downsampled;
- **shading**: ranges of epochs that were lost, quarantined, in warm-up, recommendation-only or inside an
  excluded period (a bucket takes its most frequent such state).

Every value is JSON-ready (times as ISO strings), for the page's Vega-Lite charts and for the read
API's JSON alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc

from autoscaler.observe.views import LOST, QUARANTINED, RECOMMENDATION, WARMUP, epoch_state
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS, NOOP, RECOMMENDED, VALIDATIONS

EXCLUDED = "excluded"
PENDING = "pending"  # no trace yet, and its run may still come (late runs): not shaded
SHADED = (LOST, QUARANTINED, WARMUP, RECOMMENDATION, EXCLUDED)
LOAD_KEYS = ("arrival", "throughput", "backlog")
MAX_POINTS = 720  # points per series: about one per pixel column of a wide chart


@dataclass(frozen=True)
class JobSeries:
    job: str
    interval_s: float
    first: int
    last: int
    step: int  # epochs per point
    load: list[dict[str, Any]]  # time, epoch, arrival, throughput, backlog
    parallelism: list[dict[str, Any]]  # time, epoch, operator, parallelism, recommended
    events: list[dict[str, Any]]  # time, epoch, outcome, new_parallelism, downtime_s, approved_by, message
    shading: list[dict[str, Any]]  # start, end, state
    states: dict[str, int]  # epochs per state over the range

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _iso(epoch: float, interval_s: float) -> str:
    return datetime.fromtimestamp(epoch * interval_s, tz=UTC).isoformat()


def _frame(store_root: str | Path, table: Any, job: str, epochs: range, columns: list[str]) -> pd.DataFrame:
    return read_epochs(store_root, table, job, epochs, columns=columns).select(columns).to_pandas()


def _none(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def job_series(
    store_root: str | Path,
    job: str,
    interval_s: float,
    first: int,
    last: int,
    max_points: int = MAX_POINTS,
    excluded: Callable[[datetime], bool] | None = None,
    pending_from: int | None = None,
) -> JobSeries:
    """The series of ``job`` over epochs [first, last].

    ``excluded(t)`` tells whether a time is in an excluded period; an epoch from ``pending_from`` on
    with no trace yet is "pending" (its run may still come late), not lost.
    """
    if last < first:
        raise ValueError(f"an empty range: epoch {first} to {last}")
    epochs = range(first, last + 1)
    step = max(1, math.ceil(len(epochs) / max_points))
    metric_cols = ["epoch", "operator_name", "is_source", "parallelism", "true_output_rate", "observed_output_rate"]
    metrics = _frame(store_root, METRICS, job, epochs, [*metric_cols, "pending_records", "warmup"])
    decision_cols = ["epoch", "operator_name", "is_source", "status", "current_parallelism", "target_parallelism"]
    decisions = _frame(store_root, DECISIONS, job, epochs, decision_cols)
    actions = read_epochs(store_root, ACTIONS, job, epochs)
    acted = actions.filter(pc.not_equal(actions.column("outcome"), NOOP)).to_pylist()  # few: every action but "no change"
    validations = _frame(store_root, VALIDATIONS, job, epochs, ["epoch", "status", "validated_at"])

    def bucket(frame: pd.DataFrame) -> pd.Series:
        return first + (frame["epoch"] - first) // step * step

    def time(b: float) -> str:
        return _iso(b, interval_s)

    # Load: per epoch over the sources, then per bucket.
    sources = metrics[metrics["is_source"]]
    by_epoch = sources.groupby("epoch")
    per_epoch = pd.DataFrame(
        {
            "arrival": by_epoch["true_output_rate"].sum(),
            "throughput": by_epoch["observed_output_rate"].sum(),
            "backlog": by_epoch["pending_records"].sum(min_count=1),  # NaN: no source reported pendingRecords
        }
    ).reset_index()
    per_epoch["bucket"] = bucket(per_epoch)
    load_b = per_epoch.groupby("bucket").agg(
        arrival=("arrival", "mean"), throughput=("throughput", "mean"), backlog=("backlog", "max")
    )
    load = [
        {"time": time(b), "epoch": int(b)} | {k: _none(float(v)) for k, v in zip(LOAD_KEYS, values, strict=True)}
        for b, *values in load_b[list(LOAD_KEYS)].itertuples(name=None)
    ]

    # Parallelism and proposals, per operator and bucket (the maximum: a rescale within a bucket shows).
    # Sources too where a kind sized them: one that ran at more than one size or was proposed another (a query
    # chained into one task is nothing but its source).
    moved = metrics[metrics["is_source"]].groupby("operator_name")["parallelism"].nunique()
    shown = set(moved[moved > 1].index)
    src = decisions[decisions["is_source"]]
    shown |= set(src.loc[src["target_parallelism"] != src["current_parallelism"], "operator_name"])
    ops = metrics[~metrics["is_source"] | metrics["operator_name"].isin(shown)]
    ops = ops.groupby(["epoch", "operator_name"])["parallelism"].max().reset_index()
    ops["bucket"] = bucket(ops)
    props = decisions[~decisions["is_source"] | decisions["operator_name"].isin(shown)].copy()
    props["bucket"] = bucket(props)
    merged = pd.concat(
        [
            ops.groupby(["bucket", "operator_name"])["parallelism"].max().rename("parallelism"),
            props.groupby(["bucket", "operator_name"])["target_parallelism"].max().rename("recommended"),
        ],
        axis=1,
    ).sort_index()
    parallelism = [
        {"time": time(b), "epoch": int(b), "operator": op}
        | {"parallelism": None if pd.isna(n) else int(n), "recommended": None if pd.isna(r) else int(r)}
        for (b, op), n, r in merged[["parallelism", "recommended"]].itertuples(name=None)
    ]
    acted.sort(key=lambda a: a["epoch"])
    events = [_event(a, time(a["epoch"] + 1)) for a in acted]

    # Each epoch's state, by the one rule job_view uses.
    latest = validations.sort_values("validated_at").groupby("epoch")["status"].last()
    quarantined = set(latest[latest == "failed"].index)
    decided = set(decisions["epoch"].unique())
    traced = set(metrics["epoch"].unique()) | decided | set(pc.unique(actions.column("epoch")).to_pylist())
    recommended = {a["epoch"] for a in acted if a["outcome"] == RECOMMENDED}
    warm = set(decisions.loc[decisions["status"] == "warmup", "epoch"].unique())
    warm |= set(metrics.loc[metrics["warmup"], "epoch"].unique())
    states = [epoch_state(e in quarantined, e in traced, e in recommended, e in warm, e in decided) for e in epochs]
    if excluded is not None:
        states = [
            EXCLUDED if s not in (LOST, QUARANTINED) and excluded(datetime.fromtimestamp((e + 1) * interval_s, tz=UTC)) else s
            for e, s in zip(epochs, states, strict=True)
        ]
    if pending_from is not None:
        states = [PENDING if s == LOST and e >= pending_from else s for e, s in zip(epochs, states, strict=True)]
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    shading = _shading(states, first, step, interval_s)
    return JobSeries(job, interval_s, first, last, step, load, parallelism, events, shading, counts)


def _event(action: dict[str, Any], time: str) -> dict[str, Any]:
    keep = ("epoch", "outcome", "approved_by", "message", "mechanism")
    return (
        {"time": time}
        | {k: action[k] for k in keep}
        | {
            "downtime_s": _none(action["downtime_s"]),
            "old_parallelism": json.loads(action["old_parallelism"]),
            "new_parallelism": json.loads(action["new_parallelism"]),
        }
    )


def _shading(states: list[str], first: int, step: int, interval_s: float) -> list[dict[str, Any]]:
    """Ranges of shaded states, one bucket at a time (a bucket takes its most frequent shaded state)."""
    per_bucket: list[str | None] = []
    for i in range(0, len(states), step):
        shaded = [s for s in states[i : i + step] if s in SHADED]
        per_bucket.append(max(SHADED, key=shaded.count) if shaded else None)
    out: list[dict[str, Any]] = []
    for i, state in enumerate(per_bucket):
        start, end = first + i * step, min(first + (i + 1) * step, first + len(states))
        if state is None:
            continue
        if out and out[-1]["state"] == state and out[-1]["_end"] == start:
            out[-1]["_end"], out[-1]["end"] = end, _iso(end, interval_s)
        else:
            out.append({"state": state, "start": _iso(start, interval_s), "end": _iso(end, interval_s), "_end": end})
    for r in out:
        del r["_end"]
    return out
