"""Where the autoscaler finds its files: the jobs file, the data folder, the jars, the Spark job and its settings.

Two ways to run it, one set of rules:
- **from this repository's checkout** (``make demo``, an editable install): every default points into the
  checkout (``include/jobs.yaml``, ``data/``, ``build/``, ``conf/spark``);
- **installed** from the wheel into someone's Airflow: there is no checkout. The jars and the Spark job ship in
  the package; the jobs file and the data folder are settings (the provider's ``[ds2_autoscaler]`` section in
  ``airflow.cfg``, or ``AIRFLOW__DS2_AUTOSCALER__<NAME>``; the Airflow layer hands them to this module as the
  environment variables below, which also reach every subprocess: spark-submit, the Flink scripts).

Each setting is declared once here (:data:`SETTINGS`); the provider's config section is built from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from autoscaler.errors import InputError
from autoscaler.store.delta import check_store_url, is_store_url

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The folder holding include/, plugins/ and pyproject.toml when this runs from the repository.
_REPO = PACKAGE_DIR.parents[1]


@dataclass(frozen=True)
class Setting:
    """One deployment setting: its key in the provider's config section and the environment variable read here."""

    key: str
    env: str
    description: str
    example: str


JOBS_FILE = Setting(
    "jobs_file", "DS2_JOBS_CONFIG",
    "The registered jobs (YAML; the format of include/jobs.yaml in the repository). Relative paths inside it "
    "are relative to its own folder. Default in a checkout: include/jobs.yaml; installed: required.",
    "/opt/airflow/ds2/jobs.yaml",
)  # fmt: skip
DATA_DIR = Setting(
    "data_dir", "DS2_DATA_DIR",
    "Runtime data: the metrics, decisions and actions store, the rescale journals, the Data Docs. Every "
    "Airflow component (scheduler, workers, triggerer, api-server) must see the same folder. Default in a "
    "checkout: data/; installed: ds2-data under AIRFLOW_HOME.",
    "/opt/airflow/ds2-data",
)  # fmt: skip
JARS_DIR = Setting(
    "jars_dir", "DS2_JARS_DIR",
    "Where the test job's and the SQL runner's jars are (ds2-testjob.jar, ds2-sql-runner.jar). Default: the "
    "ones shipped in the package, else the checkout's build/.",
    "/opt/airflow/ds2-jars",
)  # fmt: skip
SPARK_CONF_DIR = Setting(
    "spark_conf_dir", "SPARK_CONF_DIR",
    "The Spark settings spark-submit runs the policy job with (Spark's own variable). Default in a checkout: "
    "conf/spark; installed: Spark's defaults.",
    "/opt/airflow/ds2-spark-conf",
)  # fmt: skip
SQL_DIR = Setting(
    "sql_dir", "DS2_SQL_DIR",
    "The folder every job's sql_file must lie in (symbolic links followed): a jobs file names no other file to "
    "submit to Flink. Default in a checkout: the repository; installed: the jobs file's folder.",
    "/opt/airflow/ds2/sql",
)  # fmt: skip
STORE = Setting(
    "store", "DS2_STORE",
    "Where the metrics, decisions, actions and validations tables, the boundary snapshots and the topologies "
    "live. A folder (default: store/ under the data dir), or an object store's URL (s3://bucket/prefix) that "
    "workers on several hosts share: Delta tables there (docs/object-store.md). Its credentials: store_conn_id, "
    "else the environment's AWS_* variables.",
    "s3://ds2-bucket/store",
)  # fmt: skip
STORE_CONN_ID = Setting(
    "store_conn_id", "DS2_STORE_CONN_ID",
    "The Airflow connection (type aws) that reaches an object store: login and password are the access key and "
    "secret; extra's endpoint_url names an S3-compatible server. Unset: the process's own AWS credentials.",
    "ds2_store",
)  # fmt: skip
LEASE_CONN_ID = Setting(
    "lease_conn_id", "DS2_LEASE_CONN_ID",
    "The PostgreSQL connection of the leases: its advisory locks guard a rescale journal on an object store, so "
    "that two attempts on two hosts never run at once, and each rescale takes its Flink job's lease there (a row, "
    "ds2_job_leases), so that two deployments given the same database never rescale one job at once. Required "
    "with a store on an object store (a rescale says so when it is missing); optional with a local one. "
    "Airflow's own database cannot serve, since Airflow 3's tasks do not reach it.",
    "ds2_lease",
)  # fmt: skip
SETTINGS = (JOBS_FILE, DATA_DIR, JARS_DIR, SPARK_CONF_DIR, SQL_DIR, STORE, STORE_CONN_ID, LEASE_CONN_ID)


