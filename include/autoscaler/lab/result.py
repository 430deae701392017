"""The figures a closed-loop lab run is judged by, from its store and the ground truth.

Everything is read back from the job's tables (metrics, validations, actions: the same epoch
rows as the loop report) and compared with the *measured* minimum parallelism
(:mod:`autoscaler.lab.ground_truth`), never with any policy's own estimate. Per load change
(schedule entry), until the next one:

- ``rescales``: successful rescales; ``oscillations``: rescales that reverse an operator's
  previous change within the same load change;
- ``time_to_sustain_s``: from the change to the end of the first epoch of the run of sustained
  epochs that lasts to the next change (the sources emit >= 95 % of the scheduled arrivals and their
  backlog is not growing, or under 1 s of input; sources without a backlog metric back-pressured
  <= 10 % instead); None when the change ends unsustained;
- ``over_instances`` / ``under_instances``: per operator, the parallelism the load change ends
  with against the ground truth for the highest rate since its last rescale;
- ``under_provisioned_s``: time in epochs that ran an operator below the ground truth for the
  epoch's highest rate;
- ``backlog_peak_records`` and ``backlog_drain_s`` (peak to <= 1 s of input, None: never);
- ``downtime_s``: the rescales' stop-to-running time.

Totals add ``instance_seconds`` (the resource cost: instances of the rescaled operators times
time) next to the ground truth's own, and count the epochs left without a decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from autoscaler.lab.ground_truth import GroundTruth
from autoscaler.lab.scenario import SCALED, Scenario
from autoscaler.record.loop_report import DRAINED_S, EpochRow, keeps_up, reversals, sustained_from
from autoscaler.store.schemas import SUCCEEDED


def _running(rows: Sequence[EpochRow], initial: dict[str, int]) -> list[dict[str, int]]:
    """Each epoch's parallelism while it was measured (carried over epochs with no metrics)."""
    out, current = [], dict(initial)
    for r in rows:
        if r.measured:
            current = {**current, **{op: p for op, p in r.parallelism.items() if op in SCALED}}
        out.append(dict(current))
        if r.outcome == SUCCEEDED:
            current = {**current, **r.new_parallelism}
    return out


