"""The plain-Python DS2 model: golden values, worked examples and edge cases."""

import math

import pytest

from autoscaler.collect.ds2_files import read_rates_log
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.policy.base import OperatorWindow
from autoscaler.policy.ds2 import evaluate_epoch
from autoscaler.policy.rounding import SATURATED, align, round_up
from autoscaler.topology import read_topology_csv
from tests.conftest import RATES_LOG, TOPOLOGY_CSV
from tests.helpers import topology, window

WC = read_topology_csv(TOPOLOGY_CSV)
FLATMAP, COUNT, SOURCE = "Splitter FlatMap", "Count -> Latency Sink", "Source: Custom Source"


def wordcount_windows(epoch: int) -> dict[str, OperatorWindow]:
    out = {}
    for op in WC.order:
        rows = [r for r in read_rates_log(RATES_LOG, WC) if r.epoch == epoch and r.operator_id == op]
        out[op] = OperatorWindow(
            WC.operators[op].parallelism,
            len(rows),
            sum(r.true_processing_rate for r in rows),
            sum(r.true_output_rate for r in rows),
            sum(r.observed_output_rate for r in rows),
        )
    return out


def by_op(decisions):
    return {d.operator_id: d for d in decisions}


def test_golden_epoch0_values():
    d = by_op(evaluate_epoch(WC, wordcount_windows(0), PolicyOptions()))
    assert d[SOURCE].target_output_rate == pytest.approx(109705.37486387165, rel=1e-12)
    assert d[FLATMAP].true_processing_rate == pytest.approx(245126.381229663, rel=1e-12)
    assert d[FLATMAP].capacity_per_instance == pytest.approx(122563.19061483151, rel=1e-12)
    assert d[FLATMAP].optimal_parallelism == pytest.approx(0.8950923545, rel=1e-9)
    assert d[FLATMAP].target_output_rate == pytest.approx(1114679.0183175134, rel=1e-12)
    assert d[COUNT].optimal_parallelism == pytest.approx(1114679.0183175134 / 1845391.0738689527, rel=1e-12)
    assert d[COUNT].optimal_parallelism == pytest.approx(0.6040340360, rel=1e-9)
    assert (d[FLATMAP].target_parallelism, d[COUNT].target_parallelism) == (1, 1)
    assert d[SOURCE].target_parallelism == 1 and d[SOURCE].is_source
    assert d[FLATMAP].source_rate_ratio == pytest.approx(1.372345074569085, rel=1e-12)


def test_golden_epoch1_values():
    d = by_op(evaluate_epoch(WC, wordcount_windows(1), PolicyOptions()))
    assert d[FLATMAP].optimal_parallelism == pytest.approx(0.9188, abs=1e-4)
    assert d[COUNT].optimal_parallelism == pytest.approx(0.7143, abs=1e-4)
    assert (d[FLATMAP].target_parallelism, d[COUNT].target_parallelism) == (1, 1)
    assert d[COUNT].source_rate_ratio == pytest.approx(1.4621134714423822, rel=1e-12)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (PolicyOptions(threshold=1.0), [(2, 2), (2, 2)]),
        (PolicyOptions(threshold=1.4), [(1, 1), (2, 2)]),
        (PolicyOptions(factor=0.5), [(2, 1), (2, 2)]),
        (PolicyOptions(factor=1.0), [(2, 2), (2, 2)]),
    ],
)
def test_golden_threshold_and_factor_variants(options, expected):
    got = []
    for epoch in (0, 1):
        d = by_op(evaluate_epoch(WC, wordcount_windows(epoch), options))
        got.append((d[FLATMAP].target_parallelism, d[COUNT].target_parallelism))
    assert got == expected


# The course example: o1 source 2000 r/s; o2 p=2, λp=1000, λo=3800; o3 p=3, λp=2930.
COURSE = topology([("o1", "o2"), ("o2", "o3")], {"o1": 1, "o2": 2, "o3": 3})
COURSE_WINDOWS = {"o1": window(1, 0.0, 2000.0), "o2": window(2, 1000.0, 3800.0), "o3": window(3, 2930.0, 0.0)}


def test_course_example():
    d = by_op(evaluate_epoch(COURSE, COURSE_WINDOWS, PolicyOptions()))
    assert d["o2"].optimal_parallelism == pytest.approx(4.0)
    assert d["o2"].target_output_rate == pytest.approx(7600.0)
    assert d["o3"].optimal_parallelism == pytest.approx(7600 * 3 / 2930)
    assert (d["o2"].target_parallelism, d["o3"].target_parallelism) == (4, 8)
    assert "scale up 2 -> 4" in d["o2"].reason and "scale up 3 -> 8" in d["o3"].reason


