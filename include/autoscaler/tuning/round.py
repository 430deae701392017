"""One tuning round of a job: forecast, choose profiles, run them, fit, recommend; every step recorded.

:func:`tune` is what the tuning DAG's task calls. It reads the configuration in force from Flink, the job's
arrival rates and capacity from its own epochs (table METRICS) and the profiles of earlier rounds (table
PROFILES), runs the copies the model asks for within the budget, and writes the round's PROFILES rows and
its TUNING row (idempotent per job and epoch: a rerun of the same epoch replaces them).

The forecast is the policy's own (damped Holt over the epochs' arrival rates, :func:`damped_holt`), over the
horizon in which a round's recommendation can take effect (the round's time budget, in epochs). A round
started by the schedule runs only when the forecast predicts a change: when it differs from the current
rate by more than the job's typical epoch-to-epoch change (:func:`typical_change`, the noise a policy
already ignores). A round started by a person always runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from autoscaler.collect.state import backend_name
from autoscaler.config.jobs import JobConfig
from autoscaler.errors import InputError
from autoscaler.flink import ids
from autoscaler.flink.client import FlinkRestClient
from autoscaler.policy.base import history_epochs
from autoscaler.policy.signals import VARIATION_CHANGES, damped_holt, typical_change
from autoscaler.store.parquet import epoch_span, read_epochs, write_epochs
from autoscaler.store.schemas import METRICS, PROFILES, TUNING
from autoscaler.tuning.configuration import Configuration, candidates
from autoscaler.tuning.model import Model, Observation, Prediction
from autoscaler.tuning.outcomes import NONE, RECOMMENDED, SKIPPED
from autoscaler.tuning.profile import Budget, CopyArgs, Profile, max_sustainable_rate, run_round
from autoscaler.tuning.site import ProfilingSite

MB = 1024 * 1024
FAILED_RATE = 1.0  # records/s a configuration the job failed at is taken to sustain (see observation)


@dataclass(frozen=True)
class RoundResult:
    round_id: str
    outcome: str
    message: str
    in_force: Configuration
    recommended: Prediction | None
    profiles: tuple[Profile, ...]
    current_rate: float | None
    forecast_rate: float | None


def configuration_in_force(client: FlinkRestClient, job_name: str) -> tuple[Configuration, int, str]:
    """The running job's configuration, its TaskManagers' slots each, and its state backend (from Flink)."""
    job = client.running_job(job_name)
    details = client.job(job.id)
    config = client.get(f"/jobs/{ids.job_id(job.id)}/checkpoints/config")
    interval_ms = config.get("interval") or 0
    if not interval_ms or interval_ms <= 0 or interval_ms >= 2**62:
        raise InputError(f"job {job_name}", "checkpointing is off: a configuration's recovery cannot be measured without it")
    used = {str(tm.get("taskmanager-id")) for v in details.vertices for tm in _vertex_taskmanagers(client, job.id, v.id)}
    tms = [t for t in client.get("/taskmanagers").get("taskmanagers", []) if not used or str(t["id"]) in used]
    if not tms:
        raise InputError(f"job {job_name}", "no TaskManager runs its tasks")
    detail = client.get(f"/taskmanagers/{ids.taskmanager_id(str(tms[0]['id']))}")
    memory = detail.get("memoryConfiguration") or {}
    slots = int(detail.get("slotsNumber") or tms[0]["slotsNumber"])
    process = int(memory.get("totalProcessMemory") or 0)
    flink_total = int(memory.get("totalFlinkMemory") or 0)
    if not process or not flink_total:
        raise InputError(f"job {job_name}", "its TaskManagers report no memory configuration")
    fraction = round(int(memory.get("managedMemory") or 0) / flink_total, 2) or 0.01
    in_force = Configuration.of({v.name: v.parallelism for v in details.vertices}, interval_ms / 1000,
                                max(process // MB // slots, 64), fraction)  # fmt: skip
    return in_force, slots, backend_name(config.get("state_backend")) or "hashmap"


def _vertex_taskmanagers(client: FlinkRestClient, job_id: str, vertex_id: str) -> list[dict[str, Any]]:
    return client.get(f"/jobs/{ids.job_id(job_id)}/vertices/{ids.vertex_id(vertex_id)}/taskmanagers").get("taskmanagers", [])


def history(store_root: str | Path, job: str, in_force: Configuration, lookback: int) -> tuple[list[float], list[Observation]]:
    """The arrival rate of each of the last ``lookback`` epochs (oldest first) and the job's own capacity at the
    configuration in force."""
    span = epoch_span(store_root, METRICS, job)
    if span is None:
        return [], []
    rows = read_epochs(store_root, METRICS, job, range(max(span[0], span[1] - lookback + 1), span[1] + 1)).to_pylist()
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_epoch.setdefault(r["epoch"], []).append(r)
    arrivals, capacity = [], []
    parallelism = in_force.operators
    for epoch in sorted(by_epoch):
        epoch_rows = by_epoch[epoch]
        if any(r["warmup"] for r in epoch_rows):
            continue
        arrivals.append(sum(r["true_output_rate"] for r in epoch_rows if r["is_source"]))
        if all(parallelism.get(r["operator_name"]) == r["parallelism"] for r in epoch_rows):
            rate, _ = max_sustainable_rate(epoch_rows)
            if rate:
                capacity.append(rate)
    own = [Observation(in_force, statistics.median(capacity), None, f"epochs of {job}")] if capacity else []
    return arrivals, own


def earlier_profiles(store_root: str | Path, job: str) -> list[Observation]:
    span = epoch_span(store_root, PROFILES, job)
    if span is None:
        return []
    out = []
    for r in read_epochs(store_root, PROFILES, job, range(span[0], span[1] + 1)).to_pylist():
        if r["outcome"] == "succeeded" or r["job_failed"]:
            config = Configuration.from_dict(json.loads(r["config_json"]), f"profile {r['copy_id']}")
            out.append(observation(config, r["max_rate"], r["restart_s"], r["job_failed"], f"profile {r['copy_id']}"))
    return out


def observation(config: Configuration, max_rate: float | None, restart_s: float | None, job_failed: bool,
                source: str) -> Observation:  # fmt: skip
    """A profile as the model reads it. A job that failed at a configuration sustained nothing: one record per second
    (its logarithm 0, so the capacity model falls near it and no neighbour is recommended on its strength)."""
    return Observation(config, FAILED_RATE if job_failed else max_rate, None if job_failed else restart_s, source)


def forecast(arrivals: Sequence[float], horizon_epochs: float) -> tuple[float | None, float | None, bool]:
    """(current rate, forecast rate, whether a change is forecast) from the epochs' arrival rates."""
    if not arrivals:
        return None, None, False
    current = arrivals[-1]
    ahead = max(damped_holt(arrivals, horizon_epochs), 0.0)
    noise = typical_change(arrivals)
    return current, ahead, len(arrivals) > VARIATION_CHANGES and abs(ahead - current) > noise


