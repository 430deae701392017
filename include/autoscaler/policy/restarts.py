"""The restart time a policy sizes for, measured: the median downtime of the job's recent rescales.

A restart's input is owed once the job runs again, so a kind that sizes for it (``ds2_plus``) needs
to know how long a restart takes on this job and cluster, not a constant. The audit trail records
each rescale's stop-to-running downtime (ACTIONS ``downtime_s``); a policy run reads the median of
the newest :data:`RECENT` before the epochs it decides, and the kind's ``restart_time`` default
stands in only until one is measured.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pyarrow.compute as pc

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS

RECENT = 5  # rescales whose downtimes count: recent enough to be this cluster's, enough to damp one outlier


def measured_restart_time(store_root: str | Path, job: str, before_epoch: int | None) -> float | None:
    """Median downtime in seconds of the job's newest rescales before ``before_epoch`` (None: none measured)."""
    actions = read_epochs(store_root, ACTIONS, job).select(["epoch", "downtime_s"])
    measured = actions.filter(pc.is_valid(actions.column("downtime_s")))
    if before_epoch is not None:
        measured = measured.filter(pc.less(measured.column("epoch"), before_epoch))
    rows = measured.sort_by([("epoch", "descending")]).slice(0, RECENT).column("downtime_s").to_pylist()
    downtimes = [d for d in rows if d >= 0]
    return statistics.median(downtimes) if downtimes else None
