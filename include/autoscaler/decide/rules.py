"""Whether a DS2 proposal is worth acting on: the rules between the policy and a rescale.

DS2 computes the parallelism an epoch's rates need; acting on every such number would restart
the job on noise. A proposal becomes a rescale only when it passes, in this order:

1. the epoch is decidable (validated, not a warm-up window) and every operator's metrics are complete;
2. warm-up: the first ``warmup_epochs`` epochs after a rescale carry the restart's transient, counted from
   the decided epoch and from the epoch the restart fell in (a late rescale starts its warm-up late); a
   failover (an epoch recorded failing-over) restarts the job too, and counts as one here and below;
3. activation: at least ``activation_epochs`` decided epochs since the last rescale;
4. cooldown: at least ``cooldown`` since the last rescale ended;
5. per operator: hysteresis (a scale-down by ``ignore_scale_down_by`` instances or fewer is ignored,
   as the reference ignores one of exactly 1); bounds, alignment and the scale-down limit are the
   policy's, applied once for every kind (:func:`autoscaler.policy.base.bounded`);
6. capacity: the new job must fit the cluster: its task slots (free slots plus the slots the job
   itself holds, which a restart releases), and no more busy slots on a TaskManager than its cores.
   A capacity provider is asked for TaskManagers first; what still does not fit is reduced, or
   blocked when nothing would change (:mod:`autoscaler.decide.capacity_rule`).

7. acting: a recommendation-only job, or a time inside one of its excluded periods, records the
   rescale it would make (``recommend``) and never acts on it.

The outcome is a :class:`ScalingPlan`: ``rescale`` with a target per operator, ``recommend`` with the
same, or ``noop`` with the reason. Pure Python: the Airflow decide task only gathers the inputs and branches on it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from autoscaler.capacity.inventory import ClusterView, Inventory
from autoscaler.config.jobs import JobConfig
from autoscaler.decide.capacity_rule import fit_capacity
from autoscaler.decide.plan import NOOP, RECOMMEND, RESCALE, LastRescale, OperatorPlan, ScalingPlan

__all__ = ["NOOP", "RECOMMEND", "RESCALE", "LastRescale", "OperatorPlan", "ScalingPlan", "agreeing_epochs", "decide"]


_REQUIRED = ("operator_id", "operator_name", "is_source", "current_parallelism", "target_parallelism", "status")


def _row_problem(d: Mapping[str, Any]) -> str | None:
    """Why a decision row cannot be acted on (None: it can); bad data never becomes a rescale."""
    if not isinstance(d, Mapping):
        return f"a decision row is a {type(d).__name__}, not a mapping"
    missing = [k for k in _REQUIRED if k not in d or (d[k] is None and not (k == "target_parallelism" and d.get("is_source")))]
    if missing:
        return f"decision of {d.get('operator_name', '?')!r} lacks {', '.join(missing)}"
    for key in ("current_parallelism",) + (() if d["is_source"] and d["target_parallelism"] is None else ("target_parallelism",)):
        value = d[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 1:
            return f"decision of {d['operator_name']!r}: {key} is {value!r}, not a parallelism >= 1"
    return None


def _operators(decisions: Iterable[Mapping[str, Any]]) -> list[OperatorPlan]:
    ops = []
    for d in decisions:
        ops.append(
            OperatorPlan(
                operator_id=d["operator_id"],
                operator_name=d["operator_name"],
                is_source=bool(d["is_source"]),
                current=int(d["current_parallelism"]),
                # Rows of sources written before sources were sized may have no target: they stay.
                proposed=int(d["target_parallelism"] if d["target_parallelism"] is not None else d["current_parallelism"]),
                final=int(d["current_parallelism"]),
                input_rate=_float(d.get("target_input_rate")),
                capacity_per_instance=_float(d.get("capacity_per_instance")),
                reason=str(d.get("reason") or ""),
            )
        )
    return sorted(ops, key=lambda op: (not op.is_source, op.operator_name))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _noop(job: str, epoch: int, ops: list[OperatorPlan], summary: str, validation: str | None) -> ScalingPlan:
    for op in ops:
        op.final = op.current
    return ScalingPlan(job, epoch, NOOP, summary, ops, validation)


def decide(
    job: JobConfig,
    epoch: int,
    decisions: Sequence[Mapping[str, Any]],
    *,
    decidable: bool = True,
    not_decidable_reason: str = "",
    last_rescale: LastRescale | None = None,
    decided_epochs_since_rescale: int = 0,
    free_slots: int | None = None,
    now: datetime | None = None,
    validation: str | None = None,
    key_groups: Mapping[str, int] | None = None,
    cluster: ClusterView | None = None,
) -> ScalingPlan:
    """Apply the stability, bound and capacity rules to one epoch's DS2 decisions.

    ``decided_epochs_since_rescale`` counts the epochs after ``last_rescale`` (this one
    included) whose decisions were complete; ``free_slots`` is the cluster's available task
    slots (None skips the capacity check), ``cluster`` what the cluster offers in full (its TaskManagers, their
    cores, the job's capacity limits and provider; it replaces ``free_slots``); ``key_groups`` (operator id -> key groups) keeps a
    target the capacity check cuts aligned, as the policy aligned it (``align_to_key_groups``).
    """
    name = job.name
    problems = [p for p in map(_row_problem, decisions) if p]
    if problems:
        return _noop(name, epoch, [], f"the epoch's decisions cannot be acted on: {problems[0]}", validation)
    ops = _operators(decisions)
    if not ops:
        why = f"epoch not decidable: {not_decidable_reason}" if not decidable and not_decidable_reason else ""
        return _noop(name, epoch, ops, why or f"no decision was computed for epoch {epoch}", validation)
    if not decidable:
        return _noop(name, epoch, ops, f"epoch not decidable: {not_decidable_reason or 'see the validation'}", validation)
    incomplete = sorted({d["operator_name"] for d in decisions if d["status"] != "ok"})
    if incomplete:
        statuses = sorted({d["status"] for d in decisions if d["status"] != "ok"})
        return _noop(name, epoch, ops, f"metrics {'/'.join(statuses)} for {', '.join(incomplete)}: no change", validation)

    for op in ops:
        _operator_rules(job, op)
    if not any(op.changes for op in ops):
        held = [op for op in ops if op.proposed != op.current]
        summary = (
            f"the {job.policy.kind} policy proposes no change"
            if not held
            else "no change after the rules: " + "; ".join(f"{op.operator_name} {'; '.join(op.notes)}" for op in held)
        )
        return _noop(name, epoch, ops, summary, validation)

    hold = _stability_hold(job, epoch, last_rescale, decided_epochs_since_rescale, now)
    if hold:
        proposal = ", ".join(f"{op.operator_name} {op.current}→{op.final}" for op in ops if op.changes)
        return _noop(name, epoch, ops, f"{hold} (held: {proposal})", validation)

    groups = (key_groups or {}) if job.policy.align_to_key_groups else {}
    if cluster is None and free_slots is not None:
        cluster = ClusterView(Inventory.slots_only(free_slots), slots_only=True)
    wanted = {op.operator_id: op.final for op in ops}
    capacity_note, add = fit_capacity(ops, cluster, groups, job.policy.job_max_parallelism)
    if not any(op.changes for op in ops):
        return _noop(name, epoch, ops, f"blocked: {capacity_note}", validation)
    summary = "rescale " + ", ".join(f"{op.operator_name} {op.current}→{op.final}" for op in ops if op.changes)
    if capacity_note:
        reduced = any(op.final != wanted[op.operator_id] for op in ops)
        summary += f" ({'reduced' if reduced else 'capacity'}: {capacity_note})"
    withheld = _withheld(job, now)
    if withheld:
        return ScalingPlan(name, epoch, RECOMMEND, f"recommended, not acted on ({withheld}): {summary}", ops, validation, add)
    return ScalingPlan(name, epoch, RESCALE, summary, ops, validation, add)


def _withheld(job: JobConfig, now: datetime | None) -> str | None:
    """Why a decided rescale is only recorded (recommendation-only job, excluded period); None: it is acted on."""
    if job.recommendation_only:
        return "recommendation-only job"
    period = next((p for p in job.excluded_periods if now is not None and p.contains(now)), None)
    return f"excluded period {period.text} UTC" if period else None


def _direction(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Operator id -> +1, -1 or 0: where the epoch's proposal moves each operator (a source: where its kind sizes it)."""
    out = {}
    for r in rows:
        if r["target_parallelism"] is not None:
            change = r["target_parallelism"] - r["current_parallelism"]
            out[r["operator_id"]] = (change > 0) - (change < 0)
    return out


def agreeing_epochs(epochs: Sequence[Sequence[Mapping[str, Any]]]) -> int:
    """What activation counts: of the epochs' decision rows (oldest first, the decided epoch last), how many,
    newest first, propose the same direction per operator as the decided one.

    An epoch with an incomplete decision is skipped; one that disagrees ends the count.
    """
    if not epochs:
        return 0
    wanted, count = _direction(epochs[-1]), 0
    for rows in reversed(epochs):
        if not all(r["status"] == "ok" for r in rows):
            continue
        if _direction(rows) != wanted:
            break
        count += 1
    return count


def _stability_hold(job: JobConfig, epoch: int, last: LastRescale | None, decided: int, now: datetime | None) -> str | None:
    """Why warm-up, activation or cooldown hold a proposal back now (None: they let it pass)."""
    stability = job.stability
    if last is None:
        return (
            f"activation: {decided} of {stability.activation_epochs} decided epochs"
            if decided < stability.activation_epochs
            else None
        )
    since = epoch - last.epoch
    if since <= stability.warmup_epochs:
        return f"warm-up: epoch {since} of {stability.warmup_epochs} after the {last.what} at epoch {last.epoch}"
    # A rescale that ran late (its run queued, or its worker died and the retry finished it) took effect
    # after later epochs had ended: their metrics describe the job before it, and acting on them would
    # undo or repeat it (seen in the cluster drill: 1 -> 6 late, then the next epoch, still measured at
    # 1, "rescaled" 6 -> 2).
    finished = last.finished_at
    if finished is not None:
        finished = finished if finished.tzinfo else finished.replace(tzinfo=UTC)
        took_effect = job.epoch_of(finished) + 1  # the epoch whose interval holds ``finished``
        if epoch < took_effect:
            return (
                f"measured before the {last.what} at epoch {last.epoch} took effect ({finished:%H:%M:%S} UTC): "
                "these metrics describe the job as it ran before"
            )
        # Warm-up counts from the epoch the restart fell in, not only from the decided epoch: when runs
        # were late or skipped, a window measured a few seconds after the restart (a short one, taken
        # late) carries its transient all the same (seen: Count 1 -> 4 took effect 3 epochs late, the
        # next run measured 6 s of the drain 9 s after the restart and went 4 -> 6, then 6 -> 4).
        if epoch - took_effect < stability.warmup_epochs:
            return (
                f"warm-up: epoch {epoch - took_effect + 1} of {stability.warmup_epochs} after the {last.what} at "
                f"epoch {last.epoch} took effect ({finished:%H:%M:%S} UTC, in epoch {took_effect})"
            )
    if decided < stability.activation_epochs:
        need = stability.activation_epochs
        return f"activation: {decided} of {need} decided epochs since the {last.what} at epoch {last.epoch}"
    if stability.cooldown_s and last.finished_at is not None and now is not None:
        elapsed = (now - last.finished_at).total_seconds()
        if elapsed < stability.cooldown_s:
            return f"cooldown: {elapsed:.0f} s of {stability.cooldown_s:.0f} s since the last {last.what}"
    return None


def _operator_rules(job: JobConfig, op: OperatorPlan) -> None:
    """Hysteresis for one operator (a source changes only where its kind proposed it).

    Bounds, alignment and the scale-down limit are the policy's (:func:`autoscaler.policy.base.bounded`):
    the proposal arrives within them.
    """
    st = job.stability
    final = op.proposed
    if final < op.current:
        drop = op.current - final
        if drop <= st.ignore_scale_down_by:
            why = f"hysteresis: ignore_scale_down_by={st.ignore_scale_down_by}"
            op.notes.append(f"scale-down by {drop} ignored ({why})")
            final = op.current
    op.final = final


def plan_json(plan: ScalingPlan) -> str:
    return json.dumps(plan.to_dict(), sort_keys=True, default=str)
