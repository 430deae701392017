"""Ground truth: the fewest instances of an operator that sustain a rate, measured, never estimated.

For one operator cost (cost per record, wait or CPU, skew) the lab measures a *capacity curve*
on the real cluster: the operator's throughput at parallelism 1, 2, ... when it is the job's
only bottleneck and saturated (the partitioned source owes far more than the job can take, the
other operators have no cost and ample instances). The minimum parallelism for a rate is then
the smallest ``p`` whose measured throughput reaches it. No policy's estimate enters it: the
curve shows a CPU-bound operator flattening on 2 cores and a skewed one capped by its hot key,
which no busy-time model sees. Curves are cached (``benchmarks/ground-truth.json``) per
operator and cost, so a sweep measures each once.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoscaler.errors import InputError
from autoscaler.lab.scenario import SCALED, OperatorCost, Scenario

SATURATING_RATE = 200_000  # records/s the source owes: far above what any tested operator takes
WARMUP_S = 8.0
MEASURE_S = 10.0
PLATEAU_GAIN = 0.05  # a parallelism that adds less than 5 % twice in a row ends the curve
SAMPLES = 3  # runs per point: the median of three is robust to one disturbed run
KNIFE_EDGE = 0.05  # a point within 5 % of the rate it must carry decides a judgement by noise


@dataclass(frozen=True)
class Curve:
    """Measured throughput (records/s in) of one operator cost at each parallelism: the median of its samples."""

    operator: str
    cost: OperatorCost
    throughput: Mapping[int, float]
    measured_at: str = ""
    samples: Mapping[int, tuple[float, ...]] = field(default_factory=dict)  # every measurement, when kept

    @property
    def key(self) -> str:
        return curve_key(self.operator, self.cost)

    def minimum_parallelism(self, rate: float) -> int | None:
        """The fewest instances whose measured throughput reaches ``rate``; None: none measured does.

        Beyond the measured points the curve is taken as flat (it ends at a plateau or at the
        largest parallelism the policies may use).
        """
        for p in sorted(self.throughput):
            if self.throughput[p] >= rate:
                return p
        return None

    def to_json(self) -> dict[str, Any]:
        out = {"operator": self.operator, "cost_us": self.cost.cost_us, "mode": self.cost.mode, "skew": self.cost.skew,
               "throughput": {str(p): round(v, 1) for p, v in sorted(self.throughput.items())},
               "measured_at": self.measured_at}  # fmt: skip
        if self.samples:
            out["samples"] = {str(p): [round(v, 1) for v in vs] for p, vs in sorted(self.samples.items())}
        return out


def curve_key(operator: str, cost: OperatorCost) -> str:
    return f"{operator}/{cost.key}"


def operator_costs(scenario: Scenario) -> dict[str, OperatorCost]:
    """Operator -> its cost in ``scenario``: the curves its ground truth needs."""
    return {op: scenario.cost(op) for op in SCALED}


class GroundTruth:
    """The cached curves (one JSON file), read and extended by the lab."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.curves: dict[str, Curve] = {}
        self.conditions: dict[str, Any] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.conditions = data.get("conditions", {})
                for key, c in data["curves"].items():
                    cost = OperatorCost(float(c["cost_us"]), c["mode"], float(c["skew"]))
                    samples = {int(p): tuple(float(v) for v in vs) for p, vs in c.get("samples", {}).items()}
                    self.curves[key] = Curve(c["operator"], cost, {int(p): float(v) for p, v in c["throughput"].items()},
                                             c.get("measured_at", ""), samples)  # fmt: skip
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(str(path), f"not a ground-truth cache: {exc}") from None

    def missing(self, scenario: Scenario) -> dict[str, OperatorCost]:
        return {op: cost for op, cost in operator_costs(scenario).items() if curve_key(op, cost) not in self.curves}

    def curve(self, operator: str, cost: OperatorCost) -> Curve:
        key = curve_key(operator, cost)
        if key not in self.curves:
            raise InputError(str(self.path), f"no measured curve for {key}: run 'scripts/ds2_lab.py ground-truth'")
        return self.curves[key]

    def minimum(self, scenario: Scenario, rate: float) -> dict[str, int | None]:
        """Operator -> the fewest instances that sustain source rate ``rate`` in ``scenario``."""
        return {op: self.curve(op, cost).minimum_parallelism(rate) for op, cost in operator_costs(scenario).items()}

    def add(self, curve: Curve, conditions: Mapping[str, Any]) -> None:
        self.curves[curve.key] = curve
        self.conditions = dict(conditions)
        self.save()

    def save(self) -> None:
        data = {"conditions": self.conditions, "curves": {k: c.to_json() for k, c in sorted(self.curves.items())}}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(self.path)


