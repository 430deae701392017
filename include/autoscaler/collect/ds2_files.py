"""Readers for the DS2 reference formats: the rates log, online rate files, source-rate overrides.

The rates log has one line per operator instance and window:
``operator_id,instance_id,total_instances,window_start_ts,true_processing_rate,
true_output_rate,observed_processing_rate,observed_output_rate``. Epochs have no delimiter:
each instance's lines are sorted by timestamp and numbered 0, 1, 2, ...

Every problem is an :class:`InputError` naming the file and line.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from autoscaler.errors import InputError
from autoscaler.store.parquet import epoch_block
from autoscaler.topology import Topology

RATE_COLUMNS = (
    "operator_id",
    "instance_id",
    "total_instances",
    "window_start_ts",
    "true_processing_rate",
    "true_output_rate",
    "observed_processing_rate",
    "observed_output_rate",
)
_RATE_FIELDS = RATE_COLUMNS[4:]
_RATE_FILE_NAME = re.compile(r"^(?P<name>.+)-(?P<instance>\d+)-(?P<epoch>\d+)\.[^.]+$")


MAX_TIMESTAMP_NS = 2**63  # the metrics table's timestamps are 64-bit nanoseconds


def _short_text(fields: list[str]) -> str:
    return fields[3] if len(fields[3]) <= 30 else fields[3][:27] + "..."


@dataclass(frozen=True)
class RateRecord:
    operator_id: str
    instance: int
    total_instances: int
    window_start_ns: int
    true_processing_rate: float
    true_output_rate: float
    observed_processing_rate: float
    observed_output_rate: float
    epoch: int = -1


def parse_rate_line(line: str, topology: Topology, source: str, line_no: int) -> RateRecord:
    """One 8-column line, checked against the topology."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != len(RATE_COLUMNS):
        raise InputError(
            source, f"expected {len(RATE_COLUMNS)} comma-separated columns ({','.join(RATE_COLUMNS)}), got {len(fields)}", line_no
        )
    op_id = fields[0]
    if op_id not in topology.operators:
        raise InputError(source, f"unknown operator {op_id!r} (not in the topology)", line_no)
    ints = []
    for name, text in zip(RATE_COLUMNS[1:4], fields[1:4]):
        try:
            ints.append(int(text))
        except ValueError:
            raise InputError(source, f"operator {op_id!r}: {name} {text!r} is not an integer", line_no) from None
    instance, total, ts = ints
    if not 0 <= ts < MAX_TIMESTAMP_NS:
        problem = f"operator {op_id!r}: timestamp {_short_text(fields)} is outside 0..2^63 ns (1970-2262)"
        raise InputError(source, problem, line_no)
    expected = topology.operators[op_id].parallelism
    if total != expected:
        raise InputError(source, f"operator {op_id!r}: total_instances {total} disagrees with the topology ({expected})", line_no)
    if not 1 <= instance <= total:
        raise InputError(source, f"operator {op_id!r}: instance_id {instance} is outside 1..{total}", line_no)
    rates = []
    for name, text in zip(_RATE_FIELDS, fields[4:]):
        try:
            value = float(text)
        except ValueError:
            raise InputError(
                source, f"operator {op_id!r} instance {instance}: {name} {text!r} is not a number", line_no
            ) from None
        if not math.isfinite(value) or value < 0:
            raise InputError(
                source, f"operator {op_id!r} instance {instance}: {name} is {text}; rates must be finite and >= 0", line_no
            )
        rates.append(value)
    return RateRecord(op_id, instance, total, ts, *rates)


def _data_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the first operator id.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = data[: exc.start].count(b"\n") + 1
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start})", line_no) from None
    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield line_no, line


def read_rates_log(path: str | Path, topology: Topology) -> list[RateRecord]:
    """All lines of a rates log, numbered into epochs per instance by timestamp order."""
    path = Path(path)
    per_instance: dict[tuple[str, int], list[tuple[int, int, RateRecord]]] = defaultdict(list)
    for line_no, line in _data_lines(path):
        record = parse_rate_line(line, topology, str(path), line_no)
        per_instance[(record.operator_id, record.instance)].append((record.window_start_ns, line_no, record))
    if not per_instance:
        raise InputError(str(path), "the rates log has no data lines")
    out = []
    for windows in per_instance.values():
        windows.sort(key=lambda w: (w[0], w[1]))
        for epoch, (_, _, record) in enumerate(windows):
            out.append(_with_epoch(record, epoch))
    return out


def _with_epoch(record: RateRecord, epoch: int) -> RateRecord:
    return RateRecord(**{**record.__dict__, "epoch": epoch})


