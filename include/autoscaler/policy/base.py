"""The one interface every policy kind implements, as in DS2's controller: a pure function.

A policy reads one epoch of a job -- per operator, its metrics summed over its instances
(:class:`OperatorWindow`) -- and returns one :class:`Decision` per operator of the topology,
in topological order, each with its reason. It keeps no state and does no I/O. A kind that
needs the past (N back-pressured epochs in a row, a deferred scale-down) receives the job's
previous epochs as an argument (:class:`EpochWindows`, oldest first), as many as
:func:`history_epochs` says it looks back; stability rules and acting still belong to the
decide and rescale stages.

A kind is a module ``autoscaler/policy/<kind>.py`` with two functions, ``evaluate_epoch`` (a
:class:`Policy`) and ``history_epochs(options) -> int`` (and, for a kind whose model is written over
columns, ``evaluate_columns``: :mod:`autoscaler.policy.columns`), and its name in
:data:`autoscaler.config.options.POLICY_KINDS`: that tuple is the one registry of kinds (the
jobs config, the Spark job, the lab and this module all read it). Every kind runs unchanged on
Python and on Spark (:mod:`autoscaler.engine.spark.decisions`). What every kind shares lives
here: the completeness check, the sources' arrival rate and its words, the propagation of rates
through the graph (:func:`flow`), the scale-down wait (:func:`scale_down_wait`), and the bounds,
key-group alignment and scale-down limit a proposal passes (:func:`bounded`), each written once.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from autoscaler.config.options import POLICY_KINDS
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.policy.rounding import align
from autoscaler.topology import Topology


@dataclass(frozen=True)
class OperatorWindow:
    """One operator's metrics in one epoch, summed over its instances."""

    parallelism: int
    instances_observed: int
    true_processing_rate: float
    true_output_rate: float
    observed_output_rate: float
    max_parallelism: int | None = None
    warmup_instances: int = 0
    # Read by the utilization and rules kinds (DS2 needs only the rates above):
    observed_processing_rate: float = 0.0  # records in per second of wall time, summed
    observed_processing_rate_max: float = 0.0  # the same, of the instance that took the most (skew: its share)
    busy_ratio_max: float = 0.0  # busiest instance's busy time / its window (the Flink autoscaler's MAX)
    backpressure_ratio_max: float = 0.0  # most back-pressured instance's back-pressured time / its window
    pending_records: float | None = None  # sources: records owed at the window's end (FLIP-33), if reported
    # Sources: how their arrival rate (true_output_rate) was known (the metrics' source_rate_basis,
    # distinct values joined by "/"); None for DS2 files, whose true output rate is the file's.
    rate_basis: str | None = None
    duplicated_instances: int = 0  # rows beyond one per instance (bad input: the epoch is incomplete)


@dataclass(frozen=True)
class EpochWindows:
    """One earlier epoch of the job, as the policy saw it: its number and windows by operator id.

    A run passes the stored epochs among the :func:`history_epochs` before the decided one, oldest
    first; an epoch with no stored metrics (quarantined, never collected) is simply absent.
    """

    epoch: int
    windows: Mapping[str, OperatorWindow]


@dataclass(frozen=True)
class Decision:
    operator_id: str
    operator_name: str
    is_source: bool
    status: str
    current_parallelism: int
    instances_observed: int
    true_processing_rate: float | None
    true_output_rate: float | None
    capacity_per_instance: float | None
    target_input_rate: float | None
    target_output_rate: float | None
    optimal_parallelism: float | None
    target_parallelism: int
    source_rate_ratio: float | None
    reason: str
    # What the kind found that other stages act on, as codes of FINDINGS joined by "," (None: nothing). The
    # reason says it in words for people; a stage that acts on a finding reads this, never the words.
    findings: str | None = None


# The codes a decision's ``findings`` may hold, and what each means.
INEFFECTIVE_SCALE_UP = "ineffective-scale-up"
FINDINGS = {
    INEFFECTIVE_SCALE_UP: "the operator's last scale-up bought less than effectiveness_threshold of the capacity it "
    "promised, and further scale-ups are held back (the alerts raise it)",
}


