"""The Prometheus hook: owns the connection to a Prometheus that scrapes Flink's reporter."""

from __future__ import annotations

from airflow.sdk import BaseHook

from autoscaler.collect.prometheus import PrometheusConnection, PrometheusReader


class PrometheusHook(BaseHook):
    """Reach Prometheus's HTTP API through an Airflow connection (any type: host, port, schema, login, password).

    ``host`` may be a whole URL (``http://127.0.0.1:29090``); otherwise ``schema`` (http or https) and
    ``port`` (9090) complete it. The password stays in the connection, never in code or logs.
    """

    conn_name_attr = "prometheus_conn_id"
    hook_name = "Prometheus"

    def __init__(self, prometheus_conn_id: str) -> None:
        super().__init__()
        self.prometheus_conn_id = prometheus_conn_id

    def get_reader(self) -> PrometheusReader:
        conn = self.get_connection(self.prometheus_conn_id)
        host = (conn.host or "127.0.0.1").rstrip("/")
        url = host if "://" in host else f"{(conn.schema or 'http').lower()}://{host}:{conn.port or 9090}"
        timeout = float((conn.extra_dejson or {}).get("timeout", 10))
        return PrometheusReader(PrometheusConnection(url, conn.login or None, conn.password or None, timeout))
