"""The validation record: one row per (job, epoch) in the store's ``validations`` table.

Written with :func:`autoscaler.store.parquet.write_epochs`, so validating an epoch again replaces its
record (idempotent) and the audit trail shows the latest verdict with its one-line summary.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from autoscaler.store.parquet import epoch_block, write_epochs
from autoscaler.store.schemas import VALIDATIONS
from autoscaler.validate.result import EpochValidation
from autoscaler.validate.suite import SUITE_VERSION


def validation_rows(results: Iterable[EpochValidation], run_id: str | None = None) -> pa.Table:
    rows = [
        {
            "job": r.job,
            "epoch": r.epoch,
            "epoch_block": epoch_block(r.epoch),
            "status": r.status,
            "decidable": r.decidable,
            "rows": r.rows,
            "expectations": r.evaluated,
            "failed": len(r.failures),
            "failed_rules": ",".join(sorted({f.rule for f in (*r.failures, *r.warnings)})),
            "summary": r.summary(),
            "engine": r.engine,
            "suite_version": SUITE_VERSION,
            "thresholds": json.dumps(r.thresholds, sort_keys=True, default=str),
            "docs_page": r.docs_pages[0] if r.docs_pages else None,
            "quarantine": r.quarantine,
            "run_id": run_id,
            "validated_at": r.validated_at,
        }
        for r in results
    ]
    return pa.Table.from_pylist(rows, schema=VALIDATIONS.arrow_schema())


def record_validations(root: str | Path, job: str, results: Iterable[EpochValidation], run_id: str | None = None) -> list[int]:
    """Write (replace) the validation records of these epochs; returns the epochs written."""
    table = validation_rows(results, run_id)
    return write_epochs(root, VALIDATIONS, job, table) if table.num_rows else []
