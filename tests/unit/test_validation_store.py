"""Data Docs, the validations table, backfill ranges (pandas), quarantine edge cases and the config."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from autoscaler.errors import InputError
from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import METRICS, TABLES, VALIDATIONS
from autoscaler.validate import (
    ValidationConfig,
    default_docs_dir,
    gxrun,
    quarantined_epochs,
    read_quarantine,
    release_quarantine,
    validate_epoch,
    validate_range,
)
from tests.unit.test_validation_builders import JOB, SLOTS, TOPO, change, config, drop, epoch_rows, interval, table


def test_data_docs_pages_survive_a_new_process(tmp_path):
    store = tmp_path / "data" / "store"
    write_epochs(store, METRICS, JOB, table(epoch_rows(4) + change(epoch_rows(5), "count", 1, busy_ms=-1.0)))
    first = validate_epoch(store, JOB, 4, config(4))
    docs = default_docs_dir(store)
    assert docs == tmp_path / "data" / "validation-docs"
    page = Path(first.docs_pages[0])
    assert page.is_file() and page.is_relative_to(docs) and page.suffix == ".html"
    assert len(first.docs_pages) == 2 and Path(first.docs_pages[1]).is_file()  # the slots suite's page
    gxrun._CONTEXTS.clear()  # as if the next epoch ran in another process
    second = validate_epoch(store, JOB, 5, config(5))
    assert not second.success
    index = (docs / "index.html").read_text()
    assert page.is_file() and f"{JOB}-epoch-4" in index and f"{JOB}-epoch-5" in index
    assert (
        "busy_ms is &gt;= 0" in Path(second.docs_pages[0]).read_text()
        or "busy_ms is >= 0" in Path(second.docs_pages[0]).read_text()
    )
    record = read_epochs(store, VALIDATIONS, JOB, [5]).to_pylist()[0]
    assert record["docs_page"] == second.docs_pages[0] and record["quarantine"] == second.quarantine


def test_the_validations_table_is_registered():
    assert TABLES["validations"] is VALIDATIONS
    assert {"status", "summary", "failed_rules", "quarantine", "docs_page"} <= set(VALIDATIONS.names)


def test_a_backfill_range_quarantines_only_the_bad_epochs(tmp_path):
    rows = []
    for e in range(10):
        good = epoch_rows(e)
        if e == 3:
            good = drop(good, lambda r: (r["operator_id"], r["instance"]) != ("src", 1))
        if e == 7:
            good = change(good, "sink", 1, observed_output_rate=math.nan)
        rows += good
    write_epochs(tmp_path, METRICS, JOB, table(rows))
    intervals = {e: interval(e) for e in range(10)}
    results = validate_range(tmp_path, JOB, 1, 9, config(1), intervals=intervals, engine="pandas", docs=False, run_id="bf")
    assert sorted(results) == list(range(1, 10))
    assert {e: r.failed_rules for e, r in results.items() if not r.success} == {3: ["instances_present"], 7: ["rates_valid"]}
    assert [o.where() for f in results[3].failures for o in f.offenders] == ["Source#1 (epoch 3)"]
    assert quarantined_epochs(tmp_path, JOB) == [3, 7]
    assert sorted(set(read_epochs(tmp_path, METRICS, JOB).column("epoch").to_pylist())) == [0, 1, 2, 4, 5, 6, 8, 9]
    records = read_epochs(tmp_path, VALIDATIONS, JOB).to_pylist()
    assert [(r["epoch"], r["status"], r["run_id"]) for r in records] == [
        (e, "failed" if e in (3, 7) else "passed", "bf") for e in range(1, 10)
    ]
    assert results[4].rows == SLOTS and results[3].rows == SLOTS - 1


def test_release_refuses_to_overwrite_recollected_rows(tmp_path):
    write_epochs(tmp_path, METRICS, JOB, table(change(epoch_rows(5), "count", 1, busy_ms=-1.0)))
    assert not validate_epoch(tmp_path, JOB, 5, config(5), docs=False).success
    write_epochs(tmp_path, METRICS, JOB, table(epoch_rows(5)))  # collected again after a fix
    with pytest.raises(InputError, match="already has 7 rows"):
        release_quarantine(tmp_path, JOB, 5)
    assert validate_epoch(tmp_path, JOB, 5, config(5), docs=False).success  # the store's rows are validated
    assert quarantined_epochs(tmp_path, JOB) == [5]  # the rejected copy stays until released or replaced
    with pytest.raises(InputError, match="not in quarantine"):
        release_quarantine(tmp_path, JOB, 6)


def test_thresholds_come_from_the_jobs_configuration():
    cfg = ValidationConfig.from_mapping(TOPO, {"window_s": 30, "time_tolerance": 0.1})
    assert (cfg.window_s, cfg.time_tolerance, cfg.rate_tolerance) == (30, 0.1, 0.25)
    with pytest.raises(InputError, match="unknown validation settings \\['windows'\\]"):
        ValidationConfig.from_mapping(TOPO, {"windows": 30})
    described = {name: (default, doc) for name, default, doc in ValidationConfig.describe()}
    assert described["topology"][0] == "required" and described["time_tolerance"][0] == "0.25"
    assert all(doc for _, doc in described.values())
    assert cfg.thresholds()["topology"] == {"src": 2, "parse": 1, "count": 3, "sink": 1}


def test_a_recollected_epoch_rejected_again_keeps_the_earlier_copy(tmp_path):
    first = change(epoch_rows(5), "count", 1, busy_ms=-1.0)
    write_epochs(tmp_path, METRICS, JOB, table(first))
    assert not validate_epoch(tmp_path, JOB, 5, config(5), docs=False).success
    second = change(epoch_rows(5), "count", 2, busy_ms=-2.0)
    write_epochs(tmp_path, METRICS, JOB, table(second))  # collected again, still bad
    result = validate_epoch(tmp_path, JOB, 5, config(5), docs=False)
    assert not result.success
    rows, saved = read_quarantine(tmp_path, JOB, 5)
    assert rows.column("busy_ms").to_pylist()[4] == -2.0 and saved["summary"] == result.summary()
    (earlier,) = (Path(result.quarantine) / "superseded").iterdir()
    kept = pq.read_table(earlier / "part-0.parquet")
    assert kept.column("busy_ms").to_pylist()[3] == -1.0 and (earlier / "validation.json").is_file()
