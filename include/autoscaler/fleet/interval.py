"""One policy interval of a fleet: collect, validate, policy and decide for every due job at once.

The per-job DAG runs five task processes and a Spark session per job and epoch; most of a fleet's
cost was that, not the work. Here one process does each stage for all due jobs:

- **collect**: every job's epoch from its boundary snapshots, concurrently (threads: the work is
  waiting on Flink's REST API);
- **validate**: the GX suite of each job in the one process (one GX context, built once);
- **policy**: every decidable job in one Spark query (:mod:`autoscaler.engine.spark.fleet`);
- **decide**: the stability, bound and capacity rules per job (:mod:`autoscaler.decide.rules`).

Each job carries a :class:`JobEpoch` through the stages; a stage that fails for a job sets its
``failed`` and the job skips the rest, while the others go on. Nothing here imports Airflow: the
fleet DAG (``ds2_airflow.fleet``) hands in the Flink clients and the Spark session.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoscaler.capacity.inventory import ClusterView
from autoscaler.collect import prometheus
from autoscaler.collect.flink import collect_epoch_metrics, topology_path
from autoscaler.config.jobs import JobConfig
from autoscaler.decide import history as decide_history
from autoscaler.decide.mechanism_rule import choose_for_plan
from autoscaler.decide.rules import ScalingPlan, decide
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkRestClient, JobNotRunning
from autoscaler.record import audit, outcomes
from autoscaler.store.files import StorePath, store_path, write_text_atomic
from autoscaler.topology import read_topology_csv

log = logging.getLogger(__name__)

COLLECT_THREADS = 16  # concurrent collections: each waits on REST calls, not on this process's CPU


@dataclass
class JobEpoch:
    """One job's epoch as it passes the stages: what each produced, or the stage that failed and why."""

    job: JobConfig
    epoch: int
    collected: dict[str, Any] = field(default_factory=dict)  # window_s, flink_job_id, warmup_reason
    validation: dict[str, Any] = field(default_factory=dict)  # decidable, summary, docs
    plan: ScalingPlan | None = None
    failed: str | None = None  # the stage that failed: collect, validate, policy or decide
    error: str | None = None  # its one-line reason
    held: str | None = None  # why the job is not decided this interval although nothing failed
    failing_over: str | None = None  # how collection found the job failing over (the epoch's outcome is then failing-over)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def alive(self) -> bool:
        return self.failed is None and self.held is None

    def hold(self, reason: str) -> None:
        """Leave the job out of this interval, with the reason (its own run is acting on it, say)."""
        self.held = reason
        log.info("%s epoch %d: not decided: %s", self.name, self.epoch, reason)

    def fail(self, stage: str, error: BaseException | str) -> None:
        self.failed, self.error = stage, (str(error).strip().splitlines() or [type(error).__name__])[0]
        log.warning("%s epoch %d: %s failed: %s", self.name, self.epoch, stage, self.error)

    def verdict(self) -> dict[str, Any]:
        """The job's result for the run's log and XCom."""
        plan = self.plan
        return {"job": self.name, "epoch": self.epoch, "failed": self.failed, "error": self.error, "held": self.held,
                "action": plan.action if plan else None, "summary": plan.summary if plan else None}  # fmt: skip


def validation_config(job: JobConfig, epoch: int, window_s: float | None, store_root: str | Path) -> Any:
    """The job's validation thresholds for one epoch, with the window its collection measured.

    The window is what collection measured between two boundary snapshots: about the policy interval,
    shorter or longer when a run started late. Freshness is checked against the epoch's own interval.
    """
    from autoscaler.validate import ValidationConfig

    topology = read_topology_csv(topology_path(store_root, job.name))
    return dataclasses.replace(
        ValidationConfig.from_mapping(topology, job.validation),
        window_s=window_s or job.interval_s,
        lateness_s=job.lateness_s,
        data_interval=(job.epoch_start(epoch), job.epoch_start(epoch + 1)),
    )


