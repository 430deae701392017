"""Boundary snapshots of every registered job, taken on time in the triggerer (always running).

See :mod:`autoscaler.flink.boundaries` for why. One trigger serves all jobs until its ``until``
time; the ``ds2_boundaries`` DAG starts a new one every hour, overlapping the previous one by a
few minutes so that no boundary falls between two (a boundary is written once: first wins).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from autoscaler.flink.boundaries import DEFAULT_TOLERANCE_S, BoundaryJob, next_boundary, take_boundary
from ds2_airflow.hooks.flink import FlinkHook


class BoundarySnapshotTrigger(BaseTrigger):
    """At each job's epoch boundaries until ``until`` (Unix seconds), take its counter snapshot.

    ``jobs``: ``{"job", "flink_job_name", "interval_s", "flink_conn_id", "source_rate_metric"}`` per
    job (connection ids, never credentials: the triggerer resolves them). Fires one event at the
    end: ``{"taken": n, "outcomes": [last lines]}``.
    """

    def __init__(self, jobs: list[dict[str, Any]], store_root: str, until: float,
                 tolerance_s: float = DEFAULT_TOLERANCE_S) -> None:  # fmt: skip
        super().__init__()
        self.jobs = jobs
        self.store_root = store_root
        self.until = until
        self.tolerance_s = tolerance_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"jobs": self.jobs, "store_root": self.store_root, "until": self.until, "tolerance_s": self.tolerance_s},
        )

    def _take(self, spec: dict[str, Any], boundary: float) -> str:
        try:
            connection = FlinkHook(spec["flink_conn_id"]).connection()
        except Exception as exc:  # a missing or bad connection must not stop the other jobs' boundaries
            return f"{spec['job']}: connection {spec['flink_conn_id']!r} unusable: {type(exc).__name__}"
        rate_metric = spec.get("source_rate_metric")
        job = BoundaryJob(spec["job"], spec["flink_job_name"], int(spec["interval_s"]), connection, rate_metric)
        return take_boundary(job, boundary, self.store_root, time.time(), self.tolerance_s)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        taken, outcomes = 0, []
        while True:
            now = time.time()
            due = {s["job"]: next_boundary(int(s["interval_s"]), now) for s in self.jobs}
            at = min(due.values(), default=self.until + 1)
            if at > self.until:
                break
            await asyncio.sleep(max(0.0, at - time.time()))
            # requests is blocking: each job's snapshot runs in a thread, all of them at once.
            batch = [s for s in self.jobs if due[s["job"]] == at]
            results = await asyncio.gather(*(asyncio.to_thread(self._take, s, at) for s in batch))
            for line in results:
                self.log.info("boundary %s", line)
                taken += " taken " in line
            outcomes = (outcomes + list(results))[-20:]
        yield TriggerEvent({"taken": taken, "outcomes": outcomes})
