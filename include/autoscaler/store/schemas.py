"""The data contracts: the metrics, decisions and actions tables, each defined once.

Every engine derives its schema from here: pyarrow (collection, the store) via
:meth:`Table.arrow_schema`, Spark via :meth:`Table.spark_ddl`. Tables are partitioned by
``job`` and ``epoch_block`` (see :mod:`autoscaler.store.parquet` for why blocks of epochs rather than
one directory per epoch); partition columns live in the directory names, not in the files.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

_ARROW_TYPES = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
_SPARK_TYPES = {
    "string": "STRING",
    "int": "INT",
    "long": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "TIMESTAMP",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # one of _ARROW_TYPES
    nullable: bool
    doc: str


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ("job", "epoch_block")
    doc: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def data_columns(self) -> list[Column]:
        """Columns stored inside the Parquet files (everything but the partition columns)."""
        return [c for c in self.columns if c.name not in self.partition_by]

    def arrow_schema(self, with_partitions: bool = True) -> pa.Schema:
        """The table's Arrow schema, built once per table (a store in memory asks for it at every read and write)."""
        key = f"_arrow_schema_{with_partitions}"
        schema = self.__dict__.get(key)
        if schema is None:
            cols = self.columns if with_partitions else self.data_columns
            schema = pa.schema([pa.field(c.name, _ARROW_TYPES[c.type], nullable=c.nullable) for c in cols])
            object.__setattr__(self, key, schema)  # a cache, not a field (the dataclass is frozen)
        return schema

    def spark_types(self) -> list[tuple[str, str]]:
        """(column, Spark SQL type) in table order, partition columns included."""
        return [(c.name, _SPARK_TYPES[c.type]) for c in self.columns]

    def spark_ddl(self, with_partitions: bool = True) -> str:
        cols = self.columns if with_partitions else self.data_columns
        return ", ".join(f"`{c.name}` {_SPARK_TYPES[c.type]}{'' if c.nullable else ' NOT NULL'}" for c in cols)


_KEYS = (
    Column("job", "string", False, "Registered job name (partition)."),
    Column("epoch", "long", False, "Policy interval number; for DS2 files the k-th window of every instance."),
    Column("epoch_block", "long", False, "epoch // EPOCH_BLOCK_SIZE (partition, derived)."),
)

# The outcome of an epoch (ACTIONS.outcome). A rescale reports one of RESCALE_OUTCOMES.
SUCCEEDED, FAILED, ROLLED_BACK, NOOP = "succeeded", "failed", "rolled-back", "noop"
RESCALE_OUTCOMES = (SUCCEEDED, FAILED, ROLLED_BACK, NOOP)
# Outcomes of an epoch in which nothing was rescaled. RECOMMENDED: a rescale was decided but not acted on
# (recommendation-only job, excluded period).
# FAILING_OVER: the job failed and was restarting by its restart strategy in the epoch (collection found it
# FAILING or RESTARTING, or its numRestarts grew in the window): nothing is decided or rescaled while it does.
SKIPPED, REJECTED, RECOMMENDED, FAILING_OVER = "skipped", "rejected", "recommended", "failing-over"
NOT_ACTED = (NOOP, SKIPPED, REJECTED, RECOMMENDED, FAILING_OVER)
ALL = (*RESCALE_OUTCOMES, SKIPPED, REJECTED, RECOMMENDED, FAILING_OVER)
# After these the job runs anew (new job id or restarted tasks): warm-up, activation and cooldown count from
# them. A failover restarts it as a rescale does, with the same transient (the catch-up of what it missed).
RESTARTED = (SUCCEEDED, ROLLED_BACK, FAILING_OVER)
# These make the epoch's run fail, so that it shows red in the UI.
RUN_FAILS = (FAILED, ROLLED_BACK)

