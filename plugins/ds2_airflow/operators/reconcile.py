"""Settle rescale actions nobody finishes (autoscaler.rescale.reconcile) for every registered job in one task;
alert on each job a person must look at, and fail the task naming them.

One task for the whole fleet, not one per job: a task process costs seconds of CPU, and a thousand
of them every five minutes saturated a 2-core machine before any scaling work ran. The journals
are read once, and each Flink cluster's jobs listed once. What keeps the reconciler off a rescale
still at work is the staleness rule (an action untouched longer than it could still run) and the
journal's lock, which every resume path takes.
"""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from autoscaler.config.jobs import JobConfig, load_jobs_each
from autoscaler.flink.client import FlinkError
from autoscaler.observe.alerts import UNSETTLED, Alert
from autoscaler.rescale.reconcile import Watched, reconcile_cluster
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.notifiers import send_alerts

SHOWN_IN_ERROR = 20  # jobs named in the task's error; every one gets its own alert


class ReconcileOperator(BaseOperator):
    """Every job of the jobs config: settle stale rescale journals, then check that it runs."""

    def __init__(self, *, config_path: str, journal_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.journal_dir = journal_dir

    def execute(self, context: Any) -> dict[str, Any]:
        jobs, _ = load_jobs_each(self.config_path)  # a bad entry has no DAG and no rescale to settle
        problems: dict[str, list[str]] = {}
        settled = 0
        for conn_id in sorted({job.flink_conn_id for job in jobs}):
            cluster = [job for job in jobs if job.flink_conn_id == conn_id]
            try:
                client = FlinkHook(conn_id).get_client()
                results, found = reconcile_cluster(client, [_watched(job) for job in cluster], self.journal_dir)
            except (FlinkError, AirflowException, ValueError) as exc:
                for job in cluster:
                    problems.setdefault(job.name, []).append(f"Flink connection {conn_id!r}: {exc}")
                continue
            for result in results:
                self.log.warning("settled an unfinished earlier action %s: %s (%s)", result.action_id, result.outcome,
                                 result.message)  # fmt: skip
            settled += len(results)
            for name, listed in found.items():
                problems.setdefault(name, []).extend(listed)
        by_name = {job.name: job for job in jobs}
        for name, listed in sorted(problems.items()):
            alerts = [Alert(UNSETTLED, name, None, problem) for problem in listed]
            send_alerts(alerts, by_name[name].alerts, context)
        if problems:
            shown = "; ".join(f"{name}: {' | '.join(listed)}" for name, listed in sorted(problems.items())[:SHOWN_IN_ERROR])
            more = f" (and {len(problems) - SHOWN_IN_ERROR} more)" if len(problems) > SHOWN_IN_ERROR else ""
            raise AirflowException(f"{len(problems)} job(s) need a person: {shown}{more}")
        return {"jobs": len(jobs), "settled": settled}


def _watched(job: JobConfig) -> Watched:
    return Watched(job.name, job.deployment, job.mechanism, job.savepoint_timeout.total_seconds(),
                   job.start_timeout.total_seconds())  # fmt: skip
