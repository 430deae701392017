"""The bad-input corpus: each input that once escaped as a library traceback (or slipped through)
now gets one clear InputError naming the input and the problem -- or, for the decide rules, a
no-op that says why. Each case failed before its fix (see the issue on reliability and security).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pyarrow as pa
import pytest

from autoscaler.collect.ds2_files import read_rates_log
from autoscaler.config.jobs import load_jobs, parse_jobs
from autoscaler.decide.rules import NOOP, decide
from autoscaler.errors import InputError
from autoscaler.flink import ids
from autoscaler.record.outcomes import action_row
from autoscaler.rescale.journal import ACTION_ID, open_journal, safe_name
from autoscaler.store.parquet import read_epochs, validate_job_name, write_epochs
from autoscaler.store.schemas import ACTIONS
from autoscaler.topology import read_topology_csv
from tests.conftest import TOPOLOGY_CSV

TOPO = read_topology_csv(TOPOLOGY_CSV)
JOB = {"name": "wc", "flink_job_name": "wordcount", "jar": "build/ds2-testjob.jar", "parallelism_args": {"Count": "--c"}}


def jobs_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def error_of(call, *args) -> InputError:
    with pytest.raises(InputError) as err:
        call(*args)
    return err.value


# -- the jobs config ------------------------------------------------------------------------------


def test_an_interval_too_long_for_any_clock_is_named():
    entry = {**copy.deepcopy(JOB), "policy_interval": "99999999999d"}
    err = error_of(parse_jobs, {"jobs": [entry]}, "jobs.yaml")
    assert "policy_interval" in str(err) and "longer than any duration" in str(err)


def test_an_impossible_start_date_is_named(tmp_path):
    path = jobs_file(tmp_path, "jobs:\n  - name: wc\n    flink_job_name: w\n    start_date: 2026-13-45\n")
    err = error_of(load_jobs, path)
    assert "jobs.yaml" in err.source and "out of range" in err.problem and "month" in err.problem


def test_a_jobs_config_that_is_not_utf8_is_named(tmp_path):
    err = error_of(load_jobs, jobs_file(tmp_path, b"jobs:\n  - name: w\xe9\n"))
    assert "not UTF-8" in err.problem


# -- topology and rates files ----------------------------------------------------------------------


def test_a_topology_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,A\xff,1,b,B,1\n")
    assert "not UTF-8" in error_of(read_topology_csv, path).problem


def test_a_rates_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    path = tmp_path / "r.log"
    path.write_bytes(b"Splitter FlatMap,1,2,100,1.0,2.0,0.5,1.0\nSplitter FlatMap,2,2,1\xff0,1,2,0.5,1\n")
    err = error_of(read_rates_log, path, TOPO)
    assert "not UTF-8" in err.problem and err.line == 2


def test_a_byte_order_mark_is_not_part_of_the_first_operator(tmp_path):
    path = tmp_path / "r.log"
    path.write_text("\ufeffSplitter FlatMap,1,2,100,1.0,2.0,0.5,1.0\n", encoding="utf-8")
    assert [r.operator_id for r in read_rates_log(path, TOPO)] == ["Splitter FlatMap"]


@pytest.mark.parametrize("timestamp", ["1" + "0" * 30, "-5"])
def test_a_timestamp_outside_64_bit_nanoseconds_is_named(tmp_path, timestamp):
    path = tmp_path / "r.log"
    path.write_text(f"Splitter FlatMap,1,2,{timestamp},1.0,2.0,0.5,1.0\n")
    err = error_of(read_rates_log, path, TOPO)
    assert "timestamp" in err.problem and "2262" in err.problem and err.line == 1


# -- the store ----------------------------------------------------------------------------------


def test_a_truncated_block_is_set_aside_not_an_arrow_error(tmp_path, caplog):
    row = action_row("wc", 3, action_id="a", mechanism="in-place", outcome="noop", message="", parallelism={})
    write_epochs(tmp_path, ACTIONS, "wc", pa.Table.from_pylist([row], schema=ACTIONS.arrow_schema()))
    block = next(tmp_path.rglob("*.parquet"))
    block.write_bytes(block.read_bytes()[:40])
    assert read_epochs(tmp_path, ACTIONS, "wc").num_rows == 0  # no ArrowInvalid: the block is set aside
    assert str(block) in caplog.text and "cannot be read" in caplog.text


# -- the decide rules -----------------------------------------------------------------------------


def rows(**change):
    row = {
        "operator_id": "c", "operator_name": "Count", "is_source": False, "status": "ok",
        "current_parallelism": 1, "target_parallelism": 4, "target_input_rate": 1.0, "capacity_per_instance": 1.0,
    }  # fmt: skip
    row.update(change)
    return [{k: v for k, v in row.items() if v is not KeyError}]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"target_parallelism": None}, "lacks target_parallelism"),
        ({"target_parallelism": math.nan}, "target_parallelism is nan"),
        ({"target_parallelism": 0}, "not a parallelism"),
        ({"current_parallelism": math.inf}, "current_parallelism is inf"),
        ({"status": KeyError}, "lacks status"),
    ],
)
def test_unusable_decision_rows_are_a_noop_that_says_why(change, said):
    job = parse_jobs({"jobs": [copy.deepcopy(JOB)]}, "jobs.yaml")[0]
    plan = decide(job, 5, rows(**change), decided_epochs_since_rescale=1)
    assert plan.action == NOOP and said in plan.summary and "cannot be acted on" in plan.summary


# -- names and ids: full-string matches ----------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (validate_job_name, "wc\n"),
        (ids.job_id, "a" * 32 + "\n"),
        (ids.vertex_id, "b" * 32 + "\n"),
        (ids.trigger_id, "c" * 32 + "\n"),
        (ids.jar_id, "867eaee7-eaf8-481f-9571-f37da1173d65_ds2-testjob.jar\n"),
    ],
)
def test_a_trailing_newline_is_not_a_valid_name(check, value):
    with pytest.raises(InputError):
        check(value)


def test_an_action_id_with_a_trailing_newline_creates_no_file(tmp_path):
    with pytest.raises(InputError, match="action id"), open_journal(tmp_path, "act\n"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_run_ids_become_distinct_safe_names():
    names = {run: safe_name(run) for run in ("run~1", "run_1", "..", ".", "", "a..b", "a=b", "a=3Db", "x" * 400, "y" * 400)}
    assert len(set(names.values())) == len(names)  # injective: no two runs share a journal or a folder
    for name in names.values():
        assert ACTION_ID.fullmatch(name) and ".." not in name and not name.startswith(".")
    assert safe_name("manual__2026-11-23T11:41:40.504228+00:00") == "manual__2026-11-23T11:41:40.504228+00:00"


# -- secrets never printed ----------------------------------------------------------------------


def test_credentials_in_a_flink_url_are_used_but_never_printed():
    from autoscaler.errors import redact_url
    from autoscaler.flink.client import FlinkConnection, FlinkRestClient, FlinkUnreachable

    connection = FlinkConnection("http://user:S3cretPW@127.0.0.1:9", retries=0, timeout_s=1)
    assert connection.base_url == "http://127.0.0.1:9" and (connection.username, connection.password) == ("user", "S3cretPW")
    client = FlinkRestClient(connection)
    assert client.session.auth == ("user", "S3cretPW")  # still authenticates
    with pytest.raises(FlinkUnreachable) as err:
        client.overview()
    assert "S3cretPW" not in str(err.value) and "S3cretPW" not in repr(connection) and "S3cretPW" not in (err.value.url or "")
    assert redact_url("https://u:p%40ss@h:8443/x?token=abc&a=1") == "https://u:***@h:8443/x?token=***&a=1"
    assert redact_url("sc://h:15002/;token=abc;user_id=me") == "sc://h:15002/;token=***;user_id=***"


# -- the jar a rescale runs is pinned by content ---------------------------------------------------


class FakeJars:
    """The /jars part of a Flink REST API: anyone may upload a jar of any file name."""

    def __init__(self) -> None:
        self.files: list[dict] = []
        self.uploads = 0

    def jars(self) -> list[dict]:
        return list(self.files)

    def upload_jar(self, path: Path, name: str | None = None) -> str:
        self.uploads += 1
        jar_id = f"{self.uploads:08d}-0000-0000-0000-000000000000_{name or path.name}"
        self.files.append({"id": jar_id, "name": name or path.name, "uploaded": self.uploads})
        return jar_id


def test_a_planted_jar_of_the_same_name_is_never_run(tmp_path):
    from autoscaler.flink.deployment import JobDeployment, resolve_jar

    jar = tmp_path / "job.jar"
    jar.write_bytes(b"our job")
    dep = JobDeployment("j", "/tmp/sp", {"Count": "--c"}, jar_path=jar)
    flink = FakeJars()
    ours = resolve_jar(flink, dep)  # type: ignore[arg-type]
    assert resolve_jar(flink, dep) == ours and flink.uploads == 1  # our own upload is reused
    planted = flink.upload_jar(jar, "job.jar")  # someone else's newer jar with the same file name
    assert resolve_jar(flink, dep) == ours != planted
    jar.write_bytes(b"our job, rebuilt")  # a changed jar is uploaded again, not confused with the old
    rebuilt = resolve_jar(flink, dep)
    assert rebuilt not in (ours, planted) and resolve_jar(flink, dep) == rebuilt
