"""Settle rescale actions nobody finishes (autoscaler.rescale.reconcile); fail, and so alert, when one cannot be."""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowException

from autoscaler.config.options import IN_PLACE
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.operators.rescale import FlinkRescaleOperator


class ReconcileOperator(FlinkRescaleOperator):
    """One job's unfinished, stale rescale journals: settle each, then fail if any is left
    unsettled or the job is left stopped, so that the DAG's failure notifier alerts a person."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("target", {})
        super().__init__(**kwargs)

    def execute(self, context: Any) -> dict[str, Any]:
        client = FlinkHook(self.flink_conn_id).get_client()
        problems = self.settle_stale_actions(client)
        if self.mechanism != IN_PLACE and client.find_job(self.deployment.job_name) is None:
            problems.append(f"no job called {self.deployment.job_name!r} runs on Flink ({client.base_url})")
        if problems:
            raise AirflowException(f"{len(problems)} problem(s) need a person: " + " | ".join(problems))
        return {"job": self.deployment.job_name, "running": True}
