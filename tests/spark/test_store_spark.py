"""Live and backfill runs from the metrics store: idempotent per (job, epoch)."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

import ds2_policy
from autoscaler.errors import InputError
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, read_epochs, write_epochs
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import write_topology_csv
from tests.helpers import metrics_rows, topology, window

pytestmark = pytest.mark.spark
TOPO = topology([("src", "work"), ("work", "sink")], {"src": 2, "work": 1, "sink": 1})


def epoch_windows(rate: float):
    return {
        "src": window(2, 0.0, rate),
        "work": window(1, 1000.0, 1000.0, max_parallelism=128),
        "sink": window(1, 5000.0, 0.0, max_parallelism=128),
    }


@pytest.fixture
def store(tmp_path):
    epochs = {e: epoch_windows(2000.0 + 1000 * (e % 3)) for e in (0, 1, 2, EPOCH_BLOCK_SIZE + 1)}
    write_epochs(tmp_path, METRICS, "job1", metrics_rows(TOPO, epochs, job="job1"))
    return tmp_path


def policy(store, *args: str) -> None:
    topo_csv = write_topology_csv(TOPO, store / "topology.csv")
    argv = ["--topology", str(topo_csv), "--metrics-store", "--store", str(store), "--job", "job1", *args]
    assert ds2_policy.run(argv) == 0


def test_backfill_then_rerun_one_epoch_replaces_only_it(spark, store):
    policy(store, "--run-type", "backfill", "--run-id", "bf")
    first = read_epochs(store, DECISIONS, "job1")
    assert first.num_rows == 4 * 3
    assert set(first.column("run_type").to_pylist()) == {"backfill"}
    work = first.filter(pc.equal(first.column("operator_id"), "work"))
    assert dict(zip(work.column("epoch").to_pylist(), work.column("target_parallelism").to_pylist())) == {
        0: 2,
        1: 3,
        2: 4,
        EPOCH_BLOCK_SIZE + 1: 4,
    }
    for _ in range(2):  # live re-run of epoch 1, twice: replaces, never duplicates
        policy(store, "--from-epoch", "1", "--to-epoch", "1", "--run-id", "live1")
    again = read_epochs(store, DECISIONS, "job1")
    assert again.num_rows == 12
    runs = dict(
        zip(zip(again.column("epoch").to_pylist(), again.column("operator_id").to_pylist()), again.column("run_id").to_pylist())
    )
    assert runs[(1, "work")] == "live1" and runs[(0, "work")] == "bf" and runs[(EPOCH_BLOCK_SIZE + 1, "work")] == "bf"


def test_new_metrics_for_an_epoch_change_its_decision(spark, store):
    policy(store, "--from-epoch", "0", "--to-epoch", "0")
    write_epochs(store, METRICS, "job1", metrics_rows(TOPO, {0: epoch_windows(8000.0)}, job="job1"))
    policy(store, "--from-epoch", "0", "--to-epoch", "0")
    rows = read_epochs(store, DECISIONS, "job1", [0])
    work = rows.filter(pc.equal(rows.column("operator_id"), "work"))
    assert work.num_rows == 1 and work.column("target_parallelism").to_pylist() == [8]


def test_unknown_operator_in_the_store_is_an_error_and_writes_nothing(spark, store):
    other = topology([("src", "work"), ("work", "ghost")], {"src": 2})
    rows = metrics_rows(
        other, {7: {"src": window(2, 0, 10.0), "work": window(1, 10.0, 10.0), "ghost": window(1, 1.0, 0)}}, job="job1"
    )
    write_epochs(store, METRICS, "job1", rows)
    with pytest.raises(InputError, match="rows name operators not in the topology, first 'ghost' in epoch 7"):
        policy(store, "--from-epoch", "7", "--to-epoch", "7")
    assert read_epochs(store, DECISIONS, "job1").num_rows == 0


def test_empty_epoch_range_is_an_error(spark, store):
    with pytest.raises(InputError, match="no metrics rows in the requested epochs"):
        policy(store, "--from-epoch", "500", "--to-epoch", "600")


def test_missing_job_is_an_error(spark, store):
    with pytest.raises(InputError, match="no metrics stored for job 'nope'"):
        ds2_policy.run(
            [
                "--topology",
                str(write_topology_csv(TOPO, store / "t.csv")),
                "--metrics-store",
                "--store",
                str(store),
                "--job",
                "nope",
            ]
        )
