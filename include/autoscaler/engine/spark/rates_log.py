"""A DS2 rates log decided block by block: its byte ranges parsed in parallel, then the store's block path.

A rates log numbers each instance's lines into epochs by timestamp, so Spark's reading of it
(:func:`autoscaler.engine.spark.inputs.rates_log`) numbers them with a window over all rows: 12.6-13.2 s
for 10^7 rows on 2 cores before any deciding (``benchmarks/results/policy.md``). A log written as
windows close is already in timestamp order per instance, and then an epoch is only a count:

1. one Spark task per byte range of the file parses it with Arrow's CSV reader and counts each
   instance's lines, with their first and last timestamps;
2. the driver checks that every instance's timestamps rise through the file, and gives each range
   the count of each instance's lines before it;
3. the tasks parse their ranges again, number the lines, and write them as metrics rows into a
   temporary store beside the decisions (one file per range and epoch block);
4. that store is decided by :func:`autoscaler.engine.spark.blocks.decide_stored_blocks`.

Whatever this path cannot take exactly -- a line Arrow's reader refuses, a value the checks refuse,
an instance out of timestamp order, a file with no data lines -- returns None, and the caller takes
Spark's general path, which decides such a log or names its first bad line.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from autoscaler.collect.ds2_files import RATE_COLUMNS
from autoscaler.engine.spark.blocks import BlockRun, decide_stored_blocks, per_task
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, block_dir, conform
from autoscaler.store.schemas import METRICS
from autoscaler.topology import Topology

MICROS = pa.timestamp("us", "UTC")  # a window's start (the log's timestamps are nanoseconds)
RANGE_BYTES = 16 * 1024 * 1024  # one task's share of the file: 40 ranges for the bench's 628-MB log
_RATES = RATE_COLUMNS[4:]
_TYPES = {"operator_id": pa.string(), "instance_id": pa.int32(), "total_instances": pa.int32(),
          "window_start_ts": pa.int64(), **dict.fromkeys(_RATES, pa.float64())}  # fmt: skip
# Per range and instance; a range this path cannot take is one row saying why (a task that raised
# would fill the log with its traceback before the general path names the bad line).
COUNTS_DDL = "range INT, operator_id STRING, instance INT, lines BIGINT, first_ts BIGINT, last_ts BIGINT, refused STRING"
WRITTEN_DDL = "range INT, rows BIGINT"


class NotThisPath(Exception):
    """The log needs Spark's general path (the reason is for the log only)."""


