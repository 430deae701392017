"""Boundary snapshots: when they are due, which epoch they close, first writer wins, never raising."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from autoscaler.collect.boundaries import BoundaryJob, epoch_ending_at, next_boundary, save_first, take_boundary
from autoscaler.collect.flink import snapshot_path
from autoscaler.config.jobs import parse_jobs
from autoscaler.flink.client import FlinkConnection


def test_next_boundary_and_its_epoch_match_the_jobs_epoch_numbering():
    assert next_boundary(30, 1000.0) == 1020.0
    assert next_boundary(30, 1020.0) == 1050.0  # strictly after
    assert epoch_ending_at(30, 1020.0) == 33
    # jobs.epoch_of(interval end) numbers the same epoch
    (job,) = parse_jobs({"jobs": [{"name": "j", "flink_job_name": "f", "jar": "x.jar", "parallelism_args": {"A": "--a"},
                                   "policy_interval": "30s"}]}, "t")  # fmt: skip
    assert job.epoch_of(datetime.fromtimestamp(1020.0, tz=UTC)) == 33


def test_save_first_keeps_the_first_writer(tmp_path):
    path = tmp_path / "snapshots" / "epoch=1.json"
    assert save_first("first", path) is True
    assert save_first("second", path) is False
    assert path.read_text() == "first"
    assert [p.name for p in path.parent.iterdir()] == ["epoch=1.json"]  # no temp file left


def _job(url="http://127.0.0.1:1"):
    return BoundaryJob("j", "flink-j", 10, FlinkConnection(base_url=url, retries=0, timeout_s=1.0))


def test_a_late_or_existing_boundary_is_not_taken(tmp_path):
    now = time.time()
    boundary = next_boundary(10, now) - 10
    line = take_boundary(_job(), boundary - 60, tmp_path, now)
    assert "skipped" in line and "after the boundary" in line
    path = snapshot_path(tmp_path, "j", epoch_ending_at(10, boundary))
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    assert "already taken" in take_boundary(_job(), boundary, tmp_path, boundary + 0.5)


def test_flink_away_is_an_outcome_not_an_exception(tmp_path):
    boundary = next_boundary(10, time.time()) - 10
    line = take_boundary(_job(), boundary, tmp_path, boundary + 0.1)
    assert "not taken" in line and "\n" not in line
    assert not snapshot_path(tmp_path, "j", epoch_ending_at(10, boundary)).exists()
