"""The closed loop, simulated: the production collect, policy, decide and record code against the job model.

Each epoch goes through the code the DAG runs, unchanged, in the same order:

1. **collect**: the boundary snapshot is taken late by a measured delay, from counters up to the
   metric store's refresh old; the collector's :func:`~autoscaler.collect.snapshot.window_metrics`
   turns the epoch's two snapshots into its METRICS rows (a window across a restart is a warm-up);
2. **validate**: a warm-up window is valid but not decidable (the suite's ``no_warmup`` warning). The
   Great Expectations suite itself does not run: the model's rows are well-formed by construction;
3. **policy**: the kind's own function over the operator windows
   (:func:`~autoscaler.engine.windows.operator_windows`, then
   :func:`~autoscaler.engine.spark.decisions.decide_job`, what each Spark task runs), with its
   history, and the restart time measured on the job's own rescales as a policy run reads it;
4. **decide**: :func:`~autoscaler.fleet.interval.plan_epoch`, the rules with the history they read
   from the store, at the simulated time;
5. **rescale**: a decided rescale stops the job a measured decision latency after the epoch's end,
   and starts it again at the new parallelism after a downtime drawn from the measured ones;
6. **record**: the ACTIONS row, from which the next epochs' rules read the last rescale.

The store is a :class:`~autoscaler.store.memory.MemoryStore` behind the store's own functions, so
the run is judged by the real lab's code too (:func:`autoscaler.record.loop_report.epoch_rows`,
:func:`autoscaler.lab.result.lab_result`). Deterministic per seed: the timings are drawn from one
``random.Random(seed)``, and the load's noise from the scenario's own seed.
"""

from __future__ import annotations

import bisect
import inspect
import json
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from autoscaler.collect.snapshot import Snapshot, window_metrics
from autoscaler.config.jobs import JobConfig, parse_jobs
from autoscaler.decide.rules import RESCALE, ScalingPlan
from autoscaler.lab.ground_truth import GroundTruth
from autoscaler.lab.result import lab_result
from autoscaler.lab.scenario import Scenario, job_settings
from autoscaler.lab.sim.calibration import Calibration
from autoscaler.lab.sim.job import EDGES, SOURCE, JobModel, operator_models, source_capacity
from autoscaler.policy import base as policy_base

try:  # a replay of an older commit runs the engine code it had beside its policy (fidelity's hybrid trees)
    from autoscaler.policy.spark import run as policy_run  # type: ignore[no-redef]
    from autoscaler.policy.spark.decisions import RunInfo, decide_job  # type: ignore[no-redef]
    from autoscaler.policy.windows import operator_windows  # type: ignore[no-redef]
except ImportError:  # today's tree: the engine is its own stage
    from autoscaler.engine.spark import run as policy_run
    from autoscaler.engine.spark.decisions import RunInfo, decide_job
    from autoscaler.engine.windows import operator_windows
from autoscaler.record.loop_report import EpochRow, epoch_rows
from autoscaler.store.memory import MemoryStore
from autoscaler.store.parquet import epoch_block, write_epochs
from autoscaler.store.schemas import ACTIONS, DECISIONS, METRICS, NOOP, SUCCEEDED
from autoscaler.testjob import PARALLELISM_ARGS

try:
    from autoscaler.engine.spark.decisions import windows_by_epoch
except ImportError:  # an engine from before 2026-12-02 builds every epoch's history from the table each time
    windows_by_epoch = None  # type: ignore[assignment]
# Whether the engine takes earlier epochs' windows ready built (the same decisions: a test pins the two forms).
HISTORY_BUILT = windows_by_epoch is not None and "history" in inspect.signature(decide_job).parameters

START = datetime(2026, 1, 1, tzinfo=UTC)  # the first epoch's start (a boundary of every interval that divides a day)
RUN = RunInfo("lab-sim", "simulated", START)
CLUSTER_SLOTS = 16  # the lab cluster's task slots for one job (FLINK_SLOTS = 8 x (jobs + 1)): never binding


@dataclass
class Simulated:
    """One simulated run: its epochs as the loop report reads them, its figures, and its store."""

    scenario: Scenario
    kind: str
    seed: int
    rows: list[EpochRow]
    result: dict[str, Any]
    store: MemoryStore
    job: JobConfig


def sim_job(scenario: Scenario, kind: str, policy: Mapping[str, Any] | None = None) -> JobConfig:
    """The lab's job entry (:func:`~autoscaler.lab.scenario.job_settings`), with ``policy`` keys set on top."""
    settings = job_settings(scenario, kind)
    settings["policy"].update(policy or {})
    entry = {"name": f"sim-{scenario.name}"[:120], "flink_job_name": f"sim-{scenario.name}", "jar": "build/ds2-testjob.jar",
             "parallelism_args": PARALLELISM_ARGS, "savepoint_dir": "file:///nonexistent/savepoints", **settings,
             "start_date": START.isoformat()}  # fmt: skip
    return parse_jobs({"version": 1, "jobs": [entry]}, f"simulated job of {scenario.name}")[0]


