"""Hand every registered job's boundary snapshots to the triggerer for the next hour (and a bit)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from ds2_airflow.runtime import interval_end
from ds2_airflow.triggers.boundaries import BoundarySnapshotTrigger

# Each run's trigger outlives the next run's start by this much: no boundary falls in between.
OVERLAP = timedelta(minutes=5)


class BoundarySnapshotOperator(BaseOperator):
    """Defer at once; the trigger takes the boundary snapshots of every job of the jobs config until
    the end of the run's period plus the overlap, then the task succeeds with a summary."""

    def __init__(self, *, config_path: str, store_root: str, period: timedelta, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.store_root = store_root
        self.period = period

    def execute(self, context: Any) -> None:
        until = max(interval_end(context).timestamp() + self.period.total_seconds(), time.time()) + OVERLAP.total_seconds()
        self.log.info("boundary snapshots of the jobs in %s until %s", self.config_path, time.ctime(until))
        self.defer(
            trigger=BoundarySnapshotTrigger(self.config_path, self.store_root, until),
            method_name="execute_complete",
            timeout=timedelta(seconds=until - time.time()) + OVERLAP,
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        for line in event.get("outcomes", []):
            self.log.info("%s", line)
        return {"taken": event.get("taken", 0)}
