"""Validate an epoch's metrics with Great Expectations before DS2 decides on them.

Bad input is stopped (no decision), named (which expectation, which operator instance, which
values) and kept (moved to quarantine, restorable). Modules, one job each:

- :mod:`.config` -- :class:`ValidationConfig`: every threshold with its default and meaning;
- :mod:`.suite` -- the rules and the GX expectation suites built from a config (defined once);
- :mod:`.expectations` -- the one custom expectation (a ratio between two columns, with tolerance);
- :mod:`.view` -- the batches GX validates (derived columns, expected-instance grid), pandas and Spark;
- :mod:`.gxrun` -- the ephemeral GX context, checkpoints and Data Docs;
- :mod:`.parse` / :mod:`.result` -- GX results as failures per epoch, messages and summaries;
- :mod:`.check` -- validate rows (pandas) or a DataFrame (Spark), no side effects;
- :mod:`.quarantine` -- move rejected epochs out of the store and back;
- :mod:`.records` -- the ``validations`` table (one verdict per job and epoch);
- :mod:`.stored` -- validate stored epochs: read, validate, quarantine, record.

Importing this package does not import GX (~2.5 s); the validating functions do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autoscaler.validate.config import ValidationConfig

if TYPE_CHECKING:
    from autoscaler.validate.check import validate_dataframe, validate_rows
    from autoscaler.validate.quarantine import quarantined_epochs, read_quarantine, release_quarantine
    from autoscaler.validate.result import EpochValidation, Failure, Offender, ValidationFailed
    from autoscaler.validate.stored import default_docs_dir, validate_epoch, validate_range

_LAZY = {
    "validate_rows": "check",
    "validate_dataframe": "check",
    "quarantined_epochs": "quarantine",
    "read_quarantine": "quarantine",
    "release_quarantine": "quarantine",
    "EpochValidation": "result",
    "Failure": "result",
    "Offender": "result",
    "ValidationFailed": "result",
    "default_docs_dir": "stored",
    "validate_epoch": "stored",
    "validate_range": "stored",
}

__all__ = [
    "EpochValidation",
    "Failure",
    "Offender",
    "ValidationConfig",
    "ValidationFailed",
    "default_docs_dir",
    "quarantined_epochs",
    "read_quarantine",
    "release_quarantine",
    "validate_dataframe",
    "validate_epoch",
    "validate_range",
    "validate_rows",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"autoscaler.validate.{_LAZY[name]}"), name)
    raise AttributeError(name)
