"""The real lab against itself: repeated real runs of the same code held to the fidelity checks."""

from __future__ import annotations

from pathlib import Path

from autoscaler.lab.sim.fidelity import read_real_run
from autoscaler.lab.sim.repeatability import repeatability, repeatability_md, reproduces, simulator_on

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
STEP = BENCH / "lab" / "runs" / "step-up-down"  # the confirmation's runs are <kind>/confirm-8d046aa[-<round>]/
ATTEMPT = "confirm-8d046aa"


def _result(kind: str, round_: int = 1) -> Path:
    return STEP / kind / (ATTEMPT + (f"-{round_}" if round_ > 1 else "")) / "result.json"


def test_a_run_that_rescales_once_more_in_its_last_epoch_does_not_reproduce_its_rounds():
    # rules, rounds 1-3 at one commit: rounds 1 and 2 make the same three rescales; round 3 adds
    # Count 7 -> 8 in its last epoch, with the same instance-seconds (a last-epoch rescale costs nothing).
    one, two, three = (read_real_run(_result("rules", n)) for n in (1, 2, 3))
    assert reproduces(one, two)["sequence"]
    assert not reproduces(one, three)["sequence"]
    assert reproduces(one, three)["instance_seconds"]


def test_runs_are_grouped_by_their_code_and_every_ordered_pair_is_counted():
    paths = sorted(STEP.glob(f"*/{ATTEMPT}*/result.json"))
    rep = repeatability(paths, lambda p: "8d046aa")
    assert rep["runs"] == 12 and rep["pairs"] == 4 * 3 * 2  # four kinds, three rounds each
    by_run = {"/".join(Path(r["run"]).parts[-2:]): r for r in rep["rows"]}
    assert by_run[f"ds2/{ATTEMPT}"]["reproduced_by"]["sequence"] == 2
    assert by_run[f"rules/{ATTEMPT}-3"]["reproduced_by"]["sequence"] == 0
    assert rep["in_some_other"]["sequence"] == sum(r["reproduced_by"]["sequence"] > 0 for r in rep["rows"])
    # Different code is never a repeat: each run alone in its group, no group of two.
    alone = repeatability(paths, lambda p: str(p))
    assert alone["runs"] == 0 and alone["pairs"] == 0


def test_the_simulators_figures_are_counted_on_the_same_runs_only():
    paths = sorted(STEP.glob(f"utilization/{ATTEMPT}*/result.json"))
    rep = repeatability(paths, lambda p: "same")
    names = [str(p.parent.relative_to(BENCH)) for p in paths]
    fidelity = [{"run": n, "sequence": True, "instance_seconds": i != 0, "under_provisioned": True, "drain": False,
                 "sequence_seeds": True, "instance_seconds_seeds": True} for i, n in enumerate(names)]  # fmt: skip
    fidelity.append({"run": "lab/elsewhere/x", "sequence": True, "instance_seconds": True, "under_provisioned": True,
                     "drain": True, "sequence_seeds": True, "instance_seconds_seeds": True})  # fmt: skip
    sim = simulator_on(rep, fidelity, BENCH)
    assert sim["runs"]["n"] == 3
    assert sim["seed_1"] == {"sequence": 3, "instance_seconds": 2, "under_provisioned": 3, "drain": 0}
    text = repeatability_md(rep, BENCH, sim)
    assert "| 6 of 6 (100 %) | 3 of 3 (100 %) | 3 of 3 (100 %) |" in text  # sequence: pairs, some other round, seed 1
