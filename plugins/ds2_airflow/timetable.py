"""The scaling DAGs' schedule: every interval, and a late run never costs an epoch.

With ``catchup=False`` and ``max_active_runs=1`` (a job's runs never overlap), Airflow's interval
timetable skips every interval that ended while a run was still going: when the run finishes, the
next one is created for the *latest* whole interval. On a loaded machine a run with a rescale takes
longer than the interval, and the epoch after it was lost -- every other epoch, in the worst case
(seen in the lab: runs of 32-47 s at a 30-s interval, "no metrics: the run failed or never came").

This timetable keeps creating the intervals in order while the next one ended at most
``max_late_epochs`` intervals ago: those runs are late, and measure their own epochs from the
boundary snapshots the triggerer took on time. Only when the DAG is further behind (paused,
scheduler down) does it skip to the latest interval, as ``catchup=False`` does, so that a DAG
unpaused after a day does not replay it.
"""

from __future__ import annotations

import datetime
from typing import Any

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.timetables.interval import DeltaDataIntervalTimetable


class LateRunsTimetable(DeltaDataIntervalTimetable):
    """Every ``delta``; intervals up to ``max_late_epochs`` behind run late, in order, instead of being skipped."""

    def __init__(self, delta: datetime.timedelta, max_late_epochs: int) -> None:
        super().__init__(delta)
        self.max_late_epochs = max_late_epochs

    @property
    def summary(self) -> str:
        return f"every {self._delta}, late up to {self.max_late_epochs} intervals"

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        if restriction.catchup or last_automated_data_interval is None:
            return super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval, restriction=restriction)
        following = super().next_dagrun_info(
            last_automated_data_interval=last_automated_data_interval, restriction=restriction._replace(catchup=True)
        )
        if following is None or following.data_interval.end is None:
            return following
        behind = datetime.datetime.now(datetime.UTC) - following.data_interval.end
        if behind <= self.max_late_epochs * self._delta:
            return following
        return super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval, restriction=restriction)

    def serialize(self) -> dict[str, Any]:
        return {**super().serialize(), "max_late_epochs": self.max_late_epochs}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> LateRunsTimetable:
        return cls(datetime.timedelta(seconds=data["delta"]), int(data["max_late_epochs"]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LateRunsTimetable):
            return NotImplemented
        return (self._delta, self.max_late_epochs) == (other._delta, other.max_late_epochs)

    def __hash__(self) -> int:
        return hash((self._delta, self.max_late_epochs))


class FleetMemberTimetable(DeltaDataIntervalTimetable):
    """A batched job's own DAG: no scheduled runs (its fleet DAG decides every interval and starts this
    DAG's runs when there is something to approve or rescale), but the job's intervals for backfills.

    The scheduler asks for the next run with the DAG's ``catchup=False``; a backfill enumerates its
    range with ``catchup=True`` (``iter_dagrun_infos_between``): only the latter gets intervals.
    """

    def __init__(self, delta: datetime.timedelta, fleet_dag_id: str) -> None:
        super().__init__(delta)
        self.fleet_dag_id = fleet_dag_id

    @property
    def summary(self) -> str:
        return f"decided by {self.fleet_dag_id} every {self._delta}"

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        if not restriction.catchup:
            return None
        return super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval, restriction=restriction)

    def serialize(self) -> dict[str, Any]:
        return {**super().serialize(), "fleet_dag_id": self.fleet_dag_id}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> FleetMemberTimetable:
        return cls(datetime.timedelta(seconds=data["delta"]), str(data["fleet_dag_id"]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FleetMemberTimetable):
            return NotImplemented
        return (self._delta, self.fleet_dag_id) == (other._delta, other.fleet_dag_id)

    def __hash__(self) -> int:
        return hash((self._delta, self.fleet_dag_id))