class Policy(Protocol):
    """``(topology, windows by operator id, options, source-rate overrides, earlier epochs, epoch) -> decisions``.

    ``epoch`` is the decided epoch's number, so that a kind can tell an epoch missing from its history
    (None: right after the last one of ``history``).
    """

    def __call__(
        self,
        topology: Topology,
        windows: Mapping[str, OperatorWindow],
        options: PolicyOptions,
        source_rates: Mapping[str, float] | None = None,
        history: Sequence[EpochWindows] = (),
        epoch: int | None = None,
    ) -> list[Decision]: ...


def unusable_epoch(topology: Topology, windows: Mapping[str, OperatorWindow]) -> list[Decision] | None:
    """ "No change" decisions when an epoch lacks instances or spans a restart; None when it is usable.

    Every kind starts with this check: a decision needs every instance of every operator once,
    and a window that overlaps a restart measures the restart, not the job.
    """
    missing = []
    for op in topology.order:
        w = windows.get(op)
        name = topology.operators[op].name
        if w is None:
            missing.append(f"{name} has 0 of {topology.operators[op].parallelism} instances")
        elif w.duplicated_instances:
            missing.append(f"{name} has duplicated instances")
        elif w.instances_observed != w.parallelism:
            missing.append(f"{name} has {w.instances_observed} of {w.parallelism} instances")
    warm = [topology.operators[op].name for op in topology.order if op in windows and windows[op].warmup_instances]
    if not missing and not warm:
        return None
    status = "incomplete" if missing else "warmup"
    if missing:
        reason = "incomplete metrics, no change: " + "; ".join(missing)
    else:
        reason = "warm-up window (the job restarted), no change: " + ", ".join(warm)
    return [keep(topology, windows, op, reason, status) for op in topology.order]


# What each basis of a source's arrival rate means, in a decision's words (see collect.snapshot).
BASIS_WORDS = {
    "emitted+lag": "records emitted + backlog growth",
    "emitted+end-lag": "pendingRecords reported at the window's end only: records emitted + the backlog then, "
    "the most that can have arrived",
    "emitted-unblocked": "no pendingRecords reported: only what it emitted while unblocked is known, "
    "the arrival rate beyond it is not",
    "emitted": "no pendingRecords reported and blocked most of the window: only what it emitted is known, "
    "the arrival rate beyond it is not",
    "gauge (oracle)": "ORACLE: the test job's own rate gauge, which no production source has",
}


# Bases whose rate is a bound on the arrival, not a measure of it: what the source emitted (the least that arrived)
# or that plus its backlog at the window's end (the most). A kind decides on them when nothing better is known, but
# a bound is not a value of the job's load to learn its sway from (ds2_plus's rises).
BOUND_BASES = frozenset({"emitted", "emitted-unblocked", "emitted+end-lag"})


def arrival_measured(window: OperatorWindow) -> bool:
    """Whether the source's arrival rate in ``window`` was measured on every instance, not bounded
    (:data:`BOUND_BASES`); a window with no basis (the true output rate of a rates file, an oracle) is measured."""
    return not (set((window.rate_basis or "").split("/")) & BOUND_BASES)


def source_arrival(window: OperatorWindow, override_per_instance: float | None) -> tuple[float, str]:
    """A source's arrival rate (:func:`arrival_rate`) and how it is known, in words."""
    rate = arrival_rate(window, override_per_instance)
    if override_per_instance is None:
        return rate, basis_words(window.rate_basis)
    if override_per_instance == -1:
        return rate, OBSERVED_OVERRIDE_WORDS
    return rate, override_words(override_per_instance)


def arrival_rate(window: OperatorWindow, override_per_instance: float | None) -> float:
    """A source's arrival rate: an override times its instances, or the measured one (a kind reads it over an
    hour of history, where the words are not wanted).

    An override of -1 means "use the observed output" (the DS2 reference's convention).
    """
    if override_per_instance is None:
        return window.true_output_rate
    if override_per_instance == -1:
        return window.observed_output_rate
    return override_per_instance * window.parallelism


OBSERVED_OVERRIDE_WORDS = "override -1: the observed output"


def basis_words(basis: str | None) -> str:
    """How a source's measured arrival rate is known, in words (its window's ``rate_basis``)."""
    return "; ".join(BASIS_WORDS.get(b, b) for b in basis.split("/")) if basis else "the input's true output rate"


def override_words(override_per_instance: float) -> str:
    return f"override {override_per_instance:g} r/s per instance"


