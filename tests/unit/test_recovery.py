"""Where a job the cluster forgot is restarted from: the savepoint its stop wrote, else its latest
retained checkpoint (``autoscaler.rescale.recovery``), found on a real folder tree."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from autoscaler.flink.client import FlinkError
from autoscaler.rescale.recovery import latest_checkpoint, local_folder, savepoint_written

JOB = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


class ConfigOnly:
    """Answers ``/jobmanager/config`` as Flink does (a list of key/value pairs), or fails."""

    def __init__(self, config: dict[str, str] | None) -> None:
        self.config = config

    def get(self, path: str) -> Any:
        assert path == "/jobmanager/config"
        if self.config is None:
            raise FlinkError("Flink REST at http://127.0.0.1:1 is unreachable")
        return [{"key": k, "value": v} for k, v in self.config.items()]


def complete(folder: Path, mtime: float | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "_metadata").write_bytes(b"meta")
    if mtime is not None:
        os.utime(folder / "_metadata", (mtime, mtime))
    return folder


def test_local_folder_only_for_local_uris():
    assert local_folder("file:///tmp/sp") == Path("/tmp/sp")
    assert local_folder("file:/tmp/sp") == Path("/tmp/sp")
    assert local_folder("/tmp/sp") == Path("/tmp/sp")
    assert local_folder("s3://bucket/sp") is None
    assert local_folder("relative/sp") is None


def test_the_newest_complete_savepoint_of_the_job_since_the_stop(tmp_path):
    stopped = time.time() - 100
    complete(tmp_path / f"savepoint-{JOB[:6]}-old", mtime=stopped - 3600)  # an earlier rescale's
    (tmp_path / f"savepoint-{JOB[:6]}-torn").mkdir()  # no _metadata: not complete
    complete(tmp_path / f"savepoint-{OTHER[:6]}-other")  # another job's
    first = complete(tmp_path / f"savepoint-{JOB[:6]}-first", mtime=stopped + 1)
    assert savepoint_written(f"file://{tmp_path}", JOB, stopped) == f"file:{first}"
    newer = complete(tmp_path / f"savepoint-{JOB[:6]}-newer", mtime=stopped + 5)
    assert savepoint_written(str(tmp_path), JOB, stopped) == f"file:{newer}"


def test_no_savepoint_when_none_is_complete_recent_or_local(tmp_path):
    stopped = time.time()
    complete(tmp_path / f"savepoint-{JOB[:6]}-old", mtime=stopped - 60)
    (tmp_path / f"savepoint-{JOB[:6]}-torn").mkdir()
    assert savepoint_written(str(tmp_path), JOB, stopped) is None
    assert savepoint_written(str(tmp_path / "missing"), JOB, stopped) is None
    assert savepoint_written("s3://bucket/sp", JOB, stopped) is None


def test_the_latest_complete_retained_checkpoint(tmp_path):
    jobs = tmp_path / "checkpoints"
    complete(jobs / JOB / "chk-9")
    complete(jobs / JOB / "chk-12")
    (jobs / JOB / "chk-13").mkdir()  # in progress when the JobManager died
    (jobs / JOB / "shared").mkdir()
    complete(jobs / OTHER / "chk-40")
    client = ConfigOnly({"execution.checkpointing.dir": f"file://{jobs}"})
    assert latest_checkpoint(client, JOB) == f"file:{jobs / JOB / 'chk-12'}"  # 12 > 9 numerically, not as text


def test_no_checkpoint_without_a_folder_a_complete_one_or_an_answer(tmp_path):
    (tmp_path / JOB / "chk-1").mkdir(parents=True)
    assert latest_checkpoint(ConfigOnly({"execution.checkpointing.dir": str(tmp_path)}), JOB) is None
    assert latest_checkpoint(ConfigOnly({}), JOB) is None
    assert latest_checkpoint(ConfigOnly({"execution.checkpointing.dir": "s3://bucket/chk"}), JOB) is None
    assert latest_checkpoint(ConfigOnly(None), JOB) is None
    complete(tmp_path / JOB / "chk-2")
    assert latest_checkpoint(ConfigOnly({"state.checkpoints.dir": str(tmp_path)}), JOB) == f"file:{tmp_path / JOB / 'chk-2'}"
