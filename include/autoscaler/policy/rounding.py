"""Rounding, bounds and alignment rules of a DS2 proposal.

The Spark job applies the same rules as column expressions
(:mod:`autoscaler.policy.spark.plan`); the tests check that both agree.
"""

from __future__ import annotations

import math

# Stand-in for an infinite estimate (the reference saturates to u32::MAX); bounds cap it.
SATURATED = 2**31 - 1


def round_up(optimal: float, factor: float) -> int:
    """ceil(optimal * (1 + factor)); NaN -> 0 and +inf saturates, as in the reference."""
    if math.isnan(optimal):
        return 0
    scaled = optimal * (1.0 + factor)
    if scaled >= SATURATED:
        return SATURATED
    return max(0, math.ceil(scaled))


def threshold_adjust(decision: int, ratio: float) -> int:
    """The target-rate-ratio rule's adjustment: ceil(r * decision), saturating."""
    scaled = ratio * decision
    return SATURATED if scaled >= SATURATED else math.ceil(scaled)


def align_up(parallelism: int, key_groups: int, upper: int) -> int:
    """Smallest divisor of ``key_groups`` in [parallelism, upper]; unchanged when there is none."""
    for candidate in range(parallelism, min(upper, key_groups) + 1):
        if key_groups % candidate == 0:
            return candidate
    return parallelism


def key_group_divisors(max_parallelism: int) -> list[int]:
    """Parallelisms that spread ``max_parallelism`` key groups evenly (its divisors, ascending)."""
    return [d for d in range(1, max_parallelism + 1) if max_parallelism % d == 0]
