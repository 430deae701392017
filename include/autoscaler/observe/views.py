"""One read API over the store for the views of a job and of the fleet: the UI pages and a notebook read the same.

``job_view`` gives a job's epochs over a range, one :class:`EpochView` each, with everything its
page draws: the sources' arrival rate and throughput, the backlog, each operator's parallelism and
the policy's recommendation, what was done (outcome, downtime, who approved), the epoch's state
for shading, each operator's reason, and the Data Docs page and runs behind it. Every epoch of the
range is listed, also one that left no trace (``state`` "lost"), so a gap cannot go unseen.

``fleet_view`` gives one :class:`FleetRow` per job: current and recommended parallelism and the
gap, the last decision and its age, the last rescale, the epochs lost or quarantined and the
failures over the last day, and the decision lag.

From a notebook::

    from autoscaler.observe.views import job_view, fleet_view
    epochs = job_view("data/store", "testjob", interval_s=60, first=..., last=...)
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from autoscaler.observe import alert_log
from autoscaler.store.parquet import epoch_span, read_epochs
from autoscaler.store.schemas import (
    ACTIONS,
    CAPACITY,
    DECISIONS,
    FAILED,
    METRICS,
    RECOMMENDED,
    ROLLED_BACK,
    STATE,
    SUCCEEDED,
    VALIDATIONS,
)

# An epoch's state, for shading: what became of it (a rescale's outcome is in ``outcome``).
LOST, QUARANTINED, WARMUP, RECOMMENDATION, DECIDED, MEASURED = (
    "lost", "quarantined", "warm-up", "recommendation-only", "decided", "measured",
)  # fmt: skip


@dataclass(frozen=True)
class EpochView:
    """One epoch of a job, as its page shows it."""

    epoch: int
    start: datetime
    end: datetime
    state: str  # lost, quarantined, warm-up, recommendation-only, decided or measured (no decision yet)
    arrival_rate: float | None = None  # the sources' arrival rate (records out + backlog growth), records/s
    throughput: float | None = None  # what the sources emitted, records/s
    backlog: float | None = None  # records the sources owed at the window's end
    source_arrival: dict[str, float] = field(default_factory=dict)  # source -> its arrival rate, records/s
    source_backlog: dict[str, float] = field(default_factory=dict)  # source -> records it owed (if reported)
    capacity: dict[str, float] = field(default_factory=dict)  # operator -> records/s one instance takes (policy)
    parallelism: dict[str, int] = field(default_factory=dict)  # operator -> instances while measured
    recommended: dict[str, int] = field(default_factory=dict)  # operator -> the policy's proposal
    reasons: dict[str, str] = field(default_factory=dict)  # operator -> the policy's reason
    findings: dict[str, tuple[str, ...]] = field(default_factory=dict)  # operator -> its codes (policy.base.FINDINGS)
    kind: str | None = None  # the policy kind that decided
    outcome: str | None = None  # the epoch's action: succeeded, noop, rejected, recommended, ...
    message: str | None = None
    applied: dict[str, int] = field(default_factory=dict)  # operator -> parallelism after a rescale
    downtime_s: float | None = None
    rescaled_at: datetime | None = None  # when a rescale of this epoch finished (succeeded or not)
    approved_by: str | None = None
    validation: str | None = None  # the validation's one-line summary
    docs_page: str | None = None  # its GX Data Docs page
    run_id: str | None = None  # the run that decided it
    decided_at: datetime | None = None
    state_bytes: int | None = None  # the job's state in its latest checkpoint at the epoch's end (table STATE)
    capacity_events: tuple[dict[str, Any], ...] = ()  # TaskManagers added or released at this epoch (table CAPACITY)


def _by_epoch(rows: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(int(row["epoch"]), []).append(row)
    return out


def _per_operator(rows: Iterable[dict[str, Any]], column: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        out[row["operator_name"]] = out.get(row["operator_name"], 0.0) + row[column]
    return out


def job_view(store_root: str | Path, job: str, interval_s: float, first: int, last: int) -> list[EpochView]:
    """Every epoch of ``job`` in [first, last], oldest first."""
    epochs = range(first, last + 1)
    metrics = _by_epoch(read_epochs(store_root, METRICS, job, epochs).to_pylist())
    decisions = _by_epoch(read_epochs(store_root, DECISIONS, job, epochs).to_pylist())
    actions = {a["epoch"]: a for a in read_epochs(store_root, ACTIONS, job, epochs).to_pylist()}
    state: dict[int, int] = {}
    for row in read_epochs(store_root, STATE, job, epochs, columns=["state_bytes"]).to_pylist():
        state[row["epoch"]] = state.get(row["epoch"], 0) + int(row["state_bytes"])
    capacity = _by_epoch(read_epochs(store_root, CAPACITY, job, epochs).to_pylist())
    validations: dict[int, dict[str, Any]] = {}
    for v in sorted(read_epochs(store_root, VALIDATIONS, job, epochs).to_pylist(), key=lambda v: v["validated_at"]):
        validations[v["epoch"]] = v  # the latest validation of each epoch
    out = []
    for epoch in epochs:
        start = datetime.fromtimestamp(epoch * interval_s, tz=UTC)
        rows, decided = metrics.get(epoch, []), decisions.get(epoch, [])
        action, valid = actions.get(epoch), validations.get(epoch)
        sources = [r for r in rows if r["is_source"]]
        pending = [r["pending_records"] for r in sources if r.get("pending_records") is not None]
        options = json.loads(decided[0]["options"]) if decided else {}
        out.append(
            EpochView(
                epoch=epoch,
                start=start,
                end=start + timedelta(seconds=interval_s),
                state=_state(rows, decided, action, valid),
                arrival_rate=sum(r["true_output_rate"] for r in sources) if sources else None,
                throughput=sum(r["observed_output_rate"] for r in sources) if sources else None,
                backlog=sum(pending) if pending else None,
                source_arrival=_per_operator(sources, "true_output_rate"),
                source_backlog=_per_operator([r for r in sources if r.get("pending_records") is not None], "pending_records"),
                capacity=_per_operator(
                    [d for d in decided if not d["is_source"] and d["capacity_per_instance"]], "capacity_per_instance"
                ),
                parallelism={r["operator_name"]: r["parallelism"] for r in rows},
                recommended={d["operator_name"]: d["target_parallelism"] for d in decided if not d["is_source"]},
                reasons={d["operator_name"]: d["reason"] for d in decided},
                findings={d["operator_name"]: tuple(d["findings"].split(",")) for d in decided if d.get("findings")},
                kind=options.get("kind"),
                outcome=action["outcome"] if action else None,
                message=action["message"] if action else None,
                applied=json.loads(action["new_parallelism"]) if action and action["outcome"] == SUCCEEDED else {},
                downtime_s=action["downtime_s"] if action else None,
                rescaled_at=action["finished_at"] if action else None,
                approved_by=action["approved_by"] if action else None,
                validation=valid["summary"] if valid else None,
                docs_page=valid["docs_page"] if valid else None,
                run_id=decided[0]["run_id"] if decided else (valid["run_id"] if valid else None),
                decided_at=max((d["decided_at"] for d in decided), default=None),
                state_bytes=state.get(epoch),
                capacity_events=tuple(capacity.get(epoch, [])),
            )
        )
    return out


def _state(rows: list[dict[str, Any]], decided: list[dict[str, Any]], action: dict[str, Any] | None,
           valid: dict[str, Any] | None) -> str:  # fmt: skip
    return epoch_state(
        quarantined=bool(valid and valid["status"] == "failed"),
        traced=bool(rows or decided or action),
        recommended=bool(action and action["outcome"] == RECOMMENDED),
        warm=any(d["status"] == "warmup" for d in decided) or any(r["warmup"] for r in rows),
        decided=bool(decided),
    )


def epoch_state(quarantined: bool, traced: bool, recommended: bool, warm: bool, decided: bool) -> str:
    """An epoch's state for shading, from what the store holds of it (the job view and its series share it)."""
    if quarantined:
        return QUARANTINED
    if not traced:
        return LOST
    if recommended:
        return RECOMMENDATION
    if warm:
        return WARMUP
    return DECIDED if decided else MEASURED


