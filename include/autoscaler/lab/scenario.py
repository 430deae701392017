"""A lab scenario: the workload one closed-loop run puts on the test job, read from a YAML file.

```yaml
name: step-up-down
interval: 30s                 # policy interval
duration: 450s
operators:                    # per-record cost; a mode is wait (default) or cpu
  Parse: {cost_us: 20}
  Count: {cost_us: 175, mode: wait, skew: 0.0}
source: {partitions: 8, backlog: true, initial_parallelism: 2}
initial_parallelism: {Parse: 1, Count: 1, "Sink: Writer": 1}
schedule:                     # source rate (records/s) from each offset on
  - {at: 0s, rate: 20000}
  - {at: 150s, rate: 30000}
noise: 0.0                    # relative random variation of the rate, e.g. 0.1 for +-10 %
```

Besides steps, a schedule entry may ramp (``ramp_to: 30000, over: 120s``: linear from ``rate``),
swing (``sine: {amplitude: 8000, period: 300s, phase: 75s}`` around ``rate``; a phase of a
quarter period makes it a cosine) or walk at random (``walk: {step: 3000, every: 30s, min: 6000,
max: 30000, seed: 3}``: every ``every`` the rate moves by up to ``step`` either way, within
[min, max], the same walk for the same seed). The test job takes a step
schedule, so ramps, sines and noise are sampled every ``resolution`` (default 5 s; noise is
drawn per sample from ``seed``, so a scenario is the same load every time). Other keys:
``seed``, ``resolution``, ``keys``, ``max_parallelism`` (per operator, default 8: the policies'
upper bound) and ``description``.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.fields import Fields
from autoscaler.errors import InputError
from autoscaler.testjob import PARALLELISM_ARGS

SCALED = ("Parse", "Count", "Sink: Writer")  # the test job's operators a policy rescales
COSTED = ("Parse", "Count")  # the ones with a per-record cost option
MODES = ("wait", "cpu")


@dataclass(frozen=True)
class OperatorCost:
    cost_us: float = 0.0
    mode: str = "wait"
    skew: float = 0.0  # Count only: the hot key's share of all records

    @property
    def key(self) -> str:
        """The cache key of this cost's ground truth."""
        return f"{self.cost_us:g}us-{self.mode}-skew{self.skew:g}"


