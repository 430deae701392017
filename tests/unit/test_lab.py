"""The policy lab's core: scenario files, ground-truth curves and the result figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from autoscaler.errors import InputError
from autoscaler.lab.ground_truth import Curve, GroundTruth, isolation_args
from autoscaler.lab.result import lab_result
from autoscaler.lab.scenario import OperatorCost, load_scenario, parse_scenario
from autoscaler.record.loop_report import EpochRow
from autoscaler.record.outcomes import SUCCEEDED
from tests.conftest import ROOT

# The example, exactly as written.
AS_WRITTEN = """
name: step-up-down
interval: 30s                 # policy interval
duration: 450s
operators:                    # per-record cost; a mode is wait (default) or cpu
  Parse: {cost_us: 20}
  Count: {cost_us: 175, mode: wait, skew: 0.0}
source: {partitions: 8, backlog: true, initial_parallelism: 2}
initial_parallelism: {Parse: 1, Count: 1, "Sink: Writer": 1}
schedule:                     # source rate (records/s) from each offset on
  - {at: 0s, rate: 20000}
  - {at: 150s, rate: 30000}
  - {at: 300s, rate: 10000}
noise: 0.0                    # relative random variation of the rate, e.g. 0.1 for +-10 %
"""


def scenario(text: str = AS_WRITTEN, **changes):
    data = yaml.safe_load(text)
    data.update(changes)
    return parse_scenario(data, "s.yaml")


def test_the_format_as_written_becomes_the_test_jobs_arguments():
    s = scenario()
    assert (s.interval_s, s.duration_s, s.source_partitions, s.backlog) == (30, 450, 8, True)
    assert s.rate_steps() == [(0, 20000), (150, 30000), (300, 10000)]
    args = s.job_args("lab-x", 1_000)
    assert args[args.index("--rate-schedule") + 1] == "0s:20000,150s:30000,300s:10000"
    for flag, value in (("--count-wait-us", "175"), ("--parse-wait-us", "20"), ("--partitions", "8"), ("--backlog", "true")):
        assert args[args.index(flag) + 1] == value
    assert s.parallelism_args() == ["--parse-parallelism", "1", "--count-parallelism", "1", "--sink-parallelism", "1"]


def test_ramps_sines_and_noise_are_sampled_the_same_every_time():
    ramp = scenario(schedule=[{"at": "0s", "rate": 8000, "ramp_to": 30000, "over": "300s"}, {"at": "300s", "rate": 30000}])
    steps = ramp.rate_steps()
    assert steps[0] == (0, 8000) and (150, 19000) in steps and steps[-1] == (445, 30000)
    sine = scenario(schedule=[{"at": "0s", "rate": 18000, "sine": {"amplitude": 10000, "period": "450s"}}])
    assert max(r for _, r in sine.rate_steps()) == pytest.approx(28000, abs=50)
    noisy = scenario(noise=0.1, seed=3)
    assert noisy.rate_steps() == scenario(noise=0.1, seed=3).rate_steps()
    assert all(18000 <= r <= 22000 for t, r in noisy.rate_steps() if t < 150)
    assert ramp.rate_over(140, 170) == max(r for t, r in steps if 140 <= t < 170)
    assert ramp.mean_rate(0, 10) == pytest.approx((steps[0][1] + steps[1][1]) / 2)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"operators": {"Sink": {"cost_us": 5}}}, "no cost option"),
        ({"operators": {"Parse": {"cost_us": 5, "skew": 0.2}}}, "only Count"),
        ({"operators": {"Count": {"cost_us": 5, "mode": "gpu"}}}, "mode"),
        ({"schedule": [{"at": "10s", "rate": 1}]}, "must start at 0s"),
        ({"schedule": [{"at": "0s", "rate": 1}, {"at": "0s", "rate": 2}]}, "must increase"),
        ({"schedule": [{"at": "0s", "rate": 1, "ramp_to": 5}]}, "needs both"),
        ({"schedule": [{"at": "0s", "rate": 1, "sine": {"amplitude": 5, "period": "1m"}}]}, "negative"),
        ({"source": {"backlog": True}}, "needs partitions"),
        ({"initial_parallelism": {"Count": 9}}, "above its max_parallelism"),
        ({"noise": 1.5}, "noise"),
        ({"interval": "fast"}, "interval"),
    ],
)
def test_bad_scenarios_name_the_field(change, problem):
    with pytest.raises(InputError, match=problem):
        scenario(**change)


def test_every_shipped_scenario_loads():
    paths = sorted((ROOT / "benchmarks" / "scenarios").glob("*.yaml"))
    assert len(paths) >= 9
    names = {load_scenario(p).name for p in paths}
    assert {"step-up-down", "ramp", "diurnal-sine", "spike", "noise", "two-bottlenecks", "cpu-bound", "skew",
            "backlog-restarts"} <= names  # fmt: skip


def test_a_curve_gives_the_fewest_instances_that_reach_a_rate(tmp_path):
    curve = Curve("Count", OperatorCost(175), {1: 5600.0, 2: 11300.0, 3: 16900.0, 4: 17100.0})
    assert [curve.minimum_parallelism(r) for r in (5000, 5600, 12000, 17000, 18000)] == [1, 1, 3, 4, None]
    truth = GroundTruth(tmp_path / "gt.json")
    truth.add(curve, {"cores": 2})
    assert GroundTruth(tmp_path / "gt.json").curve("Count", OperatorCost(175)).throughput == curve.throughput
    with pytest.raises(InputError, match="no measured curve"):
        truth.curve("Parse", OperatorCost(20))
    args = isolation_args("Count", OperatorCost(60, "cpu", 0.3), 3, "g")
    assert args[args.index("--count-parallelism") + 1] == "3" and "--count-cpu-us" in args and "--skew" in args


def test_the_shipped_ground_truth_covers_every_shipped_scenario():
    truth = GroundTruth(ROOT / "benchmarks" / "ground-truth.json")
    for path in sorted((ROOT / "benchmarks" / "scenarios").glob("*.yaml")):
        assert truth.missing(load_scenario(path)) == {}, path.name
    # Measured on the cluster: one Count instance at 175 us per record takes about 5,700 records/s.
    count = truth.curve("Count", OperatorCost(175))
    assert 5000 < count.throughput[1] < 6000 and count.minimum_parallelism(20000) == 4


def _truth(tmp_path) -> GroundTruth:
    truth = GroundTruth(tmp_path / "gt.json")
    linear = {p: 5700.0 * p for p in range(1, 9)}
    truth.add(Curve("Count", OperatorCost(175), linear), {})
    truth.add(Curve("Parse", OperatorCost(20), {1: 49000.0}), {})
    truth.add(Curve("Sink: Writer", OperatorCost(), {1: 80000.0}), {})
    return truth


def test_the_result_judges_a_run_against_the_ground_truth(tmp_path):
    s = scenario()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for k in range(15):  # 30 s epochs over 450 s
        end = start + timedelta(seconds=30 * (k + 1))
        rate = 20000 if k < 5 else 30000 if k < 10 else 10000
        rows.append(EpochRow(k, end, rate, rate, 0.0, {"Parse": 1, "Count": 1, "Sink: Writer": 1}, backlog=0.0))
    pars = [1, 4, 4, 4, 4, 4, 6, 6, 5, 6, 6, 6, 2, 2, 2]  # a scale-down and back within the 30,000 phase
    for k, row in enumerate(rows):
        row.parallelism["Count"] = pars[k]
        if k + 1 < len(pars) and pars[k + 1] != pars[k]:
            row.outcome, row.downtime_s = SUCCEEDED, 4.0
            row.new_parallelism, row.rescaled_at = {"Count": pars[k + 1]}, row.end + timedelta(seconds=5)
    rows[0].achieved_rate, rows[0].backpressure, rows[0].backlog = 5600, 0.9, 400000.0
    rows[1].warmup, rows[1].backlog = True, 100000.0
    result = lab_result(rows, s, _truth(tmp_path), start, "ds2")
    first, second, third = result["load_changes"]
    assert [c["rescales"] for c in result["load_changes"]] == [1, 3, 1]
    assert second["oscillations"] == 2  # 4 -> 6 -> 5 -> 6: two reversals within one load change
    assert first["ground_truth"]["Count"] == 4 and second["ground_truth"]["Count"] == 6
    assert first["over_instances"]["Count"] == 0 and third["over_instances"]["Count"] == 0
    assert first["time_to_sustain_s"] == 90  # epochs 0 and 1 (warm-up) are not sustained
    assert first["under_provisioned_s"] == 30 and second["under_provisioned_s"] == 60  # Count 4 and 5 under 6
    assert first["backlog_peak_records"] == 400000 and first["backlog_drain_s"] == 60
    assert result["totals"]["downtime_s"] == 20.0 and result["totals"]["rescales"] == 5
    assert set(first) >= {"at_s", "rate", "rescales", "time_to_sustain_s", "oscillations", "over_instances", "under_instances",
                          "under_provisioned_s", "backlog_peak_records", "backlog_drain_s", "downtime_s"}  # fmt: skip
    assert result["totals"]["instance_seconds"] > result["totals"]["ground_truth_instance_seconds"] * 0.9


def test_a_growing_backlog_is_not_sustained_even_at_95_percent(tmp_path):
    s = scenario(schedule=[{"at": "0s", "rate": 28000}], duration="120s")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [EpochRow(k, start + timedelta(seconds=30 * (k + 1)), 28000, 27400, 1.0, {"Parse": 1, "Count": 5, "Sink: Writer": 1},
                     backlog=100_000.0 + 18_000 * k) for k in range(4)]  # fmt: skip
    result = lab_result(rows, s, _truth(tmp_path), start, "ds2")
    assert result["load_changes"][0]["time_to_sustain_s"] is None and result["totals"]["sustained_epochs"] == 0
    for k, row in enumerate(rows):
        row.backlog = 100_000.0 - 20_000 * k  # draining: sustained although back-pressured
    assert lab_result(rows, s, _truth(tmp_path), start, "ds2")["load_changes"][0]["time_to_sustain_s"] == 60


def test_a_kind_run_several_times_is_reported_by_median_and_range():
    import json

    from autoscaler.lab.report import runs_table

    run = ROOT / "benchmarks" / "lab" / "runs" / "step-up-down" / "ds2" / "2026-11-25-honest"
    base = json.loads((run / "result.json").read_text())
    runs = []
    for n, (rescales, under) in enumerate(((3, 90.0), (5, 30.0), (4, 60.0)), start=1):
        r = json.loads(json.dumps(base)) | {"policy": "ds2_plus" if n == 1 else f"ds2_plus-{n}", "kind": "ds2_plus", "run": n}
        r["totals"] |= {"rescales": rescales, "under_provisioned_s": under}
        runs.append(r)
    table = runs_table([base, *runs])
    assert table.count("\n") == 2  # header, rule, one row: ds2 ran once
    row = table.splitlines()[-1]
    assert row.startswith("| step-up-down | ds2_plus | honest | 3 | 4 [3–5] | 60 [30–90] |")


def test_the_lab_index_names_every_run_its_attempt_and_commit():
    import json

    from autoscaler.lab.index import ATTEMPTS, index_md, read_index

    lab = ROOT / "benchmarks" / "lab"
    # The committed index is the folders' own: a run added without `ds2_lab.py index` fails here.
    assert (lab / "README.md").read_text(encoding="utf-8") == index_md(lab)
    # One layout: every result is runs/<scenario>/<kind>/<attempt>[-<round>]/, none in a folder per attempt.
    results = sorted(lab.rglob("result.json"))
    assert all(p.relative_to(lab).parts[0] == "runs" and len(p.relative_to(lab).parts) == 5 for p in results)
    index = read_index(lab)
    runs = {p.parent.relative_to(lab).as_posix() for p in results}
    assert runs == set(index["runs"]), sorted(runs ^ set(index["runs"]))
    notes = (lab / ATTEMPTS).read_text(encoding="utf-8")
    for path, entry in index["runs"].items():
        _, scenario, kind, name = path.split("/")
        result = json.loads((lab / path / "result.json").read_text(encoding="utf-8"))
        assert (result["scenario"], result.get("kind") or result["policy"].split("-")[0]) == (scenario, kind), path
        assert name.split("-")[-1] == str(result["run"]) if result.get("run", 1) > 1 else name == entry["attempt"], path
        assert len(entry["commit"]) == 40 and entry["attempt"] in index["attempts"], path
    assert all(f"\n## {a}\n" in notes for a in index["attempts"])  # what each attempt was for


def test_a_new_run_is_indexed_with_its_attempt_and_commit(tmp_path):
    import json

    from autoscaler.errors import InputError
    from autoscaler.lab.index import attempt_results, commit_of, index_md, read_index, record_attempt, record_run, run_dir

    run = run_dir(tmp_path, "noise", "ds2_plus", "confirm-1", 2)
    assert run == tmp_path / "runs" / "noise" / "ds2_plus" / "confirm-1-2"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"scenario": "noise", "policy": "ds2_plus-2", "inputs": "honest"}))
    with pytest.raises(InputError, match="confirm-1"):
        record_run(tmp_path, run, "confirm-1", "a" * 40)  # an attempt is named before its runs
    record_attempt(tmp_path, "confirm-1", "Confirmation, part 1")
    record_attempt(tmp_path, "confirm-1", None)  # a resumed sweep keeps the title
    record_run(tmp_path, run, "confirm-1", "a" * 40)
    assert read_index(tmp_path)["runs"] == {"runs/noise/ds2_plus/confirm-1-2": {"attempt": "confirm-1", "commit": "a" * 40}}
    assert commit_of(tmp_path, run) == "a" * 40 and attempt_results(tmp_path, "confirm-1") == [run / "result.json"]
    text = index_md(tmp_path)
    assert "| [confirm-1](attempts.md#confirm-1) | Confirmation, part 1 | 1 | ds2_plus | 1 | honest | aaaaaaa |" in text
    assert "| noise | [1](runs/noise/ds2_plus/) |" in text
    assert "\n## confirm-1\n" in (tmp_path / "attempts.md").read_text()
    for bad in ("../x", "Confirm", "a/b", ""):
        with pytest.raises(InputError, match="attempt"):
            run_dir(tmp_path, "noise", "ds2", bad)


def test_a_run_label_is_a_kind_and_its_round():
    from autoscaler.errors import InputError
    from autoscaler.lab.index import parse_run_label, run_label

    assert [run_label("ds2_plus", n) for n in (1, 2)] == ["ds2_plus", "ds2_plus-2"]
    assert parse_run_label("ds2_plus") == ("ds2_plus", 1) and parse_run_label("utilization-3") == ("utilization", 3)
    for bad in ("ds3", "ds2-0", "ds2-x", "ds2_plus-2/..", ""):
        with pytest.raises(InputError, match="not a policy kind"):
            parse_run_label(bad)


def test_the_labs_commands_take_an_attempts_label_or_a_folder():
    import subprocess
    import sys

    def compare(*items: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "scripts/ds2_lab.py", "compare", *items], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    by_label = compare("confirm-8d046aa")
    assert by_label.returncode == 0, by_label.stderr
    rows = [line for line in by_label.stdout.splitlines() if line.startswith("| ") and " honest " in line]
    assert {line.split(" | ")[0][2:] for line in rows} == {"noise", "ramp", "skew", "spike", "step-up-down", "two-bottlenecks"}
    by_folder = compare("benchmarks/lab/runs/noise/ds2")
    assert by_folder.returncode == 0 and "| noise | ds2 |" in by_folder.stdout
    unknown = compare("no-such-attempt")
    assert unknown.returncode != 0 and "no-such-attempt: neither a folder nor an attempt" in unknown.stderr
    assert "Traceback" not in unknown.stderr