@dataclass(frozen=True)
class FleetRow:
    """One job on the fleet page."""

    job: str
    current: dict[str, int]  # operator -> parallelism in the newest measured epoch
    recommended: dict[str, int]  # operator -> the newest decision's proposal
    last_decision_epoch: int | None
    last_decision_age_s: float | None
    last_rescale: datetime | None
    lost_last_day: int
    quarantined_last_day: int
    failures_last_day: int
    decision_lag_s: float | None  # median over the last day: epoch end -> decision

    @property
    def gap(self) -> int:
        """Instances the recommendation adds (+) or removes (-), over every operator."""
        return sum(self.recommended.get(op, n) - n for op, n in self.current.items())


def fleet_view(store_root: str | Path, jobs: Sequence[tuple[str, float]], now: datetime) -> list[FleetRow]:
    """One row per (job name, interval in seconds), from the last day of each job's epochs."""
    out = []
    for job, interval_s in jobs:
        last = int(now.timestamp() // interval_s) - 1
        first = last - int(86_400 // interval_s) + 1
        day = job_view(store_root, job, interval_s, first, last)
        # A job not measured within the day (stopped, or a copied store) shows what it last ran with and last
        # decided, from its newest stored epochs; the age of that decision says how stale it is.
        latest = day if any(e.parallelism for e in day) else _newest_epochs(store_root, job, interval_s) or day
        decided = [e for e in day if e.recommended]
        newest = next((e for e in reversed(latest) if e.recommended), None)
        lags = [(e.decided_at - e.end).total_seconds() for e in decided if e.decided_at]
        rescales = [a for a in read_epochs(store_root, ACTIONS, job).to_pylist() if a["outcome"] == SUCCEEDED]
        # A job registered within the day has no trace before its first epoch: those are not lost.
        since = min((e.epoch for e in day if e.state != LOST), default=last + 1)
        out.append(
            FleetRow(
                job=job,
                current=current_parallelism(latest),
                recommended=newest.recommended if newest else {},
                last_decision_epoch=newest.epoch if newest else None,
                last_decision_age_s=(now - newest.decided_at).total_seconds() if newest and newest.decided_at else None,
                last_rescale=max((a["finished_at"] for a in rescales if a["finished_at"]), default=None),
                lost_last_day=sum(1 for e in day if e.state == LOST and since <= e.epoch < last),
                quarantined_last_day=sum(1 for e in day if e.state == QUARANTINED),
                failures_last_day=sum(1 for e in day if e.outcome in (FAILED, ROLLED_BACK)),
                decision_lag_s=statistics.median(lags) if lags else None,
            )
        )
    return out


def _newest_epochs(store_root: str | Path, job: str, interval_s: float, count: int = 12) -> list[EpochView]:
    """The newest ``count`` epochs a job has metrics for, whenever they were; empty if it has none."""
    known = epoch_span(store_root, METRICS, job)
    return job_view(store_root, job, interval_s, max(known[0], known[1] - count + 1), known[1]) if known else []


def current_parallelism(views: Sequence[EpochView]) -> dict[str, int]:
    """What the job runs with after ``views`` (consecutive epochs, oldest first): the newest measured parallelism,
    with the new one of every rescale recorded since (the epoch that rescaled measured the old one) or that finished
    after that window (a rescale recorded under an earlier epoch while this one ran late)."""
    measured = [v for v in views if v.parallelism]
    if not measured:
        return {}
    now = measured[-1]
    current = dict(now.parallelism)
    for view in views:
        if view.applied and (view.epoch >= now.epoch or (view.rescaled_at is not None and view.rescaled_at > now.end)):
            current.update(view.applied)
    return current


def recent_alerts(path: str | Path, since_s: float, now: datetime | None = None) -> dict[str, list[dict[str, Any]]]:
    """The alerts of the last ``since_s`` seconds in an alerts file (one JSON object a line), by DAG id, oldest first.

    A line that is not an alert (torn by a crash, edited by hand) is skipped: the page must still load.
    """
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=since_s)
    out: dict[str, list[dict[str, Any]]] = {}
    for line in alert_log.lines(path):  # both generations of the rotated file
        try:
            alert = json.loads(line)
            at = datetime.fromisoformat(alert["at"])
        except (ValueError, KeyError, TypeError):
            continue
        if at >= cutoff and isinstance(alert.get("dag_id"), str):
            out.setdefault(alert["dag_id"], []).append(alert)
    return out


def job_alerts(by_dag: dict[str, list[dict[str, Any]]], job: str, dag_id: str) -> list[dict[str, Any]]:
    """A job's alerts, oldest first: those naming the job (the reconciler's DAG serves every job) and, for alerts
    written before they named one, those of its scaling DAG."""
    every = [a for alerts in by_dag.values() for a in alerts]
    mine = [a for a in every if a.get("job") == job or (not a.get("job") and a.get("dag_id") == dag_id)]
    return sorted(mine, key=lambda a: str(a.get("at")))
