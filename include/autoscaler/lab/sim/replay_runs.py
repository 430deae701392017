"""Replay real runs in the simulator, closed and open loop: the worker behind ``scripts/ds2_sim.py fidelity``.

Run as ``python -m autoscaler.lab.sim.replay_runs ROOT RESULT.json ...``, it prints one JSON object
per run. The script runs it once per policy version, with the ``autoscaler`` package of a tree that
holds that version's policy, decide and config code (and today's model, collector and judge), so
that each real run is replayed with the policy it ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from autoscaler.errors import InputError
from autoscaler.lab.ground_truth import GroundTruth
from autoscaler.lab.scenario import load_scenario
from autoscaler.lab.sim import fidelity
from autoscaler.lab.sim.calibration import Calibration
from autoscaler.lab.sim.loop import simulate

SEEDS = range(1, 6)  # the real loop is noisy (snapshot delays, downtimes): is the real run one the model makes?


def replay_run(root: Path, result_path: Path, truth: GroundTruth, calibration: Calibration) -> dict[str, Any]:
    real = fidelity.read_real_run(result_path)
    scenario = load_scenario(root / "scenarios" / f"{real.scenario}.yaml")
    runs = [simulate(scenario, real.kind, truth, calibration, seed) for seed in SEEDS]
    opened = simulate(scenario, real.kind, truth, calibration, SEEDS[0], script=fidelity.open_loop_script(real))
    first, *others = [fidelity.agreement(real, run.result, run.rows) for run in runs]
    open_loop = fidelity.open_loop_errors(real, opened.rows)
    if real.record is not None:  # a run made since epochs.json is committed: busy ratios and backlogs too
        from autoscaler.lab.epochs_record import epoch_record

        epochs = range(opened.rows[0].epoch, opened.rows[0].epoch + len(opened.rows))
        open_loop |= fidelity.record_errors(real.record, epoch_record(opened.store, opened.job.name, epochs))
    every = [first, *others]
    seeds = {f"{check}_seeds": sum(a[check] for a in every) for check in ("sequence", "instance_seconds")}
    return {"run": str(result_path.parent.relative_to(root)), "scenario": real.scenario, "kind": real.kind, **first,
            **seeds, "seeds": len(runs), "open_loop": open_loop}  # fmt: skip


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    truth = GroundTruth(root / "ground-truth.json")
    calibration = Calibration.read(root / "sim" / "calibration.json")
    for arg in argv[1:]:
        try:
            out = replay_run(root, Path(arg), truth, calibration)
        except (InputError, KeyError, TypeError, ValueError, ImportError, AttributeError) as exc:
            out = {"run": str(Path(arg).parent.relative_to(root)), "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
