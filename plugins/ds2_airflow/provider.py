"""Provider metadata: registers the ``flink`` connection type so the UI shows its form."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "ds2-autoscaler",
        "name": "DS2 autoscaler for Apache Flink",
        "description": "Flink REST hook, metric collection and rescale operators of the DS2 autoscaler.",
        "versions": ["0.1.0"],
        "connection-types": [
            {
                "hook-class-name": "ds2_airflow.hooks.flink.FlinkHook",
                "hook-name": "Apache Flink (REST)",
                "connection-type": "flink",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Scheme (http or https)", "login": "User (basic auth)"},
                    "placeholders": {"host": "127.0.0.1", "port": "8081", "schema": "http"},
                },
                "conn-fields": {
                    "token": {"label": "Bearer token", "schema": {"type": ["string", "null"]}, "sensitive": True},
                    "verify": {
                        "label": "Verify TLS (true, false or a CA bundle path)",
                        "schema": {"type": ["string", "null"], "default": "true"},
                    },
                    "timeout": {"label": "Request timeout (s)", "schema": {"type": ["number", "null"], "default": 10}},
                },
            }
        ],
    }
