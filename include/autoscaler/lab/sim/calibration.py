"""What the simulator takes from the real lab: timings measured on real runs, never tuned to a result.

- ``downtimes_s``: every savepoint-restart downtime the real runs recorded (stop request to all
  tasks running again, ACTIONS ``downtime_s``, as the reports print it: "RESCALED Count→6 (3.5 s
  down)"). A simulated rescale draws one of them by its seed;
- ``snapshot_delays_s``: how late after its epoch's boundary each boundary snapshot was taken
  (the reports' "epoch end" minus the boundary): a window's ends move with them;
- ``decision_latency_s``: from an epoch's end to the job stopping for the rescale decided on it
  (collect, validate, the policy on the warm Spark engine, decide, the savepoint's trigger), the
  median measured on real runs' ACTIONS (``started_at`` against the window's end);
- ``sample_age_s``: how old the counters a snapshot reads may be: Flink's REST metric store
  refreshes every ``metrics.fetcher.update-interval`` (2 s in ``conf/flink/config.yaml.in``).

``measure`` reads them off the committed real runs (``benchmarks/lab/**/report.md``) and writes
``benchmarks/sim/calibration.json``; each value names where it came from.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autoscaler.errors import InputError

DOWN = re.compile(r"RESCALED .*?\((?P<s>[0-9.]+) s down\)")
EPOCH_END = re.compile(r"^(?P<h>[0-9]{2}):(?P<m>[0-9]{2}):(?P<s>[0-9]{2}) ")


@dataclass(frozen=True)
class Calibration:
    downtimes_s: tuple[float, ...]
    snapshot_delays_s: tuple[float, ...]
    decision_latency_s: float
    sample_age_s: float
    sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def read(cls, path: Path) -> Calibration:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(tuple(data["downtimes_s"]), tuple(data["snapshot_delays_s"]), float(data["decision_latency_s"]),
                       float(data["sample_age_s"]), dict(data.get("sources", {})))  # fmt: skip
        except FileNotFoundError:
            raise InputError(str(path), "no calibration: run 'scripts/ds2_sim.py calibrate'") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(str(path), f"not a simulator calibration: {exc}") from None


def measured_downtimes(reports: Iterable[Path]) -> list[float]:
    """Every rescale's downtime the reports print, in seconds."""
    out = []
    for path in reports:
        out += [float(m["s"]) for m in DOWN.finditer(path.read_text(encoding="utf-8"))]
    return out


def snapshot_delays(reports: Iterable[Path], interval_s: float = 30.0) -> list[float]:
    """How late after a boundary each epoch's end (its boundary snapshot) came, in whole seconds as printed."""
    out = []
    for path in reports:
        for line in path.read_text(encoding="utf-8").splitlines():
            m = EPOCH_END.match(line)
            if m:
                seconds = int(m["m"]) * 60 + int(m["s"])
                late = seconds % interval_s
                out.append(late if late < interval_s / 2 else late - interval_s)
    return [d for d in out if d >= 0]


def calibrate(reports: list[Path], decision_latency_s: float, latency_source: str, sample_age_s: float) -> Calibration:
    downs = measured_downtimes(reports)
    delays = snapshot_delays(reports)
    if not downs or not delays:
        raise InputError("reports", f"{len(reports)} reports hold {len(downs)} downtimes and {len(delays)} epoch ends")
    return Calibration(
        tuple(sorted(downs)), tuple(sorted(delays)), decision_latency_s, sample_age_s,
        sources={
            "downtimes_s": f"{len(downs)} rescales of {len(reports)} real lab runs (median {statistics.median(downs):.1f} s)",
            "snapshot_delays_s": f"{len(delays)} epoch ends of the same runs (median {statistics.median(delays):.0f} s)",
            "decision_latency_s": latency_source,
            "sample_age_s": "conf/flink/config.yaml.in: metrics.fetcher.update-interval",
        },
    )  # fmt: skip
