"""Boundary snapshots of every registered job, taken on time in the triggerer (always running).

See :mod:`autoscaler.collect.boundaries` for why. One trigger serves all jobs of the jobs config until
its ``until`` time, re-reading the config when it changes (a job registered now gets its boundaries
from its next one on); the ``ds2_boundaries`` DAG starts a new trigger every hour, overlapping the
previous one by a few minutes so that no boundary falls between two (a boundary is written once).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from autoscaler.collect.boundaries import DEFAULT_TOLERANCE_S, BoundaryJob, take_boundary
from autoscaler.config.jobs import JobConfig, load_jobs_each
from ds2_airflow.hooks.flink import FlinkHook

MAX_SLEEP_S = 10.0  # how long a config change may go unseen
# Snapshots taken at once. Each waits on Flink (and on its metric fetcher's refresh) more than it computes;
# asyncio's default pool has cpu + 4 threads, which took a 100-job fleet's boundaries up to 17 s late.
BOUNDARY_THREADS = 64


class BoundarySnapshotTrigger(BaseTrigger):
    """At each registered job's epoch boundaries until ``until`` (Unix seconds), take its counter snapshot.

    Fires one event at the end: ``{"taken": n, "outcomes": [the last lines]}``.
    """

    def __init__(self, config_path: str, store_root: str, until: float, tolerance_s: float = DEFAULT_TOLERANCE_S) -> None:
        super().__init__()
        self.config_path = config_path
        self.store_root = store_root
        self.until = until
        self.tolerance_s = tolerance_s
        self._jobs: list[JobConfig] = []
        self._mtime: float | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "config_path": self.config_path,
                "store_root": self.store_root,
                "until": self.until,
                "tolerance_s": self.tolerance_s,
            },
        )

    def _load(self) -> list[JobConfig]:
        """The good jobs of the config, read again when the file changed (a bad file keeps the last good list)."""
        try:
            mtime = os.stat(self.config_path).st_mtime
            if mtime != self._mtime:
                self._jobs, _ = load_jobs_each(self.config_path)
                self._mtime = mtime
        except Exception as exc:  # keep the jobs we know: their boundaries matter more than the edit
            self.log.warning("jobs config %s unreadable, keeping %d job(s): %s", self.config_path, len(self._jobs), exc)
        return self._jobs

    def _take(self, job: JobConfig, boundary: float) -> str:
        try:
            connection = FlinkHook(job.flink_conn_id).connection()
        except Exception as exc:  # a missing or bad connection must not stop the other jobs' boundaries
            return f"{job.name}: connection {job.flink_conn_id!r} unusable: {type(exc).__name__}"
        spec = BoundaryJob(job.name, job.flink_job_name, int(job.interval_s), connection, job.source_rate_metric)
        return take_boundary(spec, boundary, self.store_root, time.time(), self.tolerance_s)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        pool = ThreadPoolExecutor(max_workers=BOUNDARY_THREADS, thread_name_prefix="ds2-boundary")
        try:
            async for event in self._serve(pool):
                yield event
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, pool: ThreadPoolExecutor) -> AsyncIterator[TriggerEvent]:
        taken, outcomes = 0, []
        done: dict[str, float] = {}  # job -> the last boundary handled
        loop = asyncio.get_running_loop()
        while time.time() < self.until:
            jobs = await asyncio.to_thread(self._load)
            now = time.time()
            due = []
            for job in jobs:
                latest = math.floor(now / job.interval_s) * job.interval_s
                if done.get(job.name, -1.0) < latest and now - latest <= self.tolerance_s:
                    due.append((job, latest))
                    done[job.name] = latest
            if due:
                # requests is blocking: each job's snapshot runs in a thread of the pool, all of them at once.
                results = await asyncio.gather(*(loop.run_in_executor(pool, self._take, job, at) for job, at in due))
                for line in results:
                    self.log.info("boundary %s", line)
                    taken += " taken " in line
                outcomes = (outcomes + list(results))[-20:]
            now = time.time()
            upcoming = [(math.floor(now / j.interval_s) + 1) * j.interval_s for j in jobs]
            await asyncio.sleep(max(0.0, min([*upcoming, now + MAX_SLEEP_S, self.until]) - now))
        yield TriggerEvent({"taken": taken, "outcomes": outcomes})
