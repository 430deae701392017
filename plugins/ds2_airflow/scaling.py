"""The bodies of a job DAG's Python tasks: validate, decide, record (and the what-if comparison).

Each gathers its inputs from the run (XComs, the store, Flink) and delegates to the core:
:mod:`autoscaler.validate`, :mod:`autoscaler.decide.rules`, :mod:`autoscaler.record.audit`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from autoscaler.capacity.inventory import ClusterView, Inventory
from autoscaler.capacity.provider import cluster_view, last_rescale_end, provider_for, release_idle
from autoscaler.config.jobs import JobConfig, config_path, find_job
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.config.sections import Stability
from autoscaler.decide.replay import replay
from autoscaler.decide.rules import RESCALE, ScalingPlan
from autoscaler.fleet.interval import plan_epoch, validation_config
from autoscaler.observe.alerts import epoch_alerts, views_needed
from autoscaler.observe.metrics import epoch_samples
from autoscaler.observe.views import job_view
from autoscaler.record import audit, outcomes
from autoscaler.store.parquet import read_epochs
from autoscaler.store.schemas import DECISIONS
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.metrics import emit
from ds2_airflow.notifiers import send_alerts
from ds2_airflow.runtime import (
    BACKFILL,
    FLEET_RUN,
    LIVE,
    docs_dir,
    docs_link,
    epoch_for,
    fleet_handoff,
    run_type,
    safe_run_id,
    store_root,
)

log = logging.getLogger(__name__)


def validate_epoch_task(job: JobConfig, context: Any) -> dict[str, Any]:
    """Validate the collected epoch with the GX suite; a failure stops the run (data quarantined)."""
    from autoscaler.validate import validate_epoch

    handoff = fleet_handoff(context)
    if handoff:
        log.info("epoch %s was validated by fleet run %s", handoff["epoch"], handoff[FLEET_RUN])
        return dict(handoff.get("validation") or {})
    epoch = epoch_for(job, context)
    collected = context["ti"].xcom_pull(task_ids="collect") or {}
    config = validation_config(job, epoch, collected.get("window_s"), store_root())
    result = validate_epoch(store_root(), job.name, epoch, config, docs_dir=docs_dir(), run_id=safe_run_id(context))
    log.info("%s", result.message())
    result.raise_for_failure()
    return {"decidable": result.decidable, "summary": result.summary(), "docs": list(result.docs_pages)}


def cluster_of(job: JobConfig) -> ClusterView | None:
    """What the job's cluster offers (TaskManagers, cores, scheduler); None skips the capacity check, never the decision."""
    try:
        return cluster_view(FlinkHook(job.flink_conn_id).get_client(), job.capacity)
    except Exception as exc:
        log.warning("capacity check skipped: cannot read the cluster's TaskManagers (%s)", exc)
        return None


def release_idle_capacity(job: JobConfig, epoch: int) -> None:
    """Give back the TaskManagers the provider added that have been idle since the last rescale (recorded)."""
    if job.capacity.provider == "none":
        return
    try:
        client = FlinkHook(job.flink_conn_id).get_client()
        provider = provider_for(job.capacity, client.base_url)
        if provider is None:
            return
        # Only a rescale that ended within release_after matters: the epochs that span it, and the late ones.
        back = math.ceil(job.capacity.release_after.total_seconds() / job.interval_s) + job.max_late_epochs + 2
        ended = last_rescale_end(store_root(), job.name, range(max(0, epoch - back), epoch + 1))
        done = release_idle(provider, Inventory.from_rest(client.get("/taskmanagers")), store_root(), job.name, epoch,
                            ended, job.capacity.release_after, datetime.now(UTC))  # fmt: skip
    except Exception as exc:  # the epoch's audit row is committed: a release tried again next epoch costs nothing
        log.warning("capacity: idle TaskManagers not released this epoch: %s", exc)
        return
    if done:
        log.info("capacity: %s", done)


def decide_task(job: JobConfig, context: Any) -> list[str]:
    """Turn the epoch's DS2 decisions into a plan; branch to approve/rescale or straight to record."""
    ti = context["ti"]
    epoch = epoch_for(job, context)
    kind = run_type(context)
    validation = ti.xcom_pull(task_ids="validate") or {}
    docs = validation.get("docs") or []
    cluster = cluster_of(job) if kind == LIVE else None
    plan = plan_epoch(
        job,
        epoch,
        store_root(),
        validation,
        None,
        (validation.get("summary", "") + (f" — [Data Docs]({docs_link(docs[0])})" if docs else "")) or None,
        cluster=cluster,
    )
    for line in plan.log_lines():
        log.info("%s", line)
    ti.xcom_push(key="plan", value=plan.to_dict())
    ti.xcom_push(key="target", value=plan.target)
    ti.xcom_push(key="measured", value=plan.current)  # the rescale leaves alone a job someone else rescaled since
    ti.xcom_push(key="plan_markdown", value=plan.markdown())
    ti.xcom_push(key="mechanism", value=plan.mechanism or job.mechanism)
    ti.xcom_push(key="capacity", value={"job": job.name, "epoch": epoch, "add_taskmanagers": plan.add_taskmanagers})
    if kind == BACKFILL:
        return []  # a backfill recomputes decisions; it never approves, rescales or records actions
    if plan.action != RESCALE:
        return ["record"]
    return ["approve" if job.approval.required else "rescale", "record"]


