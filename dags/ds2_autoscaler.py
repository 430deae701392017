"""The DS2 autoscaler: one scaling DAG (and one what-if DAG) per job registered in include/jobs.yaml.

A bad entry in the jobs config fails this file's import with a message naming the file, the job
and the field (shown under "DAG Import Errors" in the UI); see plugins/ds2_airflow/dag_factory.py.
"""

from __future__ import annotations

from autoscaler.errors import InputError
from autoscaler.jobs import load_jobs
from ds2_airflow.dag_factory import build_dags

try:
    jobs = load_jobs()
except InputError as exc:
    # Re-raised here, without the frames of the config reader: the import error shows this one line.
    raise InputError(exc.source, exc.problem, exc.line) from None

globals().update(build_dags(jobs))
