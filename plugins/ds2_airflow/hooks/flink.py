"""The Flink hook: owns the connection (where, credentials, TLS) and hands out the core client."""

from __future__ import annotations

import re
from typing import Any

from airflow.sdk import BaseHook

from autoscaler.flink.client import FlinkConnection, FlinkRestClient


class FlinkHook(BaseHook):
    """Reach a Flink cluster's REST API through an Airflow connection of type ``flink``.

    Connection fields: host, port, schema (``http`` or ``https``), login/password for basic
    auth; extras ``token`` (bearer), ``verify`` (``true``/``false``/CA bundle path),
    ``client_cert`` and ``client_key`` (PEM paths: TLS client authentication, for a Flink with
    ``security.ssl.rest.authentication-enabled``), ``timeout`` (seconds) and ``standby_urls`` (the other
    JobManagers' REST addresses under high availability, a list or comma-separated ``http(s)://host:port``:
    asked in turn when the one in use does not answer). Secrets stay in the connection, never in code or logs.

    :param flink_conn_id: the Airflow connection id (default ``flink_default``).
    """

    conn_name_attr = "flink_conn_id"
    default_conn_name = "flink_default"
    conn_type = "flink"
    hook_name = "Apache Flink (REST)"

    def __init__(self, flink_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.flink_conn_id = flink_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": [],
            "relabeling": {"schema": "Scheme (http or https)", "login": "User (basic auth)"},
            "placeholders": {"host": "127.0.0.1", "port": "8081", "schema": "http"},
        }

    def connection(self) -> FlinkConnection:
        conn = self.get_connection(self.flink_conn_id)
        extra = conn.extra_dejson or {}
        scheme = (conn.schema or "http").lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"connection {self.flink_conn_id!r}: schema must be http or https, got {conn.schema!r}")
        host = conn.host or "127.0.0.1"
        base_url = host if "://" in host else f"{scheme}://{host}:{conn.port or 8081}"
        return FlinkConnection(
            base_url=base_url,
            username=conn.login or None,
            password=conn.password or None,
            token=extra.get("token") or None,
            verify=_verify(extra.get("verify", True)),
            client_cert=extra.get("client_cert") or None,
            client_key=extra.get("client_key") or None,
            timeout_s=float(extra.get("timeout", 10)),
            submit_timeout_s=float(extra.get("submit_timeout", FlinkConnection.submit_timeout_s)),
            standby_urls=_standby_urls(self.flink_conn_id, extra.get("standby_urls")),
        )

    def get_client(self) -> FlinkRestClient:
        return FlinkRestClient(self.connection())

    def test_connection(self) -> tuple[bool, str]:
        try:
            overview = self.get_client().overview()
        except Exception as exc:
            return False, str(exc)
        return True, f"Flink {overview.get('flink-version')}: {overview.get('slots-total')} slots"


def _verify(value: object) -> bool | str:
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in ("true", "1", "yes", ""):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    return text  # a CA bundle path


# A REST address as the client joins paths to it: scheme, host (name, IPv4 or [IPv6]), optional port; nothing else.
_REST_URL = re.compile(r"https?://(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?/?")


def _standby_urls(conn_id: str, value: object) -> tuple[str, ...]:
    if value in (None, "", []):
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    urls = tuple(str(u).strip() for u in items if str(u).strip())
    for url in urls:
        if not _REST_URL.fullmatch(url):
            raise ValueError(f"connection {conn_id!r}: standby_urls: {url!r} is not an http(s)://host[:port] address")
    return urls