@dataclass(frozen=True)
class LogRanges:
    path: str
    topology: Topology
    job: str
    ranges: list[tuple[int, int]]  # byte ranges [start, end): a line belongs to the range it starts in

    def text(self, k: int) -> bytes:
        """Range ``k``'s whole lines, comments left out."""
        start, end = self.ranges[k]
        with open(self.path, "rb") as handle:
            if start > 0:
                handle.seek(start - 1)
                handle.readline()  # the line that began before the range is the previous range's
            begin = handle.tell()
            if begin >= end:
                return b""
            data = handle.read(end - begin)
            if data and not data.endswith(b"\n"):
                data += handle.readline()
        return _without_comments(data)

    def parse(self, k: int) -> pa.Table:
        """Range ``k``'s lines as typed columns, checked as Spark's reader checks them; NotThisPath otherwise."""
        data = self.text(k)
        if not data.strip():
            return pa.schema(list(_TYPES.items())).empty_table()
        try:
            rows = pa_csv.read_csv(
                io.BytesIO(data),
                read_options=pa_csv.ReadOptions(column_names=list(RATE_COLUMNS), use_threads=False),
                convert_options=pa_csv.ConvertOptions(column_types=_TYPES, strings_can_be_null=False),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise NotThisPath(f"range {k}: {exc}") from None
        ops = self.topology.operators
        ids = pa.array(list(ops), pa.string())
        op_index = pc.index_in(rows.column("operator_id"), value_set=ids)
        if op_index.null_count:
            raise NotThisPath(f"range {k}: an operator the topology does not know")
        parallelism = np.array([ops[o].parallelism for o in ops], dtype=np.int64)[op_index.to_numpy()]
        instance, total = rows.column("instance_id").to_numpy(), rows.column("total_instances").to_numpy()
        ok = (total == parallelism) & (instance >= 1) & (instance <= parallelism)
        for name in _RATES:
            value = rows.column(name).to_numpy()
            ok &= np.isfinite(value) & (value >= 0)
        if not ok.all() or rows.column("window_start_ts").null_count:
            raise NotThisPath(f"range {k}: a line Spark's reader would count as bad")
        return rows


def _without_comments(data: bytes) -> bytes:
    """The lines of ``data`` that do not start with '#' (a rates log's comments and header)."""
    parts, pos = [], 0
    while pos < len(data):
        if data.startswith(b"#", pos):
            comment = pos
        else:
            newline = data.find(b"\n#", pos)
            if newline < 0:
                parts.append(data[pos:])
                break
            comment = newline + 1
            parts.append(data[pos:comment])
        end = data.find(b"\n", comment)
        pos = len(data) if end < 0 else end + 1
    return b"".join(parts)


def _keys(rows: pa.Table, topology: Topology) -> np.ndarray:
    """Per line, its instance as one integer (the operator's position in the topology, the instance)."""
    ops = pc.index_in(rows.column("operator_id"), value_set=pa.array(list(topology.operators), pa.string()))
    return ops.to_numpy(zero_copy_only=False).astype(np.int64) * (1 << 32) + rows.column("instance_id").to_numpy()


def _counts(log: LogRanges, k: int) -> pa.Table:
    """Range ``k``'s lines per instance, with their first and last timestamps; NotThisPath when an
    instance's timestamps fall within the range (file order)."""
    try:
        rows = log.parse(k)
        keys, ts = _keys(rows, log.topology), rows.column("window_start_ts").to_numpy()
        order = np.argsort(keys, kind="stable")
        if ((keys[order][1:] == keys[order][:-1]) & (ts[order][1:] < ts[order][:-1])).any():
            raise NotThisPath(f"range {k}: an instance's timestamps fall")
    except NotThisPath as refused:
        return pa.table({"range": pa.array([k], pa.int32()), "operator_id": pa.nulls(1, pa.string()),
                         "instance": pa.nulls(1, pa.int32()), "lines": pa.nulls(1, pa.int64()),
                         "first_ts": pa.nulls(1, pa.int64()), "last_ts": pa.nulls(1, pa.int64()),
                         "refused": pa.array([str(refused)])})  # fmt: skip
    grouped = rows.group_by(["operator_id", "instance_id"], use_threads=False).aggregate(
        [("window_start_ts", "count"), ("window_start_ts", "first"), ("window_start_ts", "last")]
    )
    return pa.table({
        "range": pa.array([k] * grouped.num_rows, pa.int32()),
        "operator_id": grouped.column("operator_id"),
        "instance": grouped.column("instance_id"),
        "lines": grouped.column("window_start_ts_count").cast(pa.int64()),
        "first_ts": grouped.column("window_start_ts_first"),
        "last_ts": grouped.column("window_start_ts_last"),
        "refused": pa.nulls(grouped.num_rows, pa.string()),
    })  # fmt: skip


def _offsets(counts: pa.Table, ranges: int) -> list[dict[tuple[str, int], int]]:
    """Per range, each instance's lines before it; NotThisPath when an instance's timestamps fall from one
    range to the next."""
    out: list[dict[tuple[str, int], int]] = [{} for _ in range(ranges)]
    seen: dict[tuple[str, int], tuple[int, int]] = {}  # instance -> (lines so far, last timestamp)
    for row in counts.sort_by([("range", "ascending")]).to_pylist():
        key = (row["operator_id"], row["instance"])
        before, last = seen.get(key, (0, None))
        if last is not None and row["first_ts"] < last:
            raise NotThisPath(f"{key}'s timestamps fall between ranges")
        out[row["range"]][key] = before
        seen[key] = (before + row["lines"], row["last_ts"])
    return out


def _write_metrics(log: LogRanges, k: int, before: dict[tuple[str, int], int], root: str) -> pa.Table:
    """Range ``k``'s lines as metrics rows, numbered into epochs, one file per epoch block under ``root``."""
    rows = log.parse(k)
    if rows.num_rows == 0:
        return pa.table({"range": pa.array([k], pa.int32()), "rows": pa.array([0], pa.int64())})
    keys = _keys(rows, log.topology)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.r_[0, np.nonzero(sorted_keys[1:] != sorted_keys[:-1])[0] + 1]
    lengths = np.diff(np.r_[starts, len(keys)])
    firsts = order[starts]
    base = np.array([before[(rows.column("operator_id")[int(i)].as_py(), int(rows.column("instance_id")[int(i)].as_py()))]
                     for i in firsts], dtype=np.int64)  # fmt: skip
    epoch = np.empty(len(keys), dtype=np.int64)
    epoch[order] = np.arange(len(keys)) - np.repeat(starts, lengths) + np.repeat(base, lengths)
    ops = log.topology.operators
    ids = pa.array(list(ops), pa.string())
    at = pc.index_in(rows.column("operator_id"), value_set=ids)
    metrics = conform(METRICS, pa.table({
        "epoch": epoch,
        "operator_id": rows.column("operator_id"),
        "operator_name": pc.take(pa.array([op.name for op in ops.values()], pa.string()), at),
        "instance": rows.column("instance_id"),
        "parallelism": rows.column("total_instances"),
        "is_source": pc.take(pa.array([op.is_source for op in ops.values()], pa.bool_()), at),
        "window_start": pa.array(np.floor_divide(rows.column("window_start_ts").to_numpy(), 1000)).cast(MICROS),
        **{name: rows.column(name) for name in _RATES},
        "warmup": pa.repeat(False, rows.num_rows),
        "source_format": pa.repeat("ds2-rates-log", rows.num_rows),
    }), f"{log.path} (range {k})")  # fmt: skip
    blocks = epoch // EPOCH_BLOCK_SIZE
    for block in np.unique(blocks).tolist():
        folder = block_dir(root, METRICS, log.job, block)
        folder.mkdir(parents=True, exist_ok=True)
        part = metrics.filter(pa.array(blocks == block)).sort_by([("epoch", "ascending")])
        # Scratch, read once: no compression or dictionary to pay for.
        pq.write_table(part, folder / f"part-{k:05d}.parquet", compression="none", use_dictionary=False)
    return pa.table({"range": pa.array([k], pa.int32()), "rows": pa.array([rows.num_rows], pa.int64())})


def decide_rates_log(
    spark: SparkSession,
    run: BlockRun,
    path: str,
    before_commit: Callable[[], None] | None = None,
) -> int | None:
    """Decide every epoch of the rates log at ``path`` into ``run.decisions_root``; the epochs written,
    or None when the log needs Spark's general path (nothing is written then)."""
    if not Path(path).is_file() or Path(path).stat().st_size == 0:
        return None  # the general path names the problem
    size = Path(path).stat().st_size
    ranges = [(start, min(start + RANGE_BYTES, size)) for start in range(0, size, RANGE_BYTES)]
    log = LogRanges(str(Path(path).resolve()), run.topology, run.job, ranges)
    counts = per_task(spark, len(ranges), lambda k: _counts(log, k), COUNTS_DDL)
    if counts.num_rows == 0 or counts.column("refused").null_count < counts.num_rows:
        return None
    try:
        offsets = _offsets(counts, len(ranges))
    except NotThisPath:
        return None
    Path(run.decisions_root).mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".rates-log-", dir=run.decisions_root)
    try:
        per_task(spark, len(ranges), lambda k: _write_metrics(log, k, offsets[k], scratch), WRITTEN_DDL)
        return decide_stored_blocks(spark, replace(run, metrics_root=scratch), before_commit)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
