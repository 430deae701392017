"""Registered Flink jobs: the versioned configuration the DAG factory builds one DAG per job from.

The file (``include/jobs.yaml`` unless ``DS2_JOBS_CONFIG`` names another) is read and checked
here, without Airflow, so a bad entry fails the DAG file's import with a message naming the
file, the job and the field -- e.g. ``include/jobs.yaml: job 'wordcount': policy.factor: must be a
number >= 0, got -1`` -- instead of a traceback from deep inside the scheduler.

Relative paths (the jar, the savepoint folder) are relative to the project root; runtime data
(metrics store, journals, Data Docs) lives under ``DS2_DATA_DIR`` (default ``<root>/data``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from autoscaler.errors import InputError
from autoscaler.flink.deployment import JobDeployment
from autoscaler.flink.rescale import IN_PLACE, SAVEPOINT_RESTART
from autoscaler.options import PolicyOptions
from autoscaler.store import validate_job_name

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = PROJECT_ROOT / "include" / "jobs.yaml"
MECHANISMS = (SAVEPOINT_RESTART, IN_PLACE)
TIMEOUT_ANSWERS = ("approve", "reject")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_CONN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,250}$")


def config_path() -> Path:
    return Path(os.environ.get("DS2_JOBS_CONFIG") or DEFAULT_CONFIG)


def data_dir() -> Path:
    """Runtime data: metrics/decisions/actions store, journals, Data Docs, demo output."""
    return Path(os.environ.get("DS2_DATA_DIR") or PROJECT_ROOT / "data").resolve()


def parse_duration(value: Any, where: str) -> timedelta:
    """``30s``, ``5m``, ``1h``, ``2d``, ``500ms`` or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a duration like 30s, 5m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"{where}: expected a duration like 30s, 5m or 1h, got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{where}: must be a finite duration >= 0, got {value!r}")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Stability:
    """What a DS2 proposal must get past before it is acted on (see :mod:`autoscaler.decide`)."""

    warmup_epochs: int = 1  # epochs after a rescale whose metrics are never acted on (the restart's transient)
    activation_epochs: int = 1  # decided epochs needed since the last rescale before the next one
    ignore_scale_down_by: int = 1  # hysteresis: a scale-down by this many instances or fewer is ignored (reference: 1)
    cooldown: timedelta = timedelta(0)  # minimum time from the end of a rescale to the next one
    max_scale_down_step: int | None = None  # a scale-down removes at most this many instances per rescale

    @property
    def cooldown_s(self) -> float:
        return self.cooldown.total_seconds()


@dataclass(frozen=True)
class Approval:
    required: bool = False
    approvers: tuple[str, ...] = ()  # Airflow user names allowed to answer; empty = any user with access
    timeout: timedelta | None = timedelta(hours=1)  # None waits forever
    on_timeout: str = "reject"  # the answer applied when nobody answered in time

    @property
    def timeout_answer(self) -> str:
        return "Approve" if self.on_timeout == "approve" else "Reject"


