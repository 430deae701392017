"""One GX run for many jobs' epoch gives each job the verdict its own run gives, charged to that job only."""

from __future__ import annotations

import dataclasses
import math

from autoscaler.store.parquet import read_epochs, write_epochs
from autoscaler.store.schemas import METRICS, VALIDATIONS
from autoscaler.topology import Operator, Topology
from autoscaler.validate import quarantined_epochs, validate_rows
from autoscaler.validate.fleet import validate_fleet_epoch
from tests.unit.test_validation_builders import change, config, drop, epoch_rows, table

EPOCH = 5
# A second topology: the same operator ids at other parallelisms (what differs per job travels in the rows).
WIDE = Topology.from_edges(
    [Operator("src", "Source", 1), Operator("parse", "Parse", 2), Operator("count", "Count", 4), Operator("sink", "Sink", 1)],
    [("src", "parse"), ("parse", "count"), ("count", "sink")],
)


def _rows(job: str, rows: list[dict]) -> list[dict]:
    return [{**r, "job": job} for r in rows]


def _wide_rows() -> list[dict]:
    base = {(r["operator_id"]): r for r in epoch_rows(EPOCH)}
    out = []
    for op_id in WIDE.order:
        for i in range(1, WIDE.operators[op_id].parallelism + 1):
            out.append({**base[op_id], "instance": i, "parallelism": WIDE.operators[op_id].parallelism})
    return out


def test_each_job_gets_its_own_verdict_from_one_run(tmp_path):
    jobs = {
        "good": epoch_rows(EPOCH),
        "wide": _wide_rows(),  # valid under its own topology only
        "missing": drop(epoch_rows(EPOCH), lambda r: (r["operator_id"], r["instance"]) != ("count", 2)),
        "nan": change(epoch_rows(EPOCH), "sink", 1, observed_output_rate=math.nan),
        "slow": change(epoch_rows(EPOCH), "parse", 1, window_end=epoch_rows(EPOCH)[0]["window_start"]),
    }
    configs = {job: config(EPOCH) for job in jobs}
    configs["wide"] = config(EPOCH, topology=WIDE)
    configs["short"] = dataclasses.replace(config(EPOCH), window_s=20)  # its collection measured 20 s: 60 s is wrong
    jobs["short"] = epoch_rows(EPOCH)
    for job, rows in jobs.items():
        write_epochs(tmp_path, METRICS, job, table(_rows(job, rows)))

    results, errors = validate_fleet_epoch(tmp_path, EPOCH, configs, docs_dir=None, run_id="fleet-1")

    assert errors == {}
    alone = {job: validate_rows(job, table(_rows(job, jobs[job])), configs[job], epochs=[EPOCH])[EPOCH] for job in jobs}
    for job in jobs:
        assert results[job].failed_rules == alone[job].failed_rules, job
        assert results[job].job == job and results[job].epoch == EPOCH
    assert [job for job, r in results.items() if r.success] == ["good", "wide"]
    assert results["missing"].failed_rules == ["instances_present"]
    assert [o.where() for f in results["missing"].failures for o in f.offenders] == ["Count#2 (epoch 5)"]
    assert "rates_valid" in results["nan"].failed_rules and "window_length" in results["short"].failed_rules
    # Settled as each job's own run settles it: the failed epochs quarantined, every verdict recorded.
    assert {job: quarantined_epochs(tmp_path, job) for job in jobs} == {
        job: ([] if job in ("good", "wide") else [EPOCH]) for job in jobs
    }
    for job in jobs:
        (record,) = read_epochs(tmp_path, VALIDATIONS, job).to_pylist()
        assert record["run_id"] == "fleet-1" and record["status"] == ("passed" if job in ("good", "wide") else "failed")


def test_a_job_without_rows_fails_alone(tmp_path):
    write_epochs(tmp_path, METRICS, "good", table(_rows("good", epoch_rows(EPOCH))))
    results, errors = validate_fleet_epoch(tmp_path, EPOCH, {"good": config(EPOCH), "gone": config(EPOCH)})
    assert errors == {} and results["good"].success
    assert results["gone"].failed_rules == ["instances_present"] and results["gone"].rows == 0


def test_when_the_one_pass_fails_each_job_is_derived_alone_and_only_the_bad_one_fails(tmp_path, monkeypatch):
    from autoscaler.validate import view

    jobs = {
        "good": epoch_rows(EPOCH),
        "missing": drop(epoch_rows(EPOCH), lambda r: (r["operator_id"], r["instance"]) != ("count", 2)),
        "bad": epoch_rows(EPOCH),
    }
    for job, rows in jobs.items():
        write_epochs(tmp_path / "one", METRICS, job, table(_rows(job, rows)))
        write_epochs(tmp_path / "alone", METRICS, job, table(_rows(job, rows)))
    configs = {job: config(EPOCH) for job in jobs}
    one_pass, _ = validate_fleet_epoch(tmp_path / "one", EPOCH, configs)

    def broken(*args, **kwargs):
        raise ValueError("a batch of another schema")

    alone_metrics = view.pandas_metrics

    def bad_job_breaks(rows, *args, **kwargs):
        if rows.num_rows and rows.column("job")[0].as_py() == "bad":
            raise ValueError("unreadable rows")
        return alone_metrics(rows, *args, **kwargs)

    monkeypatch.setattr(view, "pandas_fleet_metrics", broken)
    monkeypatch.setattr(view, "pandas_metrics", bad_job_breaks)
    alone, errors = validate_fleet_epoch(tmp_path / "alone", EPOCH, configs)

    assert errors == {"bad": "ValueError: unreadable rows"}
    assert set(alone) == {"good", "missing"}
    for job in alone:
        assert alone[job].failed_rules == one_pass[job].failed_rules, job
        assert [o.where() for f in alone[job].failures for o in f.offenders] == [
            o.where() for f in one_pass[job].failures for o in f.offenders
        ]
    assert one_pass["bad"].success and alone["good"].success and alone["missing"].failed_rules == ["instances_present"]
