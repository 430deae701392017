"""How to move a job's state at a rescale, chosen per rescale by its predicted downtime against state size.

Stop-and-restart from a savepoint halts the job while the whole state is written and read back;
in place (the adaptive scheduler) restarts from the latest checkpoint, which with incremental
checkpoints is mostly written already. Which one is cheaper depends on the job's state size and
backend, so it is measured, not assumed:

- the downtime of a mechanism is a line in the state size, seconds = a + b x GiB (:class:`DowntimeLine`);
- it is fitted from the job's own measured rescales (ACTIONS ``downtime_s`` and the state size of the
  epoch it acted on) once there are ``rescale.min_own_rescales`` of them for that mechanism;
- until then from the benchmark's curves for the cluster's state backend
  (``downtime_prior.json``, written by ``benchmarks/bench_state_size.py``).

The choice (:func:`choose_mechanism`): of the mechanisms the cluster offers (in place needs the
adaptive scheduler), the one with the shortest predicted downtime, or none when neither pays:

- a predicted downtime over the job's ``rescale.max_downtime`` (its stated limit) is never taken;
- a scale-down must save more instance-seconds over ``rescale.payback_horizon`` than the downtime
  costs (every instance the job holds is idle while it restarts). A scale-up always pays: the job
  falls further behind without it.

The policy's restart term reads the same prediction (:func:`predicted_restart_s`).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoscaler.config.options import IN_PLACE, SAVEPOINT_RESTART

GIB = float(2**30)
MECHANISMS = (SAVEPOINT_RESTART, IN_PLACE)
PRIOR_FILE = Path(__file__).with_name("downtime_prior.json")


@dataclass(frozen=True)
class DowntimeLine:
    """Predicted downtime of one mechanism: ``a`` seconds plus ``b`` per GiB of state."""

    a: float
    b: float
    n: int  # rescales it was fitted from
    source: str  # "job" (its own rescales) or "benchmark <file>" (the prior)

    def predict(self, state_bytes: float | None) -> float:
        return max(0.0, self.a + self.b * (state_bytes or 0.0) / GIB)

    def describe(self) -> str:
        return f"{self.a:.2f} s + {self.b:.2f} s/GiB ({self.source}, {self.n} rescales)"


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line through (GiB, seconds) points; flat at the median when the sizes do not differ.

    The slope is never negative: more state never makes a restart faster, so a falling fit is noise,
    and then the line is flat at the median. Nor is the intercept: with no state a restart still takes
    no less than nothing, so a fit below zero there (a curve bending up) is refitted through the origin.
    """
    import numpy  # only the fit needs it

    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    if not points:
        raise ValueError("no points to fit")
    if len(set(xs)) < 2:
        return statistics.median(ys), 0.0
    b, a = numpy.polyfit(xs, ys, 1)
    if b < 0:
        return statistics.median(ys), 0.0
    if a < 0:
        return 0.0, float(numpy.dot(xs, ys) / numpy.dot(xs, xs))
    return float(a), float(b)


def write_prior(fits: Mapping[str, Mapping[str, Any]], source: str, date: str, path: Path = PRIOR_FILE) -> None:
    """The benchmark's lines (key ``backend/mechanism``) as the prior, written atomically."""
    body = {"source": source, "date": date, "unit": "seconds = a + b * GiB", "lines": dict(sorted(fits.items()))}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(body, indent=2) + "\n")
    os.replace(tmp, path)


def load_prior(path: Path = PRIOR_FILE) -> dict[tuple[str, str], DowntimeLine]:
    """(backend, mechanism) -> the benchmark's line; empty when there is no prior file."""
    if not path.exists():
        return {}
    body = json.loads(path.read_text())
    out = {}
    for key, fit in body.get("lines", {}).items():
        backend, mechanism = key.split("/", 1)
        source = f"benchmark {str(body.get('date', ''))[:10]}"
        out[(backend, mechanism)] = DowntimeLine(float(fit["a"]), float(fit["b"]), int(fit["n"]), source)
    return out


@dataclass(frozen=True)
class MeasuredRescale:
    """One of the job's rescales: its mechanism, the state it moved (None: not measured) and its downtime."""

    mechanism: str
    state_bytes: float | None
    downtime_s: float