def isolation_args(operator: str, cost: OperatorCost, parallelism: int, job_name: str) -> list[str]:
    """Program arguments that make ``operator`` at ``parallelism`` the saturated, only bottleneck."""
    spread = {"Parse": 4, "Count": 4, "Sink: Writer": 2}
    spread[operator] = parallelism
    args = ["--job-name", job_name, "--rate", str(SATURATING_RATE), "--partitions", "8", "--backlog", "true",
            "--source-parallelism", "2", "--parse-parallelism", str(spread["Parse"]),
            "--count-parallelism", str(spread["Count"]), "--sink-parallelism", str(spread["Sink: Writer"])]  # fmt: skip
    if operator in ("Parse", "Count") and cost.cost_us:
        args += [f"--{operator.lower()}-{cost.mode}-us", f"{cost.cost_us:g}"]
    if cost.skew:
        args += ["--skew", f"{cost.skew:g}"]
    return args


def measure_curve(
    operator: str,
    cost: OperatorCost,
    throughput_at: Callable[[list[str]], float],
    max_parallelism: int,
    enough: float,
    log: Callable[[str], None] = print,
    samples: int = SAMPLES,
) -> Curve:
    """Measure ``operator``'s throughput at 1, 2, ... instances until it reaches ``enough``
    records/s, stops gaining (a plateau), or reaches ``max_parallelism``; each point is the median of
    ``samples`` runs of the job, all of them kept.

    ``throughput_at(args)`` runs the test job with those arguments and returns the operator's
    measured input rate (see ``scripts/ds2_lab.py``).
    """
    points: dict[int, float] = {}
    taken: dict[int, tuple[float, ...]] = {}
    flat = 0
    for p in range(1, max_parallelism + 1):
        taken[p] = tuple(throughput_at(isolation_args(operator, cost, p, f"ground-truth-{p}-{k}")) for k in range(samples))
        rate = points[p] = statistics.median(taken[p])
        log(f"ground truth {curve_key(operator, cost)}: parallelism {p} takes {rate:,.0f} records/s "
            f"(median of {', '.join(f'{v:,.0f}' for v in taken[p])})")  # fmt: skip
        if rate >= enough:
            break
        previous = points.get(p - 1)
        flat = flat + 1 if previous and rate < previous * (1 + PLATEAU_GAIN) else 0
        if flat >= 2:
            break
    return Curve(operator, cost, points, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), taken)


def knife_edges(scenario: Scenario, truth: GroundTruth, margin: float = KNIFE_EDGE) -> list[str]:
    """The ground-truth points of ``scenario`` that decide its judgement by less than ``margin``: for each
    rate its schedule holds (each step's rate, a swing's peak), the fewest instances that carry it take
    less than ``margin`` more, or one instance fewer falls short by less than ``margin``."""
    rates = sorted({round(c.rate + c.amplitude) for c in scenario.schedule} | {round(c.ramp_to) for c in scenario.schedule
                                                                               if c.ramp_to is not None})  # fmt: skip
    out = []
    for op, cost in operator_costs(scenario).items():
        curve = truth.curve(op, cost)
        for rate in rates:
            p = curve.minimum_parallelism(rate)
            if p is not None and curve.throughput[p] < rate * (1 + margin):
                out.append(
                    f"{op} at {p} takes {curve.throughput[p]:,.0f} against {rate:,} ({curve.throughput[p] / rate - 1:+.1%})"
                )
            below = (p or max(curve.throughput) + 1) - 1
            if below in curve.throughput and curve.throughput[below] > rate * (1 - margin) and below != p:
                out.append(f"{op} at {below} takes {curve.throughput[below]:,.0f} against {rate:,} "
                           f"({curve.throughput[below] / rate - 1:+.1%})")  # fmt: skip
    return out
