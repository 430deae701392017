"""The outcome of validating one epoch, in words a person can act on.

A failed GX expectation becomes a :class:`Failure`: which rule, what exactly was expected, how many
rows broke it, and a few offending rows named by operator and instance with their values. The
Airflow task prints :meth:`EpochValidation.message` when it stops an epoch and writes
:meth:`EpochValidation.summary` (one line) into the audit trail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from autoscaler.errors import InputError

EXAMPLES = 3  # offending rows quoted per failed expectation


@dataclass(frozen=True)
class Offender:
    """One offending row: where it is and the values the expectation looked at."""

    epoch: int | None
    operator: str | None  # operator name (the id when the topology does not know it)
    instance: int | None
    values: dict[str, Any] = field(default_factory=dict)

    def where(self) -> str:
        slot = f"{self.operator or '?'}#{self.instance if self.instance is not None else '?'}"
        return slot if self.epoch is None else f"{slot} (epoch {self.epoch})"

    def text(self) -> str:
        values = ", ".join(f"{k}={_fmt(v)}" for k, v in self.values.items())
        return f"{self.where()}: {values}" if values else self.where()


@dataclass(frozen=True)
class Failure:
    """One failed expectation, restricted to one epoch."""

    rule: str  # rule id (autoscaler.validate.suite.RULES)
    category: str  # schema, ranges, completeness, consistency, freshness
    expectation: str  # GX expectation type, e.g. expect_column_values_to_be_between
    expected: str  # what the expectation asked for, in words
    unexpected_count: int | None  # offending rows (None for table-level expectations)
    element_count: int | None  # rows the expectation looked at
    offenders: tuple[Offender, ...] = ()
    detail: str | None = None  # table-level findings or why the expectation could not be evaluated
    severity: str = "critical"

    def text(self) -> str:
        head = f"[{self.category}/{self.rule}] {self.expected}"
        if self.detail:
            return f"{head}: {self.detail} ({self.expectation})"
        count = ""
        if self.unexpected_count is not None:
            of = f" of {self.element_count}" if self.element_count is not None else ""
            count = f"{self.unexpected_count}{of} rows fail"
        examples = "; ".join(o.text() for o in self.offenders[:EXAMPLES])
        more = f" (+{len(self.offenders) - EXAMPLES} more)" if len(self.offenders) > EXAMPLES else ""
        body = ", e.g. ".join(p for p in (count, examples + more if examples else "") if p)
        return f"{head}: {body} ({self.expectation})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "category": self.category,
            "expectation": self.expectation,
            "expected": self.expected,
            "unexpected_count": self.unexpected_count,
            "element_count": self.element_count,
            "offenders": [
                {
                    "epoch": o.epoch,
                    "operator": o.operator,
                    "instance": o.instance,
                    "values": {k: _json(v) for k, v in o.values.items()},
                }
                for o in self.offenders[: EXAMPLES * 4]
            ],
            "detail": self.detail,
            "severity": self.severity,
        }


@dataclass(frozen=True)
class EpochValidation:
    """Whether one epoch's metrics may be used for a decision, and why not."""

    job: str
    epoch: int
    engine: str  # pandas or spark
    rows: int  # metrics rows validated
    evaluated: int  # expectations evaluated
    failures: tuple[Failure, ...]  # critical: the epoch is rejected
    warnings: tuple[Failure, ...]  # e.g. warm-up: valid data, but not decidable
    validated_at: datetime
    docs_pages: tuple[str, ...] = ()  # Data Docs pages (metrics suite, slots suite)
    quarantine: str | None = None  # where the rejected rows were moved
    thresholds: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """No critical expectation failed: the data is fit to be kept and used."""
        return not self.failures

    @property
    def decidable(self) -> bool:
        """The policy may decide on this epoch (valid and no warm-up window)."""
        return self.success and not self.warnings

    @property
    def status(self) -> str:
        return "failed" if not self.success else ("passed" if self.decidable else "not-decidable")

    @property
    def failed_rules(self) -> list[str]:
        return sorted({f.rule for f in self.failures})

    def summary(self) -> str:
        """One line for the audit trail."""
        where = f"job {self.job} epoch {self.epoch}"
        if not self.success:
            kept = f"; quarantined in {self.quarantine}" if self.quarantine else ""
            failed = f"{len(self.failures)} of {self.evaluated} expectations: {', '.join(self.failed_rules)}"
            return f"{where}: metrics FAILED validation ({failed}), {self.rows} rows{kept}"
        if not self.decidable:
            warned = ", ".join(sorted({w.rule for w in self.warnings}))
            return f"{where}: metrics valid but not decidable ({warned}), {self.rows} rows"
        return f"{where}: metrics passed {self.evaluated} expectations, {self.rows} rows"

    def message(self) -> str:
        """Every failed (and warned) expectation in plain words, with operator/instance and values."""
        lines = [self.summary()]
        if self.failures:
            lines.append("No decision is made for this epoch. Failed expectations:")
            lines += [f"  - {f.text()}" for f in self.failures]
        if self.warnings:
            lines.append("Not decidable:" if self.success else "Also:")
            lines += [f"  - {w.text()}" for w in self.warnings]
        if self.quarantine:
            lines.append(f"The rows are kept in {self.quarantine} (release_quarantine restores them after a fix).")
        if self.docs_pages:
            lines.append(f"Data Docs: {self.docs_pages[0]}")
        return "\n".join(lines)

    def raise_for_failure(self) -> None:
        """Stop the task: a :class:`ValidationFailed` carrying :meth:`message`."""
        if not self.success:
            raise ValidationFailed(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "epoch": self.epoch,
            "status": self.status,
            "success": self.success,
            "decidable": self.decidable,
            "engine": self.engine,
            "rows": self.rows,
            "evaluated": self.evaluated,
            "failures": [f.to_dict() for f in self.failures],
            "warnings": [w.to_dict() for w in self.warnings],
            "validated_at": self.validated_at.isoformat(),
            "docs_pages": list(self.docs_pages),
            "quarantine": self.quarantine,
            "thresholds": self.thresholds,
            "summary": self.summary(),
        }


class ValidationFailed(InputError):
    """An epoch's metrics failed validation: no decision, the rows are in quarantine."""

    def __init__(self, result: EpochValidation) -> None:
        self.result = result
        super().__init__(f"metrics of job {result.job} epoch {result.epoch}", result.message())


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if math.isnan(value) or math.isinf(value) else f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return _fmt(value)