def downtime_lines(
    own: Sequence[MeasuredRescale], backend: str, min_own: int, prior: Mapping[tuple[str, str], DowntimeLine] | None = None
) -> dict[str, DowntimeLine]:
    """Mechanism -> its downtime line: the job's own once ``min_own`` rescales measured it, else the benchmark's.

    A mechanism with neither (no prior for this backend, too few of its own) gets the median of what
    it has, flat; one never measured anywhere gets no line.
    """
    prior = load_prior() if prior is None else prior
    lines = {}
    for mechanism in MECHANISMS:
        points = [(r.state_bytes / GIB, r.downtime_s) for r in own if r.mechanism == mechanism and r.state_bytes is not None]
        if len(points) >= min_own:
            a, b = fit_line(points)
            lines[mechanism] = DowntimeLine(a, b, len(points), "job")
        elif (backend, mechanism) in prior:
            lines[mechanism] = prior[(backend, mechanism)]
        else:
            measured = [r.downtime_s for r in own if r.mechanism == mechanism]
            if measured:
                lines[mechanism] = DowntimeLine(statistics.median(measured), 0.0, len(measured), "job, median")
    return lines


@dataclass(frozen=True)
class MechanismChoice:
    """The mechanism a rescale uses (None: neither pays, the rescale is not made) and why."""

    mechanism: str | None
    predicted_s: Mapping[str, float]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "predicted_s": dict(self.predicted_s), "reason": self.reason}


def choose_mechanism(
    lines: Mapping[str, DowntimeLine],
    state_bytes: float | None,
    offered: Sequence[str],
    *,
    old_instances: int,
    new_instances: int,
    payback_horizon_s: float,
    max_downtime_s: float | None,
) -> MechanismChoice:
    """The cheapest offered mechanism at ``state_bytes``, or none when it does not pay (module docstring)."""
    size = "unmeasured state" if state_bytes is None else f"{state_bytes / GIB:.2f} GiB of state"
    predicted = {m: round(lines[m].predict(state_bytes), 2) for m in offered if m in lines}
    if not predicted:
        # Nothing measured yet for any offered mechanism: the first one offered, to measure it.
        first = offered[0]
        return MechanismChoice(first, {}, f"{first}: no downtime measured yet for {', '.join(offered)} ({size})")
    best = min(predicted, key=lambda m: (predicted[m], MECHANISMS.index(m)))
    downtime = predicted[best]
    others = "; ".join(f"{m} {s:.1f} s" for m, s in predicted.items() if m != best)
    why = f"{best}: predicted downtime {downtime:.1f} s at {size} ({lines[best].describe()})" + (f"; {others}" if others else "")
    if max_downtime_s is not None and downtime > max_downtime_s:
        return MechanismChoice(None, predicted, f"none: {why}, over the job's max_downtime {max_downtime_s:g} s")
    if new_instances < old_instances:
        saved = (old_instances - new_instances) * payback_horizon_s
        cost = downtime * old_instances
        if saved <= cost:
            return MechanismChoice(
                None, predicted,
                f"none: {why}; the scale-down would save {saved:,.0f} instance-s over the {payback_horizon_s:g}-s payback "
                f"horizon, and its downtime costs {cost:,.0f}",
            )  # fmt: skip
    return MechanismChoice(best, predicted, why)


def predicted_restart_s(lines: Mapping[str, DowntimeLine], state_bytes: float | None, offered: Sequence[str]) -> float | None:
    """The downtime a policy sizes for: the cheapest offered mechanism's prediction (None: nothing measured)."""
    values = [lines[m].predict(state_bytes) for m in offered if m in lines]
    return min(values) if values and all(math.isfinite(v) for v in values) else None


def own_rescales(store_root: str | Path, job: str, before_epoch: int | None) -> list[MeasuredRescale]:
    """The job's succeeded rescales before ``before_epoch`` with a measured downtime, each with the state of its epoch."""
    import pyarrow.compute as pc

    from autoscaler.collect.state import recorded_state
    from autoscaler.store.parquet import read_epochs
    from autoscaler.store.schemas import ACTIONS

    actions = read_epochs(store_root, ACTIONS, job, columns=["mechanism", "downtime_s", "outcome"])
    actions = actions.filter(pc.and_(pc.is_valid(actions.column("downtime_s")), pc.equal(actions.column("outcome"), "succeeded")))
    state = recorded_state(store_root, job, before_epoch)
    return [
        MeasuredRescale(r["mechanism"], state[r["epoch"]][0] if r["epoch"] in state else None, float(r["downtime_s"]))
        for r in actions.to_pylist()
        if r["mechanism"] in MECHANISMS and (before_epoch is None or r["epoch"] < before_epoch)
    ]


def latest_state(store_root: str | Path, job: str, epoch: int) -> tuple[float | None, str | None]:
    """The job's state at ``epoch`` or the newest recorded before it: (bytes, backend); (None, None) when none is."""
    from autoscaler.collect.state import recorded_state

    state = recorded_state(store_root, job, epoch)
    if not state:
        return None, None
    size, backend = state[max(state)]
    return float(size), backend
