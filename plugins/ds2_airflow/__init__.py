"""Airflow side of the DS2 autoscaler: a Flink hook, operators, triggers, plugins and the DAG factory.

Thin by design: every operator delegates to the pure-Python core in ``autoscaler``. Importing it has no
side effect (Airflow imports ``ds2_airflow.provider`` while its own configuration is still loading); the
entry points that need the ``[ds2_autoscaler]`` settings apply them first (``provider_config``).
"""
