"""The cheapest any policy can be on a scenario while it meets the lab's other targets: a floor under ``cost``.

A lab policy acts only at an epoch's end, and its change runs from the next epoch, whose window is a
warm-up that decides nothing. Over a scenario's epochs, :func:`cheapest` searches every such schedule
of the rescaled operators' sizes (dynamic programming over the epochs) for the fewest
instance-seconds, subject to the targets of :mod:`autoscaler.lab.targets` other than cost:

- **under**: at most ``under_epochs`` epochs below the ground truth for the epoch's highest rate
  (the target: no more than the best baseline's);
- **rescales**: per load change at most the scenario's limit; ``spike`` at most one in all;
  ``noise`` none after the first change; ``diurnal-sine`` any number, but no reversal of an
  operator within a change.

It leaves out what only adds cost: the backlog a change builds (its drain needs capacity above the
ground truth) and the restart. So no policy does better than this floor. Where the floor is above
:data:`~autoscaler.lab.targets.COST_FACTOR` times the ground truth's instance-seconds, no policy
meets the cost target together with the others on that scenario, and the tally has a ceiling below
its count of targets (``docs/policy-lab.md``, "What the targets allow").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise, product

from autoscaler.lab.ground_truth import GroundTruth, operator_costs
from autoscaler.lab.result import DRAINED_S
from autoscaler.lab.scenario import SCALED, Scenario
from autoscaler.lab.targets import BASELINES, COST_FACTOR, DRAIN_S, NO_REVERSAL, rescale_limit

DECISION_DELAY_S = 5.0  # a rescale decided at an epoch's end happens a few seconds later (its load change)


@dataclass(frozen=True)
class Floor:
    """The cheapest schedule found: its sizes per epoch, its instance-seconds and the ground truth's."""

    instance_seconds: float
    ground_truth_instance_seconds: float
    sizes: tuple[Mapping[str, int], ...]  # per epoch, the rescaled operators' sizes
    rescales: int

    @property
    def ratio(self) -> float:
        return self.instance_seconds / self.ground_truth_instance_seconds


def _allowed(scenario: Scenario, change: int, done: int) -> bool:
    """Whether one more rescale meets the rescale target, ``done`` made in load change ``change`` (or in the
    whole run, where the target counts that)."""
    _, limit = rescale_limit(scenario.name, change)
    return limit is None or done < limit


# After an epoch: the sizes the next epoch runs at; the load change of the last rescale and the rescales
# in it; per operator, the direction of its last change and that change's load change; the epochs under
# so far; whether the next epoch is a warm-up (no decision at its end); the backlog, rounded to
# BACKLOG_BUCKET records; and the epochs since the backlog last grew (0: none owed).
State = tuple[tuple[int, ...], tuple[int, int], tuple[tuple[int, int], ...], int, bool, int, int]
BACKLOG_BUCKET = 10_000.0
RESTART_S = 3.5  # the lab's measured stop-to-running time of a rescale (3.2-4.2 s): input piles up meanwhile


