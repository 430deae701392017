"""How Flink spreads a keyed operator's records over its instances: key groups, assigned in ranges.

A record's key goes to key group ``murmur(key.hashCode()) % maxParallelism`` and key group ``g`` to
instance ``g * parallelism // maxParallelism`` (Flink's ``KeyGroupRangeAssignment``). With 10,000
keys and 128 key groups the groups hold 57 to 101 keys, so at 6 instances the busiest takes 17.9 %
of the records, not 16.7 %: that, and not CPU contention, is why Count's measured throughput grows
sublinearly. From the one-instance rate alone it gives every measured point of Count's curves
within 1 % (``tests/unit/test_sim.py``). ``tests/fixtures/sim/key-groups-10000-128.txt`` holds
what Flink 2.3's own ``KeyGroupRangeAssignment.assignToKeyGroup`` answers for keys 0..9999, and the
test pins this module to it.

The test job's keys are the ``Integer`` values 0..keys-1, well mixed (``LineGenerator.keyOf``), and
with skew ``s`` key 0 carries a share ``s`` of the records on top.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def murmur(code: int) -> int:
    """Flink's ``MathUtils.murmurHash`` of a 32-bit hash code (non-negative)."""
    code = (code * 0xCC9E2D51) & MASK
    code = (_rotl(code, 15) * 0x1B873593) & MASK
    code = (_rotl(code, 13) * 5 + 0xE6546B64) & MASK
    code ^= 4
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & MASK
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & MASK
    code ^= code >> 16
    signed = code - (1 << 32) if code & 0x80000000 else code
    if signed >= 0:
        return signed
    return -signed if signed != -(2**31) else 0


def key_group(key: int, max_parallelism: int) -> int:
    """The key group of an ``Integer`` key (its hashCode is its value)."""
    return murmur(key & MASK) % max_parallelism


@cache
def instance_shares(parallelism: int, keys: int, max_parallelism: int, skew: float = 0.0) -> tuple[float, ...]:
    """Each instance's share of a keyed operator's records, for uniform keys 0..keys-1 and key 0's extra ``skew``."""
    groups = Counter(key_group(k, max_parallelism) for k in range(keys))
    shares = [0.0] * parallelism
    for group, n in groups.items():
        shares[group * parallelism // max_parallelism] += (1.0 - skew) * n / keys
    shares[key_group(0, max_parallelism) * parallelism // max_parallelism] += skew
    return tuple(shares)
