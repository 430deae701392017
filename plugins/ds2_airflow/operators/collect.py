"""Collect one epoch's metrics of a running Flink job into the metrics store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from autoscaler.collect.flink import collect_epoch_metrics
from autoscaler.flink.client import JobNotRunning
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.runtime import BACKFILL, FLEET_RUN, fleet_handoff, run_type


class FlinkCollectMetricsOperator(BaseOperator):
    """Measure an epoch of a Flink job from its counters and write it to the metrics store.

    :param job: registered job name (the store partition).
    :param flink_job_name: name of the Flink job (found by name: ids change on restarts).
    :param epoch: epoch number (templated; rendered to an integer).
    :param store_root: root of the Parquet store (templated).
    :param flink_conn_id: Airflow connection of type ``flink``.
    :param short_window_s: window measured on the spot when no previous boundary is usable.
    :param max_gap_s: how old the previous boundary may be (default: no limit).
    :param source_rate_metric: per-subtask gauge of the sources' target rate, if the job has one.
    :param prometheus_conn_id: a Prometheus scraping the job's Flink reporter: the epoch is read from it at
        its exact boundaries ``epoch_start`` and ``epoch_end`` (templated ISO times) instead of from the REST API.
    :return: a small dict: epoch, rows, window_s, measured_short_window, warmup_reason, flink_job_id, failovers,
        failing_over (the failovers in words). A job found FAILING or RESTARTING fails the task at once, its words in
        the XCom ``failing_over``.

    A backfill run measures nothing now (that would file the present under a past epoch): without
    Prometheus it skips and the decisions are recomputed from stored metrics; with Prometheus it
    collects its epoch from Prometheus when the store has no metrics for it.
    """

    template_fields: Sequence[str] = ("epoch", "store_root", "epoch_start", "epoch_end")

    def __init__(
        self,
        *,
        job: str,
        flink_job_name: str,
        epoch: int | str,
        store_root: str,
        flink_conn_id: str = FlinkHook.default_conn_name,
        short_window_s: float = 20.0,
        max_gap_s: float | None = None,
        source_rate_metric: str | None = None,
        prometheus_conn_id: str | None = None,
        epoch_start: str | None = None,
        epoch_end: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.flink_job_name = flink_job_name
        self.epoch = epoch
        self.store_root = store_root
        self.flink_conn_id = flink_conn_id
        self.short_window_s = short_window_s
        self.max_gap_s = max_gap_s
        self.source_rate_metric = source_rate_metric
        self.prometheus_conn_id = prometheus_conn_id
        self.epoch_start = epoch_start
        self.epoch_end = epoch_end

    def execute(self, context: Any) -> dict[str, Any]:
        handoff = fleet_handoff(context)
        if handoff:
            self.log.info("epoch %s was collected by fleet run %s", handoff["epoch"], handoff[FLEET_RUN])
            return dict(handoff.get("collected") or {})
        backfill = run_type(context) == BACKFILL
        if self.prometheus_conn_id:
            return self._from_prometheus(backfill)
        if backfill:
            raise AirflowSkipException("backfill run: decisions are recomputed from the stored metrics, nothing is collected")
        try:
            result = collect_epoch_metrics(
                FlinkHook(self.flink_conn_id).get_client(),
                self.flink_job_name,
                self.job,
                int(self.epoch),
                self.store_root,
                short_window_s=self.short_window_s,
                max_gap_s=self.max_gap_s,
                source_rate_metric=self.source_rate_metric,
            )
        except JobNotRunning as exc:
            if not exc.failing_over:
                raise
            # The record task files the epoch as failing-over with these words; a retry now would measure
            # a window across the restart, which decides nothing either: the next epoch looks again.
            context["ti"].xcom_push(key="failing_over", value=str(exc))
            raise AirflowFailException(str(exc)) from None
        self.log.info("%s", result.summary())
        return {
            "epoch": result.epoch,
            "rows": result.rows.num_rows,
            "window_s": result.window_s,
            "measured_short_window": result.measured_short_window,
            "warmup_reason": result.warmup_reason,
            "flink_job_id": result.flink_job_id,
            "failovers": result.failovers,
            "failing_over": result.failing_over,
        }

    def _from_prometheus(self, backfill: bool) -> dict[str, Any]:
        from autoscaler.collect import prometheus
        from autoscaler.store.parquet import read_epochs
        from autoscaler.store.schemas import METRICS
        from ds2_airflow.hooks.prometheus import PrometheusHook

        epoch = int(self.epoch)
        if backfill and read_epochs(self.store_root, METRICS, self.job, [epoch], columns=["epoch"]).num_rows:
            raise AirflowSkipException(f"backfill run: epoch {epoch} has stored metrics; its decision is recomputed from them")
        start, end = (datetime.fromisoformat(str(t)) for t in (self.epoch_start, self.epoch_end))
        reader = PrometheusHook(self.prometheus_conn_id).get_reader()
        job, root = self.job, self.store_root
        rows, window_s, job_id = prometheus.collect_epoch(reader, self.flink_job_name, job, epoch, start, end, root)
        self.log.info("epoch %d of %s read from Prometheus (%s): %d rows over %.1f s", epoch, self.job,
                      self.prometheus_conn_id, rows, window_s)  # fmt: skip
        return {"epoch": epoch, "rows": rows, "window_s": window_s, "measured_short_window": False, "warmup_reason": None,
                "flink_job_id": job_id, "source": "prometheus"}  # fmt: skip