def cheapest(scenario: Scenario, need_at: Callable[[float], Mapping[str, int | None]], under_epochs: int,
             capacity: Callable[[Mapping[str, int]], float] | None = None,
             scale_down_wait_s: float = 0.0) -> Floor | None:  # fmt: skip
    """The fewest instance-seconds of any schedule meeting the targets but cost (None: no schedule meets them).

    ``need_at(rate)``: the ground truth, operator -> fewest instances for that source rate (None:
    none measured reaches it, counted at the operator's maximum as the lab counts it).
    ``capacity(sizes)``: the records/s the job takes at those sizes (the measured curves); with it, the
    backlog is followed as a fluid (the epoch's mean arrival against the capacity, nothing processed
    during a restart) and every backlog must drain within :data:`~autoscaler.lab.targets.DRAIN_S` of
    its last growth, and none be owed at the end. The search's states keep the backlog to
    :data:`BACKLOG_BUCKET` records, so the floor is approximate by that much.
    ``scale_down_wait_s``: an operator goes down only to a size that took the highest rate of the
    epochs in that time before (a policy's scale-down wait: it has seen that much of the lower load).
    """
    interval = scenario.interval_s
    count = round(scenario.duration_s / interval)
    needs, arrivals = [], []
    for i in range(count):
        raw = need_at(scenario.rate_over(i * interval, (i + 1) * interval))
        needs.append({op: (n if n is not None else scenario.max_parallelism[op]) for op, n in raw.items()})
        arrivals.append(scenario.mean_rate(i * interval, (i + 1) * interval))
    ops = [op for op in SCALED if op in needs[0]]
    initial = tuple(scenario.initial_parallelism.get(op, 1) for op in ops)
    if capacity is None:
        # An optimal size is the initial one or some epoch's need: any other can be lowered to the next
        # such value below it without putting any epoch under.
        sizes_of = [sorted({initial[k], *(n[op] for n in needs)}) for k, op in enumerate(ops)]
    else:  # a drain may need more than any epoch's need; an operator always at its initial size stays there
        sizes_of = [[initial[k]] if all(n[op] == initial[k] for n in needs) else list(range(1, scenario.max_parallelism[op] + 1))
                    for k, op in enumerate(ops)]  # fmt: skip
    candidates = list(product(*sizes_of))
    changes = [c.at_s for c in scenario.schedule]
    drain_epochs = round(DRAIN_S / interval)
    wait_epochs = math.ceil(scale_down_wait_s / interval - 1e-9)

    def change_of(t: float) -> int:
        return max(k for k, at in enumerate(changes) if at <= t)

    Value = tuple[float, tuple[tuple[int, ...], ...], float]  # instance-seconds, sizes per epoch, backlog
    start: State = (initial, (0, 0), tuple((0, -1) for _ in ops), 0, False, 0, 0)
    best: dict[State, Value] = {start: (0.0, (), 0.0)}
    for i in range(count):
        step: dict[State, Value] = {}
        for (sizes, (last_change, done), directions, under, warm, _, since), (cost, path, owed) in best.items():
            under += any(sizes[k] < needs[i][op] for k, op in enumerate(ops))
            if under > under_epochs:
                continue
            if capacity is not None:
                arrival, restarted = arrivals[i], warm and i > 0
                down = RESTART_S if restarted else 0.0
                after = max(0.0, owed + arrival * interval - capacity(dict(zip(ops, sizes, strict=True))) * (interval - down))
                if after <= arrival * DRAINED_S:
                    after, since = 0.0, 0
                else:
                    since = 0 if after >= owed else since + 1
                    if since >= drain_epochs:
                        continue
                owed = after
            spent, trail = cost + interval * sum(sizes), (*path, sizes)
            bucket = round(owed / BACKLOG_BUCKET)
            change = change_of((i + 1) * interval + DECISION_DELAY_S)  # the load change a rescale now falls in
            done_here = done if change == last_change or rescale_limit(scenario.name, change)[0] else 0
            moves: list[State] = [(sizes, (last_change, done), directions, under, False, bucket, since)]
            if not warm and i < count - 1 and _allowed(scenario, change, done_here):
                for new in candidates:
                    if new == sizes:
                        continue
                    signs = [(n > s) - (n < s) for n, s in zip(new, sizes, strict=True)]
                    if wait_epochs and any(sign < 0 for sign in signs):
                        seen = needs[i + 1 - wait_epochs : i + 1] if i + 1 >= wait_epochs else []
                        if not seen or any(sign < 0 and any(n[op] > new[k] for n in seen)
                                           for k, (op, sign) in enumerate(zip(ops, signs, strict=True))):  # fmt: skip
                            continue  # a scale-down before the wait has seen the lower load
                    if scenario.name in NO_REVERSAL and any(
                        sign and d_sign and sign != d_sign and d_change == change
                        for sign, (d_sign, d_change) in zip(signs, directions, strict=True)
                    ):
                        continue  # a reversal within the change
                    turned = tuple((sign, change) if sign else d for sign, d in zip(signs, directions, strict=True))
                    moves.append((new, (change, done_here + 1), turned, under, True, bucket, since))
            for state in moves:
                if state not in step or spent < step[state][0]:
                    step[state] = (spent, trail, owed)
        best = step
    # A backlog still owed at the end never drained (the lab's "never"), and would leave the budget of
    # under-provisioned epochs free to be spent on the last ones.
    ends = [v for v in best.values() if capacity is None or v[2] == 0.0]
    if not ends:
        return None
    cost, path, _ = min(ends, key=lambda v: v[0])
    truth = interval * sum(sum(n[op] for op in ops) for n in needs)
    rescales = sum(1 for a, b in pairwise(path) if a != b)
    return Floor(cost, truth, tuple(dict(zip(ops, s, strict=True)) for s in path), rescales)


def job_capacity(truth: GroundTruth, scenario: Scenario, sizes: Mapping[str, int]) -> float:
    """Records/s the job takes at ``sizes``: its slowest operator's measured throughput (flat past the curve)."""
    out = math.inf
    for op, cost in operator_costs(scenario).items():
        curve = truth.curve(op, cost).throughput
        measured = [p for p in curve if p <= sizes.get(op, 1)]
        out = min(out, curve[max(measured)] if measured else 0.0)
    return out


def floors_table(scenarios: Sequence[Scenario], truth: GroundTruth, results: Sequence[dict], drain: bool = True,
                 scale_down_wait_s: float = 0.0) -> str:  # fmt: skip
    """Per scenario: the floor of cost given the best baseline's under-provisioned time in ``results``."""
    lines = ["| scenario | under allowed | ground truth inst-s | floor inst-s | floor / truth | cost ≤ 1.10× | "
             "cheapest Count per epoch |", "|---|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for scenario in scenarios:
        base = [r for r in results if r["scenario"] == scenario.name and r.get("kind", r["policy"]) in BASELINES
                and r.get("inputs", "honest") == "honest"]  # fmt: skip
        if not base:
            continue
        under_s = min(r["totals"]["under_provisioned_s"] for r in base)
        floor = cheapest(scenario, lambda rate, s=scenario: truth.minimum(s, rate), round(under_s / scenario.interval_s),
                         (lambda sizes, s=scenario: job_capacity(truth, s, sizes)) if drain else None,
                         scale_down_wait_s)  # fmt: skip
        if floor is None:
            lines.append(f"| {scenario.name} | {under_s:.0f} s | | | | **unreachable**: no schedule meets the other targets | |")
            continue
        counts = " ".join(str(s.get("Count", "")) for s in floor.sizes)
        reachable = "reachable" if floor.ratio <= COST_FACTOR + 1e-9 else "**unreachable**"
        lines.append(f"| {scenario.name} | {under_s:.0f} s | {floor.ground_truth_instance_seconds:,.0f} | "
                     f"{floor.instance_seconds:,.0f} | {floor.ratio:.2f}× | {reachable} | {counts} |")  # fmt: skip
    return "\n".join(lines)
