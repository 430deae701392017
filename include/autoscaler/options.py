"""Policy options: every option in one place, with its default and what it means."""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields

from autoscaler.errors import InputError
from autoscaler.topology import Topology


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class PolicyOptions:
    """Options of the DS2 policy run (the Spark job and the pure-Python reference)."""

    factor: float = field(default=0.0, metadata=_doc("Over-provisioning factor f >= 0: decision = ceil(optimal * (1 + f))."))
    threshold: float | None = field(
        default=None,
        metadata=_doc(
            "Target-rate-ratio threshold T (>= 1; None = off, as the reference default): when no operator "
            "scales up and max over sources of true/observed output r > T, every decision becomes ceil(r * decision)."
        ),
    )
    min_parallelism: dict[str, int] = field(
        default_factory=dict, metadata=_doc("Per-operator lower bound (operator id or name -> n); default 1.")
    )
    max_parallelism: dict[str, int] = field(
        default_factory=dict, metadata=_doc("Per-operator upper bound (operator id or name -> n).")
    )
    job_max_parallelism: int | None = field(
        default=None,
        metadata=_doc("Cap for every operator (the job's max parallelism); the operator's own max parallelism also caps."),
    )
    align_to_key_groups: bool = field(
        default=False, metadata=_doc("Round a proposal up to a divisor of the max parallelism so key groups spread evenly.")
    )

    def __post_init__(self) -> None:
        if not (isinstance(self.factor, (int, float)) and math.isfinite(self.factor) and self.factor >= 0):
            raise InputError("--factor", f"over-provisioning factor must be a finite number >= 0, got {self.factor!r}")
        if self.threshold is not None and not (math.isfinite(self.threshold) and self.threshold >= 1.0):
            raise InputError("--threshold", f"target-rate-ratio threshold must be >= 1, got {self.threshold!r}")
        for name, bounds in (("--min-parallelism", self.min_parallelism), ("--max-parallelism", self.max_parallelism)):
            for op, value in bounds.items():
                if not isinstance(value, int) or value < 1:
                    raise InputError(name, f"operator {op!r}: bound must be an integer >= 1, got {value!r}")
        for op, low in self.min_parallelism.items():
            high = self.max_parallelism.get(op)
            if high is not None and high < low:
                raise InputError("--max-parallelism", f"operator {op!r}: max {high} is below min {low}")
        if self.job_max_parallelism is not None and self.job_max_parallelism < 1:
            raise InputError("--job-max-parallelism", f"must be >= 1, got {self.job_max_parallelism}")

    def resolved(self, topology: Topology) -> PolicyOptions:
        """The same options with operator names replaced by ids (unknown operators are errors)."""
        return PolicyOptions(
            factor=self.factor,
            threshold=self.threshold,
            min_parallelism={topology.resolve(k, "--min-parallelism"): v for k, v in self.min_parallelism.items()},
            max_parallelism={topology.resolve(k, "--max-parallelism"): v for k, v in self.max_parallelism.items()},
            job_max_parallelism=self.job_max_parallelism,
            align_to_key_groups=self.align_to_key_groups,
        )

    def cli_args(self) -> list[str]:
        """The options as arguments of the Spark job (``spark_jobs/ds2_policy.py``), which parses them back."""
        args = ["--factor", repr(float(self.factor))]
        if self.threshold is not None:
            args += ["--threshold", repr(float(self.threshold))]
        for flag, bounds in (("--min-parallelism", self.min_parallelism), ("--max-parallelism", self.max_parallelism)):
            for op, n in sorted(bounds.items()):
                args += [flag, f"{op}={n}"]
        if self.job_max_parallelism is not None:
            args += ["--job-max-parallelism", str(self.job_max_parallelism)]
        if self.align_to_key_groups:
            args.append("--align-to-key-groups")
        return args

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def describe(cls) -> list[tuple[str, object, str]]:
        """(name, default, description) for every option: the source of docs tables."""
        out = []
        for f in fields(cls):
            default = f.default_factory() if f.default is MISSING else f.default
            out.append((f.name, default, f.metadata["doc"]))
        return out


def key_group_divisors(max_parallelism: int) -> list[int]:
    """Parallelisms that spread ``max_parallelism`` key groups evenly (its divisors, ascending)."""
    return [d for d in range(1, max_parallelism + 1) if max_parallelism % d == 0]
