"""The DS2 autoscaler: one scaling DAG (and one what-if DAG) per job registered in include/jobs.yaml,
and ``ds2_boundaries``, which takes every job's boundary snapshots on time in the triggerer.

A bad entry costs only itself: the other jobs' DAGs are built, and ``ds2_config_errors.py`` fails
its import with one line per bad entry, naming the file, the job and the field (shown under "DAG
Import Errors" in the UI). A file that cannot be read or parsed fails this import too.

A task process parses this file to find its task: then only its own DAG is built (Airflow's
parsing context), so a task's cost does not grow with the number of registered jobs.
"""

from __future__ import annotations

from airflow.sdk import get_parsing_context

from autoscaler.config.jobs import load_jobs_each
from autoscaler.errors import InputError
from ds2_airflow.dag_factory import build_dags

try:
    jobs, _bad = load_jobs_each()
except InputError as exc:
    # Re-raised here, without the frames of the config reader: the import error shows this one line.
    raise InputError(exc.source, exc.problem, exc.line) from None

globals().update(build_dags(jobs, only=get_parsing_context().dag_id))
