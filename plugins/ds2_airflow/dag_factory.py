"""One scaling DAG per registered job (and a what-if DAG beside it), built from the jobs config.

``collect → validate → policy → decide → [approve →] rescale → record``, every policy interval:

- ``collect`` measures the epoch that just ended from Flink's counters (skipped by backfills);
- ``validate`` runs the GX suite; failing metrics are quarantined and the run fails (no decision);
- ``policy`` runs the DS2 Spark job through the job's Spark connection (one application for a
  whole backfill);
- ``decide`` applies warm-up, activation, hysteresis, cooldown, bounds and capacity and branches:
  to ``record`` when nothing changes, else to ``approve`` (when required) or ``rescale``;
- ``approve`` waits for a person (Approve/Reject) with the decision table as its body;
- ``rescale`` applies the plan through Flink (savepoint-and-restart, deferred, or in place);
- ``record`` writes the audit row, whatever happened, and fails the run if anything failed.

``max_active_runs=1`` and a one-slot pool per job keep two rescales of a job from overlapping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, DeltaDataIntervalTimetable, Param, task

from autoscaler.config import options as opt
from autoscaler.config.jobs import (
    BOUNDARIES_DAG_ID,
    RECONCILE_DAG_ID,
    STABILITY_OPTIONS,
    WHAT_IF_DAG_ID,
    JobConfig,
    config_path,
    load_jobs_each,
)
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from ds2_airflow.fleet import fleet_dag, fleets
from ds2_airflow.operators.approval import gate
from ds2_airflow.operators.boundaries import BoundarySnapshotOperator
from ds2_airflow.operators.collect import FlinkCollectMetricsOperator
from ds2_airflow.operators.policy import DS2PolicyOperator, WhatIfPolicyOperator
from ds2_airflow.operators.reconcile import ReconcileOperator
from ds2_airflow.operators.rescale import FlinkRescaleOperator
from ds2_airflow.provider_config import export_to_environment
from ds2_airflow.runtime import epoch_for, journal_dir, store_root
from ds2_airflow.scaling import decide_task, record_task, validate_epoch_task, what_if_compare_task
from ds2_airflow.timetable import FleetMemberTimetable, LateRunsTimetable
from ds2_airflow.tuning import tuning_dag, tuning_dag_id

# The run's epoch as its tasks compute it (ds2_airflow.runtime.epoch_for): handed over by a fleet run,
# else closed by the run's data interval (a run triggered without one: its run_after).
EPOCH = "{{ ds2_run_epoch(dag_run) }}"
EPOCH_START = "{{ ds2_epoch_start(ds2_run_epoch(dag_run)) }}"
EPOCH_END = "{{ ds2_epoch_start(ds2_run_epoch(dag_run) + 1) }}"


def _doc(job: JobConfig) -> str:
    flags = job.deployment.parallelism_args
    ops = ", ".join(f"`{name}` ({flag})" for name, flag in flags.items()) or "every operator, set through Flink (no flags)"
    approval = (
        f"required ({', '.join(job.approval.approvers) or 'any user'}; on timeout after {job.approval.timeout}: "
        f"{job.approval.on_timeout})"
        if job.approval.required
        else "not required"
    )
    return (
        f"### DS2 autoscaler for Flink job `{job.flink_job_name}`\n\n"
        f"Every {job.interval}: collect the epoch's metrics, validate them, compute the DS2 decision "
        f"with Spark (`{job.spark_conn_id}`), decide, rescale ({job.mechanism}) and record.\n\n"
        f"- scalable operators: {ops}\n- approval: {approval}\n"
        f"- policy: `{job.policy.to_json()}`\n- stability: {job.stability}\n"
        + (f"- batched: decided every interval by `{job.fleet_dag_id}`, which starts runs here to act\n" if job.batched else "")
        + "\n"
        "Backfill (Backfills tab or `airflow backfill create`) recomputes decisions from stored metrics "
        f"and never rescales; `{WHAT_IF_DAG_ID}` (job `{job.name}`) recomputes a range with other options without "
        "touching them."
    )


def scaling_dag(job: JobConfig) -> DAG:
    retry = {"retries": 1, "retry_delay": timedelta(seconds=10)}
    with DAG(
        dag_id=job.dag_id,
        description=f"DS2 autoscaling of Flink job {job.flink_job_name} every {job.interval}",
        # A real data interval [start, end) per run (a bare timedelta gives zero-length ones in 3.x); the
        # intervals a long run overlapped run late, in order, rather than being skipped (ds2_airflow.timetable).
        # A batched job's fleet DAG decides it every interval and starts this DAG's runs to act.
        schedule=FleetMemberTimetable(job.interval, job.fleet_dag_id)
        if job.batched
        else LateRunsTimetable(job.interval, job.max_late_epochs),
        start_date=job.start_date,
        catchup=False,
        max_active_runs=1,
        default_args={"owner": "ds2", **retry},
        dagrun_timeout=max(job.interval * 10, timedelta(minutes=30)) + (job.approval.timeout or timedelta(days=7)),
        user_defined_macros={
            "ds2_run_epoch": lambda dag_run: epoch_for(job, {"dag_run": dag_run}),
            "ds2_epoch_start": lambda e: job.epoch_start(int(e)).isoformat(),
        },
        tags=["ds2", job.name, *job.tags],
        doc_md=_doc(job),
    ) as dag:
        collect = FlinkCollectMetricsOperator(
            task_id="collect",
            job=job.name,
            flink_job_name=job.flink_job_name,
            epoch=EPOCH,
            store_root=str(store_root()),
            flink_conn_id=job.flink_conn_id,
            short_window_s=job.short_window.total_seconds(),
            max_gap_s=job.max_boundary_age_s,
            source_rate_metric=job.source_rate_metric,
            prometheus_conn_id=job.prometheus_conn_id,
            epoch_start=EPOCH_START,
            epoch_end=EPOCH_END,
            execution_timeout=job.interval + job.short_window + timedelta(minutes=1),
        )

        @task(task_id="validate", execution_timeout=timedelta(minutes=10), retries=0)
        def validate(**context: Any) -> dict[str, Any]:
            return validate_epoch_task(job, context)

        # Retried a few times: an engine that is restarting must not cost the epoch (its metrics are stored).
        policy = DS2PolicyOperator(
            task_id="policy", job=job, trigger_rule="none_failed", pool=job.pool, retries=3, retry_delay=timedelta(seconds=10)
        )

        @task.branch(task_id="decide", trigger_rule="none_failed")
        def decide(**context: Any) -> list[str]:
            return decide_task(job, context)

        rescale = FlinkRescaleOperator(
            task_id="rescale",
            deployment=job.deployment,
            target="{{ ti.xcom_pull(task_ids='decide', key='target') | tojson }}",
            mechanism=job.mechanism if job.mechanism != opt.AUTO else "{{ ti.xcom_pull(task_ids='decide', key='mechanism') }}",
            journal_dir=str(journal_dir()),
            flink_conn_id=job.flink_conn_id,
            savepoint_timeout_s=job.savepoint_timeout.total_seconds(),
            start_timeout_s=job.start_timeout.total_seconds(),
            measured="{{ ti.xcom_pull(task_ids='decide', key='measured') | tojson }}",
            lease_store=str(store_root()),
            capacity_request="{{ ti.xcom_pull(task_ids='decide', key='capacity') | tojson }}",
            capacity=job.capacity,
            pool=job.pool,
            retries=2,
            retry_delay=timedelta(seconds=5),
        )

        @task(task_id="record", trigger_rule="all_done", retries=2)
        def record(**context: Any) -> dict[str, Any]:
            return record_task(job, context)

        decided = decide()
        recorded = record()
        collect >> validate() >> policy >> decided
        gate(decided, rescale, f"Rescale {job.name} (epoch {EPOCH})?",
             "{{ ti.xcom_pull(task_ids='decide', key='plan_markdown') }}", job.approval)  # fmt: skip
        decided >> recorded
        rescale >> recorded
    return dag


def what_if_params(jobs: list[JobConfig]) -> dict[str, Param]:
    """The job to replay, its range, and one param per policy option and per decide rule's option (warm-up,
    activation, hysteresis, cooldown: the replay through the rules uses them), each with its meaning from the
    options' declarations; an option left unset keeps the job's own value, which its DAG's doc lists."""
    kinds = {
        "number": ["null", "number"],
        "integer": ["null", "integer"],
        "boolean": ["null", "boolean"],
        "choice": ["null", "string"],
        "duration": ["null", "number"],  # seconds, as PolicyOptions holds them
        "bounds": "object",
    }
    params = {
        "job": Param(jobs[0].name, type="string", enum=sorted(job.name for job in jobs), description="The registered job."),
        "start": Param(None, type=["null", "string"], description="ISO start of the range (default: end - 1 h)"),
        "end": Param(None, type=["null", "string"], description="ISO end of the range (default: now)"),
    }
    replayable = set(PolicyOptions.__dataclass_fields__) | {o.name for o in STABILITY_OPTIONS}
    for option in opt.OPTIONS:
        if option.key.startswith("policy.") and option.name in replayable:
            limits = {"minimum": option.minimum} if option.minimum is not None and option.kind != "bounds" else {}
            params[option.name] = Param(
                {} if option.kind == "bounds" else None,
                type=kinds[option.kind],
                description=f"{option.meaning}{' In seconds.' if option.kind == 'duration' else ''} Unset: the job's own.",
                **limits,
            )
    return params


