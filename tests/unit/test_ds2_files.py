import random
from pathlib import Path

import pytest

from autoscaler.collect.ds2_files import read_rate_files, read_rates_log, read_source_rates, records_to_metrics
from autoscaler.errors import InputError
from autoscaler.store.schemas import METRICS
from autoscaler.topology import read_topology_csv
from tests.conftest import RATES_LOG, TOPOLOGY_CSV

TOPO = read_topology_csv(TOPOLOGY_CSV)
GOOD = "Splitter FlatMap,1,2,100,1.0,2.0,0.5,1.0"


def test_rates_log_numbers_epochs_per_instance_by_timestamp(tmp_path):
    lines = RATES_LOG.read_text().splitlines()
    header, data = lines[0], lines[1:]
    random.Random(7).shuffle(data)  # file order must not matter
    shuffled = tmp_path / "shuffled.log"
    shuffled.write_text("\n".join([header, *data]) + "\n")
    original = sorted((r.operator_id, r.instance, r.epoch, r.true_processing_rate) for r in read_rates_log(RATES_LOG, TOPO))
    again = sorted((r.operator_id, r.instance, r.epoch, r.true_processing_rate) for r in read_rates_log(shuffled, TOPO))
    assert original == again
    assert {r.epoch for r in read_rates_log(RATES_LOG, TOPO)} == {0, 1}
    first = [r for r in read_rates_log(RATES_LOG, TOPO) if r.operator_id == "Splitter FlatMap" and r.instance == 1]
    assert [r.epoch for r in sorted(first, key=lambda r: r.window_start_ns)] == [0, 1]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Splitter FlatMap,1,2,100,1.0,2.0,0.5", "expected 8 comma-separated columns"),  # truncated line
        ("Splitter FlatMap,1,2,100,1.0,2.0,0.5,1.0,9", "got 9"),
        ("Nope,1,1,100,1.0,2.0,0.5,1.0", "unknown operator 'Nope'"),
        ("Splitter FlatMap,x,2,100,1.0,2.0,0.5,1.0", "instance_id 'x' is not an integer"),
        ("Splitter FlatMap,1,3,100,1.0,2.0,0.5,1.0", "total_instances 3 disagrees with the topology (2)"),
        ("Splitter FlatMap,3,2,100,1.0,2.0,0.5,1.0", "instance_id 3 is outside 1..2"),
        ("Splitter FlatMap,1,2,100,fast,2.0,0.5,1.0", "true_processing_rate 'fast' is not a number"),
        ("Splitter FlatMap,1,2,100,-1.0,2.0,0.5,1.0", "true_processing_rate is -1.0; rates must be finite and >= 0"),
        ("Splitter FlatMap,1,2,100,1.0,NaN,0.5,1.0", "true_output_rate is NaN"),
        ("Splitter FlatMap,1,2,100,1.0,2.0,inf,1.0", "observed_processing_rate is inf"),
    ],
)
def test_bad_rate_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "rates.log"
    path.write_text(f"# header\n{GOOD}\n\n{line}\n")
    with pytest.raises(InputError) as err:
        read_rates_log(path, TOPO)
    assert err.value.source == str(path) and err.value.line == 4
    assert message in str(err.value)


def test_empty_rates_log_is_an_error(tmp_path):
    path = tmp_path / "rates.log"
    path.write_text("# only a header\n")
    with pytest.raises(InputError, match="no data lines"):
        read_rates_log(path, TOPO)


def _rate_files(folder: Path, epochs: range, skip: tuple[str, int, int] | None = None, ext: str = "log") -> None:
    folder.mkdir(exist_ok=True)
    for epoch in epochs:
        for op in TOPO.operators.values():
            for i in range(1, op.parallelism + 1):
                if skip == (op.name, i, epoch):
                    continue
                line = f"{op.id},{i},{op.parallelism},{1000 + epoch},10.0,20.0,5.0,10.0"
                (folder / f"{op.name}-{i}-{epoch}.{ext}").write_text(f"# {','.join(['h'] * 8)}\n{line}\n")


def test_rate_files_keep_complete_epochs_and_skip_incomplete_ones(tmp_path):
    folder = tmp_path / "rates"
    _rate_files(folder, range(3), skip=("Splitter FlatMap", 2, 1))  # epoch 1 misses an instance
    records, skipped = read_rate_files(folder, TOPO)
    assert skipped == [1]
    assert sorted({r.epoch for r in records}) == [0, 2]
    assert len(records) == 2 * 4


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("garbage.txt", "x", "file name is not <operator name>-<instance>-<epoch>.<ext>"),
        ("Nope-1-0.log", "x", "unknown operator name 'Nope'"),
        ("Splitter FlatMap-1-0.log", "Count -> Latency Sink,1,1,5,1,1,1,1", "line is for operator 'Count -> Latency Sink'"),
        ("Splitter FlatMap-2-0.log", "Splitter FlatMap,1,2,5,1,1,1,1", "line is for instance 1 but the file name says 2"),
        ("Splitter FlatMap-1-0.log", "Splitter FlatMap,1,2,5,1,1,1", "expected 8 comma-separated columns"),
        ("Splitter FlatMap-1-0.log", "", "expected exactly one data line, found 0"),
    ],
)
def test_bad_rate_files_name_the_file(tmp_path, name, content, message):
    folder = tmp_path / "rates"
    folder.mkdir()
    (folder / name).write_text(content + "\n")
    with pytest.raises(InputError) as err:
        read_rate_files(folder, TOPO)
    assert name in err.value.source and message in str(err.value)


def test_duplicate_rate_files_are_rejected(tmp_path):
    folder = tmp_path / "rates"
    _rate_files(folder, range(1))
    _rate_files(folder, range(1), ext="txt")
    with pytest.raises(InputError, match="duplicate rate file"):
        read_rate_files(folder, TOPO)


def test_missing_rates_folder(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_rate_files(tmp_path / "none", TOPO)


def test_source_rates_override_file(tmp_path):
    path = tmp_path / "src.csv"
    path.write_text("# op,rate\nSource: Custom Source,5000\n")
    assert read_source_rates(path, TOPO) == {"Source: Custom Source": 5000.0}
    for text, message in [
        ("Splitter FlatMap,5\n", "is not a source"),
        ("Nope,5\n", "unknown operator 'Nope'"),
        ("Source: Custom Source,-2\n", "must be >= 0, or -1"),
        ("Source: Custom Source\n", "expected 2 columns"),
        ("Source: Custom Source,1\nSource: Custom Source,2\n", "listed twice"),
    ]:
        path.write_text(text)
        with pytest.raises(InputError, match=message):
            read_source_rates(path, TOPO)


def test_records_become_metrics_rows():
    table = records_to_metrics(read_rates_log(RATES_LOG, TOPO), TOPO, "wc", "ds2-rates-log")
    assert table.schema == METRICS.arrow_schema()
    assert table.num_rows == 8
    assert set(table.column("operator_name").to_pylist()) == set(o.name for o in TOPO.operators.values())
