"""The options of multi-configuration tuning (``tuning.*``, :mod:`autoscaler.tuning`), declared once.

Imported into :mod:`autoscaler.config.options`, whose ``OPTIONS`` and table list them with the rest; kept in
a module of their own so that one stage's options can be read together.
"""

from __future__ import annotations

from datetime import timedelta

from autoscaler.config.option import Option

TUNING_SITE = Option(
    "tuning.site", "choice", "none",
    "Where profiling copies of the job run (none: no profiling, tuning is off; local: a scripts/flink.sh cluster of its "
    "own per copy, beside the job's, restoring the job's latest checkpoint from the shared checkpoint folder).",
    choices=("none", "local"),
)  # fmt: skip
TUNING_MAX_SLOTS = Option(
    "tuning.max_slots", "integer", None,
    "Budget: the most task slots all profiling copies hold at once (none: as many as the job itself holds, so "
    "profiling never more than doubles its footprint). Copies that do not fit wait for the next round.", 1,
)  # fmt: skip
TUNING_MAX_MINUTES = Option(
    "tuning.max_minutes", "integer", 10,
    "Budget: the most wall-clock minutes one profiling round may take; a copy still running then is stopped and "
    "its measurements so far are kept.", 1,
)  # fmt: skip
TUNING_WARMUP = Option(
    "tuning.warmup", "duration", timedelta(seconds=20),
    "A copy runs this long before it is measured: its restore and first metrics fetch are not its steady state "
    "(the collector's own warm-up rule: a window that spans a start is never used).", 0,
)  # fmt: skip
TUNING_MEASURE = Option(
    "tuning.measure", "duration", timedelta(seconds=30),
    "The window over which a copy's rates, busy time and resource use are measured (counter deltas, as an epoch's).", 5,
)  # fmt: skip
TUNING_RECOVERY_TARGET = Option(
    "tuning.recovery_target", "duration", None,
    "The longest recovery after a TaskManager is lost that a recommended configuration may have (none: the job's "
    "policy interval, so that a failure is over before the next decision).", 1,
)  # fmt: skip
TUNING_CONFIDENCE = Option(
    "tuning.confidence", "number", 0.9,
    "A configuration is recommended only when the model gives at least this probability that it sustains the "
    "forecast rate and recovers within the target.", 0.5,
)  # fmt: skip
TUNING_CHECKPOINT_INTERVALS = Option(
    "tuning.checkpoint_intervals", "strings", (),
    "Candidate checkpoint intervals, as durations (none: the interval in force halved, kept, doubled and "
    "quadrupled: a shorter one costs throughput, a longer one recovery time, in doubling steps around what runs).",
)  # fmt: skip
TUNING_MEMORY_PER_SLOT = Option(
    "tuning.memory_per_slot_mb", "strings", (),
    "Candidate TaskManager process memory per task slot, MB (none: what runs now, halved, kept and doubled; "
    "never below Flink's fixed overhead, see tuning.min_taskmanager_mb).",
)  # fmt: skip
TUNING_MANAGED_FRACTIONS = Option(
    "tuning.managed_fractions", "strings", (),
    "Candidate managed-memory fractions (taskmanager.memory.managed.fraction; none: the fraction in force halved, "
    "kept and 1.5 times, within (0, 0.9]).",
)  # fmt: skip
TUNING_MIN_TM_MB = Option(
    "tuning.min_taskmanager_mb", "integer", 1024,
    "No TaskManager is started with less process memory: Flink's own fixed parts (JVM metaspace 256 MB, framework "
    "heap and off-heap 256 MB, JVM overhead at least 192 MB, network at least 64 MB) leave nothing for tasks below it.",
    768,
)  # fmt: skip
TUNING_NAME_FLAG = Option(
    "tuning.name_flag", "text", "--job-name",
    "The program argument that names the job: a copy is run with its own name (<job>-profile-<n>).",
)  # fmt: skip
TUNING_RATE_FLAG = Option(
    "tuning.rate_flag", "text", None,
    "The program argument that sets a constant source rate (records/s): a copy runs at the forecast rate. None: the "
    "copy replays the job's input from the checkpoint's position as fast as it can (a Kafka source).",
)  # fmt: skip
TUNING_GROUP_FLAG = Option(
    "tuning.group_flag", "text", None,
    "The program argument that names the Kafka consumer group: a copy gets a group of its own, so the job's "
    "committed offsets are never moved.",
)  # fmt: skip
TUNING_DROP_FLAGS = Option(
    "tuning.drop_flags", "strings", (),
    "Program arguments (with their values) a copy is run without: its sink topic, so that it writes to a discarding "
    "sink, and the rate schedule that the rate flag replaces.",
)  # fmt: skip

__all__ = [name for name, value in dict(globals()).items() if isinstance(value, Option)]
