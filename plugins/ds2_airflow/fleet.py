"""The fleet DAG: one run per policy interval decides every batched job of that interval at once.

``decide_jobs → act[job] → verdicts``:

- ``decide_jobs`` runs :mod:`autoscaler.fleet.interval` for every due job: collect (concurrently),
  validate, the policy in one Spark query, the decide rules. Jobs with nothing to do (no change, a
  recommendation, a held proposal) and jobs that failed a stage are recorded here, in the audit
  trail, with their metrics and alerts.
- ``act`` starts, per job whose plan is a rescale, a run of the job's own DAG (a mapped task instance
  named by the job): it approves (when the job requires it), rescales and records, with the job's
  pool, retries and journal. The run id is ``fleet__<epoch>``: an epoch is acted on once, however
  often this run is retried.
- ``verdicts`` fails the run when any job failed a stage (the others were decided and acted on).

Why per-job runs and not mapped rescale tasks here: a job's approval gate, its one-slot pool, its
rescale retries and its record already live in its DAG, and a person finds a job's history there.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, BaseHook, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from autoscaler.capacity.inventory import ClusterView
from autoscaler.collect.prometheus import PrometheusReader
from autoscaler.config.jobs import JobConfig
from autoscaler.config.sections import CapacitySettings
from autoscaler.decide.rules import RESCALE
from autoscaler.fleet import interval
from autoscaler.flink.client import FlinkConnection, FlinkRestClient
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.hooks.prometheus import PrometheusHook
from ds2_airflow.runtime import FLEET_RUN, docs_dir, docs_link, interval_end, safe_run_id, store_root
from ds2_airflow.scaling import cluster_of, metrics_and_alerts
from ds2_airflow.timetable import LateRunsTimetable

log = logging.getLogger(__name__)


def _prometheus_readers(due: list[interval.JobEpoch]) -> dict[str, PrometheusReader]:
    """Each Prometheus connection the due jobs collect from once (collect.prometheus_conn_id), as _connections."""
    found: dict[str, PrometheusReader] = {}
    for item in due:
        conn_id = item.job.prometheus_conn_id
        if not conn_id or conn_id in found or not item.alive:
            continue
        try:
            found[conn_id] = PrometheusHook(conn_id).get_reader()
        except Exception as exc:
            for other in due:
                if other.job.prometheus_conn_id == conn_id:
                    other.fail("collect", f"Prometheus connection {conn_id!r}: {exc}")
    return found


def _connections(due: list[interval.JobEpoch]) -> dict[str, FlinkConnection]:
    """Each Flink connection once, read in the task's own thread (the collectors' threads only use them)."""
    found: dict[str, FlinkConnection] = {}
    for item in due:
        conn_id = item.job.flink_conn_id
        if conn_id in found:
            continue
        try:
            found[conn_id] = FlinkHook(conn_id).connection()
        except Exception as exc:  # a missing or bad connection fails the jobs that use it
            for other in due:
                if other.job.flink_conn_id == conn_id:
                    other.fail("collect", f"Flink connection {conn_id!r}: {exc}")
    return found


def _spark(conn_id: str) -> Any:
    from autoscaler.engine.spark import engine

    conn = BaseHook.get_connection(conn_id)
    if conn.conn_type != SparkConnectHook.conn_type:
        raise AirflowFailException(f"connection {conn_id!r}: a fleet run needs a spark_connect connection, not {conn.conn_type}")
    url = SparkConnectHook(conn_id).get_connection_url()
    try:
        return engine.connect(url, what=conn_id)
    except (engine.EngineUnavailable, ValueError) as exc:
        raise AirflowException(str(exc)) from None  # the task's retry runs the interval again


def decide_jobs_task(members: list[JobConfig], context: Any) -> list[dict[str, Any]]:
    """Collect, validate, decide every due member's epoch; record the ones settled here; the runs to start."""
    epoch = members[0].epoch_of(interval_end(context))
    run_id, root = safe_run_id(context), store_root()
    due = [interval.JobEpoch(job, epoch) for job in members if job.epoch_start(epoch) >= job.start_date]
    ti = context["ti"]
    timings: dict[str, float] = {}
    started = time.monotonic()
    # A job whose own run is approving or rescaling is not measured meanwhile (its window would span the
    # restart): the per-job path's max_active_runs=1 gives the same, by queueing the epoch behind it. Only
    # the jobs the previous fleet run left acting are asked about (one scheduler call each).
    acting = interval.jobs_left_acting(root, ti.dag_id)
    for item in due:
        if item.name in acting and ti.get_dr_count(dag_id=item.job.dag_id, states=["queued", "running"]):
            item.hold(f"its DAG {item.job.dag_id} has a run approving or rescaling it; the epoch is not measured")
    connections, readers = _connections(due), _prometheus_readers(due)
    interval.collect_all(due, lambda job: FlinkRestClient(connections[job.flink_conn_id]), root,
                         lambda job: readers[job.prometheus_conn_id])  # fmt: skip
    timings["collect"] = time.monotonic() - started
    interval.validate_all(due, root, docs_dir(), run_id)
    timings["validate"] = time.monotonic() - started - sum(timings.values())
    if any(item.alive for item in due):
        spark = _spark(members[0].spark_conn_id)
        try:
            interval.policy_all(spark, due, root, run_id)
        finally:
            spark.stop()
    timings["policy"] = time.monotonic() - started - sum(timings.values())
    clusters: dict[tuple[str, CapacitySettings], ClusterView | None] = {}

    def cluster(job: JobConfig) -> ClusterView | None:
        """Read once per cluster (and per capacity setting: the limits are the job's)."""
        key = (job.flink_conn_id, job.capacity)
        if key not in clusters:
            clusters[key] = cluster_of(job)
        return clusters[key]

    def note(item: interval.JobEpoch) -> str | None:
        docs = item.validation.get("docs") or []
        return (item.validation.get("summary", "") + (f" — [Data Docs]({docs_link(docs[0])})" if docs else "")) or None

    interval.decide_all(due, root, cluster, note)
    timings["decide"] = time.monotonic() - started - sum(timings.values())
    to_act: list[dict[str, Any]] = []
    for item in due:
        job = item.job
        if item.alive and item.plan is not None and item.plan.action == RESCALE:
            to_act.append({
                "trigger_dag_id": job.dag_id,
                "trigger_run_id": f"fleet__{epoch}",
                "run_after": job.epoch_start(epoch + 1).isoformat(),
                "conf": {FLEET_RUN: run_id, "epoch": epoch, "collected": item.collected, "validation": item.validation},
            })  # fmt: skip
            log.info("%s epoch %d: %s -> its DAG %s acts", job.name, epoch, item.plan.summary, job.dag_id)
            continue
        row = interval.record(item, root, f"{run_id}.{job.name}")
        metrics_and_alerts(job, epoch, row["outcome"], context)
        log.info("%s epoch %d: %s — %s", job.name, epoch, row["outcome"], row["message"])
    timings["record"] = time.monotonic() - started - sum(timings.values())
    ti.xcom_push(key="verdicts", value=[item.verdict() for item in due])
    started_runs = {i.name for i in due if i.alive and i.plan is not None and i.plan.action == RESCALE}
    interval.leave_acting(root, ti.dag_id, started_runs | {i.name for i in due if i.held})
    log.info("seconds per stage for %d jobs: %s", len(due), ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    log.info("epoch %d: %d jobs due, %d decided, %d held, %d to act on, %d failed", epoch, len(due),
             sum(1 for i in due if i.plan), sum(1 for i in due if i.held), len(to_act),
             sum(1 for i in due if i.failed))  # fmt: skip
    return to_act


def verdicts_task(context: Any) -> dict[str, Any]:
    verdicts = context["ti"].xcom_pull(task_ids="decide_jobs", key="verdicts")
    if verdicts is None:
        raise AirflowFailException("decide_jobs did not finish: no job of this interval was decided (see its log)")
    failed = [v for v in verdicts if v["failed"]]
    for v in failed:
        log.error("%s epoch %s: %s failed: %s", v["job"], v["epoch"], v["failed"], v["error"])
    if failed:
        names = ", ".join(f"{v['job']} ({v['failed']})" for v in failed)
        raise AirflowFailException(f"{len(failed)} of {len(verdicts)} jobs failed: {names}; the others were decided")
    return {"jobs": len(verdicts)}


def fleet_dag(dag_id: str, members: list[JobConfig]) -> DAG:
    first = members[0]
    names = ", ".join(job.name for job in members)
    with DAG(
        dag_id=dag_id,
        description=f"Every {first.interval}: collect, validate and decide {len(members)} batched jobs at once",
        schedule=LateRunsTimetable(first.interval, max(job.max_late_epochs for job in members)),
        start_date=min(job.start_date for job in members),
        catchup=False,
        max_active_runs=1,
        default_args={"owner": "ds2", "retries": 1, "retry_delay": timedelta(seconds=10)},
        dagrun_timeout=max(first.interval * 10, timedelta(minutes=30)),
        tags=["ds2", "fleet"],
        doc_md=__doc__ + f"\n\nJobs: {names}. Spark connection: `{first.spark_conn_id}`.",
    ) as dag:

        @task(task_id="decide_jobs", execution_timeout=first.interval * 5 + timedelta(minutes=5))
        def decide_jobs(**context: Any) -> list[dict[str, Any]]:
            return decide_jobs_task(members, context)

        decided = decide_jobs()
        act = TriggerDagRunOperator.partial(
            task_id="act", skip_when_already_exists=True, map_index_template="{{ task.trigger_dag_id }}", retries=2
        ).expand_kwargs(decided)

        @task(task_id="verdicts", trigger_rule="all_done", retries=0)
        def verdicts(**context: Any) -> dict[str, Any]:
            return verdicts_task(context)

        act >> verdicts()
    return dag


def fleets(jobs: list[JobConfig]) -> dict[str, list[JobConfig]]:
    """The batched jobs grouped by their fleet DAG (one per interval and Spark connection)."""
    groups: dict[str, list[JobConfig]] = {}
    for job in jobs:
        if job.batched:
            groups.setdefault(job.fleet_dag_id, []).append(job)
    return groups
