"""What a closed-loop run did, epoch by epoch, read back from the store: table, figures, chart.

Everything comes from the three tables (metrics, decisions, actions), so the same report can be
made for any job and any stretch of time, not only for the demo:

- per epoch: the sources' target rate (what they want to emit) and achieved rate, the sources'
  back-pressure, every operator's parallelism, and what the autoscaler did and why. Every epoch
  of the range is listed, also those with no metrics (quarantined by validation, or never
  collected: a run that failed or never came), so a lost epoch cannot go unseen;
- per load phase: its rescales (DS2's goal: one), the reversals among them (a rescale that turns an
  operator's previous change of the same phase around), time from the load change to the run of
  sustained epochs that lasts to the next change, and over-provisioning against the smallest
  parallelism that sustains the rate at the measured capacity per instance.

"Sustained" and "reversal" are the policy lab's own (``autoscaler.lab.result`` imports them from here),
so the demo's report and a lab run's figures mean the same by each word.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS, SUCCEEDED, VALIDATIONS

SUSTAINED = 0.95  # the sources emit >= 95 % of the window's arrivals ...
MAX_BACKPRESSURE = 0.10  # ... back-pressured <= 10 % of the window, where they report no backlog ...
DRAINED_S = 1.0  # ... or owing no more than this many seconds of their input (and at least 1 record)


@dataclass
class EpochRow:
    epoch: int
    end: datetime
    target_rate: float
    achieved_rate: float
    backpressure: float  # max over source instances, fraction of the window
    parallelism: dict[str, int]
    outcome: str = ""
    message: str = ""
    new_parallelism: dict[str, int] = field(default_factory=dict)
    rescaled_at: datetime | None = None
    downtime_s: float | None = None
    warmup: bool = False
    measured: bool = True  # False: no metrics for this epoch (see verdict)
    validation: str = ""  # the validation's status (passed, not-decidable, failed) and failed rules
    backlog: float | None = None  # records the sources owed at the window's end (FLIP-33), when they say

    @property
    def verdict(self) -> str:
        """What became of the epoch, in one word or two."""
        if self.validation.startswith("failed"):
            return "quarantined"
        if self.outcome:
            return "rescaled" if self.outcome == SUCCEEDED else self.outcome
        if not self.measured:
            return "lost"
        return "warm-up" if self.warmup else "no action recorded"


def keeps_up(row: EpochRow, previous: EpochRow | None, arrivals: float) -> bool:
    """The epoch sustained its load: its sources emitted at least 95 % of the window's ``arrivals`` (the
    scheduled rate averaged over the window: the sources' gauge is read at one instant, which under a noisy
    or swinging load is not what the window carried), and a backlog the sources report is not growing (or
    is under 1 s of input). A source that owes a backlog is back-pressured while it works it off, so
    back-pressure counts only for sources without a backlog metric."""
    if not (row.measured and not row.warmup and arrivals > 0 and row.achieved_rate >= SUSTAINED * arrivals):
        return False
    if row.backlog is None:
        return row.backpressure <= MAX_BACKPRESSURE
    before = previous.backlog if previous is not None and previous.measured else None
    return row.backlog <= max(arrivals * DRAINED_S, 1.0) or (before is not None and row.backlog <= before)


def sustained_from(flags: Sequence[bool]) -> int:
    """Where the trailing run of sustained epochs starts (``len(flags)``: the last epoch is not sustained)."""
    j = len(flags)
    while j > 0 and flags[j - 1]:
        j -= 1
    return j


def reversals(steps: Sequence[tuple[Mapping[str, int], Mapping[str, int]]]) -> int:
    """How many of these rescales ((parallelism before, new parallelism), in order, of one load change)
    turn an operator's previous change among them around."""
    direction: dict[str, int] = {}
    count = 0
    for before, after in steps:
        for op, new in after.items():
            sign = (new > before.get(op, new)) - (new < before.get(op, new))
            if sign:
                count += direction.get(op, sign) != sign
                direction[op] = sign
    return count


@dataclass
class Phase:
    start: datetime
    rate: float
    rows: list[EpochRow]
    rescales: int
    oscillations: int
    time_to_sustain_s: float | None
    final_parallelism: dict[str, int]
    minimum_parallelism: dict[str, int]

    @property
    def over_provisioning(self) -> dict[str, int]:
        return {op: self.final_parallelism.get(op, 0) - n for op, n in self.minimum_parallelism.items()}


