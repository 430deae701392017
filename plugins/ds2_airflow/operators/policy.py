"""The DS2 policy of one job's epoch(s) on Spark, through the job's Airflow connection.

Two engines, chosen by the connection's type:

- ``spark_connect`` (the default of ``make demo``, ``make up`` and the tests): a query on a warm
  Spark Connect server (``scripts/spark.sh``, or any Spark Connect endpoint), run from the task
  process through the Spark provider's own ``SparkConnectHook``: seconds, no JVM start;
- ``spark``: a cold ``spark-submit`` of ``spark_jobs/ds2_policy.py`` (``SparkSubmitHook``).

Both run :func:`autoscaler.engine.spark.run.decide_stored_epochs` on the same inputs and write the same rows.
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from autoscaler.collect.flink import topology_path
from autoscaler.config import paths
from autoscaler.config.jobs import STABILITY_OPTIONS, JobConfig, data_dir, find_job
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine import backfill
from autoscaler.engine.spark.run import StoreRun
from autoscaler.errors import InputError
from autoscaler.observe.metrics import policy_duration_sample
from autoscaler.store.s3a import s3a_jars
from ds2_airflow.metrics import emit
from ds2_airflow.runtime import BACKFILL, FLEET_RUN, LIVE, WHAT_IF, epoch_for, fleet_handoff, run_type, safe_run_id, store_root


def store_run(
    job: JobConfig,
    from_epoch: int,
    to_epoch: int,
    run_type_: str,
    run_id: str,
    options: PolicyOptions | None = None,
    decisions_store: str | None = None,
) -> StoreRun:
    """The policy run over a range of the job's stored epochs."""
    root = store_root()
    return StoreRun(
        store=str(root), job=job.name, from_epoch=from_epoch, to_epoch=to_epoch, run_type=run_type_, run_id=run_id,
        topology_path=str(topology_path(root, job.name)), options=options or job.policy, decisions_store=decisions_store,
    )  # fmt: skip


def policy_args(run: StoreRun) -> list[str]:
    """Arguments of ``spark_jobs/ds2_policy.py`` for a store run (the ``spark-submit`` engine)."""
    args = [
        "--topology", run.topology_path,
        "--metrics-store", "--store", run.store, "--job", run.job,
        "--from-epoch", str(run.from_epoch), "--to-epoch", str(run.to_epoch),
        "--run-type", run.run_type, "--run-id", run.run_id,
        "--options", run.options.to_json(),
    ]  # fmt: skip
    if run.decisions_store:
        args += ["--decisions-store", run.decisions_store]
    return args


def spark_env() -> dict[str, str]:
    """spark-submit's environment: the Spark settings (paths.spark_conf_dir) and this interpreter for the driver."""
    conf_dir = paths.spark_conf_dir()
    return {"PYSPARK_PYTHON": sys.executable} | ({"SPARK_CONF_DIR": str(conf_dir)} if conf_dir else {})


