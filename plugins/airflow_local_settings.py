"""Airflow's local settings hook: every Airflow process imports this module at start-up (plugins/ is
on its path). It changes no setting; in the scheduler only, it loads what the scaling DAG's tasks
import, before the LocalExecutor forks its workers, so each task process (forked from a worker)
starts with those modules in memory instead of importing them again: Great Expectations alone costs
about 3 CPU-s per validate task. Nothing that starts threads or opens sockets is imported here
(gRPC, hence Spark Connect, is left to the task): forking a process with threads is unsafe.
``DS2_PREIMPORT=0`` turns it off.
"""

from __future__ import annotations

import os
import sys

if sys.argv[1:2] == ["scheduler"] and os.environ.get("DS2_PREIMPORT", "1") == "1":
    try:
        import great_expectations  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        import autoscaler.validate.gxrun  # noqa: F401
        import ds2_airflow.dag_factory
        import ds2_airflow.scaling  # noqa: F401
    except Exception as exc:  # an import that fails here fails again, with its context, in the task
        print(f"airflow_local_settings: pre-import skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
