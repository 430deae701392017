"""What a job's metrics must satisfy before DS2 may decide on them: every threshold in one place.

The suite (:mod:`autoscaler.validate.suite`) is built from a :class:`ValidationConfig`; the
defaults and their meaning live here only, so the job's configuration, the Data Docs and the
validation record all say the same thing. Thresholds are relative where the quantity scales
(window lengths, times within a window, rates) and absolute only for floating-point slack.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from autoscaler.errors import InputError
from autoscaler.topology import Topology

# A window may start or end this long (at least) outside its epoch's interval: the collection
# runs after the interval closes, late by the scheduler's delay.
LATENESS_FLOOR_S = 30.0

Interval = tuple[datetime, datetime]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class ValidationConfig:
    """Thresholds of one job plus what is known about the epoch being validated."""

    topology: Topology = field(
        metadata=_doc("The job's current topology: the operators and their parallelism every epoch must cover exactly.")
    )
    data_interval: Interval | None = field(
        default=None,
        metadata=_doc(
            "The epoch's data interval [start, end) (UTC). Windows must lie inside it (freshness); "
            "None skips the check (DS2 files carry a monotonic clock, not wall time)."
        ),
    )
    window_s: float | None = field(
        default=None,
        metadata=_doc("Expected window length in seconds (the policy interval). None checks only that windows are positive."),
    )
    window_tolerance: float = field(
        default=0.2,
        metadata=_doc(
            "Relative tolerance on the window length: windows within window_s * (1 +/- tolerance) pass "
            "(the collection task starts late by the scheduler's delay)."
        ),
    )
    time_tolerance: float = field(
        default=0.25,
        metadata=_doc(
            "Relative tolerance on busy + idle + back-pressured time against the window, and on each of them being "
            "<= the window. Flink's REST API serves counters up to metrics.fetcher.update-interval old (2 s here), "
            "so over a window W the counters may cover W +/- 2 x that interval."
        ),
    )
    time_slack_s: float = field(
        default=4.0,
        metadata=_doc(
            "Absolute slack in seconds on the same time rules: the counters' staleness does not shrink with the "
            "window, so a short window (measured on the spot) would fail a purely relative tolerance. Default: "
            "2 x Flink's metrics.fetcher.update-interval (2 s)."
        ),
    )
    rate_tolerance: float = field(
        default=0.25,
        metadata=_doc(
            "Relative tolerance on observed rate <= true rate (both come from the same record count; they differ "
            "only by wall time vs. useful time, whose measurement has the same jitter as time_tolerance)."
        ),
    )
    rate_slack: float = field(
        default=1e-6, metadata=_doc("Absolute slack in records/s on observed <= true rate (floating-point rounding).")
    )
    max_rate: float = field(
        default=1e12,
        metadata=_doc("Upper bound for any rate in records/s per instance: a sanity cap that also rejects +infinity."),
    )
    lateness_s: float = field(
        default=LATENESS_FLOOR_S,
        metadata=_doc(
            "How far (seconds) a window may start before or end after the epoch's data interval: the collection runs "
            "after the interval closes, late by the scheduler's delay. A registered job's default is one policy "
            "interval, at least this."
        ),
    )

    def __post_init__(self) -> None:
        checks = {
            "window_tolerance": (self.window_tolerance, 0.0, 1.0),
            "time_tolerance": (self.time_tolerance, 0.0, 1.0),
            "rate_tolerance": (self.rate_tolerance, 0.0, math.inf),
            "rate_slack": (self.rate_slack, 0.0, math.inf),
            "lateness_s": (self.lateness_s, 0.0, math.inf),
            "time_slack_s": (self.time_slack_s, 0.0, math.inf),
        }
        for name, (value, low, high) in checks.items():
            if not (_number(value) and math.isfinite(value) and low <= value < high):
                raise InputError(f"validation.{name}", f"must be a finite number in [{low}, {high}), got {value!r}")
        if not (_number(self.max_rate) and math.isfinite(self.max_rate) and self.max_rate > 0):
            raise InputError("validation.max_rate", f"must be a finite number > 0, got {self.max_rate!r}")
        if self.window_s is not None and not (_number(self.window_s) and math.isfinite(self.window_s) and self.window_s > 0):
            raise InputError("validation.window_s", f"must be a number of seconds > 0, got {self.window_s!r}")
        if self.data_interval is not None:
            start, end = self.data_interval
            if start.tzinfo is None or end.tzinfo is None:
                raise InputError("validation.data_interval", "start and end must be timezone-aware (UTC)")
            if not start < end:
                raise InputError("validation.data_interval", f"start {start.isoformat()} is not before end {end.isoformat()}")

    @classmethod
    def from_mapping(cls, topology: Topology, settings: Mapping[str, Any], source: str = "validation") -> ValidationConfig:
        """Thresholds from a job's configuration (keys are the field names); unknown keys are errors."""
        known = {f.name for f in fields(cls)} - {"topology", "data_interval"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise InputError(source, f"unknown validation settings {unknown} (known: {sorted(known)})")
        return cls(topology=topology, **dict(settings))

    def for_epoch(self, data_interval: Interval | None) -> ValidationConfig:
        """The same thresholds for another epoch's data interval."""
        return replace(self, data_interval=data_interval)

    def thresholds(self) -> dict[str, Any]:
        """The thresholds as JSON-ready values (for the validation record and the suite's metadata)."""
        out = {k: v for k, v in asdict(self).items() if k not in ("topology", "data_interval")}
        out["topology"] = {op.id: op.parallelism for op in self.topology.operators.values()}
        if self.data_interval is not None:
            out["data_interval"] = [t.isoformat() for t in self.data_interval]
        return out

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(setting, default, meaning) for every setting: the single source for docs and help texts."""
        rows = []
        for f in fields(cls):
            default = "required" if f.default is MISSING else repr(f.default)
            rows.append((f.name, default, f.metadata["doc"]))
        return rows