@dataclass(frozen=True)
class JobConfig:
    """One registered Flink job and how to scale it."""

    name: str
    flink_job_name: str
    deployment: JobDeployment
    flink_conn_id: str = "flink_default"
    spark_conn_id: str = "spark_ds2"
    mechanism: str = SAVEPOINT_RESTART
    interval: timedelta = timedelta(minutes=1)
    start_date: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    stability: Stability = field(default_factory=Stability)
    approval: Approval = field(default_factory=Approval)
    validation: Mapping[str, Any] = field(default_factory=dict)
    short_window: timedelta = timedelta(seconds=20)
    source_rate_metric: str | None = None
    savepoint_timeout: timedelta = timedelta(minutes=2)
    start_timeout: timedelta = timedelta(minutes=1)
    tags: tuple[str, ...] = ()

    @property
    def dag_id(self) -> str:
        return f"ds2_{self.name.replace('-', '_')}"

    @property
    def what_if_dag_id(self) -> str:
        return f"{self.dag_id}_what_if"

    @property
    def pool(self) -> str:
        """One slot per job: two rescales (or policy runs) of the same job never overlap."""
        return f"ds2_{self.name}"

    @property
    def interval_s(self) -> float:
        return self.interval.total_seconds()

    def epoch_of(self, interval_end: datetime) -> int:
        """The last whole epoch ended at or before ``interval_end``: epoch n covers [n*I, (n+1)*I) since 1970.

        Absolute numbering keeps epochs stable across DAG edits, re-runs and backfills, and
        makes epoch ``n - 1`` the interval right before ``n`` (collection diffs against it).
        """
        return math.floor(interval_end.timestamp() / self.interval_s + 1e-6) - 1

    @property
    def lateness_s(self) -> float:
        """How late (s) a window may start or end against its epoch's interval (validation freshness).

        Default: one policy interval, at least 30 s. With ``max_active_runs=1`` a run queues
        behind a long one (a rescale, an approval) and measures late by up to about an interval:
        that is a late measurement, not bad data.
        """
        return float(self.validation.get("lateness_s", max(30.0, self.interval_s)))

    @property
    def max_boundary_age_s(self) -> float:
        """How old the previous epoch's boundary snapshot may be to start this epoch's window.

        Older (the DAG was paused, runs queued) and the window would start before the epoch's
        interval by more than validation tolerates: a short window is measured instead.
        """
        return self.interval_s + self.lateness_s

    def epoch_start(self, epoch: int) -> datetime:
        return datetime.fromtimestamp(epoch * self.interval_s, tz=UTC)


# ---------------------------------------------------------------------------------------------
# reading and checking


class _Fields:
    """Reads one mapping of the config, naming the job and field in every error."""

    def __init__(self, data: Any, where: str, prefix: str = "") -> None:
        self.where = where
        self.prefix = prefix
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise self.error(prefix.rstrip(".") or "entry", f"must be a mapping, got {type(data).__name__}")
        self.data = dict(data)
        self.used: set[str] = set()

    def error(self, key: str, problem: str) -> InputError:
        return InputError(self.where, f"{self.prefix}{key}: {problem}")

    def get(self, key: str, default: Any = None, required: bool = False) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.error(key, "is required")
            return default
        return self.data[key]

    def text(self, key: str, default: str | None = None, required: bool = False) -> Any:
        value = self.get(key, default, required)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise self.error(key, f"must be a non-empty string, got {value!r}")
        return value

    def integer(self, key: str, default: int | None, minimum: int) -> Any:
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, f"must be an integer >= {minimum}, got {value!r}")
        return value

    def number(self, key: str, default: float | None, minimum: float) -> Any:
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
            raise self.error(key, f"must be a number >= {minimum:g}, got {value!r}")
        return float(value)

    def duration(self, key: str, default: timedelta | None, minimum_s: float = 0.0) -> Any:
        value = self.get(key)
        if value is None:
            return default
        try:
            parsed = parse_duration(value, f"{self.prefix}{key}")
        except ValueError as exc:
            raise InputError(self.where, str(exc)) from None
        if parsed.total_seconds() < minimum_s:
            raise self.error(key, f"must be at least {minimum_s:g} s, got {value!r}")
        return parsed

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.get(key, default)
        if value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key, [])
        if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"must be a list of strings, got {value!r}")
        return tuple(value)

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.get(key, {})
        if not isinstance(value, Mapping):
            raise self.error(key, f"must be a mapping, got {value!r}")
        return dict(value)

    def conn_id(self, key: str, default: str) -> str:
        value = self.text(key, default)
        if not _CONN_ID.match(value):
            raise self.error(key, f"{value!r} is not a valid Airflow connection id (letters, digits, _ . -)")
        return value

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.error(unknown[0], f"unknown field (known: {', '.join(sorted(self.used))})")


