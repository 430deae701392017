"""The approval gate: the standard provider's ApprovalOperator, keeping who answered for the audit."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator


class RescaleApprovalOperator(ApprovalOperator):
    """Approve or reject a proposed rescale in the Airflow UI (Required Actions) or over the REST API.

    Rejecting skips the rescale. The answer -- option, who gave it, whether it was the timeout's
    default -- is pushed as XCom ``answer`` (a rejection pushes no return value), so the record
    task can write who approved or rejected into the audit trail.
    """

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        chosen = list(event.get("chosen_options") or [])
        user = event.get("responded_by_user")
        name = (user.get("name") or user.get("id")) if isinstance(user, dict) else user
        context["ti"].xcom_push(key="answer", value={"chosen": chosen[0] if chosen else None, "by": name, "timed_out": not name})
        return super().execute_complete(context=context, event=event)


def approval_gate(task_id: str, subject: str, body: str, approval: Any) -> RescaleApprovalOperator:
    """The gate as a job's ``approval`` section configures it (approvers, timeout and its answer)."""
    return RescaleApprovalOperator(
        task_id=task_id,
        subject=subject,
        body=body,
        defaults=approval.timeout_answer,
        response_timeout=approval.timeout,
        assigned_users=[{"id": u, "name": u} for u in approval.approvers] or None,
        retries=0,
    )


def gate(upstream: Any, downstream: Any, subject: str, body: str, approval: Any) -> None:
    """``upstream >> downstream``, through an approval gate when the job's ``approval`` section requires one."""
    if approval.required:
        upstream >> approval_gate("approve", subject, body, approval) >> downstream
    else:
        upstream >> downstream