def what_if_dag(jobs: list[JobConfig]) -> DAG:
    """One what-if DAG for every job (a param names the job): a DAG per job would double what the dag-processor
    parses and serialises, and a fleet's thousand what-if DAGs cost it more than all its scaling DAGs."""
    with DAG(
        dag_id=WHAT_IF_DAG_ID,
        description="Recompute a job's past DS2 decisions with other policy options (live decisions untouched)",
        schedule=None,
        start_date=min(job.start_date for job in jobs),
        catchup=False,
        tags=["ds2", "what-if"],
        params=what_if_params(jobs),
        doc_md="Re-run a job's policy over a range of its stored epochs with other options; the decisions go to a "
        "store of their own and are compared with the live ones, also through the decide rules (the rescales each "
        "would have made). Options left unset keep the job's own values (its DAG's doc lists them).",
    ) as dag:
        policy = WhatIfPolicyOperator(task_id="what_if_policy", config_path=str(config_path()))

        @task(task_id="compare")
        def compare(**context: Any) -> dict[str, Any]:
            return what_if_compare_task(context)

        policy >> compare()
    return dag


BOUNDARIES_PERIOD = timedelta(hours=1)
BOUNDARIES_START = datetime(2026, 1, 1, tzinfo=UTC)


def boundaries_dag() -> DAG:
    """Every job's boundary snapshots, taken on time by the triggerer (see autoscaler/collect/boundaries.py).

    Each hourly run defers one trigger that serves all jobs for the hour and a few minutes more; two
    runs may be active at once, so the next one takes over before the last one ends.
    """
    with DAG(
        dag_id=BOUNDARIES_DAG_ID,
        description="Counter snapshots of every registered Flink job at every epoch boundary (triggerer)",
        schedule=DeltaDataIntervalTimetable(BOUNDARIES_PERIOD),
        # Fixed: the jobs' own start dates may lie ahead, and the snapshots must be there before them.
        start_date=BOUNDARIES_START,
        catchup=False,
        max_active_runs=2,
        default_args={"owner": "ds2", "retries": 3, "retry_delay": timedelta(seconds=5)},
        tags=["ds2"],
        doc_md="Takes the counter snapshot of every registered job at each of its epoch boundaries, in the "
        "triggerer, so that a scaling run that starts late still measures exactly its own epoch.",
    ) as dag:
        BoundarySnapshotOperator(
            task_id="snapshots", config_path=str(config_path()), store_root=str(store_root()), period=BOUNDARIES_PERIOD
        )
    return dag


