"""Reading one mapping of the jobs config: every error names the file, the job and the field."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from autoscaler.config.options import Option
from autoscaler.errors import InputError

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_CONN_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")


def parse_duration(value: Any, where: str) -> timedelta:
    """``30s``, ``5m``, ``1h``, ``2d``, ``500ms`` or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a duration like 30s, 5m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(str(value))
        if not match:
            raise ValueError(f"{where}: expected a duration like 30s, 5m or 1h, got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{where}: must be a finite duration >= 0, got {value!r}")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{where}: {value!r} is longer than any duration this can hold") from None


class Fields:
    """Reads one mapping of the config, naming the job and field in every error."""

    def __init__(self, data: Any, where: str, prefix: str = "") -> None:
        self.where = where
        self.prefix = prefix
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise self.error(prefix.rstrip(".") or "entry", f"must be a mapping, got {type(data).__name__}")
        self.data = dict(data)
        self.used: set[str] = set()

    def error(self, key: str, problem: str) -> InputError:
        return InputError(self.where, f"{self.prefix}{key}: {problem}")

    def get(self, key: str, default: Any = None, required: bool = False) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.error(key, "is required")
            return default
        return self.data[key]

    def text(self, key: str, default: str | None = None, required: bool = False) -> Any:
        value = self.get(key, default, required)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise self.error(key, f"must be a non-empty string, got {value!r}")
        return value

    def integer(self, key: str, default: int | None, minimum: int) -> Any:
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, f"must be an integer >= {minimum}, got {value!r}")
        return value

    def number(self, key: str, default: float | None, minimum: float) -> Any:
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
            raise self.error(key, f"must be a number >= {minimum:g}, got {value!r}")
        return float(value)

    def duration(self, key: str, default: timedelta | None, minimum_s: float = 0.0) -> Any:
        value = self.get(key)
        if value is None:
            return default
        try:
            parsed = parse_duration(value, f"{self.prefix}{key}")
        except ValueError as exc:
            raise InputError(self.where, str(exc)) from None
        if parsed.total_seconds() < minimum_s:
            raise self.error(key, f"must be at least {minimum_s:g} s, got {value!r}")
        return parsed

    def choice(self, key: str, default: str | None, choices: tuple[str, ...]) -> str | None:
        value = self.get(key, default)
        if value is None and default is None:  # unset, and the option's "none" means the kind's own
            return None
        if value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key, [])
        if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"must be a list of strings, got {value!r}")
        return tuple(value)

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.get(key, {})
        if not isinstance(value, Mapping):
            raise self.error(key, f"must be a mapping, got {value!r}")
        return dict(value)

    def conn_id(self, key: str, default: str | None) -> str | None:
        value = self.text(key, default)
        if value is None:
            return None  # an optional connection left unset
        if not _CONN_ID.fullmatch(value):
            raise self.error(key, f"{value!r} is not a valid Airflow connection id (letters, digits, _ . -)")
        return value

    def option(self, option: Option) -> Any:
        """The value of a declared option (:mod:`autoscaler.config.options`), checked by its kind."""
        name, default, low = option.name, option.default, option.minimum
        if option.kind == "number":
            return self.number(name, default, low if low is not None else -math.inf)
        if option.kind == "integer":
            return self.integer(name, default, int(low) if low is not None else 0)
        if option.kind == "duration":
            return self.duration(name, default, low or 0.0)
        if option.kind == "boolean":
            return self.boolean(name, default)
        if option.kind == "choice":
            return self.choice(name, default, option.choices)
        if option.kind == "text":
            return self.text(name, default)
        if option.kind == "strings":
            return self.strings(name)
        if option.kind == "bounds":
            return self.bounds(name)
        if option.kind == "connection":
            return self.conn_id(name, default)
        raise AssertionError(f"option {option.key}: kind {option.kind!r} has no reader")

    def bounds(self, key: str) -> dict[str, int]:
        """Operator name -> an integer >= 1 (per-operator parallelism bounds)."""
        out = {}
        for op, n in self.mapping(key).items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise self.error(f"{key}.{op}", f"must be an integer >= 1, got {n!r}")
            out[str(op)] = n
        return out

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.error(unknown[0], f"unknown field (known: {', '.join(sorted(self.used))})")