class PolicyEngineOperator(BaseOperator):
    """Runs a :class:`StoreRun` on the engine the job's Spark connection names (see the module doc)."""

    def __init__(self, *, job: JobConfig | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("execution_timeout", timedelta(minutes=30))
        super().__init__(**kwargs)
        self.job = job
        self._submit_hook: SparkSubmitHook | None = None

    def run_policy(self, run: StoreRun, job: JobConfig | None = None) -> str:
        """Compute and commit the run's decisions on the engine of ``job``'s (default: the operator's job's) Spark
        connection; the engine used (``spark_connect`` or ``spark-submit``)."""
        job = job or self.job
        assert job is not None, "a policy run needs its job"
        conn_id = job.spark_conn_id
        conn = BaseHook.get_connection(conn_id)
        if conn.conn_type == SparkConnectHook.conn_type:
            self._run_connect(conn_id, run)
            return "spark_connect"
        jars = ",".join(map(str, s3a_jars())) or None  # for a store on an object store (autoscaler.store.s3a)
        self._submit_hook = SparkSubmitHook(
            conn_id=conn_id, name=f"ds2-policy-{job.name}", application_args=policy_args(run), env_vars=spark_env(), jars=jars
        )
        self._submit_hook.submit(str(paths.spark_application()))
        return "spark-submit"

    def _run_connect(self, conn_id: str, run: StoreRun) -> None:
        from autoscaler.engine.spark import engine
        from autoscaler.engine.spark.run import decide_stored_epochs

        url = SparkConnectHook(conn_id).get_connection_url()
        try:
            spark = engine.connect(url, what=conn_id)
        except (engine.EngineUnavailable, ValueError) as exc:
            # One line naming the connection and the address; the task's retries run the epoch again.
            raise AirflowException(str(exc)) from None
        try:
            blocks = decide_stored_epochs(spark, run)
        finally:
            spark.stop()
        self.log.info("decisions of epochs %d..%d committed (%d block(s)) through %s", run.from_epoch, run.to_epoch, blocks,
                      engine.redact(url))  # fmt: skip

    def on_kill(self) -> None:
        if self._submit_hook is not None:
            self._submit_hook.on_kill()


class DS2PolicyOperator(PolicyEngineOperator):
    """Run the DS2 policy on the run's epoch; a backfill computes its whole range at once.

    - live run: the epoch just collected and validated (skipped when validation found it not
      decidable, e.g. a warm-up window: there is nothing to decide);
    - backfill run: the first run of a backfill computes every queued run's epoch in one Spark
      query (or application) and the others find their decisions done (see :mod:`autoscaler.engine.backfill`).
    """

    def execute(self, context: Any) -> dict[str, Any]:
        job = self.job
        handoff = fleet_handoff(context)
        if handoff:
            raise AirflowSkipException(f"epoch {handoff['epoch']} was decided by fleet run {handoff[FLEET_RUN]}")
        epoch = epoch_for(job, context)
        run_id = safe_run_id(context)
        if run_type(context) == LIVE:
            validation = context["ti"].xcom_pull(task_ids="validate")
            if validation and not validation.get("decidable", True):
                raise AirflowSkipException(f"epoch {epoch} is not decidable ({validation.get('summary')}): no policy run")
            started = time.monotonic()
            result = self._run(epoch, epoch, LIVE, run_id)
            emit([policy_duration_sample(job.name, time.monotonic() - started)])
            return result
        if job.prometheus_conn_id:
            # Each backfill run collects its own epoch from Prometheus and validates it first: a batch
            # would decide epochs whose metrics are not collected (or validated) yet.
            return self._run(epoch, epoch, BACKFILL, run_id)
        return self._backfill(context, epoch, run_id)

    def _run(self, first: int, last: int, kind: str, run_id: str) -> dict[str, Any]:
        self.log.info("%s policy for %s epochs %d..%d (%s)", self.job.policy.kind, self.job.name, first, last, kind)
        engine = self.run_policy(store_run(self.job, first, last, kind, run_id))
        return {"from_epoch": first, "to_epoch": last, "run_id": run_id, "run_type": kind, "engine": engine}

    def _fingerprint(self) -> str:
        return hashlib.sha256((self.job.policy.to_json() + str(topology_path(store_root(), self.job.name))).encode()).hexdigest()

    def _backfill(self, context: Any, epoch: int, run_id: str) -> dict[str, Any]:
        job, ti = self.job, context["ti"]
        logical = context["dag_run"].logical_date
        fingerprint = self._fingerprint()
        with backfill.batch_lock(store_root(), job.name):
            leader = backfill.take_claim(store_root(), job.name, logical.isoformat(), fingerprint)
            if leader:
                self.log.info("epoch %d was computed by the backfill batch of run %s: no Spark run", epoch, leader)
                return {"from_epoch": epoch, "to_epoch": epoch, "run_id": leader, "run_type": BACKFILL, "batched": True}

            def neighbours(step: int, k: int) -> list:
                return [logical + job.interval * (step * i) for i in range(1, k + 1)]

            def pending(step: int) -> int:
                """How many runs next to this one (after it: step 1, before it: -1) the batch covers."""

                def unclaimed_and_pending(k: int) -> bool:
                    # Queued runs, and running ones: with backfill --max-active-runs > 1 they wait
                    # for this lock before their policy step. Claimed runs belong to another batch.
                    dates = neighbours(step, k)
                    if any(backfill.has_claim(store_root(), job.name, d.isoformat()) for d in dates):
                        return False
                    return ti.get_dr_count(dag_id=ti.dag_id, logical_dates=dates, states=["queued", "running"]) == k

                return backfill.contiguous_extent(unclaimed_and_pending)

            after, before = pending(1), pending(-1)
            result = self._run(epoch - before, epoch + after, BACKFILL, run_id)
            covered = [d.isoformat() for d in neighbours(-1, before) + neighbours(1, after)]
            backfill.write_claims(store_root(), job.name, covered, run_id, fingerprint)
            n = len(covered)
            self.log.info("backfill batch: %d epochs in one Spark run (%d other runs reuse it)", n + 1, n)
            return {**result, "batched": False, "epochs": len(covered) + 1}


def what_if_options(job: JobConfig, params: dict[str, Any]) -> PolicyOptions:
    """The job's policy options with the what-if run's overrides (unset params keep the job's value)."""
    import dataclasses

    overrides = {}
    bounds = ("min_parallelism", "max_parallelism")
    for key in job.policy.__dataclass_fields__:
        if key in bounds and params.get(key):
            overrides[key] = {str(k): int(v) for k, v in dict(params[key]).items()}
        elif key not in bounds and params.get(key) not in (None, ""):
            overrides[key] = params[key]
    return dataclasses.replace(job.policy, **overrides)


def what_if_stability(params: dict[str, Any]) -> dict[str, Any]:
    """The decide rules' options a what-if sets (warm-up, activation, hysteresis, cooldown in seconds): what the
    compare task's replay through the rules uses instead of the job's own. JSON, for the run's XCom."""
    names = {o.name for o in STABILITY_OPTIONS}
    return {name: params[name] for name in sorted(names) if params.get(name) not in (None, "")}


def what_if_range(job: JobConfig, params: dict[str, Any], now: datetime) -> tuple[int, int]:
    """Epochs whose intervals lie in [start, end] (default: the last hour)."""
    end = datetime.fromisoformat(params["end"]) if params.get("end") else now
    start = datetime.fromisoformat(params["start"]) if params.get("start") else end - timedelta(hours=1)
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    start = start if start.tzinfo else start.replace(tzinfo=UTC)
    first, last = math.ceil(start.timestamp() / job.interval_s - 1e-6), job.epoch_of(end)
    if last < first:
        raise InputError("what-if range", f"[{start.isoformat()}, {end.isoformat()}] holds no whole epoch of {job.interval}")
    return first, last


class WhatIfPolicyOperator(PolicyEngineOperator):
    """Recompute a range of a job's past decisions with other policy options, into a store of their own.

    The live decisions are never touched: the run's decisions go to
    ``<data>/what-if/<run id>/decisions``, and the compare task sets them side by side.
    Params: ``job`` (a registered job's name), ``start``/``end`` (ISO times; default the last hour) and
    option overrides (``factor``, ``threshold``, ``min_parallelism``, ``max_parallelism``, ...).
    """

    def __init__(self, *, config_path: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path

    def execute(self, context: Any) -> dict[str, Any]:
        params = dict(context.get("params") or {})
        job = what_if_job(params.get("job"), self.config_path)
        options = what_if_options(job, params)
        stability = what_if_stability(params)
        first, last = what_if_range(job, params, datetime.now(UTC))
        run_id = safe_run_id(context)
        decisions = str(data_dir() / "what-if" / run_id)
        self.log.info("what-if for %s epochs %d..%d with %s -> %s", job.name, first, last, options.to_json(), decisions)
        engine = self.run_policy(store_run(job, first, last, WHAT_IF, run_id, options, decisions), job)
        return {
            "job": job.name, "from_epoch": first, "to_epoch": last, "run_id": run_id, "decisions_store": decisions,
            "options": options.to_json(), "stability": stability, "engine": engine,
        }  # fmt: skip


def what_if_job(name: Any, config_path: str) -> JobConfig:
    """The registered job a what-if names; a name the config does not hold fails the run with that name."""
    try:
        return find_job(str(name), config_path)
    except InputError as exc:
        raise AirflowFailException(f"what-if job {name!r}: {exc}") from None
