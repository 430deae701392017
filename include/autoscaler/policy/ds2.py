"""The DS2 policy (kind ``ds2``) for one epoch: the one implementation, run as is on Python and on Spark.

Per window, in topological order: sources emit their aggregated true output rate (or an
override); a non-source operator's target input is the sum of its upstreams' outputs at
their optimal parallelism; its optimal parallelism is target input / (aggregated true
processing rate / current parallelism); its output at that parallelism is
true output / true processing * target input (from the unrounded estimate). The proposal then
passes the bounds, alignment and limits every kind shares (:func:`autoscaler.policy.base.bounded`).

The model is written once, over columns (:func:`evaluate_columns`, any number of epochs per call,
as a backfill runs it); :func:`evaluate_epoch` is that function over one epoch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.policy.base import (
    OBSERVED_OVERRIDE_WORDS,
    Decision,
    EpochWindows,
    OperatorWindow,
    basis_words,
    bounded,
    override_words,
    source_reason,
    unusable_epoch,
    verdict,
)
from autoscaler.policy.columns import DecisionColumns, WindowColumns
from autoscaler.policy.rounding import round_up, threshold_adjust
from autoscaler.topology import Topology


def history_epochs(options: PolicyOptions) -> int:
    """DS2 decides from one epoch's rates alone."""
    return 0


def evaluate_epoch(
    topology: Topology,
    windows: Mapping[str, OperatorWindow],
    options: PolicyOptions,
    source_rates: Mapping[str, float] | None = None,
    history: Sequence[EpochWindows] = (),
    epoch: int | None = None,
) -> list[Decision]:
    """Decisions for every operator of ``topology`` (in topological order) for one epoch.

    DS2 needs no history: one epoch's rates decide (``history`` is accepted and ignored).
    """
    unusable = unusable_epoch(topology, windows)
    if unusable is not None:
        return unusable
    return evaluate_columns(topology, WindowColumns.of(topology, [windows]), options, source_rates).decisions(topology, 0)


def _arrival(cols: Mapping[str, np.ndarray], override: float | None) -> tuple[np.ndarray, list[str]]:
    """A source's arrival rate per epoch and its words (:func:`autoscaler.policy.base.source_arrival`)."""
    n = len(cols["parallelism"])
    if override is None:
        words: dict[object, str] = {}
        return cols["true_output_rate"], [words.get(b) or words.setdefault(b, basis_words(b)) for b in cols["rate_basis"]]
    if override == -1:
        return cols["observed_output_rate"], [OBSERVED_OVERRIDE_WORDS] * n
    return override * cols["parallelism"], [override_words(override)] * n


def _bounded(
    op: str, proposal: np.ndarray, cols: Mapping[str, np.ndarray], options: PolicyOptions
) -> tuple[np.ndarray, list[str]]:
    """:func:`autoscaler.policy.base.bounded` per epoch, called once per distinct (proposal, parallelism, key groups)."""
    # Distinct keys by a dict, in order of first sight: a third of np.unique(axis=0)'s time at 1,024 epochs.
    distinct: dict[tuple[int, int, int], int] = {}
    keys = zip(proposal.tolist(), cols["parallelism"].tolist(), cols["max_parallelism"].tolist(), strict=True)
    inverse = [distinct.setdefault(key, len(distinct)) for key in keys]
    results = [
        bounded(op, int(p), OperatorWindow(int(cur), int(cur), 0.0, 0.0, 0.0, max_parallelism=int(kg) or None), options)
        for p, cur, kg in distinct
    ]
    targets = np.array([t for t, _ in results], dtype=np.int64)[np.asarray(inverse, dtype=np.int64)]
    return targets, [results[k][1] for k in inverse]


