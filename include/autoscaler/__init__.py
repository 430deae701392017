"""DS2 autoscaler core: models, policy helpers, data contracts and readers.

Pure Python (no Airflow import). The Spark job (``spark_jobs/ds2_policy.py``) and the
Airflow DAGs both delegate to this package.
"""