def _path(value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else PROJECT_ROOT / path


def _savepoint_dir(value: str) -> str:
    """A URI (file://, s3://, ...) as given; a path made absolute against the project root."""
    return value if "://" in value else str(_path(value))


def _bounds(f: _Fields, key: str) -> dict[str, int]:
    out = {}
    for op, n in f.mapping(key).items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise f.error(f"{key}.{op}", f"must be an integer >= 1, got {n!r}")
        out[str(op)] = n
    return out


def _policy(f: _Fields) -> tuple[PolicyOptions, Stability]:
    values = {
        "factor": f.number("factor", 0.0, 0.0),
        "threshold": f.number("threshold", None, 1.0),
        "min_parallelism": _bounds(f, "min_parallelism"),
        "max_parallelism": _bounds(f, "max_parallelism"),
        "job_max_parallelism": f.integer("job_max_parallelism", None, 1),
        "align_to_key_groups": f.boolean("align_to_key_groups", False),
    }
    try:
        options = PolicyOptions(**values)
    except InputError as exc:
        raise f.error(exc.source.lstrip("-").replace("-", "_"), exc.problem) from None
    stability = Stability(
        warmup_epochs=f.integer("warmup_epochs", 1, 0),
        activation_epochs=f.integer("activation_epochs", 1, 1),
        ignore_scale_down_by=f.integer("ignore_scale_down_by", 1, 0),
        cooldown=f.duration("cooldown", timedelta(0)),
        max_scale_down_step=f.integer("max_scale_down_step", None, 1),
    )
    f.done()
    return options, stability


def _approval(f: _Fields) -> Approval:
    required = f.boolean("required", False)
    timeout = f.get("timeout", "1h")
    parsed = None if timeout in ("none", "never") else f.duration("timeout", None, minimum_s=1)
    approval = Approval(
        required=required,
        approvers=f.strings("approvers"),
        timeout=parsed,
        on_timeout=f.choice("on_timeout", "reject", TIMEOUT_ANSWERS),
    )
    f.done()
    return approval


def _job(entry: Any, index: int, source: str) -> JobConfig:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    where = f"{source}: job {name!r}" if isinstance(name, str) else f"{source}: jobs[{index}]"
    f = _Fields(entry, where)
    name = f.text("name", required=True)
    try:
        validate_job_name(name)
    except InputError as exc:
        raise f.error("name", exc.problem) from None
    flink_job_name = f.text("flink_job_name", required=True)
    mechanism = f.choice("mechanism", SAVEPOINT_RESTART, MECHANISMS)
    jar = f.text("jar")
    jar_id = f.text("jar_id")
    try:
        deployment = JobDeployment(
            job_name=flink_job_name,
            savepoint_dir=_savepoint_dir(f.text("savepoint_dir", str(data_dir() / "savepoints"))),
            parallelism_args=f.mapping("parallelism_args"),
            base_args=f.strings("base_args"),
            jar_path=_path(jar) if jar else None,
            jar_id=jar_id,
            entry_class=f.text("entry_class"),
            allow_non_restored_state=f.boolean("allow_non_restored_state", False),
        )
    except InputError as exc:
        raise InputError(where, f"deployment: {exc.problem}") from None
    interval = f.duration("policy_interval", timedelta(minutes=1), minimum_s=5)
    if 86400 % interval.total_seconds() and interval.total_seconds() % 86400:
        raise f.error("policy_interval", f"{interval} must divide a day (or be whole days) so epochs align to the clock")
    start = f.get("start_date", "2026-01-01")
    try:
        start_date = start if isinstance(start, datetime) else datetime.fromisoformat(str(start))
    except ValueError:
        raise f.error("start_date", f"expected an ISO date like 2026-01-01, got {start!r}") from None
    start_date = start_date if start_date.tzinfo else start_date.replace(tzinfo=UTC)
    options, stability = _policy(_Fields(f.get("policy"), where, "policy."))
    approval = _approval(_Fields(f.get("approval"), where, "approval."))
    collect = _Fields(f.get("collect"), where, "collect.")
    short_window = collect.duration("short_window", timedelta(seconds=20), minimum_s=1)
    source_rate_metric = collect.text("source_rate_metric")
    collect.done()
    if short_window >= interval:
        raise InputError(where, f"collect.short_window: {short_window} must be shorter than policy_interval {interval}")
    validation = f.mapping("validation")
    config = JobConfig(
        name=name,
        flink_job_name=flink_job_name,
        deployment=deployment,
        flink_conn_id=f.conn_id("flink_conn_id", "flink_default"),
        spark_conn_id=f.conn_id("spark_conn_id", "spark_ds2"),
        mechanism=mechanism,
        interval=interval,
        start_date=start_date,
        policy=options,
        stability=stability,
        approval=approval,
        validation=validation,
        short_window=short_window,
        source_rate_metric=source_rate_metric,
        savepoint_timeout=f.duration("savepoint_timeout", timedelta(minutes=2), minimum_s=1),
        start_timeout=f.duration("start_timeout", timedelta(minutes=1), minimum_s=1),
        tags=f.strings("tags"),
    )
    f.done()
    _check_validation(config, where)
    return config


def _check_validation(config: JobConfig, where: str) -> None:
    """Validation settings are checked against ValidationConfig now, not at the first epoch."""
    from autoscaler.topology import Operator, Topology
    from autoscaler.validation.config import ValidationConfig

    placeholder = Topology.from_edges([Operator("src", "src", 1, True)], [])
    try:
        ValidationConfig.from_mapping(placeholder, config.validation, source="validation")
    except InputError as exc:
        raise InputError(where, f"{exc.source}: {exc.problem}") from None


def parse_jobs_each(data: Any, source: str) -> tuple[list[JobConfig], list[InputError]]:
    """The good jobs and one error per bad entry: a bad entry costs only itself."""
    if not isinstance(data, Mapping) or not isinstance(data.get("jobs"), list):
        raise InputError(source, "expected a mapping with a 'jobs' list")
    unknown = sorted(set(data) - {"jobs", "version"})
    if unknown:
        raise InputError(source, f"unknown top-level field {unknown[0]!r} (known: jobs, version)")
    jobs: list[JobConfig] = []
    errors: list[InputError] = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(data["jobs"]):
        try:
            job = _job(entry, i, source)
        except InputError as exc:
            errors.append(exc)
            continue
        clash = next((seen[key] for key in (job.name, job.dag_id) if key in seen), None)
        if clash is not None:
            errors.append(InputError(f"{source}: job {job.name!r}", f"name: clashes with job {clash!r} (same name or DAG id)"))
            continue
        seen[job.name] = seen[job.dag_id] = job.name
        jobs.append(job)
    return jobs, errors


def parse_jobs(data: Any, source: str) -> list[JobConfig]:
    jobs, errors = parse_jobs_each(data, source)
    if errors:
        raise errors[0]
    return jobs


def _read_config(path: str | Path | None) -> tuple[Any, str]:
    path = Path(path) if path else config_path()
    try:
        rel = path.resolve().relative_to(PROJECT_ROOT)
    except ValueError:
        rel = path
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(str(rel), f"cannot read the jobs config: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(str(rel), f"not valid YAML: {getattr(exc, 'problem', exc)}", mark.line + 1 if mark else None) from None
    return data, str(rel)


def load_jobs(path: str | Path | None = None) -> list[JobConfig]:
    """Read and check the jobs config; every problem raises :class:`InputError` naming job and field."""
    return parse_jobs(*_read_config(path))


def load_jobs_each(path: str | Path | None = None) -> tuple[list[JobConfig], list[InputError]]:
    """Read the jobs config keeping the good entries: ``(jobs, errors)``, an error per bad entry.

    A file that cannot be read or parsed at all still raises.
    """
    return parse_jobs_each(*_read_config(path))


def find_job(name: str, path: str | Path | None = None) -> JobConfig:
    for job in load_jobs(path):
        if job.name == name:
            return job
    raise InputError(str(path or config_path()), f"no job named {name!r}")
