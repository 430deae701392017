"""The lab's measurements on a real Flink cluster: an operator's saturated throughput, the ground-truth
curves built from it, and whether side-by-side jobs disturb each other (``scripts/ds2_lab.py``'s
``ground-truth`` and ``interference``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ds2_local import Stack, log
from harness import machine, machine_line, write_results

from autoscaler.lab import ground_truth as gt
from autoscaler.lab.scenario import Scenario


def throughput_at(stack: Stack, operator: str):  # noqa: ANN201 - a callable for measure_curve
    """Run the test job with given args, measure ``operator``'s input rate over MEASURE_S, cancel it."""
    from autoscaler.collect.snapshot import take_snapshot, window_metrics

    def measure(args: list[str]) -> float:
        client = stack.client()
        job_id = stack.submit(args)
        name = args[args.index("--job-name") + 1]
        try:
            time.sleep(gt.WARMUP_S)  # the job's start-up transient, not measured
            first = take_snapshot(client, name)
            time.sleep(gt.MEASURE_S)
            rows = window_metrics(first, take_snapshot(client, name), name, 0).to_pylist()
            return sum(r["observed_processing_rate"] for r in rows if r["operator_name"] == operator)
        finally:
            client.cancel(job_id)
            deadline = time.monotonic() + 60
            while client.find_job(name, ("RUNNING", "CANCELLING")) and time.monotonic() < deadline:
                time.sleep(0.5)

    return measure


def interference(out: Path, stack: Stack, busy: Scenario, stop: Callable[[Stack], None]) -> None:
    """Do side-by-side jobs disturb each other? Count's saturated throughput alone and beside two jobs of ``busy``."""
    from autoscaler.lab.scenario import OperatorCost

    measure = throughput_at(stack, "Count")
    args = gt.isolation_args("Count", OperatorCost(175), 4, "probe")
    figures: dict[str, list[float]] = {"alone": [], "beside two jobs": []}
    try:
        stack.flink_up()
        for _ in range(3):
            figures["alone"].append(measure(args))
        for k in range(2):
            stack.submit([*busy.job_args(f"neighbour-{k}", int(time.time() * 1000)), "--count-parallelism", "6"])
        for _ in range(3):
            figures["beside two jobs"].append(measure(args))
    finally:
        stop(stack)
    conditions = {**machine(), "probe": "Count at 4, 175 us wait per record, saturated; neighbours: step-up-down at Count 6"}
    lines = [f"# Side-by-side lab jobs: do they disturb each other?\n\n{machine_line(conditions)}\n",
             "| Count's throughput (records/s) | runs | median |", "|---|---|---|"]  # fmt: skip
    for k, v in figures.items():
        lines.append(f"| {k} | {', '.join(f'{x:,.0f}' for x in v)} | {sorted(v)[1]:,.0f} |")
    write_results(out.name, {"conditions": conditions, "throughput": figures}, "\n".join(lines) + "\n", out.parent)
    log("\n".join(lines))


def ensure_ground_truth(stack: Stack, scenarios: list[Scenario], truth: gt.GroundTruth, again: bool = False) -> None:
    """Measure the curves the scenarios need and the cache lacks (``again``: every one they need, anew)."""
    for scenario in scenarios:
        todo = gt.operator_costs(scenario) if again else truth.missing(scenario)
        for op, cost in todo.items():
            if again and gt.curve_key(op, cost) in truth.curves and truth.curves[gt.curve_key(op, cost)].samples:
                continue  # already re-measured with its samples (a resumed run)
            enough = 1.25 * max(max(r for _, r in scenario.rate_steps()), 1)
            log(f"measuring the ground truth of {gt.curve_key(op, cost)} (up to {enough:,.0f} records/s)")
            curve = gt.measure_curve(op, cost, throughput_at(stack, op), scenario.max_parallelism[op], enough, log)
            truth.add(curve, {**machine(), "warmup_s": gt.WARMUP_S, "measure_s": gt.MEASURE_S})
