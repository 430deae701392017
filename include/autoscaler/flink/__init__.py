"""The Flink REST boundary: the client, its models, id checks and the job deployment (no Airflow import)."""
