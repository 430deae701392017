"""Many epochs of one job as columns: the form a kind evaluates in when it has ``evaluate_columns``.

A kind's model is written once. A kind that can be evaluated column-wise (DS2: one epoch's rates
decide, no history) writes it as ``evaluate_columns(topology, WindowColumns, options, source_rates)
-> DecisionColumns`` and its one-epoch ``evaluate_epoch`` is that function over columns of length
one. A backfill then decides thousands of epochs per call (:mod:`autoscaler.engine.spark.decisions`)
instead of paying Python's per-object cost for each: at 10 operators that cost was about 250 µs an
epoch, 63 CPU-s for a 10^7-row backfill (``benchmarks/results/policy.md``).

Columns hold only epochs every kind can decide (every instance once, no warm-up:
:func:`autoscaler.policy.base.unusable_epoch`); the others keep their one-epoch path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autoscaler.policy.base import Decision, OperatorWindow
from autoscaler.topology import Topology

# The OperatorWindow fields a column-wise kind reads, as numbers (max_parallelism: 0 when unknown).
NUMERIC_FIELDS = ("parallelism", "instances_observed", "true_processing_rate", "true_output_rate",
                  "observed_output_rate", "max_parallelism")  # fmt: skip
INT_FIELDS = frozenset({"parallelism", "instances_observed", "max_parallelism"})
DECISION_FIELDS = tuple(Decision.__dataclass_fields__)


@dataclass(frozen=True)
class WindowColumns:
    """Epochs of one job: per operator id, each of :data:`NUMERIC_FIELDS` as an array over the epochs,
    and ``rate_basis`` (a source's, see :class:`OperatorWindow`) as an object array."""

    size: int
    fields: Mapping[str, Mapping[str, np.ndarray]]

    def __getitem__(self, op: str) -> Mapping[str, np.ndarray]:
        return self.fields[op]

    @classmethod
    def of(cls, topology: Topology, epochs: Sequence[Mapping[str, OperatorWindow]]) -> WindowColumns:
        """Columns of usable epochs' windows (every operator of ``topology`` present)."""
        out: dict[str, dict[str, np.ndarray]] = {}
        for op in topology.order:
            ws = [windows[op] for windows in epochs]
            cols = {
                name: np.array([getattr(w, name) or 0 for w in ws], dtype=np.int64 if name in INT_FIELDS else np.float64)
                for name in NUMERIC_FIELDS
            }
            cols["rate_basis"] = np.array([w.rate_basis for w in ws], dtype=object)
            out[op] = cols
        return cls(len(epochs), out)

    def take(self, index: np.ndarray) -> WindowColumns:
        """The epochs at positions ``index``, in that order."""
        return WindowColumns(len(index), {op: {k: v[index] for k, v in cols.items()} for op, cols in self.fields.items()})


@dataclass
class DecisionColumns:
    """Per operator id, each :class:`Decision` field over the epochs: an array or list (one value per
    epoch), or one value for every epoch. A float field may come with a mask, ``nulls[(op, field)]``,
    true where the value is None."""

    size: int
    by_op: dict[str, dict[str, Any]]
    nulls: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)

    def column(self, op: str, name: str) -> tuple[Any, np.ndarray | None]:
        """One field's values (broadcast to ``size`` when held once) and its null mask (None: no nulls)."""
        value = self.by_op[op][name]
        if value is None:
            return [None] * self.size, np.ones(self.size, dtype=bool)
        if isinstance(value, (np.ndarray, list)):
            return value, self.nulls.get((op, name))
        return [value] * self.size, None

    def decisions(self, topology: Topology, k: int) -> list[Decision]:
        """The ``k``-th epoch's decisions, in topological order, as plain Python values."""
        out = []
        for op in topology.order:
            values = {}
            for name in DECISION_FIELDS:
                column, nulls = self.column(op, name)
                value = None if nulls is not None and nulls[k] else column[k]
                values[name] = value.item() if isinstance(value, np.generic) else value
            out.append(Decision(**values))
        return out
