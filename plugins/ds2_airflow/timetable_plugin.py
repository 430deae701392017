"""Registers the scaling DAGs' timetable (:mod:`ds2_airflow.timetable`), so the scheduler can deserialize them.

A plugin of its own file: Airflow loads each plugin file as a top-level module named after the file,
so a class defined in the plugin file itself would register as ``timetable.LateRunsTimetable``,
not as the ``ds2_airflow.timetable.LateRunsTimetable`` the DAG files serialize.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from ds2_airflow.timetable import FleetMemberTimetable, LateRunsTimetable


class DS2TimetablePlugin(AirflowPlugin):
    name = "ds2_timetables"
    timetables = [LateRunsTimetable, FleetMemberTimetable]  # noqa: RUF012
