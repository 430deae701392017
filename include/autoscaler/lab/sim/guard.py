"""The frontier guard: a small simulated sweep whose points may move only with the code that makes them.

Each kind's default point (cost over the floor, time late, under-provisioned, rescales) on three
40-minute scenarios with two seeds is recorded in ``tests/fixtures/sim/frontier-points.json`` with a
fingerprint of the code behind it: the kind's module and the policy modules it imports, the shared
policy, decide and config code, the collector, the simulator and its calibration, the judge, and the
guard's scenarios. ``make test`` recomputes the points (about 5 s):

- fingerprint unchanged, point moved: the simulator or the policy is not deterministic, or something
  outside the fingerprint changed the result -- a failure to explain;
- fingerprint changed: the kind's point is recorded again by ``scripts/ds2_sim.py guard --record``,
  so that the commit that moves a point shows how far.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

from autoscaler.lab.ground_truth import GroundTruth
from autoscaler.lab.scenario import load_scenario
from autoscaler.lab.sim.calibration import Calibration
from autoscaler.lab.sim.loop import simulate
from autoscaler.lab.sim.sweep import figures, model_truth, points, seeded, variants

INCLUDE = Path(__file__).resolve().parents[3]
ROOT = INCLUDE.parent
SCENARIOS = ROOT / "tests" / "fixtures" / "sim" / "scenarios"
RECORD = ROOT / "tests" / "fixtures" / "sim" / "frontier-points.json"
SEEDS = (1, 2)
SHARED = (
    "autoscaler/policy/base.py", "autoscaler/policy/rounding.py", "autoscaler/policy/columns.py",
    "autoscaler/policy/restarts.py", "autoscaler/engine/windows.py", "autoscaler/engine/spark/decisions.py",
    "autoscaler/engine/spark/run.py", "autoscaler/decide/rules.py", "autoscaler/decide/history.py",
    "autoscaler/fleet/interval.py", "autoscaler/config/options.py", "autoscaler/config/policy_options.py",
    "autoscaler/config/jobs.py", "autoscaler/config/sections.py",
    "autoscaler/collect/snapshot.py", "autoscaler/lab/result.py", "autoscaler/lab/scenario.py",
    "autoscaler/record/loop_report.py", "autoscaler/store/memory.py", "autoscaler/store/parquet.py",
)  # fmt: skip
DATA = (ROOT / "benchmarks" / "ground-truth.json", ROOT / "benchmarks" / "sim" / "calibration.json")


def _policy_imports(path: Path) -> set[str]:
    """The ``autoscaler.policy`` modules a kind's module imports (its signals, say)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autoscaler.policy"):
            out.add(node.module.replace(".", "/") + ".py")
    return out


def fingerprint(kind: str) -> str:
    """A hash of every file the kind's guard point depends on."""
    own = f"autoscaler/policy/{kind}.py"
    files = sorted({own, *_policy_imports(INCLUDE / own), *SHARED, *(f"autoscaler/lab/sim/{p.name}"
                    for p in (INCLUDE / "autoscaler" / "lab" / "sim").glob("*.py"))})  # fmt: skip
    digest = hashlib.sha256()
    for rel in files:
        path = INCLUDE / rel
        if path.exists():
            digest.update(rel.encode() + b"\0" + path.read_bytes())
    for path in (*DATA, *sorted(SCENARIOS.glob("*.yaml"))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def guard_points() -> dict[str, dict[str, Any]]:
    """Each kind's default point on the guard's scenarios, rounded to what a record keeps."""
    base = GroundTruth(ROOT / "benchmarks" / "ground-truth.json")
    calibration = Calibration.read(DATA[1])
    scenarios = [load_scenario(p) for p in sorted(SCENARIOS.glob("*.yaml"))]
    judge = model_truth(base, scenarios)
    records = []
    for variant in variants(frontier=False):
        for scenario in scenarios:
            for seed in SEEDS:
                run = simulate(seeded(scenario, seed), variant.kind, base, calibration, seed, variant.policy, judge=judge)
                records.append({"variant": variant.label, "kind": variant.kind, "default": True, "family": "guard",
                                **figures(run)})  # fmt: skip
    out = {}
    for label, p in points(records).items():
        out[label] = {k: round(v, 6) if isinstance(v, float) else v for k, v in p.items()}
        out[label]["fingerprint"] = fingerprint(p["kind"])
    return out


def read_record() -> dict[str, dict[str, Any]]:
    return json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else {}


def write_record(record: dict[str, dict[str, Any]]) -> None:
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