def test_diamond_sums_both_branches_into_the_join():
    # s (1000 r/s) -> a (selectivity 1) and b (selectivity 2) -> j; each branch gets all of s's output.
    topo = topology([("s", "a"), ("s", "b"), ("a", "j"), ("b", "j")], {})
    windows = {
        "s": window(1, 0.0, 1000.0),
        "a": window(1, 500.0, 500.0),
        "b": window(1, 400.0, 800.0),
        "j": window(1, 1000.0, 0.0),
    }
    d = by_op(evaluate_epoch(topo, windows, PolicyOptions()))
    assert d["a"].optimal_parallelism == pytest.approx(2.0)
    assert d["b"].optimal_parallelism == pytest.approx(2.5)
    assert d["j"].target_input_rate == pytest.approx(1000.0 + 2000.0)
    assert d["j"].optimal_parallelism == pytest.approx(3.0)
    assert [d[x].target_parallelism for x in "abj"] == [2, 3, 3]


def test_two_sources_join():
    topo = topology([("s1", "j"), ("s2", "j")], {"s1": 2, "s2": 1, "j": 2})
    windows = {"s1": window(2, 0.0, 3000.0), "s2": window(1, 0.0, 1000.0), "j": window(2, 2000.0, 0.0)}
    d = by_op(evaluate_epoch(topo, windows, PolicyOptions()))
    assert d["j"].target_input_rate == pytest.approx(4000.0)
    assert d["j"].optimal_parallelism == pytest.approx(4.0)
    assert d["j"].target_parallelism == 4
    assert d["s1"].target_parallelism == 2 and d["s2"].target_parallelism == 1


def test_zero_input_is_clamped_to_the_minimum():
    windows = {**COURSE_WINDOWS, "o1": window(1, 0.0, 0.0)}
    d = by_op(evaluate_epoch(COURSE, windows, PolicyOptions()))
    assert d["o2"].optimal_parallelism == 0.0
    assert d["o2"].target_parallelism == 1  # the reference proposes 0
    assert "raised to min 1" in d["o2"].reason
    assert by_op(evaluate_epoch(COURSE, windows, PolicyOptions(min_parallelism={"o2": 2})))["o2"].target_parallelism == 2


def test_operator_without_processing():
    # o2 processed nothing: with input its capacity is unknown (inf, saturates to the cap);
    # downstream sees no output from it (selectivity 0), i.e. optimal 0 -> min.
    windows = {**COURSE_WINDOWS, "o2": window(2, 0.0, 0.0)}
    d = by_op(evaluate_epoch(COURSE, windows, PolicyOptions(job_max_parallelism=128)))
    assert math.isinf(d["o2"].optimal_parallelism)
    assert d["o2"].target_parallelism == 128 and "capped at max 128" in d["o2"].reason
    assert d["o3"].target_input_rate == 0.0 and d["o3"].target_parallelism == 1
    # no input and no processing: 0/0 is NaN -> 0 -> min 1
    windows = {**COURSE_WINDOWS, "o1": window(1, 0.0, 0.0), "o2": window(2, 0.0, 0.0)}
    d = by_op(evaluate_epoch(COURSE, windows, PolicyOptions()))
    assert math.isnan(d["o2"].optimal_parallelism) and d["o2"].target_parallelism == 1
    assert "no input and no processing" in d["o2"].reason


def test_bounds_and_job_max_parallelism():
    opts = PolicyOptions(max_parallelism={"O3": 6}, min_parallelism={"o2": 5})
    d = by_op(evaluate_epoch(COURSE, COURSE_WINDOWS, opts))  # operator names are accepted too
    assert d["o2"].target_parallelism == 5 and d["o3"].target_parallelism == 6
    windows = {**COURSE_WINDOWS, "o3": window(3, 2930.0, 0.0, max_parallelism=7)}
    assert by_op(evaluate_epoch(COURSE, windows, PolicyOptions()))["o3"].target_parallelism == 7


def test_alignment_to_key_group_divisors():
    windows = {**COURSE_WINDOWS, "o3": window(3, 2930.0, 0.0, max_parallelism=128)}
    d = by_op(evaluate_epoch(COURSE, windows, PolicyOptions(align_to_key_groups=True)))
    assert d["o3"].target_parallelism == 8  # 8 divides 128 already
    windows = {**COURSE_WINDOWS, "o3": window(3, 2930.0 * 8 / 9.5, 0.0, max_parallelism=128)}
    d = by_op(evaluate_epoch(COURSE, windows, PolicyOptions(align_to_key_groups=True)))
    assert d["o3"].target_parallelism == 16 and "aligned to 16 (128 key groups)" in d["o3"].reason