def lab_result(
    rows: Sequence[EpochRow], scenario: Scenario, truth: GroundTruth, start: datetime, policy: str, inputs: str = "honest"
) -> dict[str, Any]:
    """``result.json``: one entry per load change, and the totals; ``inputs``: honest or oracle (what the policy saw)."""
    interval = scenario.interval_s
    initial = {op: scenario.initial_parallelism.get(op, 1) for op in SCALED}
    running = _running(rows, initial)

    def offset(t: datetime) -> float:
        return (t - start).total_seconds()

    def minimum(rate: float) -> dict[str, int | None]:
        return truth.minimum(scenario, rate)

    per_epoch = []
    for i, (r, par) in enumerate(zip(rows, running, strict=True)):
        end = offset(r.end)
        rate = scenario.rate_over(end - interval, end)
        need = minimum(rate)
        under = any(n is None or par.get(op, 0) < n for op, n in need.items())
        sustained = keeps_up(r, rows[i - 1] if i else None, scenario.mean_rate(max(end - interval, 0.0), end))
        per_epoch.append({"end_s": end, "rate": rate, "need": need, "parallelism": par, "under": under, "sustained": sustained})

    rescales = [(i, r) for i, r in enumerate(rows) if r.outcome == SUCCEEDED and r.rescaled_at is not None]
    changes = [c.at_s for c in scenario.schedule]

    def load_change(t: float) -> int:
        return max(i for i, at in enumerate(changes) if at <= max(t, 0.0))

    by_change: dict[int, list[tuple[dict[str, int], dict[str, int]]]] = {}
    for i, r in rescales:
        by_change.setdefault(load_change(offset(r.rescaled_at)), []).append((running[i], r.new_parallelism))
    reversal_in = {k: reversals(steps) for k, steps in by_change.items()}

    entries = []
    settled: list[int] = []  # epochs in the sustained run that ends each load change: the cost after settling
    for k, change in enumerate(scenario.schedule):
        lo = change.at_s
        hi = changes[k + 1] if k + 1 < len(changes) else scenario.duration_s
        mine = [i for i, e in enumerate(per_epoch) if lo < e["end_s"] <= hi]
        done = [(i, r) for i, r in rescales if lo <= offset(r.rescaled_at) < hi]
        sustain = None
        j = sustained_from([per_epoch[i]["sustained"] for i in mine])  # the change's trailing sustained run: mine[j:]
        if j < len(mine):
            sustain = per_epoch[mine[j]]["end_s"] - lo
            settled += mine[j:]
        settled_from = offset(done[-1][1].rescaled_at) if done else lo
        final = dict(running[mine[-1]]) if mine else dict(initial)
        if mine and rows[mine[-1]].outcome == SUCCEEDED:
            final.update(rows[mine[-1]].new_parallelism)
        need = minimum(scenario.rate_over(settled_from, hi))
        over = {op: max(final.get(op, 0) - n, 0) for op, n in need.items() if n is not None}
        under = {op: (max(n - final.get(op, 0), 0) if n is not None else None) for op, n in need.items()}
        backlogs = [(i, rows[i].backlog) for i in mine if rows[i].backlog is not None]
        peak_i, peak = max(backlogs, key=lambda b: b[1]) if backlogs else (None, None)
        entries.append({
            "at_s": lo,
            "rate": change.rate,
            "rescales": len(done),
            "time_to_sustain_s": sustain,
            "oscillations": reversal_in.get(k, 0),
            "over_instances": over,
            "under_instances": under,
            "ground_truth": need,
            "final_parallelism": final,
            "under_provisioned_s": interval * sum(1 for i in mine if per_epoch[i]["under"]),
            "backlog_peak_records": peak,
            "backlog_drain_s": _drain(rows, per_epoch, peak_i) if peak_i is not None else None,
            "downtime_s": round(sum(r.downtime_s or 0.0 for _, r in done), 2),
        })  # fmt: skip
    measured = [i for i, r in enumerate(rows) if r.measured]

    def instance_seconds(epochs: list[int]) -> float:
        return interval * sum(sum(per_epoch[i]["parallelism"].get(op, 0) for op in SCALED) for i in epochs)

    def truth_seconds(epochs: list[int]) -> float:
        return interval * sum(sum(n if n is not None else scenario.max_parallelism[op] for op, n in per_epoch[i]["need"].items())
                              for i in epochs)  # fmt: skip

    calm = [i for i in settled if rows[i].measured]
    totals = {
        "rescales": len(rescales),
        "oscillations": sum(reversal_in.values()),
        "under_provisioned_s": sum(e["under_provisioned_s"] for e in entries),
        "over_instances_end": sum(entries[-1]["over_instances"].values()) if entries else 0,
        "under_instances_end": sum(v or 0 for v in entries[-1]["under_instances"].values()) if entries else 0,
        "downtime_s": round(sum(e["downtime_s"] for e in entries), 2),
        "backlog_peak_records": max((e["backlog_peak_records"] or 0 for e in entries), default=0),
        "instance_seconds": instance_seconds(measured),
        "ground_truth_instance_seconds": truth_seconds(measured),
        # After settling (each change's trailing sustained run) against the ground truth there; the rest is transient.
        "settled_instance_seconds": instance_seconds(calm),
        "settled_ground_truth_instance_seconds": truth_seconds(calm),
        "epochs": len(rows),
        "epochs_without_decision": sum(1 for r in rows if r.verdict in ("lost", "quarantined")),
        "sustained_epochs": sum(1 for e in per_epoch if e["sustained"]),
    }
    return {"scenario": scenario.name, "policy": policy, "inputs": inputs, "interval_s": interval,
            "duration_s": scenario.duration_s, "schedule_start": start.isoformat(), "load_changes": entries,
            "totals": totals}  # fmt: skip


def _drain(rows: Sequence[EpochRow], per_epoch: list[dict[str, Any]], peak_i: int) -> float | None:
    """Seconds from the backlog's peak to the first epoch that owes at most DRAINED_S of its input."""
    for i in range(peak_i, len(rows)):
        backlog, rate = rows[i].backlog, rows[i].target_rate
        if backlog is not None and not math.isnan(rate) and backlog <= max(rate * DRAINED_S, 1.0):
            return per_epoch[i]["end_s"] - per_epoch[peak_i]["end_s"]
    return None
