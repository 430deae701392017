"""The lab's targets (lab/targets.py): each ✓ or ✗ from a run's figures, the ground truth and the baselines."""

from __future__ import annotations

from autoscaler.lab.targets import check, tally, tally_table, targets_table


def run(scenario, kind, *, under=30.0, inst=2_900.0, truth=2_760.0, per_change=(1, 0, 0), drains=(60.0,), over=0, short=0,
        oscillations=0):  # fmt: skip
    changes = [{"rescales": n, "backlog_peak_records": 0, "backlog_drain_s": 0.0} for n in per_change]
    for change, drain in zip(changes, drains, strict=False):
        change.update(backlog_peak_records=500_000, backlog_drain_s=drain)
    totals = {"under_provisioned_s": under, "instance_seconds": inst, "ground_truth_instance_seconds": truth,
              "rescales": sum(per_change), "oscillations": oscillations, "over_instances_end": over,
              "under_instances_end": short}  # fmt: skip
    return {"scenario": scenario, "policy": kind, "kind": kind, "inputs": "honest", "totals": totals, "load_changes": changes}


def verdicts(result, baselines=()):
    return {k: ok for k, (ok, _) in check(result, list(baselines)).items()}


def test_a_run_that_meets_every_target():
    baselines = [run("step-up-down", "ds2", under=90), run("step-up-down", "utilization", under=30)]
    assert verdicts(run("step-up-down", "ds2_plus"), baselines) == {
        "under": True, "cost": True, "rescales": True, "drain": True, "end": None,
    }  # fmt: skip


def test_each_target_can_fail():
    baselines = [run("skew", "utilization", under=30)]
    bad = run("skew", "ds2_plus", under=60, inst=3_100, per_change=(3, 0), drains=(None,), short=1)
    assert verdicts(bad, baselines) == {"under": False, "cost": False, "rescales": False, "drain": False, "end": False}
    assert verdicts(run("skew", "ds2_plus", per_change=(2, 2), over=1), baselines)["rescales"] is True  # nonlinear: 2
    assert verdicts(run("step-up-down", "x", per_change=(2, 0, 0)))["rescales"] is False  # linear: 1
    assert verdicts(run("step-up-down", "x", drains=(91.0,)))["drain"] is False


def test_scenario_specific_rescale_targets():
    assert verdicts(run("noise", "x", per_change=(1, 0)))["rescales"] is True
    assert verdicts(run("noise", "x", per_change=(1, 1)))["rescales"] is False
    assert verdicts(run("spike", "x", per_change=(1, 1, 0)))["rescales"] is False
    assert verdicts(run("diurnal-sine", "x", per_change=(3,), oscillations=1))["rescales"] is False
    assert verdicts(run("diurnal-sine", "x", per_change=(2,)))["rescales"] is True


def test_the_table_marks_each_target_per_scenario():
    results = [run("step-up-down", "ds2_plus", inst=3_450), run("step-up-down", "ds2", under=90), run("skew", "ds2_plus")]
    table = targets_table(results, "ds2_plus")
    assert "| skew | ds2_plus | – 30 s, no baseline |" in table
    assert "| step-up-down | ds2_plus | ✓ 30 s (best baseline 90) | ✗ 1.25× | ✓ 1/0/0 per change (≤ 1) | ✓ 60 s | – |" in table


def test_the_tally_takes_each_targets_majority_over_a_kinds_runs():
    """step-up-down's three runs at the final defaults: the drain took 58, 58 and 90.4 s: ✓ by 2 of 3."""
    baselines = [run("step-up-down", "utilization", under=30, inst=3_600)]
    runs = [run("step-up-down", "ds2_plus", inst=3_870, drains=(d,)) for d in (58.0, 58.0, 90.4)]
    row = tally(runs, baselines, "ds2_plus")["step-up-down"]
    assert row == {"runs": 3, "under": (True, "3/3"), "cost": (False, "0/3"), "rescales": (True, "3/3"),
                   "drain": (True, "2/3"), "end": None}  # fmt: skip
    split = tally(runs[1:], baselines, "ds2_plus")["step-up-down"]  # one of two is no majority
    assert split["drain"] == (False, "1/2")
    table = tally_table(runs + baselines, baselines, ["ds2_plus", "utilization"])
    assert "| step-up-down | ds2_plus | 3 | 3/4 | ✓ 3/3 | ✗ 0/3 | ✓ 3/3 | ✓ 2/3 | – |" in table
    assert table.endswith("Targets met: ds2_plus 3 of 4, utilization 3 of 4")