RECONCILE_PERIOD = timedelta(minutes=5)


def reconcile_dag() -> DAG:
    """Every RECONCILE_PERIOD, one task for every job: settle rescale actions nobody finishes; alert per job when one
    cannot be, or a job is left stopped."""
    with DAG(
        dag_id=RECONCILE_DAG_ID,
        description="Settle unfinished rescale actions (journals) of every job, and alert when a job is left stopped",
        schedule=DeltaDataIntervalTimetable(RECONCILE_PERIOD),
        start_date=BOUNDARIES_START,
        catchup=False,
        max_active_runs=1,
        default_args={"owner": "ds2", "retries": 0},
        tags=["ds2"],
        doc_md="Finds rescale journals without a result that no task has touched for longer than the action could "
        "still run, asks Flink what runs, and finishes, rolls back or restarts each one (autoscaler/rescale/"
        "reconcile.py). Each job left stopped, or with an action that cannot be settled now, gets an alert, "
        "and the task fails naming them. One task serves every job.",
    ) as dag:
        ReconcileOperator(task_id="reconcile", config_path=str(config_path()), journal_dir=str(journal_dir()))
    return dag


def build_dags(jobs: list[JobConfig], only: str | None = None) -> dict[str, DAG]:
    """Every DAG of the jobs; with ``only`` (a task's parsing context), just that DAG."""
    builders = {BOUNDARIES_DAG_ID: boundaries_dag, RECONCILE_DAG_ID: reconcile_dag} if jobs else {}
    if jobs:
        builders[WHAT_IF_DAG_ID] = lambda: what_if_dag(jobs)
    for dag_id, members in fleets(jobs).items():
        builders[dag_id] = lambda dag_id=dag_id, members=members: fleet_dag(dag_id, members)
    for job in jobs:
        builders[job.dag_id] = lambda job=job: scaling_dag(job)
        if job.tuning.enabled:
            builders[tuning_dag_id(job)] = lambda job=job: tuning_dag(job)
    if only is not None and only in builders:
        builders = {only: builders[only]}
    return {dag_id: build() for dag_id, build in builders.items()}


