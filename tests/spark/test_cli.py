"""The policy job as users run it: spark-submit with the reference tool's arguments."""

from __future__ import annotations

import json
import subprocess

import pytest

import ds2_policy
from tests.conftest import RATES_LOG, ROOT, TOPOLOGY_CSV

pytestmark = pytest.mark.spark
FLATMAP, COUNT = "Splitter FlatMap", "Count -> Latency Sink"


def run_in_process(capsys, *args: str) -> list[dict]:
    assert ds2_policy.run(["--topology", str(TOPOLOGY_CSV), *args, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def targets(rows: list[dict]) -> list[tuple[int, int]]:
    by = {(r["epoch"], r["operator"]): r["target_parallelism"] for r in rows}
    return [(by[(e, FLATMAP)], by[(e, COUNT)]) for e in (0, 1)]


def spark_submit(rates) -> subprocess.CompletedProcess:
    """The policy job as users run it: bin/ds2-policy (spark-submit) with --json."""
    return subprocess.run(
        [str(ROOT / "bin" / "ds2-policy"), "--topology", str(TOPOLOGY_CSV), "--rates", str(rates), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_spark_submit_prints_only_json_with_the_golden_values():
    result = spark_submit(RATES_LOG)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]  # every stdout line is JSON
    assert len(rows) == 6 and {"epoch", "operator", "current_parallelism", "optimal_parallelism", "target_parallelism"} <= set(
        rows[0]
    )
    flatmap0 = next(r for r in rows if r["epoch"] == 0 and r["operator"] == FLATMAP)
    assert flatmap0["optimal_parallelism"] == pytest.approx(0.8950923545, rel=1e-9)
    assert flatmap0["current_parallelism"] == 2
    assert targets(rows) == [(1, 1), (1, 1)]
    assert "INFO" not in result.stderr  # Spark's logging is quiet


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--threshold", "1.0"], [(2, 2), (2, 2)]),
        (["--threshold", "1.4"], [(1, 1), (2, 2)]),
        (["--factor", "0.5"], [(2, 1), (2, 2)]),
        (["--factor", "1.0"], [(2, 2), (2, 2)]),
    ],
)
def test_golden_threshold_and_factor_variants(spark, capsys, args, expected):
    assert targets(run_in_process(capsys, "--rates", str(RATES_LOG), *args)) == expected


def test_rates_dir_with_an_incomplete_epoch(spark, capsys, tmp_path):
    lines = [x for x in RATES_LOG.read_text().splitlines() if not x.startswith("#")]
    for epoch, chunk in enumerate((lines[:4], lines[4:])):
        for line in chunk:
            op, instance = line.split(",")[:2]
            (tmp_path / f"{op}-{instance}-{epoch}.log").write_text(line + "\n")
    (tmp_path / f"{FLATMAP}-1-2.log").write_text(lines[1] + "\n")  # epoch 2: one file of four
    rows = run_in_process(capsys, "--rates-dir", str(tmp_path))
    assert sorted({r["epoch"] for r in rows}) == [0, 1]
    flatmap = {r["epoch"]: r for r in rows if r["operator"] == FLATMAP}
    assert flatmap[0]["optimal_parallelism"] == pytest.approx(0.8950923545, rel=1e-9)


def write_bad_log(tmp_path, line: str):
    path = tmp_path / "bad.log"
    good = RATES_LOG.read_text().splitlines()
    path.write_text("\n".join([*good[:3], line, *good[3:]]) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Splitter FlatMap,1,2,115963256636316,1.0,2.0,0.5", "expected 8 comma-separated columns"),
        ("Splitter FlatMap,1,2,115963256636316,-5,2.0,0.5,1.0", "rates must be finite and >= 0"),
        ("Splitter FlatMap,1,2,115963256636316,NaN,2.0,0.5,1.0", "true_processing_rate is NaN"),
        ("Splitter FlatMap,1,2,115963256636316,1.0,Infinity,0.5,1.0", "true_output_rate is Infinity"),
        ("Splitter FlatMap,1,3,115963256636316,1.0,2.0,0.5,1.0", "total_instances 3 disagrees with the topology (2)"),
        ("Splitter FlatMap,0,2,115963256636316,1.0,2.0,0.5,1.0", "instance_id 0 is outside 1..2"),
        ("Mystery,1,1,115963256636316,1.0,2.0,0.5,1.0", "unknown operator 'Mystery'"),
        ("Splitter FlatMap,1,2,soon,1.0,2.0,0.5,1.0", "window_start_ts 'soon' is not an integer"),
    ],
)
def test_bad_lines_found_by_spark_are_named_with_file_and_line(spark, capsys, tmp_path, line, message):
    path = write_bad_log(tmp_path, line)
    store = tmp_path / "store"
    with pytest.raises(ds2_policy.InputError) as err:
        ds2_policy.run(["--topology", str(TOPOLOGY_CSV), "--rates", str(path), "--store", str(store), "--json"])
    assert f"{path}:4: " in str(err.value) and message in str(err.value)
    assert capsys.readouterr().out == ""  # nothing printed
    assert not list((store / "decisions").glob("job=*")) if (store / "decisions").exists() else True  # nothing written


def test_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path):
    path = write_bad_log(tmp_path, "Splitter FlatMap,1,2,115963256636316,-5,2.0,0.5,1.0")
    result = spark_submit(path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"ds2_policy: error: {path}:4: operator 'Splitter FlatMap' instance 1: true_processing_rate is -5" in result.stderr
    assert "Traceback" not in result.stderr


def test_option_errors_need_no_spark(capsys, tmp_path):
    with pytest.raises(ds2_policy.InputError, match="unknown operator 'Nope'"):
        ds2_policy.run(["--topology", str(TOPOLOGY_CSV), "--rates", str(RATES_LOG), "--min-parallelism", "Nope=2"])
    with pytest.raises(ds2_policy.InputError, match="expected OPERATOR=N"):
        ds2_policy.run(["--topology", str(TOPOLOGY_CSV), "--rates", str(RATES_LOG), "--max-parallelism", "4"])
    with pytest.raises(ds2_policy.InputError, match="cannot read topology file"):
        ds2_policy.run(["--topology", str(tmp_path / "x.csv"), "--rates", str(RATES_LOG)])


def test_a_log_of_only_bad_lines_is_still_named(spark, tmp_path):
    path = tmp_path / "all-bad.log"
    path.write_text("Splitter FlatMap,1,2,5,-5,1,1,1\n")
    with pytest.raises(ds2_policy.InputError, match=r"all-bad.log:1: .*rates must be finite and >= 0"):
        ds2_policy.run(["--topology", str(TOPOLOGY_CSV), "--rates", str(path)])
    path.write_text("# only a header\n")
    with pytest.raises(ds2_policy.InputError, match="no data lines"):
        ds2_policy.run(["--topology", str(TOPOLOGY_CSV), "--rates", str(path)])
