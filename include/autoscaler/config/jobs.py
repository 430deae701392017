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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config import options as opt
from autoscaler.config import paths
from autoscaler.config.fields import Fields
from autoscaler.config.policy_options import PolicyOptions, kind_default
from autoscaler.config.program import from_file, savepoint_dir, sql_program
from autoscaler.config.sections import (
    Alerts,
    Approval,
    CapacitySettings,
    ExcludedPeriod,
    RescaleSettings,
    Stability,
    TuningSettings,
    read_alerts,
    read_approval,
    read_capacity,
    read_rescale,
    read_tuning,
)
from autoscaler.errors import InputError
from autoscaler.flink.deployment import JobDeployment
from autoscaler.store.parquet import validate_job_name
from autoscaler.topology import Operator, Topology
from autoscaler.validate.config import LATENESS_FLOOR_S, ValidationConfig

_DEFAULT_START = datetime.fromisoformat(opt.START_DATE.default).replace(tzinfo=UTC)


def config_path() -> Path:
    return paths.jobs_file()


def data_dir() -> Path:
    """Runtime data: metrics/decisions/actions store, journals, Data Docs, demo output."""
    return paths.data_dir()


# The autoscaler's own DAGs, shared by every job: a job's DAG id (ds2_<name>) must not take one of them.
BOUNDARIES_DAG_ID = "ds2_boundaries"
RECONCILE_DAG_ID = "ds2_reconcile"
WHAT_IF_DAG_ID = "ds2_what_if"
_FLEET_DAG_ID = re.compile(r"ds2_fleet_[0-9]+s(_[A-Za-z0-9_]+)?")


def is_shared_dag_id(dag_id: str) -> bool:
    return dag_id in (BOUNDARIES_DAG_ID, RECONCILE_DAG_ID, WHAT_IF_DAG_ID) or bool(_FLEET_DAG_ID.fullmatch(dag_id))


def fleet_dag_id(interval: timedelta, spark_conn_id: str) -> str:
    """``ds2_fleet_<seconds>s``, and the Spark connection when it is not the default one."""
    suffix = "" if spark_conn_id == opt.SPARK_CONN_ID.default else "_" + re.sub(r"[^A-Za-z0-9_]", "_", spark_conn_id)
    return f"ds2_fleet_{int(interval.total_seconds())}s{suffix}"


@dataclass(frozen=True)
class JobConfig:
    """One registered Flink job and how to scale it."""

    name: str
    flink_job_name: str
    deployment: JobDeployment
    flink_conn_id: str = opt.FLINK_CONN_ID.default
    spark_conn_id: str = opt.SPARK_CONN_ID.default
    mechanism: str = opt.MECHANISM.default
    interval: timedelta = opt.POLICY_INTERVAL.default
    max_late_epochs: int = opt.MAX_LATE_EPOCHS.default
    start_date: datetime = _DEFAULT_START
    policy: PolicyOptions = field(default_factory=PolicyOptions)
    stability: Stability = field(default_factory=Stability)
    approval: Approval = field(default_factory=Approval)
    alerts: Alerts = field(default_factory=Alerts)
    capacity: CapacitySettings = field(default_factory=CapacitySettings)
    rescale: RescaleSettings = field(default_factory=RescaleSettings)
    tuning: TuningSettings = field(default_factory=TuningSettings)
    validation: Mapping[str, Any] = field(default_factory=dict)
    short_window: timedelta = opt.SHORT_WINDOW.default
    source_rate_metric: str | None = opt.SOURCE_RATE_METRIC.default
    prometheus_conn_id: str | None = opt.PROMETHEUS_CONN_ID.default
    savepoint_timeout: timedelta = opt.SAVEPOINT_TIMEOUT.default
    start_timeout: timedelta = opt.START_TIMEOUT.default
    tags: tuple[str, ...] = opt.TAGS.default
    recommendation_only: bool = opt.RECOMMENDATION_ONLY.default
    batched: bool = opt.BATCHED.default
    excluded_periods: tuple[ExcludedPeriod, ...] = ()

    @property
    def dag_id(self) -> str:
        return f"ds2_{self.name.replace('-', '_')}"

    @property
    def fleet_dag_id(self) -> str:
        """The fleet DAG that decides this job when it is batched: one per interval and Spark connection."""
        return fleet_dag_id(self.interval, self.spark_conn_id)

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
        return float(self.validation.get("lateness_s", max(LATENESS_FLOOR_S, self.interval_s)))

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