def plan_epoch(
    job: JobConfig,
    epoch: int,
    store_root: str | Path,
    validation: Mapping[str, Any],
    free_slots: int | None,
    validation_note: str | None = None,
    now: datetime | None = None,
    cluster: ClusterView | None = None,
) -> ScalingPlan:
    """The decide stage of one epoch: its stored decisions and the job's history through the rules, then the
    mechanism that moves its state (:mod:`autoscaler.decide.mechanism_rule`).

    ``now``: the time the rules read (cooldown, excluded periods); the clock's by default, the
    simulated one in the lab's simulator. ``cluster``: what the cluster offers in full (it replaces
    ``free_slots``; :class:`autoscaler.capacity.inventory.ClusterView`).
    """
    history = decide_history.epoch_history(store_root, job.name, epoch, job.stability.activation_epochs)
    decidable = bool(history.decisions) and validation.get("decidable", True)
    plan = decide(
        job,
        epoch,
        history.decisions,
        decidable=decidable,
        not_decidable_reason=validation.get("summary", "") if not validation.get("decidable", True) else "",
        last_rescale=history.last_rescale,
        decided_epochs_since_rescale=history.decided_epochs,
        free_slots=free_slots,
        now=now or datetime.now(UTC),
        validation=validation_note,
        key_groups=history.key_groups,
        cluster=cluster,
    )
    return choose_for_plan(plan, job, store_root, cluster)


def collect_all(
    epochs: Iterable[JobEpoch],
    client_for: Callable[[JobConfig], FlinkRestClient],
    store_root: str | Path,
    reader_for: Callable[[JobConfig], prometheus.PrometheusReader] | None = None,
) -> None:
    """Collect every job's epoch concurrently; a job whose Flink cannot be read fails only its own.

    As on the per-job path, a job with ``collect.prometheus_conn_id`` is read from that Prometheus at its
    epoch's boundaries (``reader_for``), every other one from its Flink's REST API (``client_for``).
    """

    def one(item: JobEpoch) -> None:
        job = item.job
        try:
            if job.prometheus_conn_id:
                if reader_for is None:
                    raise InputError("collect.prometheus_conn_id", "this run has no Prometheus reader")
                start, end = job.epoch_start(item.epoch), job.epoch_start(item.epoch + 1)
                rows, window_s, job_id = prometheus.collect_epoch(reader_for(job), job.flink_job_name, job.name, item.epoch,
                                                                  start, end, store_root)  # fmt: skip
                item.collected = {"window_s": window_s, "flink_job_id": job_id, "warmup_reason": None, "rows": rows,
                                  "source": "prometheus"}  # fmt: skip
                return
            result = collect_epoch_metrics(
                client_for(job), job.flink_job_name, job.name, item.epoch, store_root,
                short_window_s=job.short_window.total_seconds(), max_gap_s=job.max_boundary_age_s,
                source_rate_metric=job.source_rate_metric,
            )  # fmt: skip
        except Exception as exc:  # any job's failure is its own verdict
            item.fail("collect", exc)
            item.failing_over = str(exc) if isinstance(exc, JobNotRunning) and exc.failing_over else None
            return
        item.collected = {"window_s": result.window_s, "flink_job_id": result.flink_job_id,
                          "warmup_reason": result.warmup_reason, "rows": result.rows.num_rows}  # fmt: skip
        item.failing_over = result.failing_over

    items = [e for e in epochs if e.alive]
    if not items:
        return
    with ThreadPoolExecutor(max_workers=min(COLLECT_THREADS, len(items)), thread_name_prefix="collect") as pool:
        list(pool.map(one, items))


def validate_all(epochs: Iterable[JobEpoch], store_root: str | Path, docs_dir: Path | None, run_id: str) -> None:
    """Validate every collected epoch in one GX run per group of jobs sharing their thresholds
    (:mod:`autoscaler.validate.fleet`); a failed epoch is quarantined, every verdict recorded."""
    from autoscaler.validate.fleet import validate_fleet_epoch

    items = [item for item in epochs if item.alive]
    configs = {}
    for item in items:
        try:
            configs[item.name] = validation_config(item.job, item.epoch, item.collected.get("window_s"), store_root)
        except Exception as exc:
            item.fail("validate", exc)
    by_epoch: dict[int, list[JobEpoch]] = {}
    for item in items:
        if item.alive:
            by_epoch.setdefault(item.epoch, []).append(item)
    for epoch, group in by_epoch.items():
        try:
            results, errors = validate_fleet_epoch(store_root, epoch, {i.name: configs[i.name] for i in group}, docs_dir, run_id)
        except Exception as exc:  # GX itself failed: every job of the batch is undecided, each says why
            for item in group:
                item.fail("validate", exc)
            continue
        for item in group:
            if item.name in errors:
                item.fail("validate", errors[item.name])
                continue
            result = results[item.name]
            item.validation = {"decidable": result.decidable, "summary": result.summary(), "docs": list(result.docs_pages)}
            if not result.success:
                item.fail("validate", result.summary())


