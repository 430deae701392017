"""What a job's own epochs say beyond one window: the load's trend, skew, scalability, effectiveness.

Pure functions of :class:`~autoscaler.policy.base.OperatorWindow` and
:class:`~autoscaler.policy.base.EpochWindows`, read by the ``ds2_plus`` kind. Each answers one
question DS2's single-window model cannot, with the evidence the lab found it needs:

- :func:`damped_holt`: where a source's arrival rate is heading (a ramp is met, not chased);
- :func:`typical_change`: how far it moves in one epoch when it is not trending (a sine's or a random
  walk's sway): a trend must rise by more than that;
- :func:`hot_share`: the share of an operator's input that one key sends to one instance (skew);
- :func:`scalability`: how an operator's capacity grows with its parallelism, fitted over its own
  epochs (sublinear and CPU-bound operators);
- :func:`last_scale_up`: what the operator's latest scale-up bought, against what it promised.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from autoscaler.policy.base import EpochWindows, OperatorWindow

# Holt's linear method, damped (Gardner & McKenzie): level and trend smoothing, and the damping that
# makes a trend fade over the horizon instead of running on. Chosen on synthetic series, not on the
# lab's: a linear ramp of 6 epochs is forecast 1.33 epochs ahead within 3 % of its true value, and a
# flat load with 4 % epoch-to-epoch noise (the lab's `noise` averaged over a 30-s epoch) reads at most
# 1.8 % high in 9 of 10 cases (3.2 % in 99 of 100).
HOLT_LEVEL, HOLT_TREND, HOLT_DAMPING = 0.8, 0.5, 0.9
# A hot share below this is the key groups' own unevenness (e.g. 43/43/42 of 128 on 3), not a hot key.
HOT_SHARE_FLOOR = 0.05
# The observed-scalability coefficient's range and the points the fit needs (as Flink's fit).
SCALABILITY_RANGE = (0.5, 1.0)
SCALABILITY_POINTS = 3
# The epoch-to-epoch changes the typical change needs: fewer tell a step from a sway no better than one.
VARIATION_CHANGES = 3


def damped_holt(values: Sequence[float], horizon: float) -> float:
    """The forecast ``horizon`` steps past the last of ``values`` (oldest first); the last value alone: itself."""
    if not values:
        return math.nan
    level, trend = values[0], (values[1] - values[0] if len(values) > 1 else 0.0)
    for value in values[1:]:
        previous = level
        level = HOLT_LEVEL * value + (1 - HOLT_LEVEL) * (previous + HOLT_DAMPING * trend)
        trend = HOLT_TREND * (level - previous) + (1 - HOLT_TREND) * HOLT_DAMPING * trend
    # sum of damping^i for i = 1..horizon, continuous in the horizon
    damped = HOLT_DAMPING * (1 - HOLT_DAMPING**horizon) / (1 - HOLT_DAMPING)
    return level + damped * trend


def typical_change(values: Sequence[float]) -> float:
    """The median absolute change between consecutive ``values`` (oldest first); 0 with fewer than 3 changes.

    The median, not the mean or the deviation: a step or a spike is one or two large changes among
    flat ones and reads as 0, so steady loads keep DS2's exact sizing; a sine or a random walk moves
    every epoch and reads as its usual move.
    """
    changes = [abs(b - a) for a, b in pairwise(values)]
    return statistics.median(changes) if len(changes) >= VARIATION_CHANGES else 0.0


def hot_share(window: OperatorWindow) -> float:
    """The share ``s`` of the input that one key sends to the busiest instance, from the per-instance rates.

    With ``p`` instances, that instance takes ``s + (1 - s) / p`` of the input; its measured share
    ``m`` gives ``s = (m p - 1) / (p - 1)``. One instance tells nothing (0); below
    :data:`HOT_SHARE_FLOOR` it is the key groups' own unevenness (0).
    """
    p, total = window.parallelism, window.observed_processing_rate
    if p <= 1 or total <= 0 or window.observed_processing_rate_max <= 0:
        return 0.0
    share = window.observed_processing_rate_max / total
    s = min(1.0, max(0.0, (share * p - 1) / (p - 1)))
    return s if s >= HOT_SHARE_FLOOR else 0.0


@dataclass(frozen=True)
class Scalability:
    """``capacity(p) = capacity_now * (1 + alpha (p - 1)) / (1 + alpha (p_now - 1))``: alpha 1 is linear (DS2)."""

    alpha: float
    points: int  # epochs the fit used (0: too few, alpha 1)
    parallelisms: int  # distinct parallelisms among them

    def ratio(self, p: int, current: int) -> float:
        """capacity at ``p`` / capacity at ``current``."""
        return (1 + self.alpha * (p - 1)) / (1 + self.alpha * (current - 1))

    def words(self) -> str:
        if self.points == 0:
            return ""
        if self.alpha >= SCALABILITY_RANGE[1]:
            return f"; scales linearly over {self.points} epochs at {self.parallelisms} parallelisms"
        return f"; observed scalability {self.alpha:.2f} (fit over {self.points} epochs at {self.parallelisms} parallelisms)"


def scalability(op: str, epochs: Sequence[EpochWindows]) -> Scalability:
    """Least squares of the operator's capacity (true processing rate) against ``p - 1`` over ``epochs``.

    ``capacity = a + b (p - 1)``: alpha = b / a, the share of one instance's capacity each further
    instance adds, clamped to :data:`SCALABILITY_RANGE`. It needs :data:`SCALABILITY_POINTS` epochs
    at two parallelisms or more; with fewer, alpha is 1 (DS2's linear assumption).
    """
    points = [(e.windows[op].parallelism, e.windows[op].true_processing_rate) for e in epochs
              if op in e.windows and e.windows[op].true_processing_rate > 0 and not e.windows[op].warmup_instances]  # fmt: skip
    distinct = len({p for p, _ in points})
    if len(points) < SCALABILITY_POINTS or distinct < 2:
        return Scalability(1.0, 0, distinct)
    n = len(points)
    mean_x = sum(p - 1 for p, _ in points) / n
    mean_y = sum(t for _, t in points) / n
    sxx = sum((p - 1 - mean_x) ** 2 for p, _ in points)
    b = sum((p - 1 - mean_x) * (t - mean_y) for p, t in points) / sxx
    a = mean_y - b * mean_x
    alpha = b / a if a > 0 else SCALABILITY_RANGE[1]
    low, high = SCALABILITY_RANGE
    return Scalability(min(high, max(low, alpha)), n, distinct)


@dataclass(frozen=True)
class ScaleUp:
    """An operator's latest scale-up within the history, and what it bought."""

    before: int
    after: int
    epoch: int  # the first epoch measured at ``after``
    gain: float  # (capacity after - before) / (capacity promised - before): 1 = as linear as promised
    arrival: float  # the sources' arrival rate in that epoch (the load it was judged at)


def last_scale_up(op: str, epochs: Sequence[EpochWindows], arrival: Sequence[float]) -> ScaleUp | None:
    """The newest change of ``op``'s parallelism upwards between two measured epochs (None: none in ``epochs``).

    ``epochs`` are usable epochs, oldest first, and ``arrival`` their sources' total arrival rates.
    The promise is linear, from the capacity measured before: ``capacity_before * after / before``
    (computed before alignment or bounds, which only add instances: see FLINK-39743).
    """
    for k in range(len(epochs) - 1, 0, -1):
        old, new = epochs[k - 1].windows.get(op), epochs[k].windows.get(op)
        if old is None or new is None or new.parallelism <= old.parallelism:
            if old is not None and new is not None and new.parallelism < old.parallelism:
                return None  # a scale-down since: the scale-up's verdict no longer applies
            continue
        promised = old.true_processing_rate * new.parallelism / old.parallelism
        wanted = promised - old.true_processing_rate
        gain = (new.true_processing_rate - old.true_processing_rate) / wanted if wanted > 0 else 1.0
        return ScaleUp(old.parallelism, new.parallelism, epochs[k].epoch, gain, arrival[k])
    return None
