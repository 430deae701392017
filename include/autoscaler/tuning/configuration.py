"""A job's configuration beyond parallelism, and the candidates a tuning round chooses from.

A :class:`Configuration` is what Demeter tunes together: per-operator parallelism, the checkpoint interval,
and the TaskManagers' memory (process memory per task slot and the managed-memory fraction). The checkpoint
interval is a job setting (``execution.checkpointing.interval`` in the restart's Flink configuration); the
memory settings are the TaskManagers' own, so they take new TaskManagers (:mod:`autoscaler.capacity`).

Cost is counted as the project counts it: task slots (instance-seconds) first, then memory (MB-seconds);
a longer checkpoint interval costs nothing and is preferred at equal cost (less checkpoint work).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from autoscaler.config.fields import parse_duration
from autoscaler.errors import InputError

MAX_MANAGED_FRACTION = 0.9  # Flink refuses a managed fraction of 1: the task heap and network need the rest

# Flink's TaskManager memory model with its defaults (taskmanager.memory.*: JVM metaspace 256 MB, JVM overhead 10 %
# of the process within 192 MB-1 GB, framework heap and off-heap 128 MB each, network 10 % of Flink's memory from
# 64 MB): a TaskManager whose parts do not fit in its process memory does not start ("The execution result is empty").
METASPACE_MB, OVERHEAD_MB, FRAMEWORK_MB, NETWORK_MIN_MB = 256, (192, 1024), 256, 64


def flink_memory_fits(process_mb: int, managed_fraction: float) -> bool:
    """Whether a TaskManager of ``process_mb`` with ``managed_fraction`` leaves a task heap, by Flink's defaults."""
    overhead = min(max(0.1 * process_mb, OVERHEAD_MB[0]), OVERHEAD_MB[1])
    flink_mb = process_mb - METASPACE_MB - overhead
    network = max(0.1 * flink_mb, NETWORK_MIN_MB)
    return flink_mb - FRAMEWORK_MB - network - managed_fraction * flink_mb > 0


@dataclass(frozen=True)
class Configuration:
    """One configuration of a job: what a profiling copy runs with, and what a tuning round applies."""

    parallelism: tuple[tuple[str, int], ...]  # (operator name, parallelism), in a stable order
    checkpoint_interval_s: float
    memory_per_slot_mb: int
    managed_fraction: float

    def __post_init__(self) -> None:
        where = "configuration"
        if not self.parallelism or any(not isinstance(p, int) or isinstance(p, bool) or p < 1 for _, p in self.parallelism):
            raise InputError(where, f"every operator's parallelism must be an integer >= 1, got {dict(self.parallelism)}")
        if not (self.checkpoint_interval_s >= 1):
            raise InputError(where, f"the checkpoint interval must be at least 1 s, got {self.checkpoint_interval_s!r}")
        if not isinstance(self.memory_per_slot_mb, int) or self.memory_per_slot_mb < 64:
            raise InputError(where, f"memory per slot must be a whole number of MB >= 64, got {self.memory_per_slot_mb!r}")
        if not (0 < self.managed_fraction <= MAX_MANAGED_FRACTION):
            raise InputError(where, f"the managed fraction must be in (0, {MAX_MANAGED_FRACTION}], got {self.managed_fraction!r}")

    @classmethod
    def of(cls, parallelism: Mapping[str, int], checkpoint_interval_s: float, memory_per_slot_mb: int,
           managed_fraction: float) -> Configuration:  # fmt: skip
        return cls(tuple(sorted(parallelism.items())), float(checkpoint_interval_s), int(memory_per_slot_mb),
                   round(float(managed_fraction), 4))  # fmt: skip

    @property
    def operators(self) -> dict[str, int]:
        return dict(self.parallelism)

    @property
    def slots(self) -> int:
        """Task slots the job holds: one per subtask of its widest vertex (Flink's default slot sharing)."""
        return max(p for _, p in self.parallelism)

    def taskmanager_mb(self, slots_per_taskmanager: int, floor_mb: int) -> int:
        """Process memory of a TaskManager of ``slots_per_taskmanager`` slots, never below ``floor_mb``."""
        return max(self.memory_per_slot_mb * slots_per_taskmanager, floor_mb)

    def memory_mb(self, slots_per_taskmanager: int, floor_mb: int) -> int:
        """The memory the job holds: its TaskManagers' process memory (whole TaskManagers)."""
        taskmanagers = math.ceil(self.slots / slots_per_taskmanager)
        return taskmanagers * self.taskmanager_mb(slots_per_taskmanager, floor_mb)

    def cost(self, slots_per_taskmanager: int, floor_mb: int) -> tuple[int, int, float]:
        """Slots, then memory, then a shorter checkpoint interval (more checkpoint work): lower is cheaper."""
        return self.slots, self.memory_mb(slots_per_taskmanager, floor_mb), -self.checkpoint_interval_s

    def starts(self, slots_per_taskmanager: int, floor_mb: int) -> bool:
        """Whether its TaskManagers start, both a copy's (one of its slots) and the job's (of the cluster's shape)."""
        return all(flink_memory_fits(self.taskmanager_mb(n, floor_mb), self.managed_fraction)
                   for n in (self.slots, slots_per_taskmanager))  # fmt: skip

    def flink_configuration(self) -> dict[str, str]:
        """The job settings a (re)start passes in the jar run's ``flinkConfiguration``."""
        return {"execution.checkpointing.interval": f"{round(self.checkpoint_interval_s * 1000)}ms"}

    def taskmanager_settings(self, slots_per_taskmanager: int, floor_mb: int) -> dict[str, str]:
        """The TaskManager settings this configuration needs (Flink keys)."""
        return {
            "taskmanager.memory.process.size": f"{self.taskmanager_mb(slots_per_taskmanager, floor_mb)}m",
            "taskmanager.memory.managed.fraction": f"{self.managed_fraction:g}",
        }

    def key(self) -> str:
        """A short stable name, e.g. ``Count=4,Parse=2 ckpt=30s mem=512MB/slot managed=0.4``."""
        ops = ",".join(f"{n}={p}" for n, p in self.parallelism)
        memory = f"mem={self.memory_per_slot_mb}MB/slot managed={self.managed_fraction:g}"
        return f"{ops} ckpt={self.checkpoint_interval_s:g}s {memory}"

    def to_dict(self) -> dict[str, Any]:
        return {"parallelism": self.operators, "checkpoint_interval_s": self.checkpoint_interval_s,
                "memory_per_slot_mb": self.memory_per_slot_mb, "managed_fraction": self.managed_fraction}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "configuration") -> Configuration:
        try:
            return cls.of(dict(data["parallelism"]), float(data["checkpoint_interval_s"]), int(data["memory_per_slot_mb"]),
                          float(data["managed_fraction"]))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(source, f"not a configuration: {exc}") from None