def _write(store_root: str | Path, table: Any, job: str, rows: list[dict[str, Any]]) -> None:
    data = pa.Table.from_pylist(rows, schema=table.arrow_schema())
    write_epochs(store_root, table, job, data.drop_columns(["epoch_block"]))


def _profile_row(job: str, epoch: int, round_id: str, profile: Profile, predicted: float | None) -> dict[str, Any]:
    row = profile.row()
    config = row.pop("config")
    now = datetime.now(UTC)
    return {"job": job, "epoch": epoch, "round_id": round_id, "config_json": json.dumps(config, sort_keys=True),
            "predicted_max_rate": predicted, **{k: v for k, v in row.items() if k in PROFILES.names},
            "started_at": row["started_at"] or now, "finished_at": row["finished_at"] or now}  # fmt: skip


def round_prefix(job: str) -> str:
    """What every copy id of ``job`` starts with: its name as a copy id allows, and a hash that tells apart two names
    that read the same so (copies of all jobs share the site's folder)."""
    readable = re.sub(r"[^a-z0-9-]+", "-", job.lower()).strip("-")[:32] or "job"
    return f"{readable}-{hashlib.sha256(job.encode()).hexdigest()[:6]}"


def is_copy_of(job: str, copy_id: str) -> bool:
    return re.fullmatch(rf"{re.escape(round_prefix(job))}-[0-9]+-[0-9]+", copy_id) is not None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def record_round(store_root: str | Path, job: str, epoch: int, result: RoundResult) -> None:
    rec = result.recommended
    _write(store_root, TUNING, job, [{
        "job": job, "epoch": epoch, "round_id": result.round_id, "outcome": result.outcome, "message": result.message,
        "current_rate": result.current_rate, "forecast_rate": result.forecast_rate,
        "in_force": json.dumps(result.in_force.to_dict(), sort_keys=True),
        "recommended": None if rec is None else json.dumps(rec.configuration.to_dict(), sort_keys=True),
        "predicted_max_rate": None if rec is None else rec.max_rate,
        "predicted_recovery_s": _finite(rec.recovery_s if rec else None),
        "p_feasible": None if rec is None else rec.p_feasible, "profiles_run": len(result.profiles),
        "slot_seconds": float(sum(p.slot_seconds for p in result.profiles)), "at": datetime.now(UTC),
    }])  # fmt: skip


