"""The DS2 autoscaler: one scaling DAG (and one what-if DAG) per job registered in include/jobs.yaml.

A bad entry in the jobs config fails this file's import with a message naming the file, the job
and the field (shown under "DAG Import Errors" in the UI); see plugins/ds2_airflow/dag_factory.py.
"""

from __future__ import annotations

from autoscaler.jobs import load_jobs
from ds2_airflow.dag_factory import build_dags

globals().update(build_dags(load_jobs()))
