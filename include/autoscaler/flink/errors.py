"""What can go wrong talking to Flink, as exceptions the stages tell apart."""

from __future__ import annotations

from autoscaler.flink.models import FAILOVER_STATES


class FlinkError(RuntimeError):
    """Flink answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int | None = None, url: str | None = None) -> None:
        self.status = status
        self.url = url
        super().__init__(message)


class FlinkUnreachable(FlinkError):
    pass


class JobNotRunning(FlinkError):
    """The job exists and is alive, but not RUNNING: failing over, restarting, or being created or cancelled."""

    def __init__(self, message: str, state: str, restarts: int | None) -> None:
        self.state = state
        self.restarts = restarts  # Flink's numRestarts since the job was submitted, when it could be read
        super().__init__(message)

    @property
    def failing_over(self) -> bool:
        """It failed and its restart strategy is restarting it."""
        return self.state in FAILOVER_STATES
