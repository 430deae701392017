"""Which epochs raise which alerts (observe/alerts.py), and the jobs config's alerts section."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.config.jobs import parse_jobs
from autoscaler.errors import InputError
from autoscaler.observe.alerts import (
    FAILED_RESCALE,
    INEFFECTIVE_SCALE_UP,
    QUARANTINED_EPOCHS,
    RESTART_LOOP,
    epoch_alerts,
    views_needed,
)
from autoscaler.observe.views import DECIDED, QUARANTINED, EpochView
from autoscaler.policy.base import INEFFECTIVE_SCALE_UP as INEFFECTIVE

T0 = datetime(2026, 11, 25, tzinfo=UTC)


def v(epoch: int, state: str = DECIDED, **kw) -> EpochView:
    start = T0 + timedelta(seconds=30 * epoch)
    return EpochView(epoch=epoch, start=start, end=start + timedelta(seconds=30), state=state, **kw)


def kinds(views, n=3):
    return [a.kind for a in epoch_alerts("j", views, n)]


def test_a_failed_or_rolled_back_rescale_alerts_with_its_message():
    assert kinds([v(1, outcome="noop")]) == []
    alerts = epoch_alerts("j", [v(1), v(2, outcome="rolled-back", message="tasks not RUNNING within 60 s")], 3)
    assert [(a.kind, a.epoch) for a in alerts] == [(FAILED_RESCALE, 2)]
    assert "rolled-back: tasks not RUNNING within 60 s" in alerts[0].problem
    assert kinds([v(2, outcome="failed")]) == [FAILED_RESCALE]


def test_quarantined_epochs_alert_once_when_the_streak_reaches_n():
    q = [v(e, QUARANTINED, validation="3 of 40 expectations failed") for e in range(1, 6)]
    assert kinds([v(0), *q[:2]]) == []  # 2 in a row
    alerts = epoch_alerts("j", [v(0), *q[:3]], 3)
    assert [a.kind for a in alerts] == [QUARANTINED_EPOCHS] and "3 epochs in a row" in alerts[0].problem
    assert kinds(q[:4]) == []  # the streak goes on: no new alert (the caller reads views_needed(3) = 4 epochs)
    assert views_needed(3, 3) == 4 and views_needed(1, 1) == 2 and views_needed(1, 5) == 6
    assert kinds([v(0), q[0]], n=1) == [QUARANTINED_EPOCHS]


def test_an_ineffective_scale_up_alerts_on_the_first_epoch_that_holds_it():
    words = {"Count": "input 30,000 r/s ...; the scale-up 2 -> 4 (epoch 7) bought 3% of the capacity it promised"}
    held = {"reasons": words, "findings": {"Count": (INEFFECTIVE,)}}
    alerts = epoch_alerts("j", [v(8, reasons={"Count": "ok"}), v(9, **held)], 3)
    assert [(a.kind, a.problem) for a in alerts] == [(INEFFECTIVE_SCALE_UP, "Count: " + words["Count"])]
    assert kinds([v(9, **held), v(10, **held)]) == []  # still held: said once
    assert kinds([v(9, **held), v(11, **held)]) == [INEFFECTIVE_SCALE_UP]  # epoch 10 missing: say it again
    # The finding raises it, not the words: a reason that merely says them raises nothing.
    assert kinds([v(8), v(9, reasons=words)]) == []


def _config(alerts: dict) -> dict:
    entry = {"name": "j", "flink_job_name": "j", "jar": "build/x.jar", "parallelism_args": {"Count": "--c"}, "alerts": alerts}
    return {"version": 1, "jobs": [entry]}


def test_the_alerts_section_of_a_job(tmp_path):
    (job,) = parse_jobs(_config({"email": ["oncall@example.com"], "quarantined_epochs": 5}), "jobs.yaml")
    assert job.alerts.email == ("oncall@example.com",) and job.alerts.quarantined_epochs == 5
    assert job.alerts.smtp_conn_id == "smtp_default"
    for bad, words in [
        ({"email": ["a@b.c, evil@x.y"]}, "alerts.email[0]: 'a@b.c, evil@x.y' is not an e-mail address"),
        ({"email": ["Bob <bob@x.y>"]}, "is not an e-mail address"),
        ({"quarantined_epochs": 0}, "alerts.quarantined_epochs"),
        ({"emails": ["a@b.c"]}, "alerts.emails: unknown field"),
    ]:
        with pytest.raises(InputError, match="job 'j'") as err:
            parse_jobs(_config(bad), "jobs.yaml")
        assert words in str(err.value)


def test_a_restart_loop_alerts_once_when_the_job_was_failing_over_in_n_epochs_in_a_row():
    over = [v(e, outcome="failing-over", message=f"Flink job 'x' is RESTARTING ({e})") for e in range(1, 6)]
    assert [a.kind for a in epoch_alerts("j", over[:2], 3, 3)] == []  # one failover marks up to two epochs
    alerts = epoch_alerts("j", [v(0, outcome="noop"), *over[:3]], 3, 3)
    assert [(a.kind, a.epoch) for a in alerts] == [(RESTART_LOOP, 3)]
    assert "failing over in 3 epochs in a row" in alerts[0].problem and "RESTARTING (3)" in alerts[0].problem
    assert epoch_alerts("j", over[:4], 3, 3) == []  # the loop goes on: alerted once
    broken = [*over[:2], v(3, outcome="noop"), *over[3:5]]
    assert epoch_alerts("j", broken, 3, 3) == []  # a healthy epoch ends the streak
    assert [a.kind for a in epoch_alerts("j", over[:1], 3, 1)] == [RESTART_LOOP]
