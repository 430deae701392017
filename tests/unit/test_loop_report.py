"""The closed-loop report, from synthetic store contents: phases, convergence, oscillation, chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from autoscaler.record import audit, loop_report
from autoscaler.rescale.result import RescaleResult
from autoscaler.store.parquet import epoch_block, write_epochs
from autoscaler.store.schemas import DECISIONS, METRICS, VALIDATIONS

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
JOB = "loop"


def metrics(epoch, rate, achieved, count, warmup=False, bp=0.0):
    start, end = T0 + timedelta(seconds=30 * epoch), T0 + timedelta(seconds=30 * (epoch + 1))
    base = {
        "job": JOB, "epoch": epoch, "epoch_block": epoch_block(epoch), "max_parallelism": 128, "window_start": start,
        "window_end": end, "records_in": 0, "records_out": 0, "busy_ms": 1.0, "idle_ms": 0.0, "warmup": warmup,
        "source_format": "flink-rest", "true_processing_rate": 0.0, "observed_processing_rate": 0.0,
    }  # fmt: skip
    source = {**base, "operator_id": "s", "operator_name": "Source", "instance": 1, "parallelism": 1, "is_source": True,
              "backpressured_ms": bp * 30000, "true_output_rate": rate, "observed_output_rate": achieved}  # fmt: skip
    counter = {**base, "operator_id": "c", "operator_name": "Count", "instance": 1, "parallelism": count, "is_source": False,
               "backpressured_ms": 0.0, "true_output_rate": 0.0, "observed_output_rate": 0.0}  # fmt: skip
    return [source, counter]


def decision(epoch, capacity):
    return {
        "job": JOB, "epoch": epoch, "epoch_block": epoch_block(epoch), "operator_id": "c", "operator_name": "Count",
        "is_source": False, "status": "ok", "current_parallelism": 1, "instances_observed": 1, "capacity_per_instance": capacity,
        "target_parallelism": 1, "reason": "", "options": "{}", "run_id": "r", "run_type": "live", "decided_at": T0,
    }  # fmt: skip


def rescale(epoch, new):
    at = T0 + timedelta(seconds=30 * (epoch + 1) + 5)
    result = RescaleResult(
        "a", "savepoint-restart", "succeeded", "j1", "j2", {"Count": 1}, {"Count": new}, "/sp", 0.5, "ok", at, at
    )
    return result.to_row(JOB, epoch)


def test_phases_convergence_oscillation_and_overprovisioning(tmp_path):
    # Phase 1 (20k, capacity 5k/instance -> minimum 4): epoch 0 rescales 1 -> 4, warm-up, then sustained.
    # Phase 2 (30k -> minimum 6): epoch 4 rescales 4 -> 6, sustained from epoch 6, then 6 -> 7 at 7 (no reversal).
    rows = metrics(0, 20000, 5000, 1, bp=1.0) + metrics(1, 20000, 0, 4, warmup=True) + metrics(2, 20000, 19900, 4)
    rows += metrics(3, 20000, 20000, 4) + metrics(4, 30000, 20000, 4, bp=0.5) + metrics(5, 30000, 0, 6, warmup=True)
    rows += metrics(6, 30000, 29900, 6) + metrics(7, 30000, 29900, 6)
    write_epochs(tmp_path, METRICS, JOB, pa.Table.from_pylist(rows, schema=METRICS.arrow_schema()))
    caps = [decision(e, 5000.0) for e in range(8)]
    write_epochs(tmp_path, DECISIONS, JOB, pa.Table.from_pylist(caps, schema=DECISIONS.arrow_schema()))
    for epoch, new in ((0, 4), (4, 6), (7, 7)):
        audit.record_action(tmp_path, rescale(epoch, new))

    epochs = loop_report.epoch_rows(tmp_path, JOB)
    assert [r.epoch for r in epochs] == list(range(8)) and epochs[1].warmup and not epochs[2].warmup
    assert epochs[0].backpressure == 1.0 and not loop_report.keeps_up(epochs[0], None, 20000)
    assert loop_report.keeps_up(epochs[2], epochs[1], 20000) and not loop_report.keeps_up(epochs[2], epochs[1], 21000)
    schedule = loop_report.schedule_times(T0, [(0, 20000), (120, 30000)])
    first, second = loop_report.phases(epochs, loop_report.capacities(tmp_path, JOB), schedule)
    assert (first.rescales, first.oscillations, first.time_to_sustain_s) == (1, 0, 90.0)
    assert first.final_parallelism["Count"] == 4 and first.over_provisioning == {"Count": 0}
    assert (second.rescales, second.oscillations, second.time_to_sustain_s) == (2, 0, 90.0)
    assert second.final_parallelism["Count"] == 7 and second.over_provisioning == {"Count": 1}
    # A window that ends a moment after the load changed measured the phase before: it stays with it.
    late_end = loop_report.schedule_times(T0, [(0, 20000), (119.6, 30000)])
    early, _ = loop_report.phases(epochs, loop_report.capacities(tmp_path, JOB), late_end)
    assert [r.epoch for r in early.rows] == [0, 1, 2, 3]
    text = loop_report.summary([first, second], epochs)
    assert "| start (12:00:00) | 20,000 | 1 | 0 | 90 s | Count 4, Source 1 | Count +0 |" in text
    assert "Total: 3 rescales, 1.5 s downtime in all." in text
    assert "RESCALED Count→4 (0.5 s down)" in loop_report.table(epochs, ["Source", "Count"])
    png = loop_report.chart(epochs, schedule, ["Source", "Count"], tmp_path / "loop.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_every_epoch_is_listed_with_its_verdict(tmp_path):
    # Epoch 0 decided (noop), 1 quarantined by validation (its metrics moved away), 2 never collected
    # (the run failed or never came), 3 a warm-up window with no action row.
    rows = metrics(0, 20000, 20000, 4) + metrics(3, 20000, 0, 4, warmup=True)
    write_epochs(tmp_path, METRICS, JOB, pa.Table.from_pylist(rows, schema=METRICS.arrow_schema()))
    noop = {**rescale(0, 4), "outcome": "noop", "message": "no change"}
    audit.record_action(tmp_path, noop)
    failed = {
        "job": JOB, "epoch": 1, "epoch_block": epoch_block(1), "status": "failed", "decidable": False, "rows": 2,
        "expectations": 30, "failed": 1, "failed_rules": "windows_in_interval", "summary": "failed", "engine": "pandas",
        "suite_version": 2, "thresholds": "{}", "docs_page": None, "quarantine": "q", "run_id": "r", "validated_at": T0,
    }  # fmt: skip
    write_epochs(tmp_path, VALIDATIONS, JOB, pa.Table.from_pylist([failed], schema=VALIDATIONS.arrow_schema()))

    epochs = loop_report.epoch_rows(tmp_path, JOB, range(0, 4), interval_s=30)
    assert [(r.epoch, r.verdict) for r in epochs] == [(0, "noop"), (1, "quarantined"), (2, "lost"), (3, "warm-up")]
    text = loop_report.table(epochs, ["Source", "Count"])
    assert "validation failed (windows_in_interval): no decision" in text
    assert "no metrics: the run failed or never came" in text
    summary = loop_report.summary([], epochs)
    assert "Epochs: 4 (" in summary and "2 without a decision for want of good metrics" in summary
    loop_report.chart(epochs, [], ["Source", "Count"], tmp_path / "loop.png")  # unmeasured epochs are skipped


def test_a_reversal_turns_an_operators_previous_change_of_the_phase_around():
    up, more, back = ({"Count": 1}, {"Count": 4}), ({"Count": 4}, {"Count": 8}), ({"Count": 8}, {"Count": 7})
    assert loop_report.reversals([up, more]) == 0
    assert loop_report.reversals([up, more, back]) == 1  # 1 -> 4 -> 8 -> 7: the drain capacity given back
    assert loop_report.reversals([back]) == 0  # a scale-down after a fall of the load is no reversal
    assert loop_report.reversals([({"Count": 4, "Parse": 1}, {"Count": 6, "Parse": 1})]) == 0


def test_a_phase_is_sustained_from_the_run_of_sustained_epochs_that_lasts_to_its_end(tmp_path):
    # A source that owes a backlog is back-pressured while it drains it: epochs 1-2 drain a shrinking
    # backlog at 100 % back-pressure and count as sustained; epoch 3 lets it grow again, epochs 4-5 keep up.
    def with_backlog(epoch, achieved, bp, backlog):
        rows = metrics(epoch, 20000, achieved, 4, bp=bp)
        rows[0]["pending_records"] = backlog
        return rows

    rows = with_backlog(0, 19000, 1.0, 900_000) + with_backlog(1, 28000, 1.0, 600_000) + with_backlog(2, 28000, 1.0, 300_000)
    rows += with_backlog(3, 19500, 1.0, 310_000) + with_backlog(4, 28000, 1.0, 50_000) + with_backlog(5, 20000, 0.0, 0)
    write_epochs(tmp_path, METRICS, JOB, pa.Table.from_pylist(rows, schema=METRICS.arrow_schema()))
    epochs = loop_report.epoch_rows(tmp_path, JOB)
    (phase,) = loop_report.phases(epochs, {}, loop_report.schedule_times(T0, [(0, 20000)]))
    assert phase.time_to_sustain_s == 150.0  # epoch 4's end: the run that lasts to the end starts there