def source_reason(rate: float, basis: str, kept: str = "never rescaled") -> str:
    return f"source: {kept}; arrival {rate:.1f} r/s ({basis})"


def source_decision(topology: Topology, windows: Mapping[str, OperatorWindow], op: str, rate: float, basis: str,
                    kept: str = "never rescaled") -> Decision:  # fmt: skip
    """The decision of a source: kept at its parallelism (``kept`` says why), with its arrival rate and its basis."""
    reason = source_reason(rate, basis, kept)
    return replace(keep(topology, windows, op, reason), true_output_rate=rate, target_output_rate=rate)


def source_kept(topology: Topology, op: str, options: PolicyOptions) -> str | None:
    """Why a kind that sizes sources (``scale_sources``) keeps source ``op`` as it is; None: it sizes it.

    A source is sized only where the job lets it move (``movable_operators``), and its
    capacity, as any operator's, is what it takes in per second of busy time (see collect.snapshot); its
    highest useful parallelism is its window's ``max_parallelism``: the splits it reads, when fewer than its key
    groups (an instance beyond them reads nothing).
    """
    if not options.scale_sources:
        return "kept (scale_sources is off)"
    name = topology.operators[op].name
    if options.movable_operators is not None and name not in options.movable_operators:
        return "kept (the job's parallelism_args do not name it)"
    return None


def selectivity(window: OperatorWindow) -> float:
    """An operator's records out per record in (its true output over its true processing rate; 0 when idle)."""
    return window.true_output_rate / window.true_processing_rate if window.true_processing_rate > 0 else 0.0


def flow(topology: Topology, windows: Mapping[str, OperatorWindow], at_sources: Mapping[str, Mapping[str, float]],
         factor: float = 0.0) -> dict[str, dict[str, float]]:  # fmt: skip
    """Named rates from the sources through the graph: per operator, each rate *into* it (sources: their own).

    The one rule every kind propagates by (DS2's): an operator takes the sum of its upstreams' outputs,
    times ``1 + factor``, and puts out that times its observed :func:`selectivity`. ``at_sources`` maps each
    source to its rates by name (arrival, backlog, ...); every source names the same rates.
    """
    into: dict[str, dict[str, float]] = {}
    out: dict[str, dict[str, float]] = {}
    for op in topology.order:
        if topology.operators[op].is_source:
            into[op] = dict(at_sources[op])
            out[op] = into[op]
            continue
        ups = topology.upstream(op)
        names = out[ups[0]].keys() if ups else ()
        into[op] = {n: sum(out[u][n] for u in ups) * (1 + factor) for n in names}
        s = selectivity(windows[op])
        out[op] = {n: v * s for n, v in into[op].items()}
    return into


def bounded(op: str, proposal: int, window: OperatorWindow, options: PolicyOptions) -> tuple[int, str]:
    """``proposal`` limited, bounded and aligned, and the words that say what changed it.

    The one place every kind applies these, in the Flink autoscaler's order: the scale-down and
    scale-up limits (:meth:`PolicyOptions.scale_down_limit`, ``max_scale_up_factor``), the lower
    bound (``min_parallelism``, else 1), the upper bound (``max_parallelism``,
    ``job_max_parallelism``, the operator's key groups), then, with ``align_to_key_groups``, the
    alignment to the key groups (:func:`autoscaler.policy.rounding.align`).
    """
    current = window.parallelism
    target, why = proposal, ""
    down = options.scale_down_limit()
    if down is not None and target < current:
        floor = math.ceil(current * (1 - down) - 1e-9)
        if target < floor:
            target, why = floor, f"; scale-down limited to -{down:.0%}: {floor}"
    up = options.max_scale_up_factor
    if up is not None and target > current:
        ceiling = math.ceil(current * (1 + up) - 1e-9)
        if target > ceiling:
            target, why = ceiling, f"; scale-up limited to +{up:.0%}: {ceiling}"
    low, high = options.bounds(op, window.max_parallelism)
    limited = target
    target = min(max(target, low), high)
    if target > limited:
        why += f"; raised to min {low}"
    elif target < limited:
        why += f"; capped at max {high}"
    key_groups = window.max_parallelism or options.job_max_parallelism
    if options.align_to_key_groups and key_groups:
        aligned = align(target, current, key_groups, low, high)
        if aligned != target:
            why += f"; aligned to {aligned} ({key_groups} key groups)"
        target = aligned
    return target, why