def epoch_rows(store_root: str | Path, job: str, epochs: range | None = None, interval_s: float | None = None) -> list[EpochRow]:
    """One row per epoch: those with metrics, validations or actions, and every epoch of ``epochs``
    (with ``interval_s``, to date the epochs that left no trace at all)."""
    metrics = read_epochs(store_root, METRICS, job).to_pylist()
    actions = {a["epoch"]: a for a in read_epochs(store_root, ACTIONS, job).to_pylist()}
    validations: dict[int, dict[str, Any]] = {}
    for v in sorted(read_epochs(store_root, VALIDATIONS, job).to_pylist(), key=lambda v: v["validated_at"]):
        validations[v["epoch"]] = v  # the latest validation of each epoch
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for row in metrics:
        by_epoch.setdefault(row["epoch"], []).append(row)
    wanted = set(by_epoch) | set(actions) | set(validations) | set(epochs or ())
    if epochs is not None:
        wanted = {e for e in wanted if epochs.start <= e < epochs.stop}
    out = []
    for epoch in sorted(wanted):
        rows = by_epoch.get(epoch, [])
        validation = validations.get(epoch)
        if rows:
            row = _measured_row(epoch, rows)
        else:
            window_end = validation and validation.get("window_end")
            end = window_end or (datetime.fromtimestamp((epoch + 1) * interval_s, tz=UTC) if interval_s else None)
            if end is None:
                continue  # cannot be placed in time
            row = EpochRow(epoch, end, math.nan, math.nan, math.nan, {}, measured=False)
        if validation:
            rules = validation["failed_rules"]
            row.validation = validation["status"] + (f" ({rules})" if rules else "")
        action = actions.get(epoch)
        if action:
            row.outcome, row.message = action["outcome"], action["message"]
            row.downtime_s = action["downtime_s"]
            if action["outcome"] == SUCCEEDED:
                row.new_parallelism = json.loads(action["new_parallelism"])
                row.rescaled_at = action["finished_at"]
        out.append(row)
    return out


def _measured_row(epoch: int, rows: list[dict[str, Any]]) -> EpochRow:
    sources = [r for r in rows if r["is_source"]]
    window_ms = [max((r["window_end"] - r["window_start"]).total_seconds() * 1000, 1) for r in sources if r["window_end"]]
    bp = [(r["backpressured_ms"] or 0) / w for r, w in zip(sources, window_ms, strict=False)]
    pending = [r["pending_records"] for r in sources if r.get("pending_records") is not None]
    return EpochRow(
        epoch=epoch,
        end=max(r["window_end"] or r["window_start"] for r in rows),
        target_rate=sum(r["true_output_rate"] for r in sources),
        achieved_rate=sum(r["observed_output_rate"] for r in sources),
        backpressure=max(bp, default=0.0),
        parallelism={r["operator_name"]: r["parallelism"] for r in rows},
        warmup=any(r["warmup"] for r in rows),
        backlog=sum(pending) if pending else None,
    )