def read_rate_files(folder: str | Path, topology: Topology) -> tuple[list[RateRecord], list[int]]:
    """Online rate files ``<operator name>-<instance>-<epoch>.<ext>``, one line each.

    Returns the records of complete epochs (a file for every instance of every operator)
    and the sorted list of incomplete epochs that were skipped, as the reference manager
    waits for them.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(str(folder), "rates folder does not exist or is not a folder")
    by_name = {op.name: op for op in topology.operators.values()}
    seen: dict[tuple[str, int, int], Path] = {}
    per_epoch: dict[int, list[RateRecord]] = defaultdict(list)
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        match = _RATE_FILE_NAME.fullmatch(path.name)
        if not match:
            raise InputError(str(path), "file name is not <operator name>-<instance>-<epoch>.<ext>")
        name, instance, epoch = match["name"], int(match["instance"]), int(match["epoch"])
        if name not in by_name:
            raise InputError(str(path), f"unknown operator name {name!r} (not in the topology)")
        op = by_name[name]
        key = (op.id, instance, epoch)
        if key in seen:
            raise InputError(
                str(path), f"duplicate rate file for operator {name!r} instance {instance} epoch {epoch} (also {seen[key].name})"
            )
        seen[key] = path
        lines = list(_data_lines(path))
        if len(lines) != 1:
            raise InputError(str(path), f"expected exactly one data line, found {len(lines)}")
        line_no, line = lines[0]
        record = parse_rate_line(line, topology, str(path), line_no)
        if record.operator_id != op.id:
            raise InputError(
                str(path), f"line is for operator {record.operator_id!r} but the file name says {name!r} ({op.id!r})", line_no
            )
        if record.instance != instance:
            raise InputError(str(path), f"line is for instance {record.instance} but the file name says {instance}", line_no)
        per_epoch[epoch].append(_with_epoch(record, epoch))
    if not per_epoch:
        raise InputError(str(folder), "no rate files found")
    expected = sum(op.parallelism for op in topology.operators.values())
    complete = sorted(e for e, rows in per_epoch.items() if len(rows) == expected)
    skipped = sorted(e for e in per_epoch if len(per_epoch[e]) != expected)
    return [r for e in complete for r in per_epoch[e]], skipped


def read_source_rates(path: str | Path, topology: Topology) -> dict[str, float]:
    """The override file ``operator_id,rate_per_instance`` (-1 = use the observed output)."""
    path = Path(path)
    rates: dict[str, float] = {}
    for line_no, line in _data_lines(path):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 2:
            raise InputError(str(path), f"expected 2 columns (operator_id,rate_per_instance), got {len(fields)}", line_no)
        op_id, text = fields
        if op_id not in topology.operators:
            raise InputError(str(path), f"unknown operator {op_id!r} (not in the topology)", line_no)
        if not topology.operators[op_id].is_source:
            raise InputError(str(path), f"operator {op_id!r} is not a source; only source rates can be overridden", line_no)
        try:
            rate = float(text)
        except ValueError:
            raise InputError(str(path), f"operator {op_id!r}: rate {text!r} is not a number", line_no) from None
        if not math.isfinite(rate) or (rate < 0 and rate != -1):
            raise InputError(str(path), f"operator {op_id!r}: rate {text} must be >= 0, or -1 for the observed rate", line_no)
        if op_id in rates:
            raise InputError(str(path), f"operator {op_id!r} is listed twice", line_no)
        rates[op_id] = rate
    return rates


def records_to_metrics(records: Iterable[RateRecord], topology: Topology, job: str, source_format: str) -> pa.Table:
    """Rate records as rows of the metrics table (counts and times unknown: null)."""
    from autoscaler.store.schemas import METRICS

    records = list(records)
    ops = topology.operators
    columns = {
        "job": [job] * len(records),
        "epoch": [r.epoch for r in records],
        "epoch_block": [epoch_block(r.epoch) for r in records],
        "operator_id": [r.operator_id for r in records],
        "operator_name": [ops[r.operator_id].name for r in records],
        "instance": [r.instance for r in records],
        "parallelism": [r.total_instances for r in records],
        "max_parallelism": [None] * len(records),
        "is_source": [ops[r.operator_id].is_source for r in records],
        "window_start": [r.window_start_ns // 1000 for r in records],
        "window_end": [None] * len(records),
        "records_in": [None] * len(records),
        "records_out": [None] * len(records),
        "busy_ms": [None] * len(records),
        "idle_ms": [None] * len(records),
        "backpressured_ms": [None] * len(records),
        "true_processing_rate": [r.true_processing_rate for r in records],
        "true_output_rate": [r.true_output_rate for r in records],
        "observed_processing_rate": [r.observed_processing_rate for r in records],
        "observed_output_rate": [r.observed_output_rate for r in records],
        "warmup": [False] * len(records),
        "pending_records": [None] * len(records),
        "source_format": [source_format] * len(records),
        "source_rate_basis": [None] * len(records),
    }
    return pa.table(columns, schema=METRICS.arrow_schema())
