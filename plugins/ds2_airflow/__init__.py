"""Airflow side of the DS2 autoscaler: a Flink hook, operators and triggers.

Thin by design: every operator delegates to the pure-Python core in ``autoscaler``.
"""