def evaluate_columns(
    topology: Topology, cols: WindowColumns, options: PolicyOptions, source_rates: Mapping[str, float] | None = None
) -> DecisionColumns:
    """DS2's decisions for every operator of ``topology`` over the usable epochs of ``cols``."""
    options = options.resolved(topology)
    source_rates = source_rates or {}
    n = cols.size
    output: dict[str, np.ndarray] = {}
    words: dict[str, list[str]] = {}
    estimate: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}  # op -> (input, capacity, optimal, raw)
    # The max over sources of arrival / observed output, as Python's max() over the sources in order.
    ratio, known = np.full(n, np.nan), np.zeros(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for op in topology.order:
            w = cols[op]
            if topology.operators[op].is_source:
                output[op], words[op] = _arrival(w, source_rates.get(op))
                observed = w["observed_output_rate"]
                has = observed > 0
                r = output[op] / np.where(has, observed, 1.0)
                ratio = np.where(has & (~known | (r > ratio)), r, ratio)
                known |= has
                continue
            target_input = np.zeros(n)
            for up in topology.upstream(op):
                target_input = target_input + output[up]
            processing = w["true_processing_rate"]
            capacity = processing / w["parallelism"]
            optimal = np.where(capacity > 0, target_input / capacity, np.where(target_input > 0, np.inf, np.nan))
            selectivity = np.where(processing > 0, w["true_output_rate"] / processing, 0.0)
            output[op] = selectivity * target_input
            estimate[op] = (target_input, capacity, optimal, round_up(optimal, options.factor))

    no_scale_up = np.ones(n, dtype=bool)
    for op, (_, _, _, raw) in estimate.items():
        no_scale_up &= raw <= cols[op]["parallelism"]
    apply = known & no_scale_up & (ratio > options.threshold) if options.threshold is not None else np.zeros(n, dtype=bool)
    ratio_list = ratio.tolist()

    out = DecisionColumns(n, {})
    for op in topology.order:
        w, meta = cols[op], topology.operators[op]
        common = {"operator_id": op, "operator_name": meta.name, "is_source": meta.is_source, "status": "ok",
                  "current_parallelism": w["parallelism"], "instances_observed": w["instances_observed"],
                  "true_processing_rate": w["true_processing_rate"], "source_rate_ratio": ratio}  # fmt: skip
        out.nulls[(op, "source_rate_ratio")] = ~known
        if meta.is_source:
            rate = output[op]
            reasons = [source_reason(r, b) for r, b in zip(rate.tolist(), words[op], strict=True)]
            out.by_op[op] = {**common, "true_output_rate": rate, "capacity_per_instance": None, "target_input_rate": None,
                             "target_output_rate": rate, "optimal_parallelism": None,
                             "target_parallelism": w["parallelism"], "reason": reasons, "findings": None}  # fmt: skip
            continue
        target_input, capacity, optimal, raw = estimate[op]
        proposal = raw.copy()
        proposal[apply] = threshold_adjust(raw[apply], ratio[apply])
        target, limits = _bounded(op, proposal, w, options)
        reasons = []
        rows = zip(target_input.tolist(), capacity.tolist(), optimal.tolist(), raw.tolist(), proposal.tolist(),
                   apply.tolist(), ratio_list, limits, w["parallelism"].tolist(), target.tolist(), strict=True)  # fmt: skip
        # One f-string per reason, the options' words formatted once: a block of 1,024 epochs writes 10,240.
        rounded = f"; x(1+{options.factor:g}) rounded up = "
        for t_in, cap, opt, raw_k, prop, thresholded, r, limit, current, final in rows:
            if math.isnan(opt):
                why = f"no input and no processing observed: optimal 0{rounded}{raw_k}"
            elif math.isinf(opt):
                why = f"input {t_in:.1f} r/s but no processing observed: capacity unknown, estimate saturates{rounded}{raw_k}"
            else:
                why = f"input {t_in:.1f} r/s / capacity {cap:.1f} r/s per instance = {opt:.4f}{rounded}{raw_k}"
            if thresholded:
                why += f"; no scale-up and source ratio {r:.4f} > threshold {options.threshold:g}: x{r:.4f} = {prop}"
            reasons.append(f"{why}{limit}{verdict(current, final)}")
        out.by_op[op] = {**common, "is_source": False, "true_output_rate": w["true_output_rate"],
                         "capacity_per_instance": capacity, "target_input_rate": target_input,
                         "target_output_rate": output[op], "optimal_parallelism": optimal,
                         "target_parallelism": target, "reason": reasons, "findings": None}  # fmt: skip
    return out
