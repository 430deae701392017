import pyarrow as pa
import pytest

from autoscaler.errors import InputError
from autoscaler.store.parquet import EPOCH_BLOCK_SIZE, block_dir, read_epochs, validate_job_name, write_epochs
from autoscaler.store.schemas import DECISIONS, METRICS, TABLES
from tests.helpers import metrics_rows, topology, window

TOPO = topology([("s", "m")], {"s": 1, "m": 2})


def epochs(*numbers, rate=10.0):
    return {e: {"s": window(1, 0.0, rate), "m": window(2, rate, rate)} for e in numbers}


def test_write_then_read_round_trips(tmp_path):
    rows = metrics_rows(TOPO, epochs(0, 1, 2), job="j")
    assert write_epochs(tmp_path, METRICS, "j", rows) == [0, 1, 2]
    back = read_epochs(tmp_path, METRICS, "j")
    assert back.schema == METRICS.arrow_schema()
    assert back.num_rows == 9
    assert sorted(back.column("epoch").to_pylist()) == sorted(rows.column("epoch").to_pylist())


def test_rewriting_an_epoch_replaces_it_and_keeps_the_others(tmp_path):
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, epochs(0, 1, 2), job="j"))
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, epochs(1, rate=99.0), job="j"))
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, epochs(1, rate=99.0), job="j"))  # idempotent
    back = read_epochs(tmp_path, METRICS, "j")
    assert back.num_rows == 9
    epoch1 = read_epochs(tmp_path, METRICS, "j", [1])
    assert epoch1.num_rows == 3 and set(epoch1.column("true_output_rate").to_pylist()) == {99.0, 49.5}
    assert set(read_epochs(tmp_path, METRICS, "j", [0]).column("true_output_rate").to_pylist()) == {10.0, 5.0}


def test_epochs_are_grouped_in_blocks_one_file_each(tmp_path):
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, epochs(0, EPOCH_BLOCK_SIZE - 1, EPOCH_BLOCK_SIZE), job="j"))
    write_epochs(tmp_path, METRICS, "j", metrics_rows(TOPO, epochs(5), job="j"))
    assert len(list(block_dir(tmp_path, METRICS, "j", 0).glob("*.parquet"))) == 1
    assert block_dir(tmp_path, METRICS, "j", 1).is_dir()
    # Block 0 was replaced once: its previous version stays hidden until the block's next commit
    # (a reader may still be listing it: autoscaler/store/commit.py); nothing else is left behind.
    assert len(list((tmp_path / "metrics" / "job=j").glob(".*staging*"))) == 1
    assert sorted(set(read_epochs(tmp_path, METRICS, "j").column("epoch").to_pylist())) == [0, 5, 1023, 1024]


def test_jobs_are_kept_apart(tmp_path):
    write_epochs(tmp_path, METRICS, "a", metrics_rows(TOPO, epochs(0), job="a"))
    write_epochs(tmp_path, METRICS, "b", metrics_rows(TOPO, epochs(0), job="b"))
    assert read_epochs(tmp_path, METRICS, "a").num_rows == 3
    with pytest.raises(InputError, match="contain other jobs"):
        write_epochs(tmp_path, METRICS, "a", metrics_rows(TOPO, epochs(1), job="b"))


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden", "x" * 200, "a b"])
def test_job_names_that_could_escape_a_folder_are_rejected(name):
    with pytest.raises(InputError, match="invalid job name"):
        validate_job_name(name)


def test_rows_missing_columns_or_with_nulls_are_rejected(tmp_path):
    rows = metrics_rows(TOPO, epochs(0), job="j")
    with pytest.raises(InputError, match=r"lack columns \['true_output_rate'\]"):
        write_epochs(tmp_path, METRICS, "j", rows.drop(["true_output_rate"]))
    nulls = rows.set_column(rows.schema.get_field_index("instance"), "instance", pa.nulls(rows.num_rows, pa.int32()))
    with pytest.raises(InputError, match="'instance' has 3 null values"):
        write_epochs(tmp_path, METRICS, "j", nulls)


def test_schemas_are_defined_once_with_partitions():
    for table in TABLES.values():
        assert table.partition_by == ("job", "epoch_block")
        assert table.arrow_schema().names == table.names
        assert len(table.spark_types()) == len(table.columns)
    assert "optimal_parallelism" in DECISIONS.names and "reason" in DECISIONS.names
