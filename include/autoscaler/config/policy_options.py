"""The options a policy run takes, as one value: :class:`PolicyOptions`, and each kind's own defaults.

Every option is declared once, with its key, default and meaning, in :mod:`autoscaler.config.options`;
this module gathers the ``policy.*`` ones into the value the DAG, the Spark job and the simulator pass to a
kind, and says which of them a kind defaults differently (:data:`KIND_DEFAULTS`).
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, dataclass, field, replace
from typing import Any

from autoscaler.config.options import (
    ALIGN_TO_KEY_GROUPS,
    BACKLOG_THRESHOLD,
    BACKPRESSURE_THRESHOLD,
    CATCH_UP_DURATION,
    DECISION_LATENCY,
    DRAINED_LAG,
    EFFECTIVENESS_THRESHOLD,
    FACTOR,
    HISTORY_WINDOW,
    JOB_MAX_PARALLELISM,
    LOW_UTILIZATION,
    MAX_PARALLELISM,
    MAX_SCALE_DOWN_FACTOR,
    MAX_SCALE_UP_FACTOR,
    MIN_PARALLELISM,
    OPTIONS,
    POLICY_INTERVAL,
    POLICY_KINDS,
    REFERENCE_KIND,
    RESTART_TIME,
    RULES_EPOCHS,
    RULES_STEP,
    SATURATED,
    SCALE_DOWN_INTERVAL,
    SCALE_DOWN_SIZES,
    SCALE_DOWN_TO,
    SCALE_SOURCES,
    STEADY_PRIOR_RISE,
    STEADY_QUANTILE,
    TARGET_UTILIZATION,
    THRESHOLD,
    UTILIZATION_BOUNDARY,
)
from autoscaler.errors import InputError
from autoscaler.topology import Topology

# The options whose "none" means the kind's own default: one table, read by PolicyOptions.effective.
# utilization carries the Flink autoscaler's defaults. ds2_plus's catch-up is not a number here: it is two
# policy intervals (PolicyOptions.effective), and its restart_time stands in only until a downtime is measured.
KIND_DEFAULTS: dict[str, dict[str, float | str]] = {
    "utilization": {"max_scale_down_factor": 0.4, "scale_down_interval": 3600.0, "catch_up_duration": 1800.0,
                    "restart_time": 300.0, "scale_down_to": "largest"},
    "ds2_plus": {"scale_down_interval": 300.0, "restart_time": 10.0, "scale_down_to": "latest"},
    # The DS2 reference ignores a scale-down by one instance; the other kinds hold scale-downs back by their own
    # rules (utilization's band, ds2_plus's restart term, rules' epochs in a row), so none is ignored on top.
    "ds2": {"ignore_scale_down_by": 1},
}  # fmt: skip


def catch_up_deadline(interval: float, owed: float) -> float:
    """ds2_plus's own catch-up: a backlog found at an epoch's end is gone by the end of the first epoch decided after
    the rescale it causes. The change takes effect ``owed`` s after the epoch's end; the epoch it falls in spans the
    restart (a warm-up, deciding nothing); the one after it is the first decided: two intervals while a change takes
    less than one, three while it takes less than two, and so on. Always longer than ``owed`` by at least an interval.
    """
    return (math.floor(owed / interval + 1e-9) + 2) * interval


@dataclass(frozen=True)
class PolicyOptions:
    """The options a policy run takes (the Spark job, the engine and the pure-Python reference)."""

    kind: str = REFERENCE_KIND
    factor: float = FACTOR.default
    threshold: float | None = THRESHOLD.default
    min_parallelism: dict[str, int] = field(default_factory=lambda: dict(MIN_PARALLELISM.default))
    max_parallelism: dict[str, int] = field(default_factory=lambda: dict(MAX_PARALLELISM.default))
    job_max_parallelism: int | None = JOB_MAX_PARALLELISM.default
    align_to_key_groups: bool = ALIGN_TO_KEY_GROUPS.default
    scale_sources: bool = SCALE_SOURCES.default
    # Not an option: derived from the job's deployment by the jobs config. The operators the job lets move (the
    # names its parallelism_args map); None: every operator (a job with none, such as a SQL job).
    movable_operators: list[str] | None = None
    # Durations are seconds here (the options travel as JSON to the Spark job and into each decision).
    target_utilization: float = TARGET_UTILIZATION.default
    utilization_boundary: float = UTILIZATION_BOUNDARY.default
    scale_down_interval: float | None = SCALE_DOWN_INTERVAL.default
    scale_down_to: str | None = SCALE_DOWN_TO.default
    max_scale_down_factor: float | None = MAX_SCALE_DOWN_FACTOR.default
    max_scale_up_factor: float | None = MAX_SCALE_UP_FACTOR.default
    backlog_threshold: float = BACKLOG_THRESHOLD.default.total_seconds()
    catch_up_duration: float | None = CATCH_UP_DURATION.default
    restart_time: float | None = RESTART_TIME.default
    history_window: float = HISTORY_WINDOW.default.total_seconds()
    steady_quantile: float = STEADY_QUANTILE.default
    steady_prior_rise: float = STEADY_PRIOR_RISE.default
    decision_latency: float = DECISION_LATENCY.default.total_seconds()
    drained_lag: float = DRAINED_LAG.default.total_seconds()
    effectiveness_threshold: float = EFFECTIVENESS_THRESHOLD.default
    backpressure_threshold: float = BACKPRESSURE_THRESHOLD.default
    rules_epochs: int = RULES_EPOCHS.default
    rules_step: int = RULES_STEP.default
    low_utilization: float = LOW_UTILIZATION.default
    # The job's policy interval (seconds), so that a kind can count its epochs of history.
    interval: float = POLICY_INTERVAL.default.total_seconds()

    def __post_init__(self) -> None:
        if self.kind not in POLICY_KINDS:
            raise InputError("--kind", f"policy kind must be one of {', '.join(POLICY_KINDS)}, got {self.kind!r}")
        if not (isinstance(self.factor, (int, float)) and math.isfinite(self.factor) and self.factor >= 0):
            raise InputError("--factor", f"over-provisioning factor must be a finite number >= 0, got {self.factor!r}")
        if self.threshold is not None and not (math.isfinite(self.threshold) and self.threshold >= 1.0):
            raise InputError("--threshold", f"target-rate-ratio threshold must be >= 1, got {self.threshold!r}")
        for name, bounds in (("--min-parallelism", self.min_parallelism), ("--max-parallelism", self.max_parallelism)):
            for op, value in bounds.items():
                if not isinstance(value, int) or value < 1:
                    raise InputError(name, f"operator {op!r}: bound must be an integer >= 1, got {value!r}")
        for op, low in self.min_parallelism.items():
            high = self.max_parallelism.get(op)
            if high is not None and high < low:
                raise InputError("--max-parallelism", f"operator {op!r}: max {high} is below min {low}")
        if not isinstance(self.scale_sources, bool):
            raise InputError("--scale-sources", f"must be true or false, got {self.scale_sources!r}")
        movable = self.movable_operators
        if movable is not None and not (isinstance(movable, list) and all(isinstance(n, str) for n in movable)):
            raise InputError("--movable-operators", f"must be a list of operator names, got {movable!r}")
        if self.job_max_parallelism is not None and self.job_max_parallelism < 1:
            raise InputError("--job-max-parallelism", f"must be >= 1, got {self.job_max_parallelism}")
        if not (isinstance(self.steady_quantile, (int, float)) and 0 <= self.steady_quantile < 1):
            raise InputError("--steady-quantile", f"must be in [0, 1), got {self.steady_quantile!r}")
        if not 0 < self.target_utilization <= 1:
            raise InputError("--target-utilization", f"must be in (0, 1], got {self.target_utilization!r}")
        for name in ("utilization_boundary", "max_scale_down_factor", "backpressure_threshold", "low_utilization",
                     "effectiveness_threshold"):  # fmt: skip
            value = getattr(self, name)
            if value is None and name == "max_scale_down_factor":
                continue
            if not (isinstance(value, (int, float)) and 0 <= value <= 1):
                raise InputError(f"--{name.replace('_', '-')}", f"must be a fraction in [0, 1], got {value!r}")
        up = self.max_scale_up_factor
        if up is not None and not (isinstance(up, (int, float)) and math.isfinite(up) and up >= 0):
            raise InputError("--max-scale-up-factor", f"must be a number >= 0, got {up!r}")
        for name in ("scale_down_interval", "catch_up_duration", "restart_time", "backlog_threshold", "history_window",
                     "decision_latency", "drained_lag", "steady_prior_rise"):  # fmt: skip
            value = getattr(self, name)
            if value is None and name in ("scale_down_interval", "catch_up_duration", "restart_time"):
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise InputError(f"--{name.replace('_', '-')}", f"must be seconds >= 0, got {value!r}")
        if not (isinstance(self.interval, (int, float)) and math.isfinite(self.interval) and self.interval > 0):
            raise InputError("--interval", f"the policy interval must be seconds > 0, got {self.interval!r}")
        if self.scale_down_to is not None and self.scale_down_to not in SCALE_DOWN_SIZES:
            raise InputError("--scale-down-to", f"must be one of {', '.join(SCALE_DOWN_SIZES)}, got {self.scale_down_to!r}")
        if self.catch_up_duration is not None and self.catch_up_duration <= 0:
            raise InputError("--catch-up-duration", "must be longer than 0 s")
        for name in ("rules_epochs", "rules_step"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise InputError(f"--{name.replace('_', '-')}", f"must be an integer >= 1, got {getattr(self, name)!r}")

    def check_catch_up(self) -> None:
        """Refuse a ds2_plus deadline that passes before a change has taken effect: no size could drain a backlog by
        it. Checked on the options as configured, not in ``__post_init__``: a run fills a measured restart in later,
        and one that outgrows the deadline is met by the kind's own (:class:`autoscaler.policy.ds2_plus.Clock`)."""
        takes = self.decision_latency + (self.restart_time or 0.0)
        if self.kind == "ds2_plus" and self.catch_up_duration is not None and self.catch_up_duration <= takes:
            raise InputError("--catch-up-duration", f"{self.catch_up_duration:g} s is not longer than what a change takes "
                             f"(decision latency {self.decision_latency:g} s + restart {self.restart_time or 0:g} s): "
                             "no size could drain a backlog by it")  # fmt: skip

    def resolved(self, topology: Topology) -> PolicyOptions:
        """The same options with operator names replaced by ids (unknown operators are errors)."""
        return replace(
            self,
            min_parallelism={topology.resolve(k, "--min-parallelism"): v for k, v in self.min_parallelism.items()},
            max_parallelism={topology.resolve(k, "--max-parallelism"): v for k, v in self.max_parallelism.items()},
        )

    def to_json(self) -> str:
        # Every field is a number, a string, or a list or dict of those: a shallow dict is asdict's JSON without its
        # deep copy (each decision row carries this text, and the simulated loop writes one per epoch).
        return json.dumps({name: getattr(self, name) for name in self.__dataclass_fields__}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = "--options") -> PolicyOptions:
        """The inverse of :meth:`to_json`: how the Spark job receives the options the DAG read."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            return cls(**data)
        except (ValueError, TypeError) as exc:
            raise InputError(source, f"not valid policy options: {exc}") from None

    @classmethod
    def describe(cls) -> list[tuple[str, object, str]]:
        """(name, default, meaning) for every policy option, from the declarations above; the default is the one a
        run given no value takes (for the kind, :data:`REFERENCE_KIND`, not a job's)."""
        by_name = {o.name: o for o in OPTIONS if o.key.startswith("policy.")}
        fields = cls.__dataclass_fields__
        own = {name: f.default for name, f in fields.items() if f.default is not MISSING}
        return [(name, own.get(name, by_name[name].default), by_name[name].meaning) for name in fields if name in by_name]

    def effective(self, name: str) -> float | None:
        """Option ``name`` as set, else the kind's own default (:data:`KIND_DEFAULTS`; None: the kind has none)."""
        value = getattr(self, name)
        if value is None and self.kind == "ds2_plus" and name == "catch_up_duration":
            return catch_up_deadline(self.interval, self.decision_latency + (self.effective("restart_time") or 0.0))
        return value if value is not None else KIND_DEFAULTS.get(self.kind, {}).get(name)

    def scale_down_largest(self) -> bool:
        """Whether a waited scale-down takes the wait's largest proposal (``scale_down_to``, else the kind's own)."""
        return (self.scale_down_to or KIND_DEFAULTS.get(self.kind, {}).get("scale_down_to", "largest")) == "largest"

    def scale_down_limit(self) -> float | None:
        """The fraction of instances one scale-down may remove: the option, else the kind's own (None: no limit)."""
        return self.effective("max_scale_down_factor")

    def bounds(self, op: str, key_groups: int | None) -> tuple[int, int]:
        """(lowest, highest) parallelism allowed for operator ``op`` (an id, after :meth:`resolved`)."""
        caps = [c for c in (self.max_parallelism.get(op), self.job_max_parallelism, key_groups) if c]
        return self.min_parallelism.get(op, 1), min(caps) if caps else SATURATED


def kind_default(kind: str, name: str, otherwise: Any = None) -> Any:
    """Option ``name``'s default for ``kind`` (:data:`KIND_DEFAULTS`), else ``otherwise``."""
    return KIND_DEFAULTS.get(kind, {}).get(name, otherwise)
