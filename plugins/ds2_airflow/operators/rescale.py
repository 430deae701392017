"""Rescale a Flink job: savepoint-and-restart (deferrable) or in place (adaptive scheduler)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from autoscaler.capacity.inventory import Inventory
from autoscaler.capacity.provider import CapacityError, add_for_plan, provider_for
from autoscaler.config.options import IN_PLACE, SAVEPOINT_RESTART, SAVEPOINT_TIMEOUT, START_TIMEOUT
from autoscaler.config.sections import CapacitySettings
from autoscaler.flink.deployment import JobDeployment
from autoscaler.rescale import job_lease
from autoscaler.rescale.in_place import rescale_in_place
from autoscaler.rescale.journal import safe_name
from autoscaler.rescale.lease import LEASE_DSN_ENV
from autoscaler.rescale.reconcile import reconcile, stale_after
from autoscaler.rescale.result import RescaleResult
from autoscaler.rescale.savepoint import pending_savepoint, rescale_with_savepoint
from ds2_airflow.hooks.flink import FlinkHook
from ds2_airflow.triggers.flink import FlinkSavepointTrigger


def action_id_for(context: Mapping[str, Any], task_id: str) -> str:
    """One action per (DAG, run, task): a retry of the task resumes the same action."""
    ti = context.get("ti") or context.get("task_instance")
    raw = f"{getattr(ti, 'dag_id', 'dag')}.{getattr(ti, 'run_id', 'run')}.{task_id}" if ti else f"adhoc.{task_id}"
    return safe_name(raw)


class FlinkRescaleOperator(BaseOperator):
    """Apply new per-operator parallelism to a running Flink job, verified, with rollback.

    With ``mechanism="savepoint-restart"`` the operator requests the stop-with-savepoint and
    defers: the triggerer polls the savepoint, no worker slot is held; the restart from the
    savepoint (about a second) then runs in :meth:`execute_complete`. Every step is journaled
    under ``journal_dir``, so a retry of the task resumes the same action and never rescales
    twice. With ``mechanism="in-place"`` the adaptive scheduler applies the change (about a
    second, same job id).

    :param deployment: how to (re)start the job (jar, arguments, operator -> argument mapping).
    :param target: operator name -> parallelism (templated; e.g. pulled from the decide task).
    :param mechanism: ``savepoint-restart`` or ``in-place`` (templated: the decide task's choice for ``mechanism: auto``).
    :param journal_dir: folder of the action journals (templated).
    :param flink_conn_id: Airflow connection of type ``flink``.
    :param savepoint_timeout_s: deadline for the savepoint; past it the job keeps running.
    :param start_timeout_s: deadline for all tasks RUNNING after a restart (then rollback).
    :param measured: operator name -> parallelism when the decision's epoch was measured (templated); a job found
        at another one was rescaled by someone else since, and is left alone.
    :param lease_store: the deployment's store (templated): with a lease database (``DS2_LEASE_DSN``, from
        ``lease_conn_id``) the rescale first takes the Flink job's lease there, which every deployment given the
        same database sees (:mod:`autoscaler.rescale.job_lease`); a lease held by another is not acted on.
    :param capacity_request: ``{"job", "epoch", "add_taskmanagers"}``: TaskManagers the capacity provider adds before
        the rescale (templated: the decide task's XCom ``capacity``).
    :param capacity: the job's capacity settings (its provider); the adds are recorded in ``lease_store``'s CAPACITY table.
    :return: the action record (:meth:`RescaleResult.to_dict`).
    """

    template_fields: Sequence[str] = ("target", "journal_dir", "measured", "lease_store", "mechanism", "capacity_request")

    def __init__(
        self,
        *,
        deployment: JobDeployment,
        target: Mapping[str, int] | str,
        mechanism: str = SAVEPOINT_RESTART,
        journal_dir: str,
        flink_conn_id: str = FlinkHook.default_conn_name,
        savepoint_timeout_s: float = SAVEPOINT_TIMEOUT.default.total_seconds(),
        start_timeout_s: float = START_TIMEOUT.default.total_seconds(),
        measured: Mapping[str, int] | str | None = None,
        lease_store: str | None = None,
        capacity_request: Mapping[str, Any] | str | None = None,
        capacity: CapacitySettings | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if mechanism not in (SAVEPOINT_RESTART, IN_PLACE) and "{{" not in mechanism:
            raise ValueError(f"mechanism must be {SAVEPOINT_RESTART!r} or {IN_PLACE!r} (or a template), got {mechanism!r}")
        self.deployment = deployment
        self.target = target
        self.mechanism = mechanism
        self.journal_dir = journal_dir
        self.flink_conn_id = flink_conn_id
        self.savepoint_timeout_s = savepoint_timeout_s
        self.start_timeout_s = start_timeout_s
        self.measured = measured
        self.lease_store = lease_store
        self.capacity_request = capacity_request
        self.capacity = capacity or CapacitySettings()

    @staticmethod
    def _parallelism(value: Mapping[str, int] | str | None) -> dict[str, int]:
        if isinstance(value, str):  # a template rendered to text, e.g. an XCom of the decide task
            value = json.loads(value) if value.strip() not in ("", "None", "null") else None
        return {str(k): int(v) for k, v in dict(value or {}).items()}

    def _target(self) -> dict[str, int]:
        return self._parallelism(self.target)

    def _job_lease(self, context: Any) -> job_lease.JobLease | None:
        """This action's lease on the Flink job, when the deployment is given a lease database."""
        dsn = os.environ.get(LEASE_DSN_ENV, "").strip()
        if not dsn or not self.lease_store:
            return None
        client = FlinkHook(self.flink_conn_id).get_client()
        return job_lease.JobLease(dsn, job_lease.flink_job_key(client.base_url, self.deployment.job_name),
                                  job_lease.deployment_of(self.lease_store), action_id_for(context, self.task_id),
                                  self.stale_after_s)  # fmt: skip

    def _report(self, result: RescaleResult, lease: job_lease.JobLease | None = None) -> dict[str, Any]:
        self.log.info("rescale %s: %s (%s)", result.outcome, result.message, result.mechanism)
        if lease is not None:
            job_lease.release(lease)
        return result.to_dict()

    @property
    def stale_after_s(self) -> float:
        """An unfinished action untouched this long has no task finishing it (see autoscaler.rescale.reconcile)."""
        return stale_after(self.savepoint_timeout_s, self.start_timeout_s)

    def settle_stale_actions(self, client: Any) -> list[str]:
        """Settle earlier actions of this job that nobody finishes; the problems left (for an alert)."""
        results, problems = reconcile(
            client, self.deployment, self.journal_dir, self.stale_after_s, self.savepoint_timeout_s, self.start_timeout_s
        )
        for result in results:
            self.log.warning("settled an unfinished earlier action %s: %s (%s)", result.action_id, result.outcome, result.message)
        for problem in problems:
            self.log.error("could not settle an unfinished earlier action: %s", problem)
        return problems

    def _resolved_mechanism(self) -> str:
        mechanism = str(self.mechanism).strip()
        if mechanism not in (SAVEPOINT_RESTART, IN_PLACE):
            raise ValueError(f"the rescale's mechanism must be {SAVEPOINT_RESTART!r} or {IN_PLACE!r}, got {mechanism!r}")
        return mechanism

    def _add_capacity(self, client: Any, action_id: str) -> str | None:
        """Add the TaskManagers the plan asks for; returns why the rescale cannot go on (None: it can)."""
        request = self.capacity_request
        if isinstance(request, str):  # a template rendered to text: the decide task's XCom
            request = json.loads(request) if request.strip() not in ("", "None", "null") else None
        count = int((request or {}).get("add_taskmanagers") or 0)
        if count <= 0:
            return None
        provider = provider_for(self.capacity, client.base_url)
        if provider is None or not self.lease_store:
            return f"not acted: the plan needs {count} more TaskManager(s) and the job has no capacity provider"
        try:
            done = add_for_plan(provider, lambda: Inventory.from_rest(client.get("/taskmanagers")), self.lease_store,
                                str(request["job"]), int(request["epoch"]), count, action_id)  # fmt: skip
        except CapacityError as exc:
            return f"not acted: the capacity provider could not add {count} TaskManager(s): {exc}"
        self.log.info("capacity: %s", done)
        return None

    def execute(self, context: Any) -> dict[str, Any] | None:
        client = FlinkHook(self.flink_conn_id).get_client()
        self.settle_stale_actions(client)
        action_id = action_id_for(context, self.task_id)
        self.mechanism = self._resolved_mechanism()
        lease = self._job_lease(context)
        if lease is not None and (holder := job_lease.take(lease)):
            return self._report(RescaleResult.not_acted(action_id, self.mechanism, f"not acted: {holder}"))
        refused = self._add_capacity(client, action_id)
        if refused is not None:
            return self._report(RescaleResult.not_acted(action_id, self.mechanism, refused), lease)
        measured = self._parallelism(self.measured)
        if self.mechanism == IN_PLACE:
            result = rescale_in_place(client, self.deployment.job_name, self._target(), action_id, self.journal_dir,
                                      timeout_s=self.start_timeout_s, measured=measured)  # fmt: skip
            return self._report(result, lease)
        result = rescale_with_savepoint(
            client,
            self.deployment,
            self._target(),
            action_id,
            self.journal_dir,
            savepoint_timeout_s=self.savepoint_timeout_s,
            start_timeout_s=self.start_timeout_s,
            wait_for_savepoint=False,
            measured=measured,
        )
        if result is not None:
            return self._report(result, lease)
        if lease is not None:  # held through the wait, which nobody extends, and the restart after it
            job_lease.extend(lease, self.savepoint_timeout_s + self.stale_after_s)
        job_id, request_id = pending_savepoint(self.journal_dir, action_id)
        self.defer(
            trigger=FlinkSavepointTrigger(
                self.flink_conn_id, job_id, request_id, deadline=time.time() + self.savepoint_timeout_s
            ),
            method_name="execute_complete",
        )
        return None

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """The savepoint finished (or its deadline passed): the journaled action continues."""
        self.log.info("savepoint wait ended: %s", event)
        client = FlinkHook(self.flink_conn_id).get_client()
        lease = self._job_lease(context)
        if lease is not None and not job_lease.extend(lease):  # the job is stopped by our savepoint: restart it anyway
            self.log.warning("the lease of %s expired during the savepoint wait; the action finishes regardless", lease)
        result = rescale_with_savepoint(
            client,
            self.deployment,
            self._target(),
            action_id_for(context, self.task_id),
            self.journal_dir,
            savepoint_timeout_s=0.0 if event.get("status") == "timeout" else self.savepoint_timeout_s,
            start_timeout_s=self.start_timeout_s,
        )
        assert result is not None
        return self._report(result, lease)