# The decide rules' own options (policy.* in the config, held in JobConfig.stability, not PolicyOptions).
STABILITY_OPTIONS = (opt.WARMUP_EPOCHS, opt.ACTIVATION_EPOCHS, opt.IGNORE_SCALE_DOWN_BY, opt.COOLDOWN)
# Every other policy.* option is the policy run's (a field of PolicyOptions): declared once, in config.options.
_POLICY = tuple(o for o in opt.OPTIONS if o.key.startswith("policy.") and o not in STABILITY_OPTIONS)
# Options that were removed, and what replaces them (a config still setting one gets this, not "unknown field").
_REPLACED = {
    "max_scale_down_step": "removed: scale-down limits have one option, max_scale_down_factor (a fraction of the "
    "instances, applied by every policy kind)",
}


def _policy(f: Fields, interval: timedelta) -> tuple[PolicyOptions, Stability]:
    for key, why in _REPLACED.items():
        if key in f.data:
            raise f.error(key, why)
    # Durations travel as seconds in the policy's options (JSON, see PolicyOptions).
    values = {o.name: f.option(o) for o in _POLICY} | {"interval": interval}
    values = {k: v.total_seconds() if isinstance(v, timedelta) else v for k, v in values.items()}
    try:
        options = PolicyOptions(**values)
        options.check_catch_up()
    except InputError as exc:
        raise f.error(exc.source.lstrip("-").replace("-", "_"), exc.problem) from None
    stability = {o.name: f.option(o) for o in STABILITY_OPTIONS}
    if stability["ignore_scale_down_by"] is None:
        stability["ignore_scale_down_by"] = kind_default(options.kind, "ignore_scale_down_by", 0)
    stability = Stability(**stability)
    f.done()
    return options, stability


def _job(entry: Any, index: int, source: str, base: Path, config: Path | None = None) -> JobConfig:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    where = f"{source}: job {name!r}" if isinstance(name, str) else f"{source}: jobs[{index}]"
    f = Fields(entry, where)
    name = f.text("name", required=True)
    try:
        validate_job_name(name)
    except InputError as exc:
        raise f.error("name", exc.problem) from None
    flink_job_name = f.text("flink_job_name", required=True)
    mechanism = f.option(opt.MECHANISM)
    jar = f.text("jar")
    jar_id = f.text("jar_id")
    program = {"parallelism_args": f.mapping("parallelism_args"), "base_args": f.strings("base_args"),
               "jar_path": from_file(jar, base) if jar else None, "jar_id": jar_id,
               "entry_class": f.text("entry_class")}  # fmt: skip
    program = sql_program(f, flink_job_name, base, config) or program
    try:
        deployment = JobDeployment(
            job_name=flink_job_name,
            savepoint_dir=savepoint_dir(f.text("savepoint_dir", str(data_dir() / "savepoints")), base),
            allow_non_restored_state=f.boolean("allow_non_restored_state", False),
            savepoint_format=f.option(opt.SAVEPOINT_FORMAT),
            **program,
        )
    except InputError as exc:
        raise InputError(where, f"deployment: {exc.problem}") from None
    interval = f.option(opt.POLICY_INTERVAL)
    if 86400 % interval.total_seconds() and interval.total_seconds() % 86400:
        raise f.error("policy_interval", f"{interval} must divide a day (or be whole days) so epochs align to the clock")
    start = f.get(opt.START_DATE.name, opt.START_DATE.default)
    try:
        start_date = start if isinstance(start, datetime) else datetime.fromisoformat(str(start))
    except ValueError:
        raise f.error("start_date", f"expected an ISO date like 2026-01-01, got {start!r}") from None
    start_date = start_date if start_date.tzinfo else start_date.replace(tzinfo=UTC)
    options, stability = _policy(Fields(f.get("policy"), where, "policy."), interval)
    if deployment.parallelism_args:
        # A job that names its operators' parallelism flags names what may move: a restart sets no other, and a
        # program may rely on the rest staying (the test job splits its rate over its fixed source instances).
        options = replace(options, movable_operators=sorted(deployment.parallelism_args))
    approval = read_approval(Fields(f.get("approval"), where, "approval."))
    alerts = read_alerts(Fields(f.get("alerts"), where, "alerts."))
    capacity = read_capacity(Fields(f.get("capacity"), where, "capacity."))
    rescale = read_rescale(Fields(f.get("rescale"), where, "rescale."))
    tuning = read_tuning(Fields(f.get("tuning"), where, "tuning."))
    collect = Fields(f.get("collect"), where, "collect.")
    short_window = collect.option(opt.SHORT_WINDOW)
    source_rate_metric = collect.option(opt.SOURCE_RATE_METRIC)
    prometheus_conn_id = collect.option(opt.PROMETHEUS_CONN_ID)
    collect.done()
    if short_window >= interval:
        raise InputError(where, f"collect.short_window: {short_window} must be shorter than policy_interval {interval}")
    validation = f.mapping("validation")
    config = JobConfig(
        name=name,
        flink_job_name=flink_job_name,
        deployment=deployment,
        flink_conn_id=f.option(opt.FLINK_CONN_ID),
        spark_conn_id=f.option(opt.SPARK_CONN_ID),
        mechanism=mechanism,
        interval=interval,
        max_late_epochs=f.option(opt.MAX_LATE_EPOCHS),
        start_date=start_date,
        policy=options,
        stability=stability,
        approval=approval,
        alerts=alerts,
        capacity=capacity,
        rescale=rescale,
        tuning=tuning,
        validation=validation,
        short_window=short_window,
        source_rate_metric=source_rate_metric,
        prometheus_conn_id=prometheus_conn_id,
        savepoint_timeout=f.option(opt.SAVEPOINT_TIMEOUT),
        start_timeout=f.option(opt.START_TIMEOUT),
        tags=f.option(opt.TAGS),
        recommendation_only=f.option(opt.RECOMMENDATION_ONLY),
        batched=f.option(opt.BATCHED),
        excluded_periods=_excluded_periods(f),
    )
    f.done()
    _check_validation(config, where)
    return config


