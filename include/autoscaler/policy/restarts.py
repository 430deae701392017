"""The restart time a policy sizes for, measured: predicted at the job's state size, or the median of its recent rescales.

A restart's input is owed once the job runs again, so a kind that sizes for it (``ds2_plus``) needs
to know how long a restart takes on this job and cluster, not a constant. The audit trail records
each rescale's stop-to-running downtime (ACTIONS ``downtime_s``). Where the job's state size is
recorded (table STATE), a policy run reads the same prediction the mechanism choice makes
(:mod:`autoscaler.rescale.mechanism`: downtime against state size, for the mechanism of the job's
newest rescale); otherwise the median of the newest :data:`RECENT` downtimes before the epochs it
decides. The kind's ``restart_time`` default stands in only until one of them is measured.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pyarrow.compute as pc

from autoscaler.config.options import MIN_OWN_RESCALES
from autoscaler.rescale.mechanism import downtime_lines, latest_state, own_rescales, predicted_restart_s
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS

RECENT = 5  # rescales whose downtimes count: recent enough to be this cluster's, enough to damp one outlier


def measured_restart_time(store_root: str | Path, job: str, before_epoch: int | None) -> float | None:
    """The restart in seconds a policy run of epochs from ``before_epoch`` sizes for (None: none measured): the downtime
    predicted at the job's recorded state size, else the median of its newest rescales' downtimes."""
    actions = read_epochs(store_root, ACTIONS, job, columns=["downtime_s"])  # with its epoch
    measured = actions.filter(pc.is_valid(actions.column("downtime_s")))
    if before_epoch is not None:
        measured = measured.filter(pc.less(measured.column("epoch"), before_epoch))
    newest = measured.sort_by([("epoch", "descending")]).slice(0, RECENT)
    downtimes = [d for d in newest.column("downtime_s").to_pylist() if d >= 0]
    median = statistics.median(downtimes) if downtimes else None
    state_bytes, backend = latest_state(store_root, job, before_epoch - 1 if before_epoch is not None else 2**62)
    if state_bytes is None:
        return median
    lines = downtime_lines(own_rescales(store_root, job, before_epoch), backend or "", MIN_OWN_RESCALES.default)
    used = [m for m in read_epochs(store_root, ACTIONS, job, columns=["mechanism"]).column("mechanism").to_pylist() if m in lines]
    predicted = predicted_restart_s(lines, state_bytes, used[-1:] or list(lines))
    return predicted if predicted is not None else median
