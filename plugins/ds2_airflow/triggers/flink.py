"""Wait for a Flink asynchronous operation (a savepoint) in the triggerer, not in a worker slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from autoscaler.flink.client import FlinkError
from ds2_airflow.hooks.flink import FlinkHook


class FlinkSavepointTrigger(BaseTrigger):
    """Poll ``GET /jobs/:id/savepoints/:request`` until COMPLETED or the deadline.

    Fires one event: ``{"status": "completed", "location": ..., "failure": ...}``,
    ``{"status": "unknown"}`` when Flink no longer knows the operation (HTTP 404: a JobManager
    restart, or the result expired) or ``{"status": "timeout", "error": ...}`` at the deadline
    (wall-clock seconds since the epoch), also when Flink could not be reached until then. The
    task then resumes the journaled action, which decides by what the job does (never by this
    event alone).
    """

    def __init__(self, flink_conn_id: str, job_id: str, request_id: str, deadline: float, poll_s: float = 0.2) -> None:
        super().__init__()
        self.flink_conn_id = flink_conn_id
        self.job_id = job_id
        self.request_id = request_id
        self.deadline = deadline
        self.poll_s = poll_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "flink_conn_id": self.flink_conn_id,
                "job_id": self.job_id,
                "request_id": self.request_id,
                "deadline": self.deadline,
                "poll_s": self.poll_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        last_error = None
        while True:
            try:
                # requests is blocking: run it in a thread so the triggerer's loop keeps serving others.
                client = await asyncio.to_thread(lambda: FlinkHook(self.flink_conn_id).get_client())
                status = await asyncio.to_thread(client.savepoint_status, self.job_id, self.request_id)
            except FlinkError as exc:
                if exc.status == 404:
                    yield TriggerEvent({"status": "unknown", "error": str(exc)})
                    return
                last_error = str(exc)  # unreachable or failing: keep asking until the deadline
            else:
                if status.completed:
                    yield TriggerEvent({"status": "completed", "location": status.location, "failure": status.failure})
                    return
            if time.time() >= self.deadline:
                yield TriggerEvent({"status": "timeout", "error": last_error})
                return
            await asyncio.sleep(self.poll_s)