METRICS = Table(
    "metrics",
    _KEYS
    + (
        Column("operator_id", "string", False, "Operator (Flink job vertex) id."),
        Column("operator_name", "string", False, "Operator name as shown by the engine."),
        Column("instance", "int", False, "1-based instance (subtask) number."),
        Column("parallelism", "int", False, "Instances of the operator while the window was measured."),
        Column(
            "max_parallelism",
            "int",
            True,
            "The highest parallelism at which each instance has work: the operator's max parallelism (key groups), "
            "or for a source reading fewer splits (Kafka partitions), their count; when known.",
        ),
        Column("is_source", "boolean", False, "True for operators without inputs."),
        Column("window_start", "timestamp", False, "Window start (UTC; DS2 logs: their monotonic clock)."),
        Column("window_end", "timestamp", True, "Window end, when known."),
        Column("records_in", "long", True, "Records received in the window."),
        Column("records_out", "long", True, "Records emitted in the window."),
        Column("busy_ms", "double", True, "Busy (useful) time in the window, ms."),
        Column("idle_ms", "double", True, "Idle time in the window, ms."),
        Column("backpressured_ms", "double", True, "Back-pressured time in the window, ms."),
        Column("true_processing_rate", "double", False, "Records in per busy second (sources: taken in, in arrival units)."),
        Column("true_output_rate", "double", False, "Records out per second of useful time."),
        Column("observed_processing_rate", "double", False, "Records in per second of wall time (sources: records taken in)."),
        Column("observed_output_rate", "double", False, "Records out per second of wall time."),
        Column("warmup", "boolean", False, "Window overlaps a (re)start; never used for a decision."),
        Column("pending_records", "double", True, "Sources: records owed at the window's end (FLIP-33), if reported."),
        Column(
            "source_format", "string", False, "Where the row came from: flink-rest, prometheus, ds2-rates-log or ds2-rate-files."
        ),
        Column(
            "source_rate_basis",
            "string",
            True,
            "Sources: how the arrival rate (true_output_rate) was known: emitted+lag, emitted+end-lag, emitted-unblocked, "
            "emitted, or gauge (oracle); null for operators and for DS2 files (their true output rate is the file's).",
        ),
    ),
    doc="One row per job, epoch, operator and instance.",
)

DECISIONS = Table(
    "decisions",
    _KEYS
    + (
        Column("operator_id", "string", False, "Operator id."),
        Column("operator_name", "string", False, "Operator name."),
        Column("is_source", "boolean", False, "True for sources (sized only by kinds that size them, see policy.scale_sources)."),
        Column("status", "string", False, "ok, or incomplete (metrics missing: no change proposed)."),
        Column("current_parallelism", "int", False, "Parallelism while the epoch was measured."),
        Column("instances_observed", "int", False, "Instances with metrics in the epoch."),
        Column("true_processing_rate", "double", True, "Aggregated true processing rate (sum over instances)."),
        Column("true_output_rate", "double", True, "Aggregated true output rate (sources: after overrides)."),
        Column("capacity_per_instance", "double", True, "true_processing_rate / current_parallelism."),
        Column("target_input_rate", "double", True, "Sum of the upstream outputs at optimal parallelism."),
        Column("target_output_rate", "double", True, "Output this operator would produce at optimal parallelism."),
        Column("optimal_parallelism", "double", True, "Unrounded DS2 estimate (NaN/inf as computed)."),
        Column("target_parallelism", "int", False, "Proposal after factor, threshold rule, bounds and alignment."),
        Column("source_rate_ratio", "double", True, "Max over sources of true/observed output (threshold rule)."),
        Column("reason", "string", False, "Why this proposal, in words."),
        Column("options", "string", False, "Policy options used (JSON)."),
        Column("run_id", "string", False, "Identifier of the policy run that wrote the row."),
        Column("run_type", "string", False, "live, backfill, what-if or offline."),
        Column("decided_at", "timestamp", False, "When the policy run computed it (UTC)."),
        Column(
            "findings",
            "string",
            True,
            "What the kind found that other stages act on: codes of "
            "policy.base.FINDINGS joined by ',' (null: nothing; rows written before the column: null).",
        ),
    ),
    doc="One row per job, epoch and operator: the DS2 estimate, the proposal and why.",
)

