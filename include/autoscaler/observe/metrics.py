"""The autoscaler's own metrics: what each recorded epoch exports, with job and operator as labels.

The samples are computed here, from the store's view of one epoch (:func:`epoch_samples`), and sent
by the Airflow side the way Airflow sends its own metrics (``ds2_airflow.metrics``: StatsD or
OpenTelemetry, as ``[metrics]`` in Airflow's configuration says). So the names below get Airflow's
prefix (``statsd_prefix``, ``airflow`` by default) and, in Prometheus through a StatsD exporter,
dots become underscores: ``ds2.parallelism.recommended`` is scraped as
``airflow_ds2_parallelism_recommended{job="...", operator="..."}``.

Every metric and its meaning is declared once in :data:`METRICS`; ``docs/metrics.md`` is generated
from it (``python -m autoscaler.observe.metrics``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from autoscaler.observe.views import QUARANTINED, EpochView, current_parallelism

GAUGE, COUNTER = "gauge", "counter"


@dataclass(frozen=True)
class Metric:
    name: str  # dotted StatsD name, before Airflow's prefix
    type: str  # gauge or counter
    labels: tuple[str, ...]
    unit: str
    meaning: str


@dataclass(frozen=True)
class Sample:
    metric: Metric
    value: float
    labels: dict[str, str] = field(default_factory=dict)


_JOB = ("job",)
_OP = ("job", "operator")
PARALLELISM_CURRENT = Metric(
    "ds2.parallelism.current",
    GAUGE,
    _OP,
    "instances",
    "Instances of the operator after the epoch (a rescale's new parallelism once it succeeded).",
)
PARALLELISM_RECOMMENDED = Metric(
    "ds2.parallelism.recommended",
    GAUGE,
    _OP,
    "instances",
    "The policy's proposal for the operator in the epoch (before the decide rules).",
)
ARRIVAL_RATE = Metric(
    "ds2.source.arrival_rate",
    GAUGE,
    _OP,
    "records/s",
    "A source's arrival rate: records out plus the growth of pendingRecords, or the fallback its decision names.",
)
BACKLOG = Metric(
    "ds2.source.backlog",
    GAUGE,
    _OP,
    "records",
    "Records a source owed at the window's end (FLIP-33 pendingRecords), when it reports them.",
)
CAPACITY = Metric(
    "ds2.operator.capacity_per_instance",
    GAUGE,
    _OP,
    "records/s",
    "What one instance of the operator takes, as the policy estimated it.",
)
DECISIONS = Metric(
    "ds2.decisions_total",
    COUNTER,
    ("job", "outcome"),
    "epochs",
    "Recorded epochs by outcome: noop, succeeded, failed, rolled-back, skipped, rejected, recommended.",
)
DOWNTIME = Metric(
    "ds2.rescale.downtime_seconds",
    GAUGE,
    ("job", "outcome"),
    "s",
    "The last rescale's downtime: stop request to every task running at the new parallelism.",
)
VALIDATION_FAILURES = Metric(
    "ds2.validation.failures_total", COUNTER, _JOB, "epochs", "Epochs whose metrics failed validation (quarantined; no decision)."
)
DECISION_LAG = Metric("ds2.decision.lag_seconds", GAUGE, _JOB, "s", "From the epoch's end to its decision.")
POLICY_DURATION = Metric(
    "ds2.policy.duration_seconds", GAUGE, _JOB, "s", "The policy task's duration (Spark query and commit) for the epoch."
)
LAST_EPOCH = Metric(
    "ds2.epoch.recorded",
    GAUGE,
    _JOB,
    "epoch number",
    "The newest epoch recorded: a value that stops rising means the autoscaler stopped.",
)
METRICS: tuple[Metric, ...] = (
    PARALLELISM_CURRENT, PARALLELISM_RECOMMENDED, ARRIVAL_RATE, BACKLOG, CAPACITY, DECISIONS, DOWNTIME,
    VALIDATION_FAILURES, DECISION_LAG, POLICY_DURATION, LAST_EPOCH,
)  # fmt: skip

# What a StatsD tag value may hold once Airflow has checked it (letters, digits, _ . - /); an operator
# name such as "GroupAggregate[2], Sink: x" is exported with the rest replaced by "_".
_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]")


def label_value(value: str) -> str:
    """A label value Airflow's StatsD and OpenTelemetry loggers accept, at most 100 characters."""
    return _UNSAFE.sub("_", value)[:100] or "_"


def _sample(metric: Metric, value: float, **labels: str) -> Sample:
    assert tuple(labels) == metric.labels, (metric.name, labels)
    return Sample(metric, float(value), {k: label_value(v) for k, v in labels.items()})


def epoch_samples(job: str, views: Sequence[EpochView], outcome: str | None) -> list[Sample]:
    """What the newest of ``views`` (a recorded epoch, after the epochs before it) exports; ``outcome`` is its recorded
    action (None when none was)."""
    view = views[-1]
    out = [_sample(LAST_EPOCH, view.epoch, job=job)]
    out += [_sample(PARALLELISM_CURRENT, n, job=job, operator=op) for op, n in sorted(current_parallelism(views).items())]
    out += [_sample(PARALLELISM_RECOMMENDED, n, job=job, operator=op) for op, n in sorted(view.recommended.items())]
    out += [_sample(ARRIVAL_RATE, r, job=job, operator=op) for op, r in sorted(view.source_arrival.items())]
    out += [_sample(BACKLOG, b, job=job, operator=op) for op, b in sorted(view.source_backlog.items())]
    out += [_sample(CAPACITY, c, job=job, operator=op) for op, c in sorted(view.capacity.items())]
    if outcome:
        out.append(_sample(DECISIONS, 1, job=job, outcome=outcome))
        if view.downtime_s is not None:
            out.append(_sample(DOWNTIME, view.downtime_s, job=job, outcome=outcome))
    if view.state == QUARANTINED:
        out.append(_sample(VALIDATION_FAILURES, 1, job=job))
    if view.decided_at is not None:
        out.append(_sample(DECISION_LAG, max(0.0, (view.decided_at - view.end).total_seconds()), job=job))
    return out


def policy_duration_sample(job: str, seconds: float) -> Sample:
    return _sample(POLICY_DURATION, seconds, job=job)


def metrics_table() -> str:
    """The Markdown table of docs/metrics.md."""
    lines = ["| name (StatsD; Prometheus: `airflow_` + dots as `_`) | type | labels | unit | meaning |", "|---|---|---|---|---|"]
    for m in METRICS:
        lines.append(f"| `{m.name}` | {m.type} | {', '.join(m.labels)} | {m.unit} | {m.meaning} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(metrics_table())
