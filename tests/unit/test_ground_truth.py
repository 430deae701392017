"""Ground truth: each point the median of its samples, all kept; the points that decide a judgement by noise named."""

from __future__ import annotations

from pathlib import Path

from autoscaler.lab.ground_truth import GroundTruth, knife_edges, measure_curve
from autoscaler.lab.scenario import OperatorCost, parse_scenario


def test_a_point_is_the_median_of_its_samples_and_all_are_kept(tmp_path):
    runs = iter([5600.0, 9000.0, 5700.0, 11000.0, 11400.0, 11300.0])  # one disturbed run at parallelism 1
    curve = measure_curve("Count", OperatorCost(175), lambda args: next(runs), 2, 100_000.0, log=lambda _: None)
    assert curve.throughput == {1: 5700.0, 2: 11300.0}
    assert curve.samples[1] == (5600.0, 9000.0, 5700.0)
    truth = GroundTruth(tmp_path / "gt.json")
    truth.add(curve, {})
    again = GroundTruth(tmp_path / "gt.json")
    assert again.curves[curve.key].samples == curve.samples


def test_knife_edges_name_the_points_within_5_percent_of_the_rate():
    truth = GroundTruth(Path(__file__).resolve().parents[2] / "benchmarks" / "ground-truth.json")
    scenario = parse_scenario({"name": "k", "interval": "30s", "duration": "60s", "operators": {"Count": {"cost_us": 175}},
                               "schedule": [{"at": "0s", "rate": 30000}, {"at": "30s", "rate": 20000}]}, "test")  # fmt: skip
    edges = knife_edges(scenario, truth)
    assert any(e.startswith("Count at 6 takes 31,478 against 30,000") for e in edges)  # +4.9 %
    assert not any("20,000" in e for e in edges)  # 4 take 22,239: 11 % to spare
