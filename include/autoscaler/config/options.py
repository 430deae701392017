"""Every option of a registered job, in one place: its key in the jobs config, its default and meaning.

As in the Flink autoscaler's options class, an option is declared once here; the jobs-config
reader (:mod:`autoscaler.config.jobs`), the policy's options
(:class:`autoscaler.config.policy_options.PolicyOptions`), the rescale core,
the DAG's what-if params and the Spark job all take their defaults from these declarations.
``python -m autoscaler.config.options`` prints them as the table in ``docs/options.md``.

The validation thresholds are a group of their own (``validation.*``): they are declared, with
their defaults and meanings, by :class:`autoscaler.validate.config.ValidationConfig`.
"""

from __future__ import annotations

from datetime import timedelta

from autoscaler.config.option import Option

# The highest parallelism a proposal can name: the stand-in for "no upper bound" and for an
# infinite estimate (the DS2 reference saturates to u32::MAX; bounds cap it).
SATURATED = 2**31 - 1

SAVEPOINT_RESTART, IN_PLACE, AUTO = "savepoint-restart", "in-place", "auto"
TIMEOUT_ANSWERS = ("approve", "reject")

# -- where and how often ----------------------------------------------------------------------
FLINK_CONN_ID = Option("flink_conn_id", "connection", "flink_default", "Airflow connection of the Flink REST API.")
SPARK_CONN_ID = Option(
    "spark_conn_id",
    "connection",
    "spark_ds2",
    "Airflow connection of the policy engine (spark_connect, or spark for spark-submit).",
)
POLICY_INTERVAL = Option(
    "policy_interval",
    "duration",
    timedelta(minutes=1),
    "The epoch: how often metrics are collected and a decision made; divides a day.",
    5,
)
MAX_LATE_EPOCHS = Option(
    "max_late_epochs", "integer", 4,
    "A busy scheduler runs a job's epochs late, in order, while the next one ended at most this many intervals ago; "
    "further behind (paused, scheduler down) it skips to the latest. Late runs measure their own epochs from the "
    "boundary snapshots.", 0,
)  # fmt: skip
BATCHED = Option(
    "batched", "boolean", False,
    "Decided with the fleet: one run per interval (DAG ds2_fleet_<interval>s) collects, validates and decides every "
    "batched job of that interval and Spark connection at once, and starts the job's own DAG only to approve and "
    "rescale. The job's DAG then has no schedule of its own (backfills and what-ifs work as before).",
)  # fmt: skip
START_DATE = Option("start_date", "date", "2026-01-01", "First interval the job's DAG schedules (ISO date, UTC).")
TAGS = Option("tags", "strings", (), "Airflow tags of the job's DAGs.")
# -- collect ------------------------------------------------------------------------------------
SHORT_WINDOW = Option(
    "collect.short_window", "duration", timedelta(seconds=20),
    "Window measured on the spot when the previous epoch's boundary snapshot is missing or too old.", 1,
)  # fmt: skip
SOURCE_RATE_METRIC = Option(
    "collect.source_rate_metric", "text", None, "Per-subtask gauge of the sources saying what rate they are asked to emit."
)
PROMETHEUS_CONN_ID = Option(
    "collect.prometheus_conn_id", "connection", None,
    "Airflow connection (host, port, schema, login, password) of a Prometheus that scrapes the job's Flink reporter. "
    "When set, each epoch is read from it at the epoch's exact boundaries instead of from the REST API, and a "
    "backfill collects the epochs it finds no metrics for.",
)  # fmt: skip
# -- policy -------------------------------------------------------------------------------------
# The one registry of policy kinds: each is the module autoscaler/policy/<kind>.py (see policy.base).
POLICY_KINDS = ("ds2", "utilization", "rules", "ds2_plus")
KIND = Option(
    "policy.kind", "choice", "ds2_plus",
    "Which policy proposes a job's parallelism (autoscaler/policy/<kind>.py): ds2_plus since it won the policy lab "
    "(docs/policy-lab.md); ds2 is the reference, and what bin/ds2-policy runs unless told otherwise.",
    choices=POLICY_KINDS,
)  # fmt: skip
# A policy run given no kind (bin/ds2-policy on the DS2 reference's files, the library's reference runs)
# is DS2's: the tool reproduces the reference; a job registered without policy.kind gets KIND.default.
REFERENCE_KIND = "ds2"
FACTOR = Option("policy.factor", "number", 0.0, "Over-provisioning factor f >= 0: decision = ceil(optimal * (1 + f)).", 0.0)
THRESHOLD = Option(
    "policy.threshold", "number", None,
    "Target-rate-ratio threshold T (>= 1; none = off, as the reference): when no operator scales up and max over "
    "sources of true/observed output r > T, every decision becomes ceil(r * decision).", 1.0,
)  # fmt: skip
MIN_PARALLELISM = Option(
    "policy.min_parallelism", "bounds", {}, "Per-operator lower bound (operator id or name -> n); default 1."
)
MAX_PARALLELISM = Option("policy.max_parallelism", "bounds", {}, "Per-operator upper bound (operator id or name -> n).")
JOB_MAX_PARALLELISM = Option(
    "policy.job_max_parallelism", "integer", None,
    "Cap for every operator (the job's max parallelism); the operator's own max parallelism also caps.", 1,
)  # fmt: skip
ALIGN_TO_KEY_GROUPS = Option(
    "policy.align_to_key_groups",
    "boolean",
    False,
    "Round a proposal up to a divisor of the max parallelism so key groups spread evenly.",
)
SCALE_SOURCES = Option(
    "policy.scale_sources", "boolean", True,
    "ds2_plus and utilization size a source vertex as any other operator: its arrival plus backlog over its capacity, "
    "read from its busy time, capped at the splits it reads (Kafka partitions). Only a source the job lets move: one "
    "with no parallelism_args (a SQL job), or whose parallelism_args name it. ds2 and rules keep sources, as DS2 does.",
)  # fmt: skip
# kind utilization: the Flink Kubernetes Operator autoscaler's model, with its defaults.
TARGET_UTILIZATION = Option(
    "policy.target_utilization", "number", 0.7,
    "utilization: the busy fraction each operator is sized for (Flink: job.autoscaler.utilization.target).", 0.01,
)  # fmt: skip
UTILIZATION_BOUNDARY = Option(
    "policy.utilization_boundary", "number", 0.3,
    "utilization: act only when some operator's expected utilization leaves target +- this (Flink: ...utilization.boundary).",
    0.0,
)  # fmt: skip
SCALE_DOWN_INTERVAL = Option(
    "policy.scale_down_interval", "duration", None,
    "utilization, ds2_plus: a scale-down of a load that fell waits until it was recommended for this long, then takes "
    "the size scale_down_to says (none: the kind's own, 1h for utilization as Flink's "
    "job.autoscaler.scale-down.interval, 5m for ds2_plus; ds2_plus releases drain capacity without it).", 0,
)  # fmt: skip
SCALE_DOWN_SIZES = ("largest", "latest")
SCALE_DOWN_TO = Option(
    "policy.scale_down_to", "choice", None,
    "utilization, ds2_plus: the size a scale-down takes once scale_down_interval has passed, every epoch of it "
    "proposing less (autoscaler/policy/base.py, scale_down_wait): largest, the largest proposal of the wait and "
    "today's, so every epoch the wait saw would have been carried (Flink's DelayedScaleDown); latest, today's "
    "proposal, when the kind's size already carries the job's own measured rises (ds2_plus's steady size). None: the "
    "kind's own, largest for utilization, latest for ds2_plus.",
    choices=SCALE_DOWN_SIZES,
)  # fmt: skip
MAX_SCALE_DOWN_FACTOR = Option(
    "policy.max_scale_down_factor", "number", None,
    "One scale-down removes at most this fraction of an operator's instances (none: the kind's own, 0.4 for "
    "utilization as Flink's job.autoscaler.scale-down.max-factor, no limit for ds2 and rules).", 0.0,
)  # fmt: skip
MAX_SCALE_UP_FACTOR = Option(
    "policy.max_scale_up_factor", "number", None,
    "One scale-up adds at most this multiple of an operator's instances (none: no limit, as Flink's default "
    "job.autoscaler.scale-up.max-factor of 100000).", 0.0,
)  # fmt: skip
BACKLOG_THRESHOLD = Option(
    "policy.backlog_threshold", "duration", timedelta(minutes=5),
    "utilization: a source owing more than this much of its own input is processing a backlog: the band widens to "
    "[0, 1] (Flink: job.autoscaler.backlog-processing.lag-threshold).", 0,
)  # fmt: skip
CATCH_UP_DURATION = Option(
    "policy.catch_up_duration", "duration", None,
    "utilization, ds2_plus: the time a backlog (sources' pending records) should be worked off in (none: the kind's "
    "own, 30m for utilization as Flink's job.autoscaler.catch-up.duration; for ds2_plus the end of the first epoch "
    "decided after the rescale: two policy intervals while a change takes less than one, three while it takes less "
    "than two, ...). For ds2_plus a set value must be longer than decision_latency + restart_time; a measured restart "
    "that outgrows it is met by the kind's own deadline, and the decision says so.", 1,
)  # fmt: skip
RESTART_TIME = Option(
    "policy.restart_time", "duration", None,
    "utilization, ds2_plus: the expected restart time, whose input must be caught up too (none: the kind's own, "
    "5m for utilization as Flink's job.autoscaler.restart.time; ds2_plus uses the job's measured downtimes: predicted at "
    "its state size where that is recorded (autoscaler/rescale/mechanism.py), else their median; and this, 10s by "
    "default, only until one is measured).", 0,
)  # fmt: skip
# kind ds2_plus: DS2's sizing, a steady size from the job's own rises and drain capacity (policy/ds2_plus.py).
STEADY_QUANTILE = Option(
    "policy.steady_quantile", "number", 0.9,
    "ds2_plus: the steady size carries the arrival rate through this share of the job's own reaction horizons "
    "(decision latency + restart + one interval): it is the arrival times 1 + this quantile of the rises measured over "
    "one horizon in the history. The rest are surprises, which drain capacity works off.", 0.0,
)  # fmt: skip
STEADY_PRIOR_RISE = Option(
    "policy.steady_prior_rise", "number", round(1 / 0.7 - 1, 4),
    "ds2_plus: the rise assumed while the history holds fewer than 1 / (1 - steady_quantile) measured rises (fewer, "
    "and the quantile is just their largest): the Flink autoscaler's default headroom, target utilization 0.7 "
    "(1 / 0.7 - 1). Its weight falls linearly to 0 as the job's own rises are measured.", 0.0,
)  # fmt: skip
DECISION_LATENCY = Option(
    "policy.decision_latency", "duration", timedelta(seconds=7),
    "ds2_plus: epoch end -> the rescale starts (collection, validation, the policy run, the decide task): part of the "
    "reaction horizon and of the input a change owes. Default: the demo's measured 6.75 s "
    "(benchmarks/sim/calibration.json), rounded up.", 0,
)  # fmt: skip
DRAINED_LAG = Option(
    "policy.drained_lag", "duration", timedelta(seconds=1),
    "ds2_plus: a source owing at most this much of its own input has no backlog (the SLO's on-time bound, the lab's "
    "'late'): drain capacity is released, and a scale-down no longer waits for the drain.", 0,
)  # fmt: skip
HISTORY_WINDOW = Option(
    "policy.history_window", "duration", timedelta(hours=1),
    "ds2_plus: how far back the rises, the trend, the observed-scalability fit and the effectiveness check look. "
    "Long enough that a one-off step is a surprise to drain, not a sway to carry: at the 1-min interval its rises "
    "over a change's 3-epoch horizon are 3 of 57, under 1 - steady_quantile.", 0,
)  # fmt: skip
EFFECTIVENESS_THRESHOLD = Option(
    "policy.effectiveness_threshold", "number", 0.1,
    "ds2_plus: a scale-up that bought less than this share of the capacity it promised blocks further scale-ups of "
    "that operator until the load moves beyond its steady rise; and where no size reaches the need, the proposal "
    "stops where one more instance adds less than this share of an instance (Flink: "
    "job.autoscaler.scaling.effectiveness.threshold).", 0.0,
)  # fmt: skip
# kind rules: a Dhalion-style rule-based baseline.
BACKPRESSURE_THRESHOLD = Option(
    "policy.backpressure_threshold", "number", 0.1,
    "rules: an operator is back-pressured when its most back-pressured instance is for this fraction of the epoch.", 0.0,
)  # fmt: skip
RULES_EPOCHS = Option(
    "policy.rules_epochs", "integer", 3,
    "rules: consecutive epochs a symptom (back-pressure, or low utilization) must last before acting.", 1,
)  # fmt: skip
RULES_STEP = Option("policy.rules_step", "integer", 2, "rules: instances added or removed per action.", 1)
LOW_UTILIZATION = Option(
    "policy.low_utilization", "number", 0.3,
    "rules: with no back-pressure, an operator whose busiest instance stays below this busy fraction scales down.", 0.0,
)  # fmt: skip
# -- decide -------------------------------------------------------------------------------------
WARMUP_EPOCHS = Option(
    "policy.warmup_epochs", "integer", 1,
    "Epochs after a rescale whose metrics are never acted on (the restart's transient), counted from the decided "
    "epoch and from the one the restart fell in.", 0,
)  # fmt: skip
ACTIVATION_EPOCHS = Option(
    "policy.activation_epochs", "integer", 1,
    "Decided epochs since the last rescale, the newest in a row proposing the same direction per operator, needed "
    "before a rescale (1: act on the first).", 1,
)  # fmt: skip
IGNORE_SCALE_DOWN_BY = Option(
    "policy.ignore_scale_down_by", "integer", None,
    "Hysteresis: a scale-down by this many instances or fewer is ignored (none: the kind's own, 1 for ds2 as the "
    "reference, 0 for the kinds whose own rules hold scale-downs back).", 0,
)  # fmt: skip
COOLDOWN = Option("policy.cooldown", "duration", timedelta(0), "Minimum time from the end of a rescale to the next one.")
RECOMMENDATION_ONLY = Option(
    "recommendation_only", "boolean", False,
    "The whole chain runs, decides and records what it would do (outcome 'recommended'); the job is never "
    "rescaled (Flink: job.autoscaler.scaling.enabled=false). Not an approval gate.",
)  # fmt: skip
EXCLUDED_PERIODS = Option(
    "excluded_periods", "strings", (),
    "Daily UTC windows 'HH:MM-HH:MM' (one may wrap midnight) in which nothing is rescaled; the recommendation is "
    "still recorded (outcome 'recommended'). Flink: job.autoscaler.excluded.periods.",
)  # fmt: skip
# -- approve ------------------------------------------------------------------------------------
APPROVAL_REQUIRED = Option("approval.required", "boolean", False, "A person approves each rescale in the Airflow UI first.")
APPROVERS = Option("approval.approvers", "strings", (), "Airflow user names allowed to answer; empty: any user with access.")
APPROVAL_TIMEOUT = Option(
    "approval.timeout", "duration", timedelta(hours=1), "How long an approval waits (none or never: forever).", 1
)
ON_TIMEOUT = Option(
    "approval.on_timeout", "choice", "reject", "The answer applied when nobody answered in time.", choices=TIMEOUT_ANSWERS
)
# -- alert --------------------------------------------------------------------------------------
ALERT_EMAIL = Option(
    "alerts.email", "strings", (),
    "Addresses that get this job's alerts by e-mail through alerts.smtp_conn_id (empty: the alerts file, the fleet "
    "page and the task log only).",
)  # fmt: skip
ALERT_SMTP_CONN_ID = Option(
    "alerts.smtp_conn_id", "connection", "smtp_default",
    "Airflow SMTP connection the alert e-mails go through (host, port, login, password, from_email).",
)  # fmt: skip
ALERT_QUARANTINED_EPOCHS = Option(
    "alerts.quarantined_epochs", "integer", 3, "Alert when this many epochs in a row have been quarantined by validation.", 1
)
ALERT_FAILOVER_EPOCHS = Option(
    "alerts.failover_epochs", "integer", 3,
    "Alert (restart-loop) when the job was failing over in this many epochs in a row. One failover, which Flink "
    "recovers from by itself, marks at most two epochs (the one it interrupts and the one whose window spans the "
    "restart), so the default of 3 means it failed again.", 1,
)  # fmt: skip
# -- capacity -----------------------------------------------------------------------------------
CAPACITY_PROVIDER = Option(
    "capacity.provider", "choice", "none",
    "What adds and releases TaskManagers when a plan needs more slots or cores than the cluster has (none: the cluster "
    "is fixed and a plan is cut to fit; local: TaskManager processes beside a scripts/flink.sh cluster; the Flink "
    "Kubernetes Operator's design is in docs/deploy.md).", choices=("none", "local"),
)  # fmt: skip
CAPACITY_FLINK_DATA_DIR = Option(
    "capacity.flink_data_dir", "text", None,
    "local: the cluster instance's folder (scripts/flink.sh's FLINK_DATA_DIR; none: data/flink).",
)  # fmt: skip
MAX_TASKMANAGERS = Option(
    "capacity.max_taskmanagers", "integer", None, "The most TaskManagers the cluster may have (none: no limit).", 1
)
MAX_SLOTS = Option("capacity.max_slots", "integer", None, "The most task slots the cluster may have (none: no limit).", 1)
CORES_PER_TASKMANAGER = Option(
    "capacity.cores_per_taskmanager", "number", None,
    "CPU cores of each TaskManager: a plan never puts more busy slots on one than it has cores (none: what each "
    "declares, Flink's taskmanager.cpu.cores, which defaults to its number of slots).", 0.01,
)  # fmt: skip
RELEASE_AFTER = Option(
    "capacity.release_after", "duration", timedelta(seconds=30),
    "A TaskManager the provider added is released once it has been idle this long after the job's last rescale. "
    "Default: Flink's own resourcemanager.taskmanager-timeout, after which its resource manager releases an idle "
    "TaskManager.", 0,
)  # fmt: skip
# -- rescale ------------------------------------------------------------------------------------
MECHANISM = Option(
    "mechanism", "choice", AUTO,
    "How a rescale moves the job's state: savepoint-restart (any scheduler: new job id), in-place (adaptive scheduler: "
    "same job id), or auto: per rescale, the one with the shortest downtime predicted at the job's measured state "
    "size, or none when neither pays (autoscaler/rescale/mechanism.py).",
    choices=(AUTO, SAVEPOINT_RESTART, IN_PLACE),
)  # fmt: skip
MIN_OWN_RESCALES = Option(
    "rescale.min_own_rescales", "integer", 3,
    "auto: a mechanism's downtime line is fitted from the job's own rescales once it has this many with a measured "
    "state size (a line needs two points, and a third to be checked by); until then from the benchmark's curves for "
    "the job's state backend.", 2,
)  # fmt: skip
MAX_DOWNTIME = Option(
    "rescale.max_downtime", "duration", None,
    "auto: never take a rescale whose predicted downtime is longer (none: no limit). The job's own tolerance for a "
    "stop, stated by its owner.", 0,
)  # fmt: skip
PAYBACK_HORIZON = Option(
    "rescale.payback_horizon", "duration", timedelta(hours=1),
    "auto: a scale-down is made only when the instance-seconds it saves over this horizon exceed what its predicted "
    "downtime costs (every instance idle while the job restarts). Default: the Flink autoscaler's scale-down "
    "interval, the time it expects a lower load to hold before it acts on it.", 1,
)  # fmt: skip
SAVEPOINT_FORMAT = Option(
    "savepoint_format", "choice", "canonical",
    "The savepoint a savepoint-restart takes: canonical (portable across state backends) or native (the backend's "
    "own files: faster with large state, and the only one Flink 2's ForSt backend writes).",
    choices=("canonical", "native"),
)  # fmt: skip
SAVEPOINT_TIMEOUT = Option(
    "savepoint_timeout", "duration", timedelta(minutes=2),
    "Deadline of the stop-with-savepoint; past it the job keeps running (or is restarted unchanged).", 1,
)  # fmt: skip
START_TIMEOUT = Option(
    "start_timeout", "duration", timedelta(minutes=1),
    "Deadline for all tasks RUNNING after a restart (then the rescale rolls back); the in-place deadline too.", 1,
)  # fmt: skip

# -- tuning (Demeter's multi-configuration tuning; declared in their own module) -------------------
from autoscaler.config.tuning_options import *  # noqa: E402, F403

OPTIONS: tuple[Option, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Option))


def options_table() -> str:
    """Every option as a Markdown table (``docs/options.md``)."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for o in OPTIONS:
        kind = f"{o.kind} ({' or '.join(o.choices)})" if o.choices else o.kind
        low = "" if o.minimum is None else f", min {o.minimum:g}{' s' if o.kind == 'duration' else ''}"
        lines.append(f"| `{o.key}` | {kind}{low} | `{o.default_text}` | {o.meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(options_table(), end="")
