"""Alerts: what a person must look at (a job left stopped, an action nobody can settle).

:class:`AlertNotifier` is the default failure notifier of the DAGs that act on Flink. It logs the
alert at ERROR and appends it, one JSON line each, to ``<DS2_DATA_DIR>/alerts.jsonl``; a
deployment adds Airflow's own notifiers (Slack, e-mail, PagerDuty providers) next to it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseNotifier

from ds2_airflow.runtime import data_dir

log = logging.getLogger(__name__)


class AlertNotifier(BaseNotifier):
    def notify(self, context: Any) -> None:
        ti = context.get("ti") or context.get("task_instance")
        error = context.get("exception")
        alert = {
            "at": datetime.now(UTC).isoformat(),
            "dag_id": getattr(ti, "dag_id", None),
            "task_id": getattr(ti, "task_id", None),
            "run_id": getattr(ti, "run_id", None),
            "problem": str(error) if error else "the task failed (see its log)",
        }
        log.error("ALERT %s.%s: %s", alert["dag_id"], alert["task_id"], alert["problem"])
        path = data_dir() / "alerts.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(alert) + "\n")
