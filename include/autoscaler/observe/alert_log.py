"""The alerts file (``<data>/alerts.jsonl``, one JSON object a line): appended by every task that raises an
alert, read by the fleet page for the last day's alerts.

It is rotated, so neither its size nor a page load grows without end: an append that finds the file over
``MAX_BYTES`` first renames it to ``alerts.jsonl.1`` (replacing the generation before), under an exclusive
lock that every writer takes (tasks of several workers append to one file). A reader takes both generations,
so a rotation never hides an alert younger than the whole current file.

``MAX_BYTES`` (1 MiB): an alert line is about 300 B, so a generation holds some 3,500 alerts, a day of a
thousand-job fleet each alerting three times or so; a page load reads at most two generations (2 MiB).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

MAX_BYTES = 1 << 20


def previous(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def append(path: str | Path, alerts: Iterable[Mapping[str, Any]], max_bytes: int = MAX_BYTES) -> None:
    """Append alerts as lines, rotating first when the file has grown over ``max_bytes``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(dict(a)) + "\n" for a in alerts)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists() and path.stat().st_size >= max_bytes:
                os.replace(path, previous(path))
            with path.open("a", encoding="utf-8") as handle:
                handle.write(text)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def lines(path: str | Path) -> Iterator[str]:
    """Every line of both generations, the older first."""
    path = Path(path)
    for generation in (previous(path), path):
        if generation.is_file():
            yield from generation.read_text(encoding="utf-8", errors="replace").splitlines()
