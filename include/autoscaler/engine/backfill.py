"""One Spark application per backfill, not one per epoch.

``airflow backfill create`` makes one DAG run per past interval. Starting a Spark application
for each (15-20 s of JVM start per epoch) would make a day of 1-minute epochs take hours, while
the policy computes any number of epochs in one pass. So the first backfill run to reach the
policy task becomes the *leader*: it finds how many of the intervals next to its own (after and
before it) are pending backfill runs of the same DAG -- queued, or running but not yet past their policy task, which
waits for the lock -- and not claimed yet (the contiguous extent, found by binary search on the
scheduler's run counts), computes all of their epochs in one Spark run, and leaves a *claim* per
covered run. A follower that finds its claim (same policy fingerprint) consumes it and skips Spark; one
without a claim becomes a leader itself. A lock per job serializes leaders and followers, so
overlapping batches cannot happen even with several backfill runs active at once.

A stale claim (e.g. from a cancelled backfill) is only honoured when the policy fingerprint
(options, topology) is unchanged -- then the stored decision is exactly what a recomputation
would write, from the same stored metrics.
"""

from __future__ import annotations

import fcntl
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from autoscaler.config.paths import data_dir
from autoscaler.store.delta import is_store_url

MAX_BATCH = 4096


def _dir(store_root: str | Path, job: str) -> Path:
    """The claims' folder: beside a local store; in the data dir when the store is an object store, which has no
    lock to hold. Then each host batches its own runs: two hosts may decide the same epochs, and the store's
    writes, replacing by (job, epoch), keep one copy."""
    base = data_dir() if is_store_url(store_root) else Path(store_root)
    return base / "backfill-claims" / f"job={job}"


def _name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", key) + ".json"


@contextmanager
def batch_lock(store_root: str | Path, job: str) -> Iterator[None]:
    folder = _dir(store_root, job)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def take_claim(store_root: str | Path, job: str, key: str, fingerprint: str) -> str | None:
    """Consume the claim for ``key`` (a run's logical date); the leader's run id, or None."""
    path = _dir(store_root, job) / _name(key)
    if not path.exists():
        return None
    try:
        claim = json.loads(path.read_text())
    except (OSError, ValueError):
        claim = {}
    path.unlink(missing_ok=True)
    return claim.get("leader") if claim.get("fingerprint") == fingerprint else None


def has_claim(store_root: str | Path, job: str, key: str) -> bool:
    return (_dir(store_root, job) / _name(key)).exists()


def write_claims(store_root: str | Path, job: str, keys: Sequence[str], leader: str, fingerprint: str) -> None:
    folder = _dir(store_root, job)
    folder.mkdir(parents=True, exist_ok=True)
    for key in keys:
        tmp = folder / f".{_name(key)}.tmp"
        tmp.write_text(json.dumps({"leader": leader, "fingerprint": fingerprint}))
        tmp.replace(folder / _name(key))


def contiguous_extent(all_exist: Callable[[int], bool], limit: int = MAX_BATCH) -> int:
    """Largest k <= limit such that ``all_exist(k)`` (the first k followers all exist).

    ``all_exist`` must be monotone (true up to some k, false after), as for a contiguous range
    of backfill runs; ``all_exist(0)`` is taken as true. O(log limit) calls.
    """
    low, high = 0, 1
    while high <= limit and all_exist(high):
        low, high = high, high * 2
    high = min(high, limit + 1)
    while high - low > 1:
        mid = (low + high) // 2
        if all_exist(mid):
            low = mid
        else:
            high = mid
    return low
