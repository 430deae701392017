"""The provider's ``[ds2_autoscaler]`` config section, handed to the core as the environment it reads.

The core (``autoscaler.config.paths``) has no Airflow import: it reads ``DS2_JOBS_CONFIG``, ``DS2_DATA_DIR``,
``DS2_JARS_DIR`` and ``SPARK_CONF_DIR``. A deployment sets them the Airflow way, in ``airflow.cfg``::

    [ds2_autoscaler]
    jobs_file = /opt/airflow/ds2/jobs.yaml
    data_dir = /shared/ds2-data

or as ``AIRFLOW__DS2_AUTOSCALER__JOBS_FILE`` and so on. An environment variable the process already has wins
(the checkout's scripts and the compose file set them). Exported into the environment, the values also reach
the subprocesses the tasks start (spark-submit, the Flink scripts). The triggerer needs none of them: the
operators hand their triggers the paths they resolved.
"""

from __future__ import annotations

import os
from typing import Any

from autoscaler.config.paths import LEASE_CONN_ID, SETTINGS, STORE, STORE_CONN_ID
from autoscaler.rescale.lease import LEASE_DSN_ENV
from autoscaler.store.delta import is_store_url

SECTION = "ds2_autoscaler"


def config_section() -> dict[str, Any]:
    """The section as get_provider_info declares it (Airflow shows it in ``airflow config list``)."""
    options = {
        s.key: {"description": s.description, "version_added": "0.2.0", "type": "string", "example": s.example, "default": None}
        for s in SETTINGS
    }
    return {SECTION: {"description": "Where the DS2 autoscaler finds its jobs, data, jars and Spark settings.",
                      "options": options}}  # fmt: skip


def export_to_environment() -> dict[str, str]:
    """Set each configured setting's environment variable that the process does not have yet; what was set.

    Called where a process starts using the settings: the DAG factory (the dag-processor, and every task, which
    parses its DAG file), the api-server's views and docs apps, the bootstrap command. Never at import: Airflow
    imports the provider's metadata while its configuration module is still loading.
    """
    from airflow.configuration import conf

    exported: dict[str, str] = {}
    for setting in SETTINGS:
        if os.environ.get(setting.env):
            continue
        value = (conf.get(SECTION, setting.key, fallback=None) or "").strip()
        if value:
            os.environ[setting.env] = exported[setting.env] = value
    found: dict[str, str] = {}
    if is_store_url(os.environ.get(STORE.env, "").strip()):
        from ds2_airflow.store_access import store_environment

        conn_id = os.environ.get(STORE_CONN_ID.env, "").strip()
        found = store_environment(conn_id) if conn_id else {}
    # The lease database: required with an object store (unset, a rescale says what is missing); with a local
    # store, given one, each rescale also takes its Flink job's lease there (autoscaler.rescale.job_lease).
    lease_conn_id = os.environ.get(LEASE_CONN_ID.env, "").strip()
    if lease_conn_id and not os.environ.get(LEASE_DSN_ENV):
        from ds2_airflow.store_access import lease_dsn

        found[LEASE_DSN_ENV] = lease_dsn(lease_conn_id)
    for key, value in found.items():
        os.environ[key] = value
        exported[key] = "(from a connection)"  # what was set, never the secret itself
    return exported