ACTIONS = Table(
    "actions",
    _KEYS
    + (
        Column("action_id", "string", False, "Unique id of the rescale attempt."),
        Column("mechanism", "string", False, "savepoint-restart or in-place (auto: none was chosen; nothing was rescaled)."),
        Column("approved_by", "string", True, "Who approved it (null when no approval was required)."),
        Column("old_flink_job_id", "string", True, "Flink job id before the action."),
        Column("new_flink_job_id", "string", True, "Flink job id after the action."),
        Column("old_parallelism", "string", False, "Operator -> parallelism before (JSON)."),
        Column("new_parallelism", "string", False, "Operator -> parallelism requested (JSON)."),
        Column("savepoint_path", "string", True, "Savepoint used, if any."),
        Column("downtime_s", "double", True, "Stop request to all tasks running at the new parallelism."),
        Column("outcome", "string", False, "succeeded, failed, rolled-back, noop, skipped, rejected, recommended, failing-over."),
        Column("message", "string", False, "What happened, in words."),
        Column("started_at", "timestamp", False, "UTC."),
        Column("finished_at", "timestamp", True, "UTC."),
    ),
    doc="One row per job, epoch and rescale attempt: the audit trail.",
)

TABLES = {t.name: t for t in (METRICS, DECISIONS, ACTIONS)}

VALIDATIONS = Table(
    "validations",
    _KEYS
    + (
        Column("status", "string", False, "passed, not-decidable (valid, but e.g. a warm-up window) or failed."),
        Column("decidable", "boolean", False, "The policy may decide on this epoch."),
        Column("rows", "long", False, "Metrics rows validated."),
        Column("expectations", "int", False, "Expectations evaluated."),
        Column("failed", "int", False, "Critical expectations that failed (0 when the epoch passed)."),
        Column("failed_rules", "string", False, "Comma-separated ids of the failed (or warned) rules; empty when none."),
        Column("summary", "string", False, "The one-line outcome, in words."),
        Column("engine", "string", False, "GX execution engine: pandas or spark."),
        Column("suite_version", "int", False, "Version of the expectation suite's rules."),
        Column("thresholds", "string", False, "Validation settings used (JSON)."),
        Column("docs_page", "string", True, "GX Data Docs page of the validation, if written."),
        Column("quarantine", "string", True, "Where the rejected rows were moved, if they were."),
        Column("run_id", "string", True, "Run that validated the epoch (e.g. the Airflow run id), when known."),
        Column("validated_at", "timestamp", False, "When the validation ran (UTC)."),
    ),
    doc="One row per job and epoch: the outcome of validating its metrics before any decision.",
)

TABLES["validations"] = VALIDATIONS

STATE = Table(
    "state",
    _KEYS
    + (
        Column("operator_id", "string", False, "Flink job vertex id."),
        Column("operator_name", "string", False, "Vertex name as Flink shows it."),
        Column("checkpoint_id", "long", False, "The job's latest completed checkpoint at the epoch's end."),
        Column("checkpoint_at", "timestamp", False, "When that checkpoint completed (UTC)."),
        Column("state_bytes", "long", False, "The operator's full state size in it (Flink's state_size)."),
        Column("checkpointed_bytes", "long", True, "What that checkpoint wrote of it (incremental: only the new files)."),
        Column("state_backend", "string", True, "hashmap, rocksdb or forst (the job's checkpoint config), when known."),
    ),
    doc="One row per job, epoch and operator: the keyed and operator state size from Flink's checkpoint statistics.",
)

