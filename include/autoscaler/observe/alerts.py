"""What a person must look at, found in what the store holds of a job's newest epochs.

:func:`epoch_alerts` looks at a recorded epoch and the ones before it and names, once each:

- a **failed rescale**: the epoch's action failed or was rolled back;
- **quarantined epochs**: validation quarantined ``quarantined_epochs`` epochs in a row (alerted when
  the streak reaches that length, not again for every epoch it goes on);
- an **ineffective scale-up**: the policy found that an operator's last scale-up bought less than
  it promised, and holds further scale-ups (alerted on the first epoch that says so).
- a **restart loop**: the job was failing over (FAILING or RESTARTING when collected, or its
  ``numRestarts`` grew in the window) in ``failover_epochs`` epochs in a row, alerted as the streak
  reaches that length.

The other two alerts come from the reconciler's failures (``ds2_reconcile``): a job left not
running and a rescale journal nobody can settle. The Airflow side sends them all
(``ds2_airflow.notifiers``): the log, the alerts file the fleet page reads, and e-mail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autoscaler.config.options import ALERT_FAILOVER_EPOCHS
from autoscaler.observe.views import QUARANTINED, EpochView
from autoscaler.policy.base import INEFFECTIVE_SCALE_UP as INEFFECTIVE
from autoscaler.store.schemas import FAILED, FAILING_OVER, ROLLED_BACK

# UNSETTLED: the reconciler found the job not running, or a rescale of it nobody can finish now.
FAILED_RESCALE, QUARANTINED_EPOCHS, INEFFECTIVE_SCALE_UP, UNSETTLED, RESTART_LOOP = (
    "failed-rescale", "quarantined-epochs", "ineffective-scale-up", "needs-a-person", "restart-loop",
)  # fmt: skip


@dataclass(frozen=True)
class Alert:
    kind: str
    job: str
    epoch: int | None
    problem: str  # one line, in words

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _streak(views: Sequence[EpochView], holds: Callable[[EpochView], bool]) -> int:
    """How many of the newest views in a row ``holds``."""
    streak = 0
    for view in reversed(views):
        if not holds(view):
            break
        streak += 1
    return streak


def epoch_alerts(job: str, views: Sequence[EpochView], quarantined_epochs: int,
                 failover_epochs: int = ALERT_FAILOVER_EPOCHS.default) -> list[Alert]:  # fmt: skip
    """The alerts the newest of ``views`` (oldest first, consecutive epochs) raises."""
    if not views:
        return []
    now = views[-1]
    out = []
    if now.outcome in (FAILED, ROLLED_BACK):
        out.append(Alert(FAILED_RESCALE, job, now.epoch, f"the rescale {now.outcome}: {now.message or 'see the run'}"))
    if (streak := _streak(views, lambda v: v.state == QUARANTINED)) == quarantined_epochs:
        why = f": {now.validation}" if now.validation else ""
        out.append(Alert(QUARANTINED_EPOCHS, job, now.epoch, f"{streak} epochs in a row quarantined by validation{why}"))
    if (streak := _streak(views, lambda v: v.outcome == FAILING_OVER)) == failover_epochs:
        why = f" (latest: {now.message})" if now.message else ""
        out.append(Alert(RESTART_LOOP, job, now.epoch, f"the job was failing over in {streak} epochs in a row{why}"))
    before = views[-2] if len(views) > 1 and views[-2].epoch == now.epoch - 1 else None
    for op, found in sorted(now.findings.items()):
        if INEFFECTIVE in found and not (before and INEFFECTIVE in before.findings.get(op, ())):
            # The finding is the data the alert acts on; the decision's whole reason goes with it as it was written,
            # never searched for a kind's words.
            out.append(Alert(INEFFECTIVE_SCALE_UP, job, now.epoch, f"{op}: {now.reasons.get(op, '')}"))
    return out


def views_needed(quarantined_epochs: int, failover_epochs: int = ALERT_FAILOVER_EPOCHS.default) -> int:
    """How many epochs, the newest included, :func:`epoch_alerts` must see."""
    return max(2, quarantined_epochs + 1, failover_epochs + 1)
