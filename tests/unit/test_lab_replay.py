"""The lab's replay: a store's decided epochs decided again; unchanged code moves nothing, a change shows where."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark.decisions import decide_job
from autoscaler.engine.windows import operator_windows
from autoscaler.errors import InputError
from autoscaler.lab.replay import RUN, replay
from autoscaler.policy import ds2_plus
from autoscaler.policy.base import OperatorWindow
from autoscaler.store.parquet import write_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import write_topology_csv
from tests.helpers import metrics_rows, topology, window

TOPO = topology([("src", "count")], {"src": 2, "count": 1})
JOB = "lab-flat-ds2_plus"


def stored_run(root: Path) -> Path:
    """A store as a lab run leaves it: 20,000 r/s on Count 1 for five epochs, each decided as it came."""
    store = root / "store"
    write_topology_csv(TOPO, store / "topologies" / f"{JOB}.csv")
    epochs = {e: {"src": window(2, 0.0, 20_000.0, pending_records=0.0), "count": OperatorWindow(
        1, 1, 5_700.0, 5_700.0, 5_700.0, busy_ratio_max=1.0)} for e in range(100, 105)}  # fmt: skip
    write_epochs(store, METRICS, JOB, metrics_rows(TOPO, epochs, JOB))
    windows = operator_windows(metrics_rows(TOPO, epochs, JOB))
    options = PolicyOptions(kind="ds2_plus", interval=30.0, restart_time=10.0)
    decided = decide_job(windows, TOPO, options, RUN, {}, 100).drop_columns(["op_index"])
    write_epochs(store, DECISIONS, JOB, decided)
    return store


def test_unchanged_code_moves_no_proposal_and_a_policy_change_shows_the_epochs_it_moves(tmp_path, monkeypatch):
    store = stored_run(tmp_path)
    run = replay(store)
    assert (run.job, run.epochs, run.moved) == (JOB, 5, [])
    # Without the prior's headroom (no rise measured yet), every epoch sizes for the arrival and a restart only.
    monkeypatch.setattr(ds2_plus, "steady_rise", lambda series, horizon, options: (0.0, True))
    moved = replay(store).moved
    assert [m.words() for m in moved] == [f"epoch {e}: COUNT 6 -> 5" for e in range(3)]


def test_a_folder_without_one_jobs_topology_is_named(tmp_path):
    with pytest.raises(InputError, match="holds one job's topology, found 0"):
        replay(tmp_path / "store")
