"""Plain-text views of decisions for terminals and task logs."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def _number(value: object, digits: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf"
        return f"{value:,.{digits}f}"
    return str(value)


def decision_table(rows: Iterable[Mapping[str, object]]) -> str:
    """A fixed-width table: epoch, operator, current -> target, rates and the reason."""
    header = ("epoch", "operator", "current", "optimal", "target", "input r/s", "capacity r/s/inst", "reason")
    lines = [header]
    for row in rows:
        lines.append(
            (
                str(row["epoch"]),
                str(row["operator_name"]),
                str(row["current_parallelism"]),
                _number(row["optimal_parallelism"], 4),
                str(row["target_parallelism"]),
                _number(row["target_input_rate"], 1),
                _number(row["capacity_per_instance"], 1),
                str(row["reason"]),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    out = []
    for n, line in enumerate(lines):
        cells = [cell.rjust(w) if i not in (1,) else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths))]
        out.append("  ".join([*cells, line[-1]]))
        if n == 0:
            out.append("  ".join(["-" * w for w in widths] + ["-" * 6]))
    return "\n".join(out)
