"""The batches GX validates: the metrics rows plus a few derived facts, and the expected-instance grid.

GX checks one row (or one column) at a time; a few DS2 rules need a quantity that is not a
stored column. Those quantities are derived here, identically for pandas and Spark, and every
*judgement* stays in the suite:

- ``window_ms`` -- the window length, window_end - window_start (null for DS2 files: no end);
- ``accounted_ms`` -- busy + idle + back-pressured time (null unless all three are known);
- ``previous_window_start`` / ``previous_window_end`` -- the latest window of the same operator
  instance in an earlier epoch (the predecessor epoch, or the previous one inside a range);
- ``start_offset_s`` / ``end_offset_s`` -- how far the window starts after the epoch's data
  interval starts, and ends after it ends (null without a data interval);
- ``topology_parallelism`` / ``topology_is_source`` -- what the topology says about the row's
  operator (null for an operator it does not know, which one rule reports, instead of every
  per-operator rule; one lookup instead of a row-conditioned expectation per operator).

The second batch, ``slots``, has one row per (epoch, operator, instance) the topology expects
and the number of metrics rows found for it: a missing instance is a row with 0, which a row-wise
expectation can name (GX cannot see a row that is not there).

A column the input lacks stays absent (the schema expectations name it) and the facts derived
from it are null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from autoscaler.topology import Topology
from autoscaler.validate.config import Interval

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DERIVED = {
    "window_ms": "window_end - window_start in ms",
    "accounted_ms": "busy_ms + idle_ms + backpressured_ms",
    "previous_window_start": "window_start of the same instance's latest window in an earlier epoch",
    "previous_window_end": "window_end of the same instance's latest window in an earlier epoch",
    "start_offset_s": "window_start - start of the epoch's data interval, in s",
    "end_offset_s": "window_end - end of the epoch's data interval, in s",
    "topology_parallelism": "parallelism of the row's operator in the topology (null: unknown operator)",
    "topology_is_source": "whether the topology has the row's operator as a source (null: unknown operator)",
}
# A fleet's batch (one epoch of many jobs, :mod:`autoscaler.validate.fleet`) adds what differs per job.
FLEET_DERIVED = {"expected_window_ms": "the window the job's collection measured, in ms"}
SLOT_COLUMNS = ("epoch", "operator_id", "instance", "rows")
INDEX_COLUMNS = ["epoch", "operator_id", "instance"]  # how offending rows are named
_SLOT_KEY = ["operator_id", "instance"]
_PANDAS_INTS = {pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}


def expected_slots(topology: Topology) -> list[tuple[str, int]]:
    """(operator id, instance) for every instance of every operator, in topological order."""
    return [(op, i) for op in topology.order for i in range(1, topology.operators[op].parallelism + 1)]


# ---------------------------------------------------------------- pandas (one epoch, or a range in memory)


def pandas_metrics(
    rows: pa.Table, previous: pa.Table | None, intervals: Mapping[int, Interval] | None, topology: Topology
) -> pd.DataFrame:
    """The metrics batch for the pandas engine.

    Integers become pandas' nullable integer types so a null count stays an integer column
    (numpy would turn it into float64 and the type expectations could not tell); timestamps
    are UTC without a zone.
    """
    df = _pandas_frame(rows, previous, _SLOT_KEY)
    if intervals and "epoch" in df.columns:
        _pandas_offsets(df, df["epoch"].map({e: iv[0] for e, iv in intervals.items()}),
                        df["epoch"].map({e: iv[1] for e, iv in intervals.items()}))  # fmt: skip
    else:
        _pandas_offsets(df, None, None)
    ops = df["operator_id"] if "operator_id" in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)
    df["topology_parallelism"] = ops.map({k: o.parallelism for k, o in topology.operators.items()}).astype("Int32")
    df["topology_is_source"] = ops.map({k: o.is_source for k, o in topology.operators.items()}).astype("boolean")
    return _zoneless(df)


def pandas_fleet_metrics(
    rows: pa.Table, previous: pa.Table | None, intervals: Mapping[str, Interval | None], topologies: Mapping[str, Topology]
) -> pd.DataFrame:
    """One epoch of many jobs as one metrics batch, derived in one pass (a fleet's validation).

    Each job's rows get what :func:`pandas_metrics` gives them alone: the previous windows of its
    own instances, its own data interval and its own topology. ``rows`` and ``previous`` hold every
    job's rows, with the metrics schema (``job`` included).
    """
    df = _pandas_frame(rows, previous, ["job", *_SLOT_KEY])
    jobs = df["job"]
    _pandas_offsets(
        df, jobs.map({j: iv[0] for j, iv in intervals.items() if iv}), jobs.map({j: iv[1] for j, iv in intervals.items() if iv})
    )
    facts = {(j, k): (o.parallelism, o.is_source) for j, t in topologies.items() for k, o in t.operators.items()}
    found = [facts.get(key, (None, None)) for key in zip(jobs, df["operator_id"], strict=True)]
    df["topology_parallelism"] = pd.array([f[0] for f in found], dtype="Int32")
    df["topology_is_source"] = pd.array([f[1] for f in found], dtype="boolean")
    return _zoneless(df)


def _pandas_frame(rows: pa.Table, previous: pa.Table | None, key: list[str]) -> pd.DataFrame:
    """The rows with the window length, the accounted time and each instance's previous window (by ``key``)."""
    df = rows.to_pandas(types_mapper=_PANDAS_INTS.get)
    df["window_ms"] = (_times(df, "window_end") - _times(df, "window_start")).dt.total_seconds() * 1000.0
    df["accounted_ms"] = _numbers(df, "busy_ms") + _numbers(df, "idle_ms") + _numbers(df, "backpressured_ms")
    _pandas_previous(df, None if previous is None else previous.to_pandas(types_mapper=_PANDAS_INTS.get), key)
    return df


def _zoneless(df: pd.DataFrame) -> pd.DataFrame:
    for name in df.columns:  # zone-less UTC: GX's pandas type check cannot name a zoned dtype
        if isinstance(df[name].dtype, pd.DatetimeTZDtype):
            df[name] = df[name].dt.tz_convert("UTC").dt.tz_localize(None)
    return df


def _numbers(df: pd.DataFrame, name: str) -> pd.Series:
    """A column as floats for derivations (NaN where absent or not numeric: the type rules report it)."""
    if name not in df.columns:
        return pd.Series(float("nan"), index=df.index)
    return pd.to_numeric(df[name], errors="coerce").astype("float64")


def _times(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        return pd.Series(pd.NaT, index=df.index, dtype="datetime64[us, UTC]")
    return pd.to_datetime(df[name], errors="coerce", utc=True)


def _pandas_previous(df: pd.DataFrame, previous: pd.DataFrame | None, key: list[str]) -> None:
    names = ["previous_window_start", "previous_window_end"]
    needed = {"epoch", *key, "window_start", "window_end"}
    if not needed <= set(df.columns):
        df[names[0]] = pd.NaT
        df[names[1]] = pd.NaT
        return
    parts = [df[list(needed)]]
    if previous is not None and needed <= set(previous.columns):
        parts.insert(0, previous[list(needed)])
    both = pd.concat(parts, ignore_index=True)
    last = both.groupby([*key, "epoch"], sort=True, dropna=False)[["window_start", "window_end"]].max().reset_index()
    shifted = last.groupby(key, sort=False, dropna=False)[["window_start", "window_end"]].shift(1)
    last[names[0]] = shifted["window_start"]
    last[names[1]] = shifted["window_end"]
    merged = df[[*key, "epoch"]].merge(last[[*key, "epoch", *names]], on=[*key, "epoch"], how="left")
    df[names[0]] = merged[names[0]].set_axis(df.index)  # a left merge keeps the left order
    df[names[1]] = merged[names[1]].set_axis(df.index)


def _pandas_offsets(df: pd.DataFrame, starts: pd.Series | None, ends: pd.Series | None) -> None:
    """How far each window starts and ends after its data interval does (NaN without an interval)."""
    if starts is None or ends is None:
        df["start_offset_s"] = float("nan")
        df["end_offset_s"] = float("nan")
        return
    df["start_offset_s"] = (_times(df, "window_start") - pd.to_datetime(starts, utc=True)).dt.total_seconds()
    df["end_offset_s"] = (_times(df, "window_end") - pd.to_datetime(ends, utc=True)).dt.total_seconds()


def pandas_slots(df: pd.DataFrame, epochs: Iterable[int], topology: Topology) -> pd.DataFrame:
    """One row per expected (epoch, operator, instance) with the number of metrics rows found."""
    slots = expected_slots(topology)
    grid = pd.DataFrame([(e, op, i) for e in epochs for op, i in slots], columns=["epoch", "operator_id", "instance"]).astype(
        {"epoch": "int64", "instance": "int64"}
    )
    return _count_rows(grid, df, ["epoch", *_SLOT_KEY])


def pandas_fleet_slots(df: pd.DataFrame, epoch: int, topologies: Mapping[str, Topology]) -> pd.DataFrame:
    """:func:`pandas_slots` of many jobs' epoch at once, with each row's ``job``."""
    grid = pd.DataFrame(
        [(epoch, op, i, job) for job, t in topologies.items() for op, i in expected_slots(t)],
        columns=["epoch", "operator_id", "instance", "job"],
    ).astype({"epoch": "int64", "instance": "int64"})
    return _count_rows(grid, df, ["job", "epoch", *_SLOT_KEY])[[*SLOT_COLUMNS, "job"]]


def _count_rows(grid: pd.DataFrame, df: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """``grid`` (one row per expected ``key``) with ``rows``: the metrics rows of ``df`` found for each."""
    if not set(key) <= set(df.columns) or df.empty:
        grid["rows"] = 0
        return grid
    keys = df[key].dropna().astype({"epoch": "int64", "instance": "int64"})
    counts = keys.value_counts().rename("rows").reset_index()
    grid = grid.merge(counts, on=key, how="left")
    grid["rows"] = grid["rows"].fillna(0).astype("int64")
    return grid


# ---------------------------------------------------------------- Spark (a backfill range)


def spark_metrics(
    rows: DataFrame, previous: DataFrame | None, intervals: Mapping[int, Interval] | None, topology: Topology
) -> DataFrame:
    """The metrics batch for the Spark engine (same derived columns as :func:`pandas_metrics`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = set(rows.columns)
    # NaN as missing, as pandas holds it: the not-null rules name NaN the same way on both engines
    # (GX's Spark engine also counts NaN rows as unexpected without listing them).
    doubles = {f.name for f in rows.schema.fields if f.dataType.typeName() in ("double", "float")}
    df = rows.select(*[F.nanvl(F.col(c), F.lit(None)).alias(c) if c in doubles else F.col(c) for c in rows.columns])
    if {"window_start", "window_end"} <= cols:
        micros = F.unix_micros(F.col("window_end")) - F.unix_micros(F.col("window_start"))
        df = df.withColumn("window_ms", micros.cast("double") / 1000.0)
    else:
        df = df.withColumn("window_ms", F.lit(None).cast("double"))
    times = ["busy_ms", "idle_ms", "backpressured_ms"]
    accounted = F.col(times[0]) + F.col(times[1]) + F.col(times[2]) if set(times) <= cols else F.lit(None)
    df = df.withColumn("accounted_ms", accounted.cast("double"))

    needed = ["epoch", *_SLOT_KEY, "window_start", "window_end"]
    if set(needed) <= cols:
        both = df.select(*needed)
        if previous is not None:
            both = previous.select(*needed).unionByName(both)
        last = both.groupBy(*_SLOT_KEY, "epoch").agg(F.max("window_start").alias("ws"), F.max("window_end").alias("we"))
        order = Window.partitionBy(*_SLOT_KEY).orderBy("epoch")
        last = last.select(
            *_SLOT_KEY,
            "epoch",
            F.lag("ws").over(order).alias("previous_window_start"),
            F.lag("we").over(order).alias("previous_window_end"),
        )
        df = df.join(last, on=[*_SLOT_KEY, "epoch"], how="left")
    else:
        df = df.withColumn("previous_window_start", F.lit(None).cast("timestamp"))
        df = df.withColumn("previous_window_end", F.lit(None).cast("timestamp"))

    if intervals and "epoch" in cols:
        spark = rows.sparkSession
        table = spark.createDataFrame(
            [(int(e), s, t) for e, (s, t) in intervals.items()], "epoch BIGINT, interval_start TIMESTAMP, interval_end TIMESTAMP"
        )
        df = df.join(F.broadcast(table), on="epoch", how="left")
        start = F.unix_micros(F.col("window_start")) - F.unix_micros(F.col("interval_start"))
        end = F.unix_micros(F.col("window_end")) - F.unix_micros(F.col("interval_end"))
        df = df.withColumn("start_offset_s", start.cast("double") / 1e6).withColumn("end_offset_s", end.cast("double") / 1e6)
        df = df.drop("interval_start", "interval_end")
    else:
        df = df.withColumn("start_offset_s", F.lit(None).cast("double")).withColumn("end_offset_s", F.lit(None).cast("double"))
    ops = rows.sparkSession.createDataFrame(
        [(k, o.parallelism, o.is_source) for k, o in topology.operators.items()],
        "operator_id STRING, topology_parallelism INT, topology_is_source BOOLEAN",
    )
    if "operator_id" in cols:
        df = df.join(F.broadcast(ops), on="operator_id", how="left")
    else:
        df = df.withColumn("topology_parallelism", F.lit(None).cast("int"))
        df = df.withColumn("topology_is_source", F.lit(None).cast("boolean"))
    return df.select(*rows.columns, *DERIVED)


def spark_slots(df: DataFrame, epochs: Iterable[int], topology: Topology) -> DataFrame:
    """The expected-instance grid with row counts, as :func:`pandas_slots`."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    slots = spark.createDataFrame(expected_slots(topology), "operator_id STRING, instance BIGINT")
    grid = spark.createDataFrame([(int(e),) for e in epochs], "epoch BIGINT").crossJoin(F.broadcast(slots))
    counts = df.groupBy("epoch", "operator_id", F.col("instance").cast("bigint").alias("instance")).agg(
        F.count(F.lit(1)).alias("rows")
    )
    joined = grid.join(counts, on=["epoch", *_SLOT_KEY], how="left")
    return joined.select("epoch", *_SLOT_KEY, F.coalesce(F.col("rows"), F.lit(0)).cast("bigint").alias("rows"))