@dataclass(frozen=True)
class PastProposal:
    """What a kind would have proposed for an operator in an earlier epoch, at the size it ran then."""

    epoch: int
    parallelism: int
    proposal: int


def scale_down_wait(current: int, today: int, past: Sequence[PastProposal], epoch: int, needed: int, wait_s: float,
                    largest: bool = True) -> tuple[int, str]:  # fmt: skip
    """The one scale-down wait of every kind that waits (the Flink autoscaler's scale-down interval and its
    ``DelayedScaleDown``): ``today``'s proposal below ``current`` is taken only once each of the ``needed`` epochs
    before ``epoch`` ran at ``current`` and proposed less too. An absent epoch (quarantined, never collected) did
    not, and one at another size means a rescale within the wait. The size then is, with ``largest`` (the option
    ``scale_down_to``), the largest proposal of the wait and today's, so that every epoch the wait saw would have been
    carried; else today's. ``past``: the kind's proposals for the epochs it could size, in any order. Returns (target,
    the words that say why)."""
    if today >= current:
        return today, ""
    by_epoch = {p.epoch: p for p in past}
    wait = [by_epoch.get(e) for e in range(epoch - needed, epoch)]
    held = 0
    for p in reversed(wait):
        if p is None or p.parallelism != current:
            break
        held += 1
    if held < needed:
        return current, (f"; a scale-down to {today} waits: {held} of the {needed} epochs of scale_down_interval "
                         f"({wait_s:g} s) ran at {current}")  # fmt: skip
    for p in wait:
        if p is not None and p.proposal >= current:
            return current, f"; a scale-down to {today} waits: the load of epoch {p.epoch} needed {current}"
    if not largest:
        return today, f"; {wait_s:g} s at {current}, each epoch of it proposing less: today's size, {today}"
    target = max([today, *(p.proposal for p in wait if p is not None)])
    return target, (f"; {wait_s:g} s at {current}, each epoch of it proposing less: the largest of the wait's "
                    f"proposals and today's, {target}")  # fmt: skip


def keep(topology: Topology, windows: Mapping[str, OperatorWindow], op: str, reason: str, status: str = "ok") -> Decision:
    """A decision that keeps ``op`` at its parallelism, with no estimate."""
    w = windows.get(op)
    current = w.parallelism if w else topology.operators[op].parallelism
    meta = topology.operators[op]
    rate = w.true_processing_rate if w and status == "ok" else None
    out = w.true_output_rate if w and status == "ok" else None
    return Decision(op, meta.name, meta.is_source, status, current, w.instances_observed if w else 0, rate, out,
                    None, None, None, None, current, None, reason)  # fmt: skip


def verdict(current: int, target: int) -> str:
    """ " -> scale up 2 -> 4", " -> scale down ..." or " -> keep 2": how every reason ends."""
    if target > current:
        return f" -> scale up {current} -> {target}"
    if target < current:
        return f" -> scale down {current} -> {target}"
    return f" -> keep {current}"


def history_epochs(options: PolicyOptions) -> int:
    """How many earlier epochs a run of ``options.kind`` reads as its history."""
    return _module(options.kind).history_epochs(options)


def sizes_for_measured_restarts(kind: str) -> bool:
    """Whether a run of ``kind`` fills an unset ``restart_time`` with the job's measured downtimes
    (:mod:`autoscaler.policy.restarts`): a kind says so with ``MEASURED_RESTART = True``."""
    return bool(getattr(_module(kind), "MEASURED_RESTART", False))


def policy_for(kind: str) -> Policy:
    """The policy function of ``kind`` (one of :data:`POLICY_KINDS`)."""
    return _module(kind).evaluate_epoch


def columns_for(kind: str) -> Callable[..., Any] | None:
    """``kind``'s column-wise model (``evaluate_columns``, :mod:`autoscaler.policy.columns`), if it has one."""
    return getattr(_module(kind), "evaluate_columns", None)


def _module(kind: str):  # noqa: ANN202 - a kind's module (evaluate_epoch, history_epochs)
    if kind not in POLICY_KINDS:
        raise InputError("policy kind", f"{kind!r} is not one of {', '.join(POLICY_KINDS)}")
    return importlib.import_module(f"autoscaler.policy.{kind}")