def _failed_tasks(context: Any) -> list[str]:
    """Tasks of this run that failed themselves (not those skipped because an upstream task failed)."""
    ti = context["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id]).get(ti.run_id, {})
    return sorted(t for t, s in states.items() if s == "failed" and t != ti.task_id)


def metrics_and_alerts(job: JobConfig, epoch: int, outcome: str, context: Any) -> None:
    """The epoch's metrics and alerts, from what the store now holds (autoscaler.observe.metrics and .alerts)."""
    try:
        # Enough epochs for the alerts, and for a rescale recorded under an earlier epoch that ran late.
        needed = views_needed(job.alerts.quarantined_epochs, job.alerts.failover_epochs)
        back = max(needed, job.max_late_epochs + 2)
        views = job_view(store_root(), job.name, job.interval_s, epoch - back + 1, epoch)
    except Exception as exc:  # the audit row is committed; a store read that fails costs only these
        log.warning("metrics and alerts of epoch %d not sent: %s", epoch, exc)
        return
    emit(epoch_samples(job.name, views, outcome))
    alerts = epoch_alerts(job.name, views[-needed:], job.alerts.quarantined_epochs, job.alerts.failover_epochs)
    send_alerts(alerts, job.alerts, context)


def record_task(job: JobConfig, context: Any) -> dict[str, Any]:
    """Write the epoch's ACTIONS row (the audit trail) and fail the run if anything went wrong."""
    ti = context["ti"]
    if run_type(context) == BACKFILL:
        raise AirflowSkipException("backfill run: no action to record")
    epoch = epoch_for(job, context)
    plan_data = ti.xcom_pull(task_ids="decide", key="plan")
    plan = ScalingPlan.from_dict(plan_data) if plan_data else None
    collected = ti.xcom_pull(task_ids="collect") or {}
    run = outcomes.EpochRun(
        action_id=f"{safe_run_id(context)}.{job.name}",
        mechanism=(plan.mechanism if plan else None) or job.mechanism,
        parallelism=plan.current if plan else {},
        plan_summary=plan.summary if plan else None,
        plan_action=plan.action if plan else None,
        answer=ti.xcom_pull(task_ids="approve", key="answer") if job.approval.required else None,
        rescaled=ti.xcom_pull(task_ids="rescale"),
        failed_tasks=_failed_tasks(context),
        validation_summary=(ti.xcom_pull(task_ids="validate") or {}).get("summary"),
        flink_job_id=collected.get("flink_job_id"),
        failing_over=ti.xcom_pull(task_ids="collect", key="failing_over") or collected.get("failing_over"),
    )
    row = outcomes.epoch_row(job.name, epoch, run, lambda: audit.validation_summary(store_root(), job.name, epoch))
    audit.record_action(store_root(), row)
    release_idle_capacity(job, epoch)
    metrics_and_alerts(job, epoch, row["outcome"], context)
    log.info(
        "action %s epoch %d: %s — %s (approved by %s, downtime %s s)",
        row["action_id"], epoch, row["outcome"], row["message"], row["approved_by"], row["downtime_s"],
    )  # fmt: skip
    if outcomes.run_fails(row, run):
        raise AirflowFailException(f"epoch {epoch}: {row['outcome']}: {row['message']}")
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}


def replayed_stability(job: JobConfig, overrides: dict[str, Any]) -> Stability:
    """The job's decide-rule options with a what-if's overrides (cooldown given in seconds)."""
    values = {k: timedelta(seconds=float(v)) if k == "cooldown" else int(v) for k, v in overrides.items()}
    return dataclasses.replace(job.stability, **values)


def what_if_compare_task(context: Any) -> dict[str, Any]:
    """Set the what-if decisions beside the live ones: where they differ, and how often each would rescale."""
    run = context["ti"].xcom_pull(task_ids="what_if_policy")
    job = find_job(run["job"], config_path())
    epochs = range(run["from_epoch"], run["to_epoch"] + 1)
    live = {(r["epoch"], r["operator_name"]): r for r in read_epochs(store_root(), DECISIONS, job.name, epochs).to_pylist()}
    what_if = read_epochs(run["decisions_store"], DECISIONS, job.name, epochs).to_pylist()

    def proposes_change(rows: list[dict[str, Any]]) -> int:
        return len({r["epoch"] for r in rows if not r["is_source"] and r["target_parallelism"] != r["current_parallelism"]})

    differ = []
    for row in what_if:
        before = live.get((row["epoch"], row["operator_name"]))
        if before is None or before["target_parallelism"] != row["target_parallelism"]:
            was = before["target_parallelism"] if before else "–"
            differ.append(f"  epoch {row['epoch']} {row['operator_name']}: live {was} -> what-if {row['target_parallelism']}")
    # The whole chain: each set of decisions through the decide rules, as the live DAG would have acted.
    what_if_job = dataclasses.replace(job, policy=PolicyOptions.from_json(run["options"]),
                                      stability=replayed_stability(job, run.get("stability") or {}))  # fmt: skip
    chain_live, chain_what_if = replay(job, live.values()), replay(what_if_job, what_if)
    summary = {
        "epochs": len({r["epoch"] for r in what_if}),
        "live_change_epochs": proposes_change(list(live.values())),
        "what_if_change_epochs": proposes_change(what_if),
        "live_rescales": len(chain_live.rescales),
        "what_if_rescales": len(chain_what_if.rescales),
        "differences": len(differ),
        "options": run["options"],
        "stability": run.get("stability") or {},
        "decisions_store": run["decisions_store"],
    }
    log.info(
        "what-if over epochs %d..%d (%d with metrics): live proposes a change in %d epochs, what-if in %d; %d decisions differ",
        run["from_epoch"], run["to_epoch"], summary["epochs"], summary["live_change_epochs"],
        summary["what_if_change_epochs"], summary["differences"],
    )  # fmt: skip
    log.info("through the decide rules (open loop, see autoscaler.decide.replay): live %s", chain_live.summary())
    log.info("through the decide rules (open loop): what-if %s", chain_what_if.summary())
    for line in differ[:200]:
        log.info("%s", line)
    return summary