CAPACITY = Table(
    "capacity",
    _KEYS
    + (
        Column("event_id", "string", False, "Unique id of the event (an add is the rescale action's id + ':add')."),
        Column("event", "string", False, "add or release."),
        Column("provider", "string", False, "The capacity provider that acted (local, ...)."),
        Column("taskmanagers", "string", False, "TaskManager resource ids added or released (JSON list)."),
        Column("slots", "int", False, "Task slots they bring or take away."),
        Column("cores", "double", False, "CPU cores they bring or take away."),
        Column("outcome", "string", False, "succeeded or failed."),
        Column("message", "string", False, "Why, and what happened, in words."),
        Column("at", "timestamp", False, "UTC."),
    ),
    doc="One row per job, epoch and capacity event: every TaskManager added or released for the job.",
)

TABLES["state"] = STATE
TABLES["capacity"] = CAPACITY

PROFILES = Table(
    "profiles",
    _KEYS
    + (
        Column("round_id", "string", False, "The tuning round (job, epoch and attempt) that ran the copy."),
        Column("copy_id", "string", False, "The copy's id within the store (<round>-<n>)."),
        Column("configuration", "string", False, "The candidate configuration, in words (Configuration.key)."),
        Column("config_json", "string", False, "The candidate configuration as JSON (Configuration.to_dict)."),
        Column("rate", "double", True, "The source rate the copy was asked to run at (null: a replay as fast as it could)."),
        Column("outcome", "string", False, "succeeded or failed."),
        Column("message", "string", False, "What happened, in words."),
        Column("predicted_max_rate", "double", True, "What the model predicted the copy would sustain, before it ran."),
        Column("max_rate", "double", True, "The source rate it could sustain, by DS2's model of its measured rates."),
        Column("observed_rate", "double", True, "The source rate it ran at over the measured window."),
        Column("checkpoint_s", "double", True, "Mean end-to-end duration of its completed checkpoints."),
        Column("checkpoint_bytes", "long", True, "The state size of its latest completed checkpoint."),
        Column("restart_s", "double", True, "From its TaskManager killed to all its tasks running again."),
        Column("recovery_s", "double", True, "Restart plus the catch-up at the forecast rate (null: it could not keep up)."),
        Column("cpu_load", "double", True, "Its TaskManager's JVM CPU load (Flink's Status.JVM.CPU.Load, 0-1)."),
        Column("heap_used_mb", "double", True, "Its TaskManager's used JVM heap."),
        Column("managed_used_mb", "double", True, "Its TaskManager's used managed memory."),
        Column("slot_seconds", "double", False, "Task slots it held × seconds it held them: the profiling cost."),
        Column("job_failed", "boolean", False, "Its cluster ran but the job failed or kept restarting at this configuration."),
        Column("started_at", "timestamp", False, "UTC."),
        Column("finished_at", "timestamp", False, "UTC."),
    ),
    doc="One row per job, epoch and profiling copy: a candidate configuration run beside the job, and what it measured.",
)

TUNING = Table(
    "tuning",
    _KEYS
    + (
        Column("round_id", "string", False, "The tuning round."),
        Column("outcome", "string", False, "skipped, recommended, none (no configuration sure enough yet), applied or failed."),
        Column("message", "string", False, "Why, in words."),
        Column("current_rate", "double", True, "The job's arrival rate at the round (records/s)."),
        Column("forecast_rate", "double", True, "The rate the round tuned for (the forecast, at least the current rate)."),
        Column("in_force", "string", True, "The configuration the job ran with (JSON)."),
        Column("recommended", "string", True, "The recommended configuration (JSON; null: none)."),
        Column("predicted_max_rate", "double", True, "The model's mean max rate of the recommended configuration."),
        Column("predicted_recovery_s", "double", True, "The model's mean recovery time of the recommended configuration."),
        Column("p_feasible", "double", True, "The model's probability that it sustains the forecast and recovers in time."),
        Column("profiles_run", "int", False, "Profiling copies this round ran."),
        Column("slot_seconds", "double", False, "Task-slot seconds this round's copies held."),
        Column("at", "timestamp", False, "UTC."),
    ),
    doc="One row per job and epoch with a tuning round: the forecast, the recommendation and what became of it.",
)

TABLES["profiles"] = PROFILES
TABLES["tuning"] = TUNING