def scaled(base: Mapping[str, int], slots: int) -> dict[str, int]:
    """``base`` stretched so that its widest operator has ``slots`` subtasks, the others in proportion (at least 1)."""
    widest = max(base.values())
    return {name: max(1, min(slots, math.ceil(p * slots / widest))) for name, p in base.items()}


def _grid(given: Sequence[str], in_force: float, factors: Iterable[float], parse: Any, where: str) -> list[float]:
    if given:
        try:
            values = [parse(v) for v in given]
        except (TypeError, ValueError, InputError) as exc:
            raise InputError(where, f"not a list of candidates: {exc}") from None
    else:
        values = [in_force * f for f in factors]
    return sorted(set(values))


def candidates(
    base: Mapping[str, int],
    fixed: Mapping[str, int],
    slot_range: range,
    in_force: Configuration,
    checkpoint_intervals: Sequence[str] = (),
    memory_per_slot_mb: Sequence[str] = (),
    managed_fractions: Sequence[str] = (),
) -> list[Configuration]:
    """Every configuration a round may profile: widths in ``slot_range`` × intervals × memory × fractions.

    ``base``: the parallelism of the operators a restart may move (stretched to each width); ``fixed``: the
    others' (a source's splits), kept.

    Empty candidate lists are derived from ``in_force`` (see the ``tuning.*`` options' meanings).
    """
    intervals = _grid(checkpoint_intervals, in_force.checkpoint_interval_s, (0.5, 1, 2, 4),
                      lambda v: parse_duration(v, "tuning.checkpoint_intervals").total_seconds(),
                      "tuning.checkpoint_intervals")  # fmt: skip
    memory = _grid(memory_per_slot_mb, in_force.memory_per_slot_mb, (0.5, 1, 2), lambda v: int(v), "tuning.memory_per_slot_mb")
    fractions = _grid(managed_fractions, in_force.managed_fraction, (0.5, 1, 1.5), float, "tuning.managed_fractions")
    out = []
    for slots, interval, mb, fraction in product(slot_range, intervals, memory, fractions):
        if interval < 1 or mb < 64 or not 0 < fraction <= MAX_MANAGED_FRACTION:
            continue
        out.append(Configuration.of(scaled(base, slots) | dict(fixed), max(round(interval), 1), int(mb), fraction))
    return sorted(set(out), key=lambda c: c.key())