def policy_all(spark: Any, epochs: Iterable[JobEpoch], store_root: str | Path, run_id: str) -> None:
    """Every decidable epoch's policy in one Spark query; each job's decisions committed on its own."""
    from autoscaler.engine.spark.fleet import decide_fleet_epochs
    from autoscaler.engine.spark.run import StoreRun

    due = [e for e in epochs if e.alive and e.validation.get("decidable", True)]
    root = str(store_root)
    runs = [StoreRun(root, e.name, e.epoch, e.epoch, "live", run_id, str(topology_path(root, e.name)), e.job.policy) for e in due]
    if not runs:
        return
    verdicts = decide_fleet_epochs(spark, runs)
    for item in due:
        error = verdicts.get(item.name)
        if error is not None:
            item.fail("policy", error)


def decide_all(
    epochs: Iterable[JobEpoch],
    store_root: str | Path,
    cluster_of: Callable[[JobConfig], ClusterView | None],
    validation_note: Callable[[JobEpoch], str | None] = lambda e: None,
) -> None:
    """The decide rules for every job that got this far (the capacity check reads each job's cluster).

    Jobs on one cluster (one Flink connection) share its free slots: each rescale planned here takes its
    slots from what the next job's capacity check sees, so two jobs are never planned into the same slots.
    Slots a scale-down gives back are not counted: they are free only once that job has restarted.
    """
    taken: dict[str, int] = {}
    for item in epochs:
        if not item.alive:
            continue
        cluster = item.job.flink_conn_id
        try:
            view = cluster_of(item.job)
            if view is not None:
                view = dataclasses.replace(view, reserved=taken.get(cluster, 0))
            item.plan = plan_epoch(item.job, item.epoch, store_root, item.validation, None, validation_note(item),
                                   cluster=view)  # fmt: skip
        except Exception as exc:
            item.fail("decide", exc)
            continue
        taken[cluster] = taken.get(cluster, 0) + item.plan.slots_taken


def record(item: JobEpoch, store_root: str | Path, action_id: str) -> dict[str, Any]:
    """The ACTIONS row of a job the fleet run settles itself: no change, a recommendation, or a failure."""
    plan = item.plan
    message = f"{item.failed} failed: {item.error}" if item.failed else item.held
    run = outcomes.EpochRun(
        action_id=action_id,
        mechanism=(plan.mechanism if plan else None) or item.job.mechanism,
        parallelism=plan.current if plan else {},
        plan_summary=plan.summary if plan else None,
        plan_action=plan.action if plan else None,
        validation_summary=message or item.validation.get("summary"),
        flink_job_id=item.collected.get("flink_job_id"),
        failing_over=item.failing_over,
    )
    row = outcomes.epoch_row(item.name, item.epoch, run)
    audit.record_action(store_root, row)
    return row


def _acting_file(store_root: str | Path, fleet: str) -> StorePath:
    return store_path(store_root, "fleet", f"{fleet}.acting.json")


def jobs_left_acting(store_root: str | Path, fleet: str) -> set[str]:
    """The jobs the fleet's previous run started an action run for, or held because one was running."""
    try:
        return set(json.loads(_acting_file(store_root, fleet).read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return set()


def leave_acting(store_root: str | Path, fleet: str, jobs: Iterable[str]) -> None:
    """Record the jobs this run leaves acting, for the next run (written whole: a crash keeps the last list)."""
    write_text_atomic(_acting_file(store_root, fleet), json.dumps(sorted(jobs)))
