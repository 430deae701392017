"""What a task of a job's DAG needs from its run: the epoch, the run type, where data lives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from autoscaler.config import paths
from autoscaler.config.jobs import JobConfig, data_dir
from autoscaler.rescale.journal import safe_name
from autoscaler.store.delta import is_store_url

LIVE, BACKFILL, WHAT_IF = "live", "backfill", "what-if"
DOCS_URL_PREFIX = "/ds2-docs"  # where the api-server serves the validation Data Docs (docs_plugin.py)


def store_root() -> str | Path:
    """The store: a folder, or an object store's URL (the ``store`` setting; see provider_config)."""
    return paths.store()


def journal_dir() -> str | Path:
    """The rescale journals: in the data dir, or beside a store on an object store, where a retry on another
    host finds them (guarded then by a PostgreSQL lease: autoscaler.rescale.lease)."""
    store = store_root()
    return f"{store}/journal" if is_store_url(store) else data_dir() / "journal"


def docs_dir() -> Path:
    return data_dir() / "validation-docs"


def docs_link(page: str) -> str:
    """A Data Docs page as a URL of the api-server (``AIRFLOW__API__BASE_URL``), else the path itself."""
    base = os.environ.get("AIRFLOW__API__BASE_URL", "").rstrip("/")
    try:
        relative = Path(page).resolve().relative_to(docs_dir().resolve())
    except ValueError:
        return page
    return f"{base}{DOCS_URL_PREFIX}/{relative.as_posix()}" if base else page


def interval_end(context: Mapping[str, Any]) -> datetime:
    """End of the run's data interval; runs triggered without a logical date use ``run_after``."""
    end = context.get("data_interval_end")
    if end is None:
        dag_run = context.get("dag_run")
        end = getattr(dag_run, "data_interval_end", None) or getattr(dag_run, "run_after", None)
    if end is None:
        raise ValueError("the run has neither a data interval nor run_after: cannot tell which epoch it is")
    return end


FLEET_RUN = "fleet_run"  # the conf key of a job run its fleet run started: the fleet run's id


def fleet_handoff(context: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the fleet run that started this job run hands it (epoch, collected, validation), else None."""
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    if FLEET_RUN not in conf:
        return None
    epoch = conf.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"run conf from fleet run {conf[FLEET_RUN]!r}: epoch must be a non-negative integer, got {epoch!r}")
    return dict(conf)


def epoch_for(job: JobConfig, context: Mapping[str, Any]) -> int:
    """The run's epoch: the one its fleet run decided, else the one its data interval closes."""
    handoff = fleet_handoff(context)
    return handoff["epoch"] if handoff else job.epoch_of(interval_end(context))


def run_type(context: Mapping[str, Any]) -> str:
    """``backfill`` for runs made by ``airflow backfill create``; ``live`` for everything else."""
    dag_run = context.get("dag_run")
    return BACKFILL if getattr(dag_run, "run_type", None) == "backfill" else LIVE


def safe_run_id(context: Mapping[str, Any]) -> str:
    run_id = str(getattr(context.get("dag_run"), "run_id", None) or context.get("run_id") or "adhoc")
    # An action id names the rescale journal's file and a what-if folder: cleaned injectively.
    return safe_name(run_id)
