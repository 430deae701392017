"""DS2 files: good epochs pass; a truncated rates line and a rate file set missing an instance are stopped and named."""

from __future__ import annotations

import pytest

from autoscaler.collect.ds2_files import parse_rate_line, read_rate_files, read_rates_log, records_to_metrics
from autoscaler.errors import InputError
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import METRICS
from autoscaler.topology import read_topology_csv
from autoscaler.validate import ValidationConfig, validate_rows
from tests.conftest import RATES_LOG, TOPOLOGY_CSV

TOPO = read_topology_csv(TOPOLOGY_CSV)
CONFIG = ValidationConfig(topology=TOPO)  # DS2 files: monotonic clock, no data interval, no window end


def test_the_ds2_example_passes():
    rows = records_to_metrics(read_rates_log(RATES_LOG, TOPO), TOPO, "wordcount", "ds2-rates-log")
    results = validate_rows("wordcount", rows, CONFIG)
    assert sorted(results) == [0, 1]
    assert all(r.success and r.decidable for r in results.values()), [r.message() for r in results.values()]


def test_a_truncated_rates_line_is_stopped_by_the_reader_and_named(tmp_path):
    lines = RATES_LOG.read_text().splitlines()
    lines[6] = lines[6].rsplit(",", 1)[0]  # the 6th data line loses its last column
    path = tmp_path / "flink_rates.log"
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    with pytest.raises(InputError) as err:
        read_rates_log(path, TOPO)
    assert (err.value.source, err.value.line) == (str(path), 7)
    assert "expected 8 comma-separated columns" in err.value.problem and "got 7" in err.value.problem
    # Stopped before anything is stored or validated; the file is kept as it was.
    assert path.read_bytes() == before
    assert read_epochs(tmp_path / "store", METRICS, "wordcount").num_rows == 0


def test_a_rate_file_set_missing_an_instance_is_skipped_by_the_reader_and_named_by_validation(tmp_path):
    folder = tmp_path / "rates"
    folder.mkdir()
    for epoch in (0, 1, 2):
        for op in TOPO.operators.values():
            for i in range(1, op.parallelism + 1):
                if (op.id, i, epoch) == ("Splitter FlatMap", 2, 1):
                    continue  # epoch 1 lacks instance 2 of the splitter
                rates = "0,20.0,0,10.0" if op.is_source else ("10.0,0,5.0,0" if "Sink" in op.id else "10.0,20.0,5.0,10.0")
                line = f"{op.id},{i},{op.parallelism},{1000 * epoch + i},{rates}"
                (folder / f"{op.name}-{i}-{epoch}.log").write_text(line + "\n")
    files = sorted(p.name for p in folder.iterdir())

    # The reader keeps complete epochs and names the incomplete one (it waits, like DS2's manager).
    records, skipped = read_rate_files(folder, TOPO)
    assert skipped == [1] and sorted({r.epoch for r in records}) == [0, 2]
    complete = validate_rows("wordcount", records_to_metrics(records, TOPO, "wordcount", "ds2-rate-files"), CONFIG)
    assert all(r.success for r in complete.values())

    # If epoch 1 is validated anyway (its files as they are), the missing instance is named exactly.
    epoch1 = []
    for path in sorted(folder.glob("*-1.log")):
        record = parse_rate_line(path.read_text().strip(), TOPO, str(path), 1)
        epoch1.append(type(record)(**{**record.__dict__, "epoch": 1}))
    result = validate_rows("wordcount", records_to_metrics(epoch1, TOPO, "wordcount", "ds2-rate-files"), CONFIG)[1]
    assert [(f.rule, [o.where() for o in f.offenders]) for f in result.failures] == [
        ("instances_present", ["Splitter FlatMap#2 (epoch 1)"])
    ]
    assert sorted(p.name for p in folder.iterdir()) == files  # nothing consumed or deleted
