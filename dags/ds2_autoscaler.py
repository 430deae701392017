"""The DS2 autoscaler: one scaling DAG (and one what-if DAG) per job registered in the jobs file
(``[ds2_autoscaler] jobs_file``; in this repository include/jobs.yaml), and ``ds2_boundaries``, which takes
every job's boundary snapshots on time in the triggerer. A user's own DAG file is these two lines.

A bad entry costs only itself: the other jobs' DAGs are built, and ``ds2_config_errors.py`` fails its import
with one line per bad entry, naming the file, the job and the field (shown under "DAG Import Errors" in the
UI). A file that cannot be read or parsed fails this import.
"""

from ds2_airflow.dag_factory import autoscaler_dags

globals().update(autoscaler_dags())
