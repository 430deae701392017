"""Talking to Flink: the REST client, metric snapshots and the rescale procedures (no Airflow import)."""
