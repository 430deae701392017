"""What an option is: its key in a job's entry of the jobs config, its kind, default and meaning.

The options themselves are declared in :mod:`autoscaler.config.options` (and the modules it gathers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class Option:
    """One option: where it is set, its type, its default and what it means."""

    key: str  # dotted key in a job's entry of the jobs config, e.g. "policy.factor"
    kind: str  # number | integer | duration | boolean | choice | text | strings | bounds | connection | date
    default: Any
    meaning: str
    minimum: float | None = None  # numbers and integers; seconds for durations
    choices: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The key's last part: the field name in its section and in the dataclasses below."""
        return self.key.rsplit(".", 1)[-1]

    @property
    def default_text(self) -> str:
        if isinstance(self.default, timedelta):
            seconds = self.default.total_seconds()
            for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
                if seconds and seconds % size == 0:
                    return f"{seconds / size:g}{unit}"
            return f"{seconds:g}s"
        return "none" if self.default is None else json.dumps(self.default, default=str)
