"""A real lab run's results (``scripts/ds2_lab.py``'s ``run``, ``sweep`` and ``rejudge``): ``result.json``,
``report.md``, ``chart.png`` and ``epochs.json`` written from the run's store, and indexed when it is an attempt's."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from ds2_local import ROOT, log
from harness import machine_line

from autoscaler.lab import ground_truth as gt
from autoscaler.lab.epochs_record import epoch_record
from autoscaler.lab.index import parse_run_label, record_run
from autoscaler.lab.report import report_md
from autoscaler.lab.result import lab_result
from autoscaler.lab.scenario import SCALED, Scenario, load_scenario
from autoscaler.record.loop_report import EpochRow

SCENARIOS = ROOT / "benchmarks" / "scenarios"
OPERATORS = ["Source: Source", *SCALED]
LAB = ROOT / "benchmarks" / "lab"  # runs/<scenario>/<kind>/<attempt>[-<round>]/, indexed (autoscaler/lab/index.py)


def run_epochs(scenario: Scenario, first_s: float) -> range:
    """The epochs of a run whose load starts at ``first_s`` (an epoch boundary)."""
    return range(int(first_s // scenario.interval_s), int((first_s + scenario.duration_s) // scenario.interval_s))


def write_result(scenario: Scenario, policy: str, inputs: str, rows: list[EpochRow], truth: gt.GroundTruth, start: datetime,
                 out: Path, conditions: dict, attempt: str | None = None) -> None:  # fmt: skip
    """``result.json``, ``report.md`` and ``chart.png`` of one policy's run (``conditions``: when, where, its store;
    ``attempt``: the lab attempt it is indexed under, when it is one)."""
    from autoscaler.record import loop_report

    out.mkdir(parents=True, exist_ok=True)
    result = lab_result(rows, scenario, truth, start, policy, inputs)
    result["kind"], result["run"] = parse_run_label(policy)
    result["conditions"] = conditions
    schedule = loop_report.schedule_times(start, scenario.rate_steps())
    loop_report.chart(rows, schedule, OPERATORS, out / "chart.png", title=f"{scenario.name} under {policy}")
    text = (f"Scenario `{scenario.name}`: {scenario.description} Inputs: {inputs}"
            + (" (the test job's own rate gauge: an upper bound no production source gives)" if inputs == "oracle" else
               " (records out plus the growth of pendingRecords, as production sees them)")
            + f". Conditions: {machine_line(conditions)}.")  # fmt: skip
    (out / "report.md").write_text(report_md(result, loop_report.table(rows, OPERATORS), text))
    if conditions.get("store") and conditions.get("job"):  # the per-epoch record the simulator replays
        epochs = run_epochs(scenario, start.timestamp())
        record = epoch_record(Path(conditions["store"]), conditions["job"], epochs)
        (out / "epochs.json").write_text(json.dumps(record, indent=None, separators=(",", ":"), default=str) + "\n")
    tmp = out / ".result.json.tmp"
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n")
    tmp.replace(out / "result.json")  # last: a result.json means the run is complete
    if attempt is not None:
        record_run(LAB.resolve(), out.resolve(), attempt, conditions["commit"])
    log(f"{scenario.name} under {policy}: {out / 'result.json'}")


def rejudge(path: Path, truth: gt.GroundTruth) -> None:
    """Recompute a finished run's figures, report and chart from its store (after the judging changed)."""
    from autoscaler.record import loop_report

    result = json.loads(path.read_text())
    scenario = load_scenario(SCENARIOS / f"{result['scenario']}.yaml")
    conditions = result["conditions"]
    if not conditions.get("store") or not conditions.get("job"):
        raise SystemExit(f"{path}: no 'store' and 'job' in its conditions: run it again to rejudge it")
    start = datetime.fromisoformat(result["schedule_start"])
    rows = loop_report.epoch_rows(Path(conditions["store"]), conditions["job"], run_epochs(scenario, start.timestamp()),
                                  scenario.interval_s)  # fmt: skip
    write_result(scenario, result["policy"], result.get("inputs", "oracle"), rows, truth, start, path.parent, conditions)
