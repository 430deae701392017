"""The store's disk full mid-run, on a size-limited tmpfs, with a real Flink job and the policy on Spark.

With the disk full, every write of an epoch (its boundary snapshot, its metrics block, its ACTIONS
row) fails in one line that names the store and says nothing was committed; the epochs committed
before read back unchanged and no partial file is left to hold the space. Once there is room again
the next epoch is collected, decided by the policy on Spark and the decide rules, and recorded.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.collect.flink import collect_epoch_metrics, topology_path
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.decide.rules import NOOP, RESCALE
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
from autoscaler.errors import StoreFull
from autoscaler.fleet.interval import plan_epoch
from autoscaler.record import audit, outcomes
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import ACTIONS, METRICS
from tests.integration.test_rescale import base_args, wait_counted
from tests.unit.test_decide import job as job_config

pytestmark = [pytest.mark.flink, pytest.mark.spark, pytest.mark.slow, pytest.mark.faults]

NAME, JOB = "full-disk", "wc"  # the decide tests' job config is called wc
DISK_SIZE = "16m"


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A tmpfs of ``DISK_SIZE`` mounted for this test, unmounted after it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE},mode=0755", "ds2-full-disk", str(disk)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs (root with CAP_SYS_ADMIN needed): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with one file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    fd = os.open(filler, os.O_WRONLY | os.O_APPEND)
    try:  # the last partial page too
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def leftovers(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.name.endswith(".tmp") or ".staging-" in p.name)


def decide(spark, store: Path, epoch: int) -> dict:
    """The policy on Spark, the decide rules and the record task's ACTIONS row of ``epoch``."""
    run = StoreRun(str(store), JOB, epoch, epoch, "live", f"full-disk-{epoch}", str(topology_path(store, JOB)),
                   PolicyOptions(kind="ds2"))  # fmt: skip
    assert decide_stored_epochs(spark, run) == 1
    plan = plan_epoch(job_config(), epoch, store, {"decidable": True}, free_slots=8)
    run_facts = outcomes.EpochRun(f"a{epoch}", "savepoint-restart", plan.current, plan_summary=plan.summary,
                                  plan_action=plan.action)  # fmt: skip
    row = outcomes.epoch_row(JOB, epoch, run_facts)
    audit.record_action(store, row)
    return {"plan": plan, "row": row}


def test_a_full_disk_fails_each_write_clearly_and_the_next_epoch_is_decided_once_there_is_room(flink, spark, small_disk):
    store = small_disk / "store"
    details = flink.start_job(base_args(NAME))
    try:
        wait_counted(flink.client, details.id, 1500)
        first = collect_epoch_metrics(flink.client, NAME, JOB, 1, store, short_window_s=2)
        decide(spark, store, 1)
        before = read_epochs(store, METRICS, JOB, [1])
        filler = fill(small_disk)

        with pytest.raises(StoreFull) as caught:  # the boundary snapshot is the epoch's first write
            collect_epoch_metrics(flink.client, NAME, JOB, 2, store, short_window_s=2)
        text = str(caught.value)
        assert text.startswith(str(store)) and "no space left on its device" in text and "nothing of it was committed" in text
        assert "Traceback" not in text and caught.value.__cause__ is None and caught.value.__suppress_context__

        with pytest.raises(StoreFull) as caught:  # the metrics block: it holds epoch 1, which must survive
            write_epochs(store, METRICS, JOB, first.rows.set_column(first.rows.schema.get_field_index("epoch"), "epoch",
                                                                    [[2] * first.rows.num_rows]))  # fmt: skip
        assert f"the metrics of job '{JOB}', epochs 2..2" in str(caught.value)
        with pytest.raises(StoreFull):  # the record task's row
            row = outcomes.action_row(JOB, 2, action_id="a2", mechanism="savepoint-restart", outcome="skipped",
                                      message="collect failed: the disk is full", parallelism={})  # fmt: skip
            audit.record_action(store, row)
        assert read_epochs(store, METRICS, JOB, [1, 2]).equals(before)
        assert read_epochs(store, ACTIONS, JOB).column("epoch").to_pylist() == [1]
        assert leftovers(store) == []

        filler.unlink()
        collect_epoch_metrics(flink.client, NAME, JOB, 3, store, short_window_s=2)
        third = decide(spark, store, 3)
        assert third["plan"].action in (RESCALE, NOOP) and "not decidable" not in third["plan"].summary, third["plan"].summary
        assert read_epochs(store, ACTIONS, JOB).column("epoch").to_pylist() == [1, 3]
        assert read_epochs(store, METRICS, JOB, [1]).equals(before)
    finally:
        flink.client.cancel(details.id)
