"""The SQL script helpers: the job name a script sets, and what a script must have to be run."""

from __future__ import annotations

import pytest

from autoscaler.errors import InputError
from autoscaler.flink import sql


def test_the_job_name_is_the_last_pipeline_name_set():
    script = "set 'pipeline.name' = 'first';\n-- a comment\nSET  'pipeline.name'='it''s mine';\nINSERT INTO t SELECT 1;"
    assert sql.pipeline_name(script) == "it's mine"
    assert sql.pipeline_name("INSERT INTO t SELECT 1;") is None
    assert sql.pipeline_name("SET 'pipeline.name.suffix' = 'x';") is None


def test_a_script_is_read_whole_and_must_insert(tmp_path):
    script = tmp_path / "job.sql"
    script.write_text("SET 'pipeline.name' = 'j';\nINSERT INTO t SELECT 1;\n")
    assert sql.runner_args(sql.read_script(script)) == ["--sql", script.read_text()]
    script.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="cannot be read"):
        sql.read_script(script)


def test_submitting_a_script_without_a_job_name_is_refused_before_anything_is_sent():
    with pytest.raises(InputError, match="it must name its job"):
        sql.submit(None, "INSERT INTO t SELECT 1;")  # type: ignore[arg-type]  # never reached


def test_submit_sql_names_a_bad_file_in_one_line_and_exits_1(tmp_path, capsys):
    assert sql.main([str(tmp_path / "missing.sql")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("submit-sql: error: ") and "missing.sql: the SQL script cannot be read" in err
    assert "Traceback" not in err and err.count("\n") == 1
    script = tmp_path / "job.sql"
    script.write_text("SET 'pipeline.name' = 'j';\nINSERT INTO t SELECT 1;\n")
    assert sql.main([str(script), "--parallelism", "0"]) == 1
    assert "--parallelism: must be >= 1, got 0" in capsys.readouterr().err
