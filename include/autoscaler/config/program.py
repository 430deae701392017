"""A registered job's program as the jobs file gives it: a jar, or a SQL script run by the SQL runner jar, and where
its savepoints go. Read here, without Airflow, for :mod:`autoscaler.config.jobs`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoscaler.config import paths
from autoscaler.config.fields import Fields
from autoscaler.errors import InputError
from autoscaler.flink import sql


def from_file(value: str, base: Path) -> Path:
    """A path from the jobs file: relative ones against ``base`` (paths.base_dir: the checkout, else its folder)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def sql_program(f: Fields, flink_job_name: str, base: Path, config: Path | None) -> dict[str, Any] | None:
    """A job given as a SQL script: the SQL runner jar with the script's text, and no flags.

    ``sql_file`` is one script or a list read as one in order (a shared file of tables, then a query).
    ``kafka_client_config``: the Kafka client config whose login fills the script's ``${kafka.<key>}``.
    """
    value = f.get("sql_file")
    if value is None:
        if f.get("kafka_client_config") is not None:
            raise f.error("kafka_client_config", "only a job given by sql_file takes it (a jar job reads its own)")
        return None
    files = [value] if isinstance(value, str) else value
    if not isinstance(files, list) or not files or not all(isinstance(v, str) and v.strip() for v in files):
        raise f.error("sql_file", f"must be a path or a list of paths, got {value!r}")
    for key in ("jar", "jar_id", "entry_class", "base_args", "parallelism_args"):
        if key in f.data:
            raise f.error(key, "a job given by sql_file runs the SQL runner jar with its script: remove it")
    scripts = [from_file(v, base) for v in files]
    allowed = paths.sql_dir(config)
    outside = [str(p) for p in scripts if not p.resolve().is_relative_to(allowed)]
    if outside:
        raise f.error("sql_file", f"{outside[0]} is outside the SQL folder {allowed} (setting {paths.SQL_DIR.key}): "
                                  "a jobs file names no other file to submit")  # fmt: skip
    try:
        script = sql.read_scripts(scripts)
    except InputError as exc:
        raise f.error("sql_file", f"{exc.source}: {exc.problem}") from None
    named = sql.pipeline_name(script)
    if named != flink_job_name:
        raise f.error("sql_file", f"the script names its job {named!r} (SET 'pipeline.name'), but flink_job_name is "
                                  f"{flink_job_name!r}: the autoscaler finds the job by that name")  # fmt: skip
    kafka = f.text("kafka_client_config")
    if sql.uses_kafka_login(script) and kafka is None:
        raise f.error("kafka_client_config", "the script uses ${kafka.<key>} placeholders: name the Kafka client config "
                                             "file (scripts/kafka.sh client-config) that fills them")  # fmt: skip
    return {"parallelism_args": {}, "base_args": sql.runner_args(script, from_file(kafka, base) if kafka else None),
            "jar_path": sql.runner_jar(), "jar_id": None, "entry_class": sql.RUNNER_CLASS}  # fmt: skip


def savepoint_dir(value: str, base: Path) -> str:
    """A URI (file://, s3://, ...) as given; a path made absolute against ``base``."""
    return value if "://" in value else str(from_file(value, base))
