"""Reports the bad entries of the jobs file as this file's import error, one line each.

The good entries' DAGs are built by ds2_autoscaler.py all the same: one bad job never takes the others
down. With no bad entry this file defines nothing and imports cleanly. (It names "airflow" and "DAG" so
that the dag-processor's safe mode reads it: a file naming neither is skipped.)
"""

from ds2_airflow.dag_factory import config_errors

config_errors()