def tune(config: JobConfig, client: FlinkRestClient, store_root: str | Path, epoch: int, site: ProfilingSite,
         force: bool = False, rate: float | None = None, profile_dir: str | None = None) -> RoundResult:  # fmt: skip
    """Run one round for ``config``'s job at ``epoch`` (see the module docstring); ``rate`` overrides the forecast."""
    settings = config.tuning
    round_id = f"{round_prefix(config.name)}-{epoch}"
    in_force, slots_per_tm, backend = configuration_in_force(client, config.flink_job_name)
    horizon = max(settings.max_minutes * 60 / config.interval.total_seconds(), 1.0)
    # As far back as the job's policy reads its history, or as the round looks ahead if that is longer, plus the
    # changes the noise estimate needs (typical_change): a forecast on no less evidence than the policy has.
    lookback = max(history_epochs(config.policy), math.ceil(horizon)) + VARIATION_CHANGES + 1
    arrivals, own = history(store_root, config.name, in_force, lookback)
    current, ahead, change = forecast(arrivals, horizon)
    target = rate if rate is not None else (max(ahead, current) if ahead is not None and current is not None else None)
    if target is None or target <= 0:
        result = RoundResult(round_id, SKIPPED, "no arrival rate measured yet and none given: nothing to tune for", in_force,
                             None, (), current, None)  # fmt: skip
        record_round(store_root, config.name, epoch, result)
        return result
    if not force and rate is None and not change:
        why = f"no change forecast: {current:,.0f} records/s now, {ahead:,.0f} over the next {horizon:g} epochs, within the " \
              "job's typical change"  # fmt: skip
        result = RoundResult(round_id, SKIPPED, why, in_force, None, (), current, target)
        record_round(store_root, config.name, epoch, result)
        return result
    movable = {n: p for n, p in in_force.operators.items() if n in config.deployment.parallelism_args}
    if not movable:
        raise InputError(f"job {config.name}", "tuning runs copies at other parallelisms: it needs parallelism_args")
    fixed = {n: p for n, p in in_force.operators.items() if n not in movable}
    budget = Budget(settings.max_slots or in_force.slots, settings.max_minutes)
    # Up to twice what runs, or twice what the job's own capacity per slot says the target needs.
    per_slot = own[0].max_rate / in_force.slots if own and own[0].max_rate else None
    needed = math.ceil(2 * target / per_slot) if per_slot else 0
    widest = max(2 * in_force.slots, needed, max(fixed.values(), default=1))
    space = candidates(movable, fixed, range(max(fixed.values(), default=1), widest + 1), in_force,
                       settings.checkpoint_intervals, settings.memory_per_slot_mb, settings.managed_fractions)  # fmt: skip
    space = [c for c in space if c.starts(slots_per_tm, settings.min_taskmanager_mb)]  # Flink's memory model allows it
    recovery_target = (settings.recovery_target or config.interval).total_seconds()
    observations = own + earlier_profiles(store_root, config.name)
    model = Model(observations, target, recovery_target, settings.confidence)
    predictions = model.predict(space, slots_per_tm, settings.min_taskmanager_mb)
    chosen = [p for p in model.next_profiles(predictions, len(space)) if p.configuration.slots <= budget.max_slots]
    predicted = {p.configuration: p.max_rate for p in predictions}
    profiles: list[Profile] = []
    if chosen:
        args = CopyArgs(settings.name_flag, settings.rate_flag, settings.group_flag, settings.drop_flags)
        done: list[dict[str, Any]] = []

        def keep(profile: Profile) -> None:  # each copy's row is written as soon as it is measured
            done.append(_profile_row(config.name, epoch, round_id, profile, predicted.get(profile.configuration) or None))
            _write(store_root, PROFILES, config.name, done)

        profiles = run_round(site, client, config.deployment, [p.configuration for p in chosen], target, round_id, budget, args,
                             settings.min_taskmanager_mb, settings.warmup.total_seconds(), settings.measure.total_seconds(),
                             profile_dir or config.deployment.savepoint_uri, backend, keep)  # fmt: skip
        new = [observation(p.configuration, p.max_rate, p.restart_s, p.job_failed, f"profile {p.copy_id}") for p in profiles
               if p.outcome == "succeeded" or p.job_failed]  # fmt: skip
        model = Model(observations + new, target, recovery_target, settings.confidence)
        predictions = model.predict(space, slots_per_tm, settings.min_taskmanager_mb)
    best = model.recommend(predictions, in_force)
    spent = sum(p.slot_seconds for p in profiles) / 60
    ran = f"{len(profiles)} profile(s) run ({spent:.1f} slot-minutes)"
    if best is None:
        outcome, message = NONE, f"{ran}; no configuration sustains {target:,.0f} records/s and recovers within " \
                                 f"{recovery_target:g} s with probability {settings.confidence:g} yet"  # fmt: skip
    elif best.configuration == in_force:
        outcome, message = NONE, f"{ran}; the configuration in force is the cheapest that is sure enough"
    else:
        recovery = "unknown" if best.recovery_s is None else f"{best.recovery_s:.0f} s"
        predicted = f"max {best.max_rate:,.0f} records/s, recovery {recovery}, probability {best.p_feasible:.2f}"
        outcome = RECOMMENDED
        message = f"{ran}; recommended {best.configuration.key()} for {target:,.0f} records/s: predicted {predicted}"
    result = RoundResult(round_id, outcome, message, in_force, best, tuple(profiles), current, target)
    record_round(store_root, config.name, epoch, result)
    return result


