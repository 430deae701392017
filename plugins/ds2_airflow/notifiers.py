"""Alerts: what a person must look at, sent through Airflow's notifiers.

Every alert (:class:`autoscaler.observe.alerts.Alert`) is logged at ERROR and appended, one JSON line
each, to ``<DS2_DATA_DIR>/alerts.jsonl``, which the fleet page reads. When the job lists addresses
(``alerts.email``), it is also e-mailed with the SMTP provider's ``SmtpNotifier`` through the job's
SMTP connection (``alerts.smtp_conn_id``: host, port, login, password and ``from_email`` in its
extra). Sending never fails the task that found the problem: the alert is in the file either way.

- the record task sends what :func:`autoscaler.observe.alerts.epoch_alerts` finds in each epoch
  (a failed rescale, epochs quarantined in a row, an ineffective scale-up);
- the reconciler's task sends one per job it finds not running, or with a rescale nobody can
  settle now (:mod:`ds2_airflow.operators.reconcile`).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from autoscaler.config.sections import Alerts
from autoscaler.observe import alert_log
from autoscaler.observe.alerts import Alert
from ds2_airflow.runtime import data_dir

log = logging.getLogger(__name__)


def _line(alert: Alert, context: Any) -> dict[str, Any]:
    ti = context.get("ti") or context.get("task_instance")
    return {
        "at": datetime.now(UTC).isoformat(),
        "dag_id": getattr(ti, "dag_id", None),
        "task_id": getattr(ti, "task_id", None),
        "run_id": getattr(ti, "run_id", None),
        **alert.to_dict(),
    }


def _email(alerts: Sequence[Alert], lines: list[dict[str, Any]], settings: Alerts, context: Any) -> None:
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    job = alerts[0].job
    kinds = ", ".join(sorted({a.kind for a in alerts}))
    rows = "".join(
        f"<li><b>{html.escape(a.kind)}</b> (epoch {a.epoch if a.epoch is not None else '–'}): {html.escape(a.problem)}</li>"
        for a in alerts
    )
    where = html.escape(f"{lines[0]['dag_id']} / {lines[0]['run_id']} / {lines[0]['task_id']}")
    notifier = SmtpNotifier(
        to=list(settings.email),
        smtp_conn_id=settings.smtp_conn_id,
        subject=f"[ds2] {job}: {kinds}",
        html_content=f"<p>DS2 autoscaler, job <b>{html.escape(job)}</b>:</p><ul>{rows}</ul><p>Run: {where}</p>",
    )
    notifier.notify(context)


def send_alerts(alerts: Sequence[Alert], settings: Alerts | None, context: Any) -> None:
    """Log, file and (when the job has addresses) e-mail the alerts; never raises."""
    if not alerts:
        return
    lines = [_line(a, context) for a in alerts]
    for line in lines:
        log.error("ALERT %s %s (epoch %s): %s", line["job"], line["kind"], line["epoch"], line["problem"])
    try:
        alert_log.append(data_dir() / "alerts.jsonl", lines)  # rotated (autoscaler.observe.alert_log)
    except OSError as exc:
        log.error("alerts not written to the alerts file: %s", exc)
    if settings is not None and settings.email:
        try:
            _email(alerts, lines, settings, context)
            log.info("alert e-mail sent to %d address(es) through %s", len(settings.email), settings.smtp_conn_id)
        except Exception as exc:  # a mail server that is down must not fail the task that found the problem
            log.error("alert e-mail not sent through connection %s: %s", settings.smtp_conn_id, exc)
