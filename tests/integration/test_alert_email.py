"""Alerts e-mailed through Airflow's SMTP notifier to a real SMTP server (aiosmtpd on loopback, with a login).

A task process (a real Airflow SDK, the job's SMTP connection from the environment) sends the alerts
:func:`autoscaler.observe.alerts.epoch_alerts` finds in an epoch, as the record task does, and the
reconciler's failure callback sends a failed task's. The test reads what the server received:
who it was for, the subject and each alert's words. With the server down, the alert still reaches
the alerts file and nothing raises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from email import message_from_bytes, policy

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.conftest import ROOT
from tests.helpers import free_port, poll

pytestmark = pytest.mark.slow

SEND = """
import types
from datetime import UTC, datetime, timedelta
from autoscaler.config.sections import Alerts
from autoscaler.observe.alerts import UNSETTLED, Alert, epoch_alerts
from autoscaler.observe.views import QUARANTINED, EpochView
from ds2_airflow.notifiers import send_alerts

def view(epoch, state="decided", **kw):
    start = datetime(2026, 11, 25, tzinfo=UTC) + timedelta(seconds=30 * epoch)
    return EpochView(epoch=epoch, start=start, end=start + timedelta(seconds=30), state=state, **kw)

settings = Alerts(email=("oncall@example.com", "flink-team@example.com"), smtp_conn_id="ds2_alerts_smtp")
ti = types.SimpleNamespace(dag_id="ds2_lab_job", task_id="record", run_id="scheduled__2026-11-25T00:02:00+00:00")
views = [view(1), view(2, QUARANTINED, validation="2 of 41 expectations failed"), view(3, QUARANTINED),
         view(4, QUARANTINED, outcome="rolled-back", message="tasks not RUNNING within 60 s <b>")]
send_alerts(epoch_alerts("lab-job", views, 3), settings, {"ti": ti})
reconcile = types.SimpleNamespace(dag_id="ds2_reconcile", task_id="reconcile", run_id="r2")
send_alerts([Alert(UNSETTLED, "lab-job", None, "no job called 'lab-job' runs on Flink")], settings, {"ti": reconcile})
print("sent")
"""


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


def authenticate(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == b"ds2" and auth_data.password == b"s3cret-pw"
    return AuthResult(success=ok)


def _send(tmp_path, port: int) -> subprocess.CompletedProcess[str]:
    conn = {"conn_type": "smtp", "host": "127.0.0.1", "port": port, "login": "ds2", "password": "s3cret-pw",
            "extra": {"from_email": "ds2-autoscaler@example.com", "disable_tls": True, "disable_ssl": True,
                      "timeout": 10, "retry_limit": 1}}  # fmt: skip
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "DS2_DATA_DIR": str(tmp_path / "data"),
        "AIRFLOW_CONN_DS2_ALERTS_SMTP": json.dumps(conn),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "plugins"), str(ROOT / "include")]),
    }
    return subprocess.run([sys.executable, "-c", textwrap.dedent(SEND)], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_alerts_arrive_by_email_and_in_the_alerts_file(tmp_path):
    inbox = Inbox()
    server = Controller(inbox, hostname="127.0.0.1", port=free_port(), authenticator=authenticate,
                        auth_require_tls=False, auth_required=True)  # fmt: skip
    server.start()
    try:
        res = _send(tmp_path, server.port)
        assert res.returncode == 0 and "sent" in res.stdout, res.stderr
        poll("two alert e-mails", lambda: len(inbox.messages) >= 2, timeout_s=30)
    finally:
        server.stop()
    (to_first, raw_first), (to_second, raw_second) = inbox.messages
    assert to_first == to_second == ["oncall@example.com", "flink-team@example.com"]
    first = message_from_bytes(raw_first, policy=policy.default)
    assert first["Subject"] == "[ds2] lab-job: failed-rescale, quarantined-epochs"
    assert first["From"] == "ds2-autoscaler@example.com"
    body = first.get_body(("html",)).get_content()
    assert "the rescale rolled-back: tasks not RUNNING within 60 s &lt;b&gt;" in body  # escaped, not markup
    assert "3 epochs in a row quarantined by validation" in body and "ds2_lab_job" in body
    second = message_from_bytes(raw_second, policy=policy.default)
    assert second["Subject"] == "[ds2] lab-job: needs-a-person"
    assert "no job called &#x27;lab-job&#x27; runs on Flink" in second.get_body(("html",)).get_content()
    lines = [json.loads(line) for line in (tmp_path / "data" / "alerts.jsonl").read_text().splitlines()]
    assert [(a["kind"], a["dag_id"]) for a in lines] == [
        ("failed-rescale", "ds2_lab_job"), ("quarantined-epochs", "ds2_lab_job"), ("needs-a-person", "ds2_reconcile"),
    ]  # fmt: skip
    assert "s3cret-pw" not in res.stderr + res.stdout


def test_a_mail_server_that_is_down_costs_only_the_email(tmp_path):
    res = _send(tmp_path, free_port())  # nothing listens there
    assert res.returncode == 0 and "sent" in res.stdout, res.stderr
    assert "alert e-mail not sent through connection ds2_alerts_smtp" in res.stdout + res.stderr
    assert "s3cret-pw" not in res.stderr + res.stdout
    lines = (tmp_path / "data" / "alerts.jsonl").read_text().splitlines()
    assert len(lines) == 3
