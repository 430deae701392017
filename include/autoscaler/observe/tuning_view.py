"""What the job view shows of multi-configuration tuning: the configuration in force, the rounds, and each
profile's prediction against what its copy measured (tables TUNING and PROFILES)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoscaler.store.parquet import epoch_span, read_epochs
from autoscaler.store.schemas import PROFILES, TUNING

RECENT_ROUNDS = 10


@dataclass(frozen=True)
class TuningView:
    in_force: dict[str, Any] | None  # the latest round's reading of the configuration in force
    rounds: tuple[dict[str, Any], ...]  # newest first
    profiles: tuple[dict[str, Any], ...]  # newest first; with "error": measured ÷ predicted max rate - 1


def _configuration(text: str | None) -> dict[str, Any] | None:
    return json.loads(text) if text else None


def tuning_view(store_root: str | Path, job: str, rounds: int = RECENT_ROUNDS) -> TuningView | None:
    """The newest ``rounds`` tuning rounds of ``job`` and their profiles (None: the job was never tuned)."""
    span = epoch_span(store_root, TUNING, job)
    if span is None:
        return None
    rows = sorted(read_epochs(store_root, TUNING, job, range(span[0], span[1] + 1)).to_pylist(), key=lambda r: r["epoch"])
    recent = rows[-rounds:][::-1]
    epochs = [r["epoch"] for r in recent]
    profiles = []
    stored = read_epochs(store_root, PROFILES, job, epochs).to_pylist()
    for p in sorted(stored, key=lambda p: (p["epoch"], p["copy_id"]), reverse=True):
        error = None
        if p["max_rate"] and p["predicted_max_rate"]:
            error = p["max_rate"] / p["predicted_max_rate"] - 1
        profiles.append({**p, "error": error})
    shown = [{**r, "in_force": _configuration(r["in_force"]), "recommended": _configuration(r["recommended"])} for r in recent]
    return TuningView(shown[0]["in_force"] if shown else None, tuple(shown), tuple(profiles))
