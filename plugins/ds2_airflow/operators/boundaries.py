"""Hand every registered job's boundary snapshots to the triggerer for the next hour (and a bit)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from autoscaler.jobs import JobConfig
from ds2_airflow.runtime import interval_end
from ds2_airflow.triggers.boundaries import BoundarySnapshotTrigger

# Each run's trigger outlives the next run's start by this much: no boundary falls in between.
OVERLAP = timedelta(minutes=5)


class BoundarySnapshotOperator(BaseOperator):
    """Defer at once; the trigger takes each job's boundary snapshots until the end of the run's
    period plus the overlap, then the task succeeds with a summary."""

    def __init__(self, *, jobs: list[JobConfig], store_root: str, period: timedelta, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs = jobs
        self.store_root = store_root
        self.period = period

    def execute(self, context: Any) -> None:
        until = max(interval_end(context).timestamp() + self.period.total_seconds(), time.time()) + OVERLAP.total_seconds()
        specs = [
            {
                "job": job.name,
                "flink_job_name": job.flink_job_name,
                "interval_s": int(job.interval_s),
                "flink_conn_id": job.flink_conn_id,
                "source_rate_metric": job.source_rate_metric,
            }
            for job in self.jobs
        ]
        self.log.info("boundary snapshots of %s until %s", ", ".join(s["job"] for s in specs), time.ctime(until))
        self.defer(
            trigger=BoundarySnapshotTrigger(specs, self.store_root, until),
            method_name="execute_complete",
            timeout=timedelta(seconds=until - time.time()) + OVERLAP,
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        for line in event.get("outcomes", []):
            self.log.info("%s", line)
        return {"taken": event.get("taken", 0)}