def mark_applied(store_root: str | Path, job: str, epoch: int, outcome: str, message: str) -> None:
    """The round's TUNING row after its recommendation was applied (or failed to be): outcome and message replaced."""
    rows = read_epochs(store_root, TUNING, job, [epoch]).to_pylist()
    if not rows:
        raise InputError(f"job {job}", f"no tuning round is recorded at epoch {epoch}")
    _write(store_root, TUNING, job, [{**r, "outcome": outcome, "message": f"{r['message']}. {message}", "at": datetime.now(UTC)}
                                     for r in rows])  # fmt: skip


def plan_markdown(result: RoundResult) -> str:
    """The approval form's body: what runs, what is recommended, and the evidence."""
    lines = [f"**{result.outcome}**: {result.message}", "", "| | in force | recommended |", "|---|---|---|"]
    rec = result.recommended.configuration if result.recommended else None
    for label, get in (("parallelism", lambda c: ", ".join(f"{n} {p}" for n, p in c.parallelism)),
                       ("checkpoint interval", lambda c: f"{c.checkpoint_interval_s:g} s"),
                       ("memory per slot", lambda c: f"{c.memory_per_slot_mb} MB"),
                       ("managed fraction", lambda c: f"{c.managed_fraction:g}")):  # fmt: skip
        lines.append(f"| {label} | {get(result.in_force)} | {get(rec) if rec else '-'} |")
    if result.profiles:
        lines += ["", "| profile | configuration | max rate | restart | outcome |", "|---|---|---|---|---|"]
        for p in result.profiles:
            rate = f"{p.max_rate:,.0f}/s" if p.max_rate else "-"
            lines.append(f"| {p.copy_id} | {p.configuration.key()} | {rate} | {p.restart_s or '-'} s | {p.outcome} |")
    return "\n".join(lines)