class _Clock:
    """Advances the model through the load's steps and the pending restart, never past an event."""

    def __init__(self, model: JobModel, steps: list[tuple[float, float]]) -> None:
        self.model, self.t = model, 0.0
        self.times, self.rates = [t for t, _ in steps], [r for _, r in steps]
        self.restart: tuple[float, dict[str, int]] | None = None

    def rate(self, t: float) -> float:
        return float(self.rates[max(bisect.bisect_right(self.times, t) - 1, 0)])

    def run_to(self, target: float) -> None:
        while self.t < target - 1e-9:
            k = bisect.bisect_right(self.times, self.t)
            nxt = min(target, self.times[k] if k < len(self.times) else target)  # the model solves a constant load exactly
            if self.restart and self.restart[0] < nxt:
                nxt = max(self.restart[0], self.t)
            self.model.advance(nxt - self.t, self.rate(self.t))
            self.t = nxt
            if self.restart and self.restart[0] <= self.t + 1e-9:
                self.model.start(self.restart[1])
                self.restart = None


def simulate(
    scenario: Scenario,
    kind: str,
    truth: GroundTruth,
    calibration: Calibration,
    seed: int = 1,
    policy: Mapping[str, Any] | None = None,
    judge: GroundTruth | None = None,
    script: Mapping[int, tuple[Mapping[str, int], float]] | None = None,
) -> Simulated:
    """One closed-loop run of ``kind`` on ``scenario``; ``judge``: the truth its figures are measured against
    (default ``truth``, the curves the model runs on); ``policy``: option keys over the lab job's.

    ``script``: an open loop. The policy and the rules still run and are recorded, but the rescales are
    these, by the epoch's index in the run: (new parallelism by operator, downtime s); no other epoch acts.
    """
    job = sim_job(scenario, kind, policy)
    rng = random.Random(seed)
    interval = scenario.interval_s
    model = JobModel(scenario, operator_models(scenario, truth), source_capacity(truth),
                     {SOURCE: scenario.source_parallelism, **{op: scenario.initial_parallelism.get(op, 1)
                                                               for op in PARALLELISM_ARGS}})  # fmt: skip
    clock = _Clock(model, scenario.rate_steps())
    store = MemoryStore()
    topology = Snapshot(job.name, model.job_id, START, model.vertices(), EDGES, ()).topology()
    depth = policy_base.history_epochs(job.policy)
    first = job.epoch_of(START + timedelta(seconds=interval))
    epochs = range(first, first + int(scenario.duration_s // interval))
    previous = _snapshot(job, model, START)
    recent: deque[pa.Table] = deque(maxlen=depth + 1)  # the epochs the policy reads, as tables (older engines)
    built: deque[tuple[int, dict[str, Any]]] = deque(maxlen=depth)  # or as windows, each epoch's built once
    for k, epoch in enumerate(epochs):
        boundary = (k + 1) * interval
        taken = boundary + rng.choice(calibration.snapshot_delays_s)
        clock.run_to(max(taken - rng.uniform(0.0, calibration.sample_age_s), clock.t))
        while not model.running:  # a snapshot waits for the job to run again
            clock.run_to(clock.restart[0] if clock.restart else clock.t + 1.0)
            taken = max(taken, clock.t)
        current = _snapshot(job, model, START + timedelta(seconds=taken))
        rows = window_metrics(previous, current, job.name, epoch)
        previous = current
        write_epochs(store, METRICS, job.name, rows)
        windows = operator_windows(rows)
        recent.append(windows)
        decided_at = taken + calibration.decision_latency_s
        clock.run_to(decided_at)
        options = _run_options(job, store, topology, epoch)
        if HISTORY_BUILT:
            decisions = decide_job(windows, topology, options, RUN, {}, epoch, history=dict(built))
            built.extend(windows_by_epoch(windows).items())
        else:
            decisions = decide_job(pa.concat_tables(recent), topology, options, RUN, {}, epoch)
        decisions = decisions.drop_columns(["op_index"])
        write_epochs(store, DECISIONS, job.name, decisions)
        warmup = any(rows.column("warmup").to_pylist())
        validation = {"decidable": not warmup, "summary": "metrics valid but not decidable (no_warmup)" if warmup else "passed"}
        now = START + timedelta(seconds=decided_at)
        plan = _plan(job, epoch, store, validation, CLUSTER_SLOTS - max(model.parallelism.values()), now)
        forced = None if script is None else script.get(k, ({}, 0.0))
        row = _action(job, epoch, plan, model, now, rng, calibration, clock, forced)
        # Built in the table's full schema, as a collector's or a policy's rows are: the store then checks it, not casts it.
        actions = pa.Table.from_pylist([{**row, "epoch_block": epoch_block(epoch)}], schema=ACTIONS.arrow_schema())
        write_epochs(store, ACTIONS, job.name, actions)
    rows_out = epoch_rows(store, job.name, epochs, interval)
    result = lab_result(rows_out, scenario, judge or truth, START, kind)
    return Simulated(scenario, kind, seed, rows_out, result, store, job)


def _plan(
    job: JobConfig, epoch: int, store: MemoryStore, validation: dict[str, Any], free_slots: int, now: datetime
) -> ScalingPlan:
    """The decide stage: :func:`autoscaler.fleet.interval.plan_epoch`. A policy version from before the fleet
    (2026-11-25) has none; its DAG's decide task made the same two calls, made here."""
    try:
        from autoscaler.fleet.interval import plan_epoch
    except ImportError:
        from autoscaler.decide.history import epoch_history
        from autoscaler.decide.rules import decide

        history = epoch_history(store, job.name, epoch, job.stability.activation_epochs)
        return decide(job, epoch, history.decisions, decidable=bool(history.decisions) and validation["decidable"],
                      not_decidable_reason="" if validation["decidable"] else validation["summary"],
                      last_rescale=history.last_rescale, decided_epochs_since_rescale=history.decided_epochs,
                      free_slots=free_slots, now=now)  # fmt: skip
    return plan_epoch(job, epoch, store, validation, free_slots, now=now)


def _run_options(job: JobConfig, store: MemoryStore, topology: Any, epoch: int) -> Any:
    """The options a policy run of ``epoch`` reads: the job's, by operator id, with the restart time measured
    on the job's own rescales (:func:`autoscaler.engine.spark.run.run_options`; a policy version from
    before that function did the same inline, when its kind sized for a measured restart)."""
    if hasattr(policy_run, "run_options"):
        fields = policy_run.StoreRun.__dataclass_fields__
        values = {"store": store, "job": job.name, "from_epoch": epoch, "to_epoch": epoch, "run_type": RUN.run_type,
                  "run_id": RUN.run_id, "topology_path": "", "options": job.policy}  # fmt: skip
        return policy_run.run_options(policy_run.StoreRun(**{k: v for k, v in values.items() if k in fields}), topology)
    options = job.policy.resolved(topology)
    sizes = getattr(policy_base, "sizes_for_measured_restarts", None)
    if sizes is None or options.restart_time is not None or not sizes(options.kind):
        return options
    from autoscaler.policy.restarts import measured_restart_time

    measured = measured_restart_time(store, job.name, epoch)
    return replace(options, restart_time=measured) if measured is not None else options


def _snapshot(job: JobConfig, model: JobModel, at: datetime) -> Snapshot:
    return Snapshot(job.name, model.job_id, at, model.vertices(), EDGES, tuple(model.subtask_counters()))


Forced = tuple[Mapping[str, int], float]  # an open loop's rescale: new parallelism, downtime s


def _action(job: JobConfig, epoch: int, plan: ScalingPlan, model: JobModel, now: datetime, rng: random.Random,
            calibration: Calibration, clock: _Clock, forced: Forced | None) -> dict[str, Any]:  # fmt: skip
    """The epoch's ACTIONS row; a rescale stops the model now and schedules its restart.

    ``forced``: the open loop's (target, downtime) for this epoch instead of the plan's ({}: no rescale).
    """
    current = {op: p for op, p in model.parallelism.items() if op != SOURCE}
    target = dict(plan.target) if forced is None else dict(forced[0])
    mechanism = getattr(plan, "mechanism", None) or job.mechanism  # a replayed decide from before issue 44 chose none
    row = {"job": job.name, "epoch": epoch, "action_id": f"sim-{epoch}", "mechanism": mechanism,
           "approved_by": None,
           "old_flink_job_id": model.job_id, "new_flink_job_id": model.job_id,
           "old_parallelism": json.dumps(current, sort_keys=True), "new_parallelism": json.dumps(current, sort_keys=True),
           "savepoint_path": None, "downtime_s": None, "outcome": NOOP, "message": plan.summary, "started_at": now,
           "finished_at": now}  # fmt: skip
    if (plan.action != RESCALE and forced is None) or (forced is not None and not target):
        return row
    downtime = rng.choice(calibration.downtimes_s) if forced is None else forced[1]
    model.stop()
    clock.restart = (clock.t + downtime, target)
    return {
        **row,
        "new_flink_job_id": f"{model.job_number + 1:032x}",
        "new_parallelism": json.dumps(target, sort_keys=True),
        "downtime_s": downtime,
        "outcome": SUCCEEDED,
        "finished_at": now + timedelta(seconds=downtime),
    }