def checkout() -> Path | None:
    """The repository's root when the code runs from it (a checkout or an editable install), else None."""
    if (_REPO / "pyproject.toml").is_file() and (_REPO / "include" / "autoscaler").is_dir():
        return _REPO
    return None


def _from_env(setting: Setting) -> Path | None:
    value = os.environ.get(setting.env, "").strip()
    return Path(value).expanduser() if value else None


def jobs_file() -> Path:
    """The jobs file: the setting, else the checkout's include/jobs.yaml."""
    path = _from_env(JOBS_FILE)
    if path is not None:
        return path
    root = checkout()
    if root is None:
        raise InputError(
            "jobs_file",
            f"no jobs file is set: set [ds2_autoscaler] {JOBS_FILE.key} in airflow.cfg (or "
            f"AIRFLOW__DS2_AUTOSCALER__{JOBS_FILE.key.upper()}, or {JOBS_FILE.env}) to your jobs YAML",
        )
    return root / "include" / "jobs.yaml"


def base_dir(config: Path | None = None) -> Path:
    """What a relative path in a jobs file is relative to: the repository root for a file inside the
    checkout (include/jobs.yaml says ``build/ds2-testjob.jar``), otherwise the jobs file's own folder."""
    config = (config or jobs_file()).resolve()
    root = checkout()
    if root is not None and config.is_relative_to(root):
        return root
    return config.parent


def data_dir() -> Path:
    """Runtime data: the setting, else the checkout's data/, else ds2-data under AIRFLOW_HOME (or ~/airflow)."""
    path = _from_env(DATA_DIR)
    if path is None:
        root = checkout()
        if root is not None:
            path = root / "data"
        else:
            path = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow").expanduser() / "ds2-data"
    return path.resolve()


def store() -> str | Path:
    """The store: its URL on an object store (checked), else its folder (the setting, else data_dir()/store)."""
    value = os.environ.get(STORE.env, "").strip()
    if value and is_store_url(value):
        return check_store_url(value)
    return Path(value).expanduser().resolve() if value else data_dir() / "store"


def jar(name: str) -> Path:
    """One of the project's jars: in the set folder, else shipped in the package, else in the checkout's build/.
    The path is returned even when absent; the caller says what is missing and how to build it."""
    folder = _from_env(JARS_DIR)
    if folder is not None:
        return folder / name
    shipped = PACKAGE_DIR / "jars" / name
    root = checkout()
    if shipped.is_file() or root is None:
        return shipped
    return root / "build" / name


def spark_application() -> Path:
    """The policy's Spark job, the file spark-submit runs (``spark_jobs/ds2_policy.py``, shipped as package
    ``spark_jobs``): its folder holds nothing else, so running it as a script shadows no module."""
    spec = find_spec("spark_jobs.ds2_policy")
    if spec is None or spec.origin is None:
        raise InputError("spark_jobs", "the policy's Spark job (spark_jobs/ds2_policy.py) is not installed")
    return Path(spec.origin)


def spark_conf_dir() -> Path | None:
    """The Spark settings folder for spark-submit: the setting, else the checkout's conf/spark, else None."""
    path = _from_env(SPARK_CONF_DIR)
    if path is not None:
        return path
    root = checkout()
    return root / "conf" / "spark" if root is not None else None


def sql_dir(config: Path | None = None) -> Path:
    """Where the jobs' SQL scripts must lie: the setting, else the checkout, else the jobs file's folder."""
    path = _from_env(SQL_DIR)
    if path is not None:
        return path.resolve()
    root = checkout()
    return root if root is not None else (config or jobs_file()).resolve().parent
