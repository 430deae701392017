"""Rounding and key-group alignment of a proposal (every kind's, through :func:`autoscaler.policy.base.bounded`)."""

from __future__ import annotations

import numpy as np

from autoscaler.config.options import SATURATED


def round_up(optimal: np.ndarray, factor: float) -> np.ndarray:
    """ceil(optimal * (1 + factor)) per element; NaN -> 0 and +inf saturates, as in the reference."""
    with np.errstate(invalid="ignore"):
        scaled = optimal * (1.0 + factor)
        finite = np.where(np.isnan(scaled) | (scaled >= SATURATED), 0.0, scaled)
        out = np.maximum(0, np.ceil(finite)).astype(np.int64)
    return np.where(scaled >= SATURATED, SATURATED, out)


def threshold_adjust(decision: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """The target-rate-ratio rule's adjustment per element: ceil(r * decision), saturating (finite ``ratio``)."""
    scaled = ratio * decision
    return np.where(scaled >= SATURATED, SATURATED, np.ceil(np.minimum(scaled, SATURATED))).astype(np.int64)


def align(proposal: int, current: int, key_groups: int, low: int, high: int) -> int:
    """``proposal`` aligned so that ``key_groups`` spread evenly, as the Flink autoscaler aligns it.

    First the smallest divisor of ``key_groups`` from ``proposal`` up (for a scale-down, up to
    ``current`` at most: reaching it blocks the scale-down); failing that, the smallest parallelism
    below ``proposal`` that gives no subtask more key groups than ``proposal`` does, never below
    ``low`` and never turning a scale-up into a scale-down or the reverse (then ``current``).
    """
    if proposal == current:
        return proposal
    scale_up = proposal > current
    top = min(key_groups, high) if scale_up else min(current, key_groups, high)
    for candidate in range(proposal, top + 1):
        if key_groups % candidate == 0:
            return candidate
    p = proposal
    while p > 0:
        if key_groups // p > key_groups // proposal:
            if key_groups % p != 0:
                p += 1
            break
        p -= 1
    p = max(p, low)
    if (scale_up and p <= current) or (not scale_up and p >= current):
        return current
    return p


def key_group_divisors(max_parallelism: int) -> list[int]:
    """Parallelisms that spread ``max_parallelism`` key groups evenly (its divisors, ascending)."""
    return [d for d in range(1, max_parallelism + 1) if max_parallelism % d == 0]
