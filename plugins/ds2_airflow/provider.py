"""Provider metadata (the ``apache_airflow_provider`` entry point), laid out as Airflow's own providers are:
the ``flink`` connection type (its form in the UI), the hooks, operators, triggers and plugins, and the
``[ds2_autoscaler]`` config section (``provider_config``). The plugins are registered through the
``airflow.plugins`` entry point as well: Airflow reads a provider's plugin list only when
``[core] lazy_discover_providers`` is off."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ds2_airflow.provider_config import config_section

PACKAGE = "ds2-autoscaler"
INTEGRATION = "Apache Flink (DS2 autoscaler)"


def _version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0.0.0"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE,
        "name": "DS2 autoscaler for Apache Flink",
        "description": "Autoscales Apache Flink jobs with the DS2 model: metrics from Flink's REST API or "
        "Prometheus, validated with Great Expectations, a policy computed on Spark, rescales through Flink's "
        "REST API, with approval gates, what-ifs and backfills.",
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://nightlies.apache.org/flink/flink-docs-stable/",
                "tags": ["service"],
            },
        ],
        "hooks": [
            {"integration-name": INTEGRATION, "python-modules": ["ds2_airflow.hooks.flink", "ds2_airflow.hooks.prometheus"]}
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "ds2_airflow.operators.collect",
                    "ds2_airflow.operators.policy",
                    "ds2_airflow.operators.rescale",
                    "ds2_airflow.operators.approval",
                    "ds2_airflow.operators.boundaries",
                    "ds2_airflow.operators.reconcile",
                ],
            }
        ],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["ds2_airflow.triggers.flink", "ds2_airflow.triggers.boundaries"]}
        ],
        "plugins": [
            {"name": "ds2_views", "plugin-class": "ds2_airflow.views_plugin.DS2ViewsPlugin"},
            {"name": "ds2_validation_docs", "plugin-class": "ds2_airflow.docs_plugin.DS2DocsPlugin"},
            {"name": "ds2_timetables", "plugin-class": "ds2_airflow.timetable_plugin.DS2TimetablePlugin"},
        ],
        "config": config_section(),
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
                    "submit_timeout": {
                        "label": "Job submission timeout (s): a jar run answers once main() has built the job",
                        "schema": {"type": ["number", "null"], "default": 600},
                    },
                },
            }
        ],
    }
