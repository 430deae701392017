"""The tuning DAG of a job with ``tuning.site`` set: ``tune → decide → [approve →] apply``, ``cleanup`` always.

- ``tune`` runs one round (:func:`autoscaler.tuning.round.tune`): every policy interval it reads the forecast and
  runs profiling copies only when a change is forecast; triggered by a person (param ``force``, and ``rate`` to
  tune for a rate of their own) it always runs;
- ``decide`` goes on to ``approve`` (when the job requires approval) or ``apply`` when a configuration other than
  the one in force is recommended and the job is not recommendation-only;
- ``apply`` restarts the job with it through savepoint-and-restart (:mod:`autoscaler.tuning.apply`) in the job's
  one-slot pool, so it never overlaps a rescale of the scaling DAG, and records the outcome in TUNING;
- ``cleanup`` stops any copy of this job a failed or killed round left running (it runs whatever happened).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, DeltaDataIntervalTimetable, Param, task

from autoscaler.config.jobs import JobConfig
from autoscaler.tuning.outcomes import APPLIED, FAILED, RECOMMENDED
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.operators.approval import gate
from ds2_airflow.runtime import epoch_for, journal_dir, safe_run_id, store_root

# The tuning core (scikit-learn among it) is imported by the tasks that run it, never when the DAG file is parsed:
# every task process of every DAG parses it, and the import alone takes about a second.
PREFIX = "ds2__tuning_"  # a job's own DAG id is ds2_<name>, whose name starts with a letter or digit: never this


def tuning_dag_id(job: JobConfig) -> str:
    return PREFIX + job.name.replace("-", "_")


def tuning_dag(job: JobConfig) -> DAG:
    settings = job.tuning
    with DAG(
        dag_id=tuning_dag_id(job),
        description=f"Multi-configuration tuning of Flink job {job.flink_job_name} (profiling copies beside it)",
        schedule=DeltaDataIntervalTimetable(job.interval),
        start_date=job.start_date,
        catchup=False,
        max_active_runs=1,
        default_args={"owner": "ds2", "retries": 0},
        params={
            "force": Param(False, type="boolean", description="Run the round even when no change is forecast."),
            "rate": Param(None, type=["null", "number"], minimum=1, description="Tune for this rate, records/s"),
        },
        tags=["ds2", "tuning", job.name, *job.tags],
        doc_md=__doc__,
    ) as dag:

        @task(task_id="tune", execution_timeout=timedelta(minutes=settings.max_minutes + 5))
        def run_round(**context: Any) -> dict[str, Any]:
            from autoscaler.tuning.round import plan_markdown, tune
            from autoscaler.tuning.site import site_for

            params = context["params"]
            epoch = epoch_for(job, context)
            site = site_for(settings.site)
            assert site is not None  # the DAG exists only for a job with a site
            client = FlinkHook(job.flink_conn_id).get_client()
            result = tune(job, client, store_root(), epoch, site, force=bool(params.get("force")), rate=params.get("rate"))
            context["ti"].xcom_push(key="plan_markdown", value=plan_markdown(result))
            rec = result.recommended
            return {"epoch": epoch, "outcome": result.outcome, "message": result.message,
                    "recommended": rec.configuration.to_dict() if rec else None}  # fmt: skip

        @task.branch(task_id="decide")
        def decide(round_result: dict[str, Any]) -> list[str]:
            if round_result["outcome"] != RECOMMENDED or job.recommendation_only:
                return []
            return ["approve" if job.approval.required else "apply"]

        @task(task_id="apply", pool=job.pool, trigger_rule="none_failed_min_one_success")
        def apply(round_result: dict[str, Any], **context: Any) -> dict[str, Any]:
            from autoscaler.capacity.provider import provider_for
            from autoscaler.tuning.apply import apply_configuration
            from autoscaler.tuning.configuration import Configuration
            from autoscaler.tuning.round import mark_applied

            answer = context["ti"].xcom_pull(task_ids="approve", key="answer") if job.approval.required else None
            epoch = round_result["epoch"]
            new = Configuration.from_dict(round_result["recommended"], "the round's recommendation")
            client = FlinkHook(job.flink_conn_id).get_client()
            provider = provider_for(job.capacity, client.base_url)
            timeouts = {"savepoint_timeout_s": job.savepoint_timeout.total_seconds(),
                        "start_timeout_s": job.start_timeout.total_seconds()}  # fmt: skip
            result = apply_configuration(client, job.deployment, new, f"tune-{safe_run_id(context)}", journal_dir(), provider,
                                         store_root(), job.name, epoch, settings.min_taskmanager_mb, **timeouts)  # fmt: skip
            by = f" (approved by {answer['by']})" if answer and answer.get("by") else ""
            outcome = APPLIED if result.outcome == "succeeded" else FAILED
            mark_applied(store_root(), job.name, epoch, outcome, f"{result.outcome}{by}: {result.message}")
            if outcome == FAILED:
                raise RuntimeError(f"applying {new.key()} to {job.name} {result.outcome}: {result.message}")
            return json.loads(json.dumps(result.to_dict(), default=str))

        @task(task_id="cleanup", trigger_rule="all_done")
        def cleanup(round_result: dict[str, Any] | None = None) -> list[str]:
            from autoscaler.tuning.round import is_copy_of
            from autoscaler.tuning.site import site_for

            site = site_for(settings.site)
            assert site is not None
            stopped = [copy_id for copy_id in site.copies() if is_copy_of(job.name, copy_id)]
            for copy_id in stopped:
                site.stop(copy_id)
            return stopped

        result = run_round()
        branch = decide(result)
        applied = apply(result)
        gate(branch, applied, f"Apply a new configuration to {job.name}?",
             "{{ ti.xcom_pull(task_ids='tune', key='plan_markdown') }}", job.approval)  # fmt: skip
        [result, applied] >> cleanup()
    return dag
