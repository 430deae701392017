"""The outcome words of a tuning round (TUNING.outcome), in a module light enough for a DAG file to import."""

from __future__ import annotations

SKIPPED, RECOMMENDED, NONE, APPLIED, FAILED = "skipped", "recommended", "none", "applied", "failed"