def _excluded_periods(f: Fields) -> tuple[ExcludedPeriod, ...]:
    try:
        return tuple(ExcludedPeriod.parse(text) for text in f.option(opt.EXCLUDED_PERIODS))
    except ValueError as exc:
        raise f.error(opt.EXCLUDED_PERIODS.name, str(exc)) from None


def _check_validation(config: JobConfig, where: str) -> None:
    """Validation settings are checked against ValidationConfig now, not at the first epoch."""
    placeholder = Topology.from_edges([Operator("src", "src", 1, True)], [])
    try:
        ValidationConfig.from_mapping(placeholder, config.validation, source="validation")
    except InputError as exc:
        raise InputError(where, f"{exc.source}: {exc.problem}") from None


def parse_jobs_each(
    data: Any, source: str, base: Path | None = None, config: Path | None = None
) -> tuple[list[JobConfig], list[InputError]]:
    """The good jobs and one error per bad entry: a bad entry costs only itself. Relative paths are taken
    against ``base`` (default: that of the configured jobs file, :func:`paths.base_dir`)."""
    base = base or paths.base_dir()
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
            job = _job(entry, i, source, base, config)
        except InputError as exc:
            errors.append(exc)
            continue
        if is_shared_dag_id(job.dag_id):
            problem = f"name: its DAG id {job.dag_id} is one of the autoscaler's own DAGs"
            errors.append(InputError(f"{source}: job {job.name!r}", problem))
            continue
        clash = next((seen[key] for key in (job.name, job.dag_id) if key in seen), None)
        if clash is not None:
            errors.append(InputError(f"{source}: job {job.name!r}", f"name: clashes with job {clash!r} (same name or DAG id)"))
            continue
        # Two registrations of one Flink job would each rescale it on their own decisions.
        flink_job = f"{job.flink_conn_id}/{job.flink_job_name}"
        if flink_job in seen:
            problem = f"registers Flink job {job.flink_job_name!r} on {job.flink_conn_id!r}, as job {seen[flink_job]!r} does"
            errors.append(InputError(f"{source}: job {job.name!r}", f"flink_job_name: {problem}"))
            continue
        seen[job.name] = seen[job.dag_id] = seen[flink_job] = job.name
        jobs.append(job)
    return jobs, errors


def parse_jobs(data: Any, source: str, base: Path | None = None, config: Path | None = None) -> list[JobConfig]:
    jobs, errors = parse_jobs_each(data, source, base, config)
    if errors:
        raise errors[0]
    return jobs


def _read_config(path: str | Path | None) -> tuple[Any, str, Path, Path]:
    """The file's data, its name for messages (relative to the checkout when in it), its paths' base, itself."""
    path = Path(path) if path else config_path()
    base = paths.base_dir(path)
    root = paths.checkout()
    rel = path.resolve().relative_to(root) if root is not None and path.resolve().is_relative_to(root) else path
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(str(rel), f"cannot read the jobs config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(rel), f"the jobs config is not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(str(rel), f"not valid YAML: {getattr(exc, 'problem', exc)}", mark.line + 1 if mark else None) from None
    except (ValueError, OverflowError) as exc:
        # PyYAML builds dates and numbers itself: e.g. start_date: 2026-13-45 -> "month must be in 1..12".
        raise InputError(str(rel), f"a value YAML reads as a date or number is out of range ({exc})") from None
    return data, str(rel), base, path


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