def verdict_counts(rows: Sequence[EpochRow]) -> dict[str, int]:
    """How many epochs ended each way (rescaled, noop, warm-up, quarantined, lost, ...)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return counts


def capacities(store_root: str | Path, job: str) -> dict[int, dict[str, float]]:
    """Measured capacity per instance (records/s of useful time) per epoch and operator."""
    out: dict[int, dict[str, float]] = {}
    for d in read_epochs(store_root, DECISIONS, job).to_pylist():
        cap = d["capacity_per_instance"]
        if not d["is_source"] and cap is not None and math.isfinite(cap) and cap > 0:
            out.setdefault(d["epoch"], {})[d["operator_name"]] = cap
    return out


def phases(
    rows: Sequence[EpochRow], caps: dict[int, dict[str, float]], schedule: Sequence[tuple[datetime, float]]
) -> list[Phase]:
    """Split the epochs by load phase: an epoch belongs to the phase its window's middle lies in, the load it
    measured (a window ends a few hundred ms after the phase it measured, whose decision is that phase's)."""
    out = []
    step = timedelta(seconds=_step(rows))
    for i, (start, rate) in enumerate(schedule):
        end = schedule[i + 1][0] if i + 1 < len(schedule) else datetime.max.replace(tzinfo=start.tzinfo)
        mine = [r for r in rows if start < r.end - step / 2 <= end and r.measured]
        rescaled = [r for r in mine if r.outcome == SUCCEEDED]
        sustained = [keeps_up(r, mine[j - 1] if j else None, mean_rate(schedule, r.end - step, r.end))
                     for j, r in enumerate(mine)]  # fmt: skip
        j = sustained_from(sustained)
        first_sustained = mine[j] if j < len(mine) else None
        final = {**mine[-1].parallelism, **mine[-1].new_parallelism} if mine else {}
        measured: dict[str, list[float]] = {}
        for r in mine:
            for op, cap in caps.get(r.epoch, {}).items():
                measured.setdefault(op, []).append(cap)
        minimum = {}
        for op, values in measured.items():
            cap = sorted(values)[len(values) // 2]
            # Operators whose capacity dwarfs the rate (idle ones) need one instance.
            minimum[op] = max(1, math.ceil(rate / cap - 1e-9))
        out.append(
            Phase(
                start=start,
                rate=rate,
                rows=mine,
                rescales=len(rescaled),
                oscillations=reversals([(r.parallelism, r.new_parallelism) for r in rescaled]),
                time_to_sustain_s=(first_sustained.end - start).total_seconds() if first_sustained else None,
                final_parallelism=final,
                minimum_parallelism=minimum,
            )
        )
    return out


def table(rows: Sequence[EpochRow], operators: Sequence[str]) -> str:
    head = (f"{'epoch end':<9} {'target r/s':>10} {'achieved':>9} {'bp':>4} " + " ".join(f"{op[:6]:>6}" for op in operators)
            + f"  {'verdict':<11}")  # fmt: skip
    lines = [head + " decision", "-" * (len(head) + 40)]
    for r in rows:
        ops = " ".join(f"{r.parallelism.get(op, 0):>6}" if r.measured else f"{'-':>6}" for op in operators)
        what = r.outcome or "-"
        if r.outcome == SUCCEEDED:
            what = "RESCALED " + ", ".join(f"{k}→{v}" for k, v in r.new_parallelism.items()) + f" ({r.downtime_s:.1f} s down)"
        elif r.verdict == "quarantined":
            what = f"validation {r.validation}: no decision"
        elif r.message:
            what += ": " + r.message
        elif r.verdict == "lost":
            what = "no metrics: the run failed or never came"
        if not r.measured:
            numbers = f"{'-':>10} {'-':>9} {'':>4}"
        elif r.warmup:
            numbers = f"{'-':>10} {'warm-up':>9} {'':>4}"
        else:
            numbers = f"{r.target_rate:>10,.0f} {r.achieved_rate:>9,.0f} {r.backpressure:>4.0%}"
        lines.append(f"{r.end:%H:%M:%S}  {numbers} {ops}  {r.verdict:<11} {what[:110]}")
    return "\n".join(lines)


def summary(ps: Sequence[Phase], rows: Sequence[EpochRow]) -> str:
    lines = [
        "| load change | rate (rec/s) | rescales | reversals | time to sustained rate "
        "| final parallelism | over-provisioning vs minimum |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, p in enumerate(ps):
        sustain = f"{p.time_to_sustain_s:.0f} s" if p.time_to_sustain_s is not None else "not sustained"
        final = ", ".join(f"{k} {v}" for k, v in sorted(p.final_parallelism.items()))
        over = ", ".join(f"{k} {v:+d}" for k, v in sorted(p.over_provisioning.items())) or "–"
        label = "start" if i == 0 else f"step {i}"
        cells = [f"{label} ({p.start:%H:%M:%S})", f"{p.rate:,.0f}", str(p.rescales), str(p.oscillations), sustain, final, over]
        lines.append("| " + " | ".join(cells) + " |")
    downtime = sum(r.downtime_s or 0 for r in rows if r.outcome == SUCCEEDED)
    rescales = sum(1 for r in rows if r.outcome == SUCCEEDED)
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts(rows).items(), key=lambda kv: -kv[1]))
    lost = sum(1 for r in rows if r.verdict in ("lost", "quarantined"))
    lines += ["", f"Total: {rescales} rescales, {downtime:.1f} s downtime in all.",
              f"Epochs: {len(rows)} ({verdicts}); {lost} without a decision for want of good metrics."]  # fmt: skip
    return "\n".join(lines)


def chart(
    rows: Sequence[EpochRow],
    schedule: Sequence[tuple[datetime, float]],
    operators: Sequence[str],
    out_png: Path,
    title: str = "DS2 autoscaler, closed loop on the local Flink test job",
) -> Path:
    """Rates, parallelism (and the sources' backlog, when they report one) over time, rescales marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.measured]
    with_backlog = any(r.backlog is not None for r in rows)
    if with_backlog:
        fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True, height_ratios=[3, 1.5, 2])
    else:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True, height_ratios=[3, 2])
    t0 = schedule[0][0] if schedule else rows[0].end

    def x(t: datetime) -> float:
        return (t - t0).total_seconds()

    xs = [x(r.end) for r in rows]
    sched_x = [x(t) for t, _ in schedule] + [max(xs, default=0)]
    sched_y = [rate for _, rate in schedule] + [schedule[-1][1] if schedule else 0]
    top.step(sched_x, sched_y, where="post", color="grey", linestyle="--", label="source rate schedule")
    # A warm-up window spans the restart: its rates measure the restart, not the load (a gap, not a 0).
    target = [float("nan") if r.warmup else r.target_rate for r in rows]
    top.plot(xs, target, "o-", color="tab:blue", label="sources' arrival rate (measured)")
    # A warm-up window spans a restart: its rates are not a measurement of either job, so it is
    # shaded instead of plotted.
    achieved = [float("nan") if r.warmup else r.achieved_rate for r in rows]
    top.plot(xs, achieved, "s-", color="tab:green", label="achieved throughput")
    for r in rows:
        if r.warmup:
            for ax in (top, bottom):
                ax.axvspan(x(r.end) - _step(rows), x(r.end), color="0.9", zorder=0)
    top.set_ylabel("records/s")
    top.legend(loc="upper left", fontsize=8)
    top.grid(alpha=0.3)
    if with_backlog:
        middle.plot(xs, [r.backlog if r.backlog is not None else float("nan") for r in rows], "d-", color="tab:purple")
        middle.set_ylabel("backlog (records)")
        middle.grid(alpha=0.3)
    # Parallelism changes at the moment a rescale finished, not at an epoch boundary.
    changes = [(x(rows[0].end) - _step(rows), dict(rows[0].parallelism))] if rows else []
    for r in rows:
        if r.rescaled_at is not None:
            changes.append((x(r.rescaled_at), {**changes[-1][1], **r.new_parallelism}))
    if rows:
        changes.append((x(rows[-1].end), changes[-1][1]))
    for op in operators:
        bottom.step([c[0] for c in changes], [c[1].get(op, 0) for c in changes], where="post", label=op)
    bottom.set_ylabel("parallelism")
    bottom.set_xlabel(f"seconds since {t0:%H:%M:%S} UTC")
    bottom.legend(loc="upper left", fontsize=8)
    bottom.grid(alpha=0.3)
    for r in rows:
        if r.rescaled_at is not None:
            for ax in (top, bottom):
                ax.axvline(x(r.rescaled_at), color="tab:red", alpha=0.6)
            top.annotate("rescale", (x(r.rescaled_at), top.get_ylim()[1] * 0.92), color="tab:red", fontsize=8, rotation=90)
    fig.suptitle(f"{title} (grey: warm-up windows spanning a restart)")
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png


def _step(rows: Sequence[EpochRow]) -> float:
    """The usual distance between epoch ends (the policy interval), seconds."""
    gaps = sorted((b.end - a.end).total_seconds() for a, b in itertools.pairwise(rows))
    return gaps[len(gaps) // 2] if gaps else 30.0


def mean_rate(schedule: Sequence[tuple[datetime, float]], t0: datetime, t1: datetime) -> float:
    """The scheduled rate averaged over [t0, t1] (the last entry lasts for ever; nothing before the first)."""
    if not schedule or t1 <= t0:
        return 0.0
    total = 0.0
    for i, (start, rate) in enumerate(schedule):
        end = schedule[i + 1][0] if i + 1 < len(schedule) else t1
        overlap = (min(end, t1) - max(start, t0)).total_seconds()
        total += rate * max(overlap, 0.0)
    return total / (t1 - t0).total_seconds()


def schedule_times(start: datetime, steps: Sequence[tuple[float, float]]) -> list[tuple[datetime, float]]:
    """``[(offset_s, rate), ...]`` from the schedule's start to absolute times."""
    return [(start + timedelta(seconds=s), rate) for s, rate in steps]