def autoscaler_dags(jobs_file: str | None = None) -> dict[str, DAG]:
    """The DAGs of the registered jobs, for a DAG file's ``globals().update(autoscaler_dags())``.

    ``jobs_file`` defaults to the ``[ds2_autoscaler] jobs_file`` setting (``autoscaler.config.paths``). A bad
    entry costs only itself: it is left out here, and :func:`config_errors` reports it. A file that cannot be
    read or parsed raises one line naming it, as the DAG file's import error. A task's process builds only
    its own DAG (Airflow's parsing context), so its cost does not grow with the number of jobs.
    """
    from airflow.sdk import get_parsing_context

    export_to_environment()
    try:
        jobs, _bad = load_jobs_each(jobs_file)
    except InputError as exc:
        raise InputError(exc.source, exc.problem, exc.line) from None  # without the config reader's frames
    return build_dags(jobs, only=get_parsing_context().dag_id)


def config_errors(jobs_file: str | None = None) -> None:
    """Raise the jobs file's bad entries, one line each, as the calling DAG file's import error (shown under
    "DAG Import Errors"); nothing when every entry is good, or when the file itself cannot be read (that is
    :func:`autoscaler_dags`'s import error already)."""
    export_to_environment()
    try:
        _jobs, bad = load_jobs_each(jobs_file)
    except InputError:
        return
    if bad:
        more = "".join(f"\n{e}" for e in bad[1:])
        raise InputError(bad[0].source, bad[0].problem + more, bad[0].line) from None