@dataclass(frozen=True)
class LoadChange:
    """One schedule entry: from ``at_s`` on, ``rate`` (ramping or swinging, if asked)."""

    at_s: float
    rate: float
    ramp_to: float | None = None
    over_s: float | None = None
    amplitude: float = 0.0
    period_s: float | None = None
    phase_s: float = 0.0
    walk_step: float = 0.0
    walk_every_s: float | None = None
    walk_range: tuple[float, float] = (0.0, math.inf)
    walk_seed: int = 1

    def rate_at(self, t: float) -> float:
        """The noise-free rate at ``t`` seconds since the schedule's start (``t >= at_s``)."""
        dt = t - self.at_s
        if self.ramp_to is not None and self.over_s:
            return self.rate + (self.ramp_to - self.rate) * min(max(dt / self.over_s, 0.0), 1.0)
        if self.period_s:
            return self.rate + self.amplitude * math.sin(2 * math.pi * (dt + self.phase_s) / self.period_s)
        if self.walk_every_s:
            return _walk(self, int(dt // self.walk_every_s))
        return self.rate

    @property
    def varies(self) -> bool:
        return self.ramp_to is not None or bool(self.period_s) or bool(self.walk_every_s)


@functools.cache
def _walked(change: LoadChange) -> list[float]:
    """The rates a walk has taken so far, step by step (extended on demand; the same walk for the same seed)."""
    return [change.rate]


def _walk(change: LoadChange, steps: int) -> float:
    """The walk's rate after ``steps`` steps: each moves by up to ``walk_step`` either way, within its range."""
    path = _walked(change)
    if len(path) <= steps:
        rng = random.Random(change.walk_seed)
        path[:] = [change.rate]
        low, high = change.walk_range
        for _ in range(steps):
            path.append(min(max(path[-1] + rng.uniform(-change.walk_step, change.walk_step), low), high))
    return path[steps]


@dataclass(frozen=True)
class Scenario:
    name: str
    interval_s: float
    duration_s: float
    operators: Mapping[str, OperatorCost]
    source_partitions: int | None
    backlog: bool
    source_parallelism: int
    initial_parallelism: Mapping[str, int]
    schedule: tuple[LoadChange, ...]
    noise: float = 0.0
    seed: int = 1
    resolution_s: float = 5.0
    keys: int = 10_000
    max_parallelism: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(SCALED, 8))
    description: str = ""

    def cost(self, operator: str) -> OperatorCost:
        return self.operators.get(operator, OperatorCost())

    def change_at(self, t: float) -> LoadChange:
        current = self.schedule[0]
        for change in self.schedule:
            if change.at_s <= t:
                current = change
        return current

    def rate_steps(self) -> list[tuple[float, float]]:
        """The load as the test job's step schedule: ``(offset s, records/s)``, noise included."""
        return list(self._steps())

    def _steps(self) -> tuple[tuple[float, float], ...]:
        """The schedule, sampled once per scenario: a long simulated run's judge reads it every epoch."""
        cached = self.__dict__.get("_sampled")
        if cached is None:
            cached = tuple(self._sample_steps())
            object.__setattr__(self, "_sampled", cached)  # a cache, not a field (the dataclass is frozen)
            object.__setattr__(self, "_times", [t for t, _ in cached])
        return cached

    def _sample_steps(self) -> list[tuple[float, float]]:
        rng = random.Random(self.seed)
        steps: list[tuple[float, float]] = []
        t = 0.0
        sampled = self.noise > 0 or any(c.varies for c in self.schedule)
        boundaries = sorted({c.at_s for c in self.schedule})
        while t < self.duration_s:
            rate = self.change_at(t).rate_at(t)
            if self.noise:
                rate *= 1 + self.noise * rng.uniform(-1.0, 1.0)
            steps.append((t, max(round(rate), 0)))
            if not sampled:
                later = [b for b in boundaries if b > t]
                t = later[0] if later else self.duration_s
            else:
                t = min([t + self.resolution_s] + [b for b in boundaries if b > t])
        return steps

    def _window(self, start_s: float, end_s: float) -> list[tuple[float, float, float]]:
        """The steps that overlap ``[start_s, end_s)``: (from, to, rate)."""
        steps = self._steps()
        times = self.__dict__["_times"]
        first = max(bisect.bisect_right(times, start_s) - 1, 0)
        out = []
        for k in range(first, len(steps)):
            t, r = steps[k]
            nxt = steps[k + 1][0] if k + 1 < len(steps) else math.inf
            if t >= end_s:
                break
            if nxt > start_s:
                out.append((t, nxt, r))
        return out

    def rate_over(self, start_s: float, end_s: float) -> float:
        """The highest scheduled rate in ``[start_s, end_s)`` (offsets since the schedule's start)."""
        return max((r for _, _, r in self._window(start_s, end_s)), default=0.0)

    def mean_rate(self, start_s: float, end_s: float) -> float:
        """The scheduled rate averaged over ``[start_s, end_s)`` (what a window should have carried)."""
        if end_s <= start_s:
            return 0.0
        total = sum(r * max(min(end_s, b) - max(start_s, a), 0.0) for a, b, r in self._window(start_s, end_s))
        return total / (end_s - start_s)

    def job_args(self, job_name: str, schedule_start_ms: int) -> list[str]:
        """The test job's program arguments for this workload (its parallelism args not included)."""
        schedule = ",".join(f"{t:g}s:{r:g}" for t, r in self.rate_steps())
        args = ["--job-name", job_name, "--rate-schedule", schedule, "--schedule-start-ms", str(schedule_start_ms),
                "--keys", str(self.keys), "--source-parallelism", str(self.source_parallelism)]  # fmt: skip
        for op in COSTED:
            cost = self.cost(op)
            if cost.cost_us:
                args += [f"--{op.lower()}-{cost.mode}-us", f"{cost.cost_us:g}"]
        if self.cost("Count").skew:
            args += ["--skew", f"{self.cost('Count').skew:g}"]
        if self.source_partitions:
            args += ["--partitions", str(self.source_partitions), "--backlog", "true" if self.backlog else "false"]
        return args

    def parallelism_args(self) -> list[str]:
        return [a for op in SCALED for a in (PARALLELISM_ARGS[op], str(self.initial_parallelism.get(op, 1)))]


def _change(entry: Any, index: int, where: str) -> LoadChange:
    f = Fields(entry, where, f"schedule[{index}].")
    at = f.duration("at", None)
    if at is None:
        raise f.error("at", "is required")
    rate = f.number("rate", None, 0.0)
    if rate is None:
        raise f.error("rate", "is required")
    ramp_to = f.number("ramp_to", None, 0.0)
    over = f.duration("over", None, 1.0)
    sine = Fields(f.get("sine"), where, f"schedule[{index}].sine.")
    amplitude = sine.number("amplitude", 0.0, 0.0)
    period = sine.duration("period", None, 1.0)
    phase = sine.duration("phase", timedelta(0))
    sine.done()
    walk = Fields(f.get("walk"), where, f"schedule[{index}].walk.")
    step = walk.number("step", 0.0, 0.0)
    every = walk.duration("every", None, 1.0)
    low, high = walk.number("min", 0.0, 0.0), walk.number("max", None, 0.0)
    high = math.inf if high is None else high
    seed = walk.integer("seed", 1, 0)
    walk.done()
    f.done()
    if (ramp_to is None) != (over is None):
        raise f.error("ramp_to", "a ramp needs both ramp_to and over")
    if sum(x is not None for x in (ramp_to, period, every)) > 1:
        raise f.error("sine", "an entry ramps, swings or walks: one of them")
    if every is not None and not low <= rate <= high:
        raise f.error("walk", f"the rate {rate:g} lies outside the walk's [{low:g}, {high:g}]")
    if amplitude > rate:
        raise f.error("sine", f"amplitude {amplitude:g} exceeds the rate {rate:g}: the rate would go negative")
    return LoadChange(at.total_seconds(), rate, ramp_to, over.total_seconds() if over else None, amplitude,
                      period.total_seconds() if period else None, phase.total_seconds(), step,
                      every.total_seconds() if every else None, (low, high), seed)  # fmt: skip


def parse_scenario(data: Any, where: str) -> Scenario:
    """A scenario from its YAML mapping; every error names the file and the field."""
    f = Fields(data, where)
    name = f.text("name", required=True)
    interval = f.duration("interval", None, 5.0)
    duration = f.duration("duration", None, 10.0)
    if interval is None or duration is None:
        raise f.error("interval" if interval is None else "duration", "is required")
    ops = f.mapping("operators")
    operators = {}
    for op, spec in ops.items():
        if op not in COSTED:
            raise f.error("operators", f"{op!r} has no cost option in the test job (one of {', '.join(COSTED)})")
        o = Fields(spec, where, f"operators.{op}.")
        cost = OperatorCost(o.number("cost_us", 0.0, 0.0), o.choice("mode", "wait", MODES), o.number("skew", 0.0, 0.0))
        o.done()
        if cost.skew > 1 or (cost.skew and op != "Count"):
            raise o.error("skew", "is a fraction in [0, 1], and only Count (the keyed operator) has one")
        operators[op] = cost
    src = Fields(f.get("source"), where, "source.")
    partitions = src.integer("partitions", None, 1)
    backlog = src.boolean("backlog", partitions is not None)
    source_p = src.integer("initial_parallelism", 2, 1)
    src.done()
    if backlog and partitions is None:
        raise src.error("backlog", "needs partitions: only the partitioned source owes what it could not emit")
    initial = _parallelisms(f, "initial_parallelism", 1)
    maxima = {**dict.fromkeys(SCALED, 8), **_parallelisms(f, "max_parallelism", 8)}
    entries = f.get("schedule", required=True)
    if not isinstance(entries, list) or not entries:
        raise f.error("schedule", "must be a non-empty list of {at, rate} entries")
    schedule = tuple(_change(e, i, where) for i, e in enumerate(entries))
    if schedule[0].at_s != 0 or any(b.at_s <= a.at_s for a, b in itertools.pairwise(schedule)):
        raise f.error("schedule", "must start at 0s and its times must increase")
    noise = f.number("noise", 0.0, 0.0)
    if noise >= 1:
        raise f.error("noise", f"is a fraction below 1, got {noise:g}")
    scenario = Scenario(
        name=name, interval_s=interval.total_seconds(), duration_s=duration.total_seconds(), operators=operators,
        source_partitions=partitions, backlog=backlog, source_parallelism=source_p, initial_parallelism=initial,
        schedule=schedule, noise=noise, seed=f.integer("seed", 1, 0),
        resolution_s=f.duration("resolution", None, 1.0).total_seconds() if f.get("resolution") else 5.0,
        keys=f.integer("keys", 10_000, 1), max_parallelism=maxima, description=f.text("description") or "",
    )  # fmt: skip
    f.done()
    for op, p in initial.items():
        if p > maxima[op]:
            raise f.error("initial_parallelism", f"{op} {p} is above its max_parallelism {maxima[op]}")
    return scenario


def _parallelisms(f: Fields, key: str, default: int) -> dict[str, int]:
    out = {}
    for op, value in f.mapping(key).items():
        if op not in SCALED:
            raise f.error(key, f"unknown operator {op!r} (the test job's: {', '.join(SCALED)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise f.error(key, f"{op}: expected an integer >= 1, got {value!r}")
        out[op] = value
    return out


def load_scenario(path: str | Path) -> Scenario:
    """Read and check one scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "no such scenario file") from None
    except UnicodeDecodeError:
        raise InputError(str(path), "is not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(str(path), f"not valid YAML: {str(exc).splitlines()[0]}") from None
    return parse_scenario(data, str(path))


ORACLE_RATE_METRIC = "Source__Source.scheduledRate"  # the test job's own gauge: the oracle input only


def job_settings(scenario: Scenario, kind: str, inputs: str = "honest") -> dict[str, Any]:
    """The jobs.yaml keys of a lab job that the scenario and the kind set: one place for the real lab and the simulator."""
    collect = {"short_window": f"{max(scenario.interval_s / 3, 2):g}s"}
    if inputs == "oracle":
        collect["source_rate_metric"] = ORACLE_RATE_METRIC
    return {
        "policy_interval": f"{scenario.interval_s:g}s",
        "collect": collect,
        "policy": {"kind": kind, "max_parallelism": dict(scenario.max_parallelism)},
        "tags": ["lab", scenario.name],
    }
