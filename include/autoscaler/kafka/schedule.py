"""A step schedule of records per second, in the test job's own notation (``RateSchedule.java``).

``"0s:20000,120s:30000,240s:10000"``: 20,000/s from the start, 30,000/s from 120 s, 10,000/s from 240 s on.
Times take ms, s, m or h (a bare number is seconds); times must increase. The generator and the Java job
read one string, so a scenario's schedule is written once; ``tests/unit/test_kafka_generator.py`` pins the
two parsers to the examples of ``RateSchedule``'s javadoc.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?")
_FACTOR_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclass(frozen=True)
class RateSchedule:
    at_s: tuple[float, ...]
    rate: tuple[float, ...]

    @staticmethod
    def constant(rate: float) -> RateSchedule:
        return RateSchedule((0.0,), (float(rate),))

    @staticmethod
    def parse(spec: str) -> RateSchedule:
        at: list[float] = []
        rates: list[float] = []
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            time_s, sep, rate_s = part.rpartition(":")
            if not sep or not time_s.strip() or not rate_s.strip():
                raise ValueError(f"rate schedule step {part!r} is not <time>:<records per second>")
            m = _DURATION.fullmatch(time_s.strip().lower())
            if not m:
                raise ValueError(f"rate schedule step {part!r}: bad duration {time_s.strip()!r} (e.g. 90s, 2m, 500ms)")
            t = float(m[1]) * _FACTOR_S[m[2]]
            try:
                r = float(rate_s)
            except ValueError:
                raise ValueError(f"rate schedule step {part!r}: bad rate") from None
            if not r >= 0 or r == float("inf"):
                raise ValueError(f"rate schedule step {part!r}: rate must be >= 0")
            if at and t <= at[-1]:
                raise ValueError(f"rate schedule {spec!r}: step times must increase")
            at.append(t)
            rates.append(r)
        if not at:
            raise ValueError(f"rate schedule {spec!r} has no step")
        return RateSchedule(tuple(at), tuple(rates))

    def rate_at(self, elapsed_s: float) -> float:
        return self.rate[max(bisect.bisect_right(self.at_s, elapsed_s) - 1, 0)]

    def cumulative(self, elapsed_s: float) -> float:
        """Records scheduled from the first step to ``elapsed_s`` (before it, negative: use differences)."""
        i = max(bisect.bisect_right(self.at_s, elapsed_s) - 1, 0)
        done = sum(self.rate[k] * (self.at_s[k + 1] - self.at_s[k]) for k in range(i))
        return done + self.rate[i] * (elapsed_s - self.at_s[i])

    def __str__(self) -> str:
        return ",".join(f"{t:g}s:{r:g}" for t, r in zip(self.at_s, self.rate, strict=True))