def test_incomplete_and_warmup_epochs_propose_no_change():
    windows = {**COURSE_WINDOWS, "o3": window(3, 2930.0, 0.0, n=2)}
    decisions = evaluate_epoch(COURSE, windows, PolicyOptions())
    assert {d.status for d in decisions} == {"incomplete"}
    assert [d.target_parallelism for d in decisions] == [1, 2, 3]
    assert "O3 has 2 of 3 instances" in decisions[0].reason
    missing = {k: v for k, v in COURSE_WINDOWS.items() if k != "o1"}
    assert {d.status for d in evaluate_epoch(COURSE, missing, PolicyOptions())} == {"incomplete"}
    warm = {**COURSE_WINDOWS, "o2": window(2, 1000.0, 3800.0, warmup_instances=1)}
    decisions = evaluate_epoch(COURSE, warm, PolicyOptions())
    assert {d.status for d in decisions} == {"warmup"} and [d.target_parallelism for d in decisions] == [1, 2, 3]


def test_source_rate_override():
    d = by_op(evaluate_epoch(COURSE, COURSE_WINDOWS, PolicyOptions(), source_rates={"o1": 4000.0}))
    assert d["o2"].target_input_rate == 4000.0 and d["o2"].target_parallelism == 8
    windows = {**COURSE_WINDOWS, "o1": window(1, 0.0, 2000.0, oo=500.0)}
    d = by_op(evaluate_epoch(COURSE, windows, PolicyOptions(), source_rates={"o1": -1}))
    assert d["o2"].target_input_rate == 500.0


def test_rules():
    assert round_up(math.nan, 0.0) == 0
    assert round_up(math.inf, 0.0) == SATURATED
    assert round_up(2.0, 0.0) == 2 and round_up(2.0000001, 0.0) == 3 and round_up(2.0, 0.5) == 3
    # align(proposal, current, key groups, low, high), as the Flink autoscaler's JobVertexScaler.scale:
    assert align(5, 2, 128, 1, 200) == 8  # up to the next divisor
    assert align(5, 8, 128, 1, 200) == 8  # a scale-down searches up to the current parallelism: blocked
    assert align(3, 8, 128, 1, 200) == 4  # a scale-down to a divisor below the current one
    assert align(5, 3, 7, 1, 6) == 4  # no divisor of 7 in [5, 6]: the smallest with no more key groups each (7 // 4 == 7 // 5)
    assert align(6, 5, 7, 1, 6) == 5  # ... which would not be a scale-up: keep the current one
    assert align(4, 4, 128, 1, 200) == 4


def test_each_policy_kind_is_one_registered_pure_function():
    from autoscaler.config.options import POLICY_KINDS
    from autoscaler.errors import InputError
    from autoscaler.policy.base import history_epochs, policy_for

    # The option's choices are the registry: each names a module with the two functions of a kind.
    for kind in POLICY_KINDS:
        assert callable(policy_for(kind)) and history_epochs(PolicyOptions(kind=kind)) >= 0
    assert policy_for("ds2") is evaluate_epoch
    assert by_op(policy_for("ds2")(COURSE, COURSE_WINDOWS, PolicyOptions())) == by_op(
        evaluate_epoch(COURSE, COURSE_WINDOWS, PolicyOptions())
    )
    with pytest.raises(InputError, match="not one of ds2"):
        policy_for("dhalion")


def test_a_sources_decision_says_how_its_arrival_rate_was_known():
    from dataclasses import replace

    honest = {**COURSE_WINDOWS, "o1": replace(COURSE_WINDOWS["o1"], rate_basis="emitted+lag")}
    source = by_op(evaluate_epoch(COURSE, honest, PolicyOptions()))["o1"]
    assert "arrival 2000.0 r/s (records emitted + backlog growth)" in source.reason
    blind = {**COURSE_WINDOWS, "o1": replace(COURSE_WINDOWS["o1"], rate_basis="emitted-unblocked")}
    for kind in ("ds2", "utilization", "rules"):
        from autoscaler.policy.base import policy_for

        source = by_op(policy_for(kind)(COURSE, blind, PolicyOptions(kind=kind)))["o1"]
        assert "no pendingRecords reported" in source.reason and "the arrival rate beyond it is not" in source.reason
    oracle = {**COURSE_WINDOWS, "o1": replace(COURSE_WINDOWS["o1"], rate_basis="gauge (oracle)")}
    assert "ORACLE" in by_op(evaluate_epoch(COURSE, oracle, PolicyOptions()))["o1"].reason
