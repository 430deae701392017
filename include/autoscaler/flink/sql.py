"""Flink SQL jobs: a SQL script submitted as one job by the SQL runner jar, with no flags of ours.

This distribution (PyPI's apache-flink wheels) ships ``sql-client.sh`` without the SQL gateway it
embeds, so the client cannot start. The runner jar (``flink-job/sql-runner``, built into ``build/``,
shipped in the package) does what the client would: ``SET`` statements go into the job's configuration, DDL runs in order, the
``INSERT`` statements form one job. It is submitted through the REST API's jar-run like any jar, so
a restart restores it from its savepoint; the operators are the planner's.

Usage: ``python -m autoscaler.flink.sql FILE [--parallelism N]`` (``scripts/flink.sh submit-sql``)
submits a script to the cluster at ``FLINK_REST_URL`` (default ``http://127.0.0.1:8081``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from autoscaler.config import paths
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkConnection, FlinkError, FlinkRestClient
from autoscaler.flink.deployment import pinned_upload

RUNNER_JAR_NAME = "ds2-sql-runner.jar"
RUNNER_CLASS = "ds2.sqlrunner.SqlRunner"
_PIPELINE_NAME = re.compile(r"^\s*SET\s+'pipeline\.name'\s*=\s*'((?:[^']|'')*)'\s*;", re.IGNORECASE | re.MULTILINE)


def runner_jar() -> Path:
    """The SQL runner jar (paths.jar: the jars setting, the package's, else the checkout's build/)."""
    return paths.jar(RUNNER_JAR_NAME)


RUNNER_JAR = runner_jar()  # where it is by default (the demo, tests and benchmarks run from the checkout)


def read_script(path: str | Path) -> str:
    """A SQL script's text; a clear error when it cannot be read or runs nothing."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"the SQL script cannot be read: {exc}") from None
    if not re.search(r"\bINSERT\s+INTO\b", text, re.IGNORECASE):
        raise InputError(str(path), "the SQL script has no INSERT INTO statement: it would run no job")
    return text


def read_scripts(paths: list[Path]) -> str:
    """Several scripts read as one, in order (a shared file of tables, then a query's own statements)."""
    texts = []
    for path in paths:
        try:
            texts.append(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"the SQL script cannot be read: {exc}") from None
    text = "\n".join(texts)
    if not re.search(r"\bINSERT\s+INTO\b", text, re.IGNORECASE):
        raise InputError(str(paths[-1]), "the SQL script has no INSERT INTO statement: it would run no job")
    return text


_KAFKA_PLACEHOLDER = re.compile(r"\$\{kafka\.[a-z.]+\}")


def uses_kafka_login(script: str) -> bool:
    """The script has ``${kafka.<key>}`` placeholders, which the runner fills from a Kafka client config."""
    return bool(_KAFKA_PLACEHOLDER.search(script))


def pipeline_name(script: str) -> str | None:
    """The job name the script sets (``SET 'pipeline.name' = '...'``), if it sets one."""
    names = _PIPELINE_NAME.findall(script)
    return names[-1].replace("''", "'") if names else None


def runner_args(script: str, kafka_client_config: Path | None = None) -> list[str]:
    """The runner's program arguments for ``script``: its text, so no file must exist on the JobManager.

    ``kafka_client_config``: the file whose login the runner puts in place of the script's ``${kafka.<key>}``
    (read where the JobManager runs): only its path is an argument, never the password.
    """
    login = ["--kafka-client-config", str(kafka_client_config)] if kafka_client_config else []
    return [*login, "--sql", script]


def submit(client: FlinkRestClient, script: str, parallelism: int | None = None, kafka_client_config: Path | None = None) -> str:
    """Submit ``script`` as a new job (the runner jar uploaded once per content); its job id."""
    if pipeline_name(script) is None:
        raise InputError("SQL script", "it must name its job: SET 'pipeline.name' = '...'; (the autoscaler finds it by name)")
    args = runner_args(script, kafka_client_config)
    return client.run_jar(pinned_upload(client, runner_jar()), RUNNER_CLASS, args, parallelism=parallelism)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="submit-sql", description="Submit a Flink SQL script as one job.")
    parser.add_argument(
        "file",
        nargs="+",
        help="the SQL script (SET 'pipeline.name' = '...'; DDL; INSERT INTO ...), or several read as one in order",
    )
    parser.add_argument(
        "--kafka-client-config", type=Path, help="fills the script's ${kafka.<key>} (scripts/kafka.sh client-config)"
    )
    parser.add_argument("--parallelism", type=int, default=None, help="the job's parallelism (default: the cluster's)")
    args = parser.parse_args(argv)
    url = os.environ.get("FLINK_REST_URL", "http://127.0.0.1:8081")
    try:
        script = read_scripts([Path(f) for f in args.file])
        if args.parallelism is not None and args.parallelism < 1:
            raise InputError("--parallelism", f"must be >= 1, got {args.parallelism}")
        client = FlinkRestClient(FlinkConnection(base_url=url))
        job_id = submit(client, script, args.parallelism, args.kafka_client_config)
        summary = client.wait_all_running(job_id, timeout_s=60)
    except (InputError, FlinkError) as exc:
        print(f"submit-sql: error: {exc}", file=sys.stderr)
        return 1
    print(f"submit-sql: job {summary.name!r} ({job_id}) runs {summary.tasks_total} tasks at {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
