"""DS2 on Spark is DS2's one function run by Spark: decisions equal the plain-Python call's, reasons whole."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark import decisions, inputs
from autoscaler.policy.base import OperatorWindow
from autoscaler.policy.ds2 import evaluate_epoch
from autoscaler.store.schemas import DECISIONS
from autoscaler.topology import Operator, Topology, read_topology_csv
from tests.conftest import RATES_LOG, TOPOLOGY_CSV
from tests.helpers import metrics_rows, topology, window

pytestmark = pytest.mark.spark
RUN = decisions.RunInfo("test-run", "offline", datetime(2026, 1, 1, tzinfo=UTC))
FLOATS = (
    "true_processing_rate",
    "true_output_rate",
    "capacity_per_instance",
    "target_input_rate",
    "target_output_rate",
    "optimal_parallelism",
    "source_rate_ratio",
)


def spark_decisions(spark, topo, epochs, options=PolicyOptions(), source_rates=None):
    df = spark.createDataFrame(metrics_rows(topo, epochs).to_pandas(), schema=inputs.METRICS.spark_ddl())
    out = decisions.policy_decisions(inputs.conform(df), topo, options, RUN, source_rates)
    assert out.drop("op_index").schema.simpleString() == spark.createDataFrame([], DECISIONS.spark_ddl()).schema.simpleString()
    return {(r["epoch"], r["operator_id"]): r.asDict() for r in out.collect()}


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == pytest.approx(b, rel=1e-9, abs=1e-9)


def assert_agree(spark, topo, epochs, options=PolicyOptions(), source_rates=None):
    got = spark_decisions(spark, topo, epochs, options, source_rates)
    assert len(got) == len(epochs) * len(topo.operators)
    for epoch, windows in epochs.items():
        for want in evaluate_epoch(topo, windows, options, source_rates):
            row = got[(epoch, want.operator_id)]
            context = f"epoch {epoch} operator {want.operator_id}: spark {row} python {want}"
            for name in ("status", "current_parallelism", "instances_observed", "target_parallelism", "is_source"):
                assert row[name] == getattr(want, name), context
            for name in FLOATS:
                assert same(row[name], getattr(want, name)), f"{name}: {context}"
            assert row["reason"] == want.reason, context
    return got


COURSE = topology([("o1", "o2"), ("o2", "o3")], {"o1": 1, "o2": 2, "o3": 3})
COURSE_W = {"o1": window(1, 0.0, 2000.0), "o2": window(2, 1000.0, 3800.0), "o3": window(3, 2930.0, 0.0)}


def test_course_example_and_edge_cases_in_one_run(spark):
    epochs = {
        0: COURSE_W,
        1: {**COURSE_W, "o1": window(1, 0.0, 0.0)},  # zero input
        2: {**COURSE_W, "o2": window(2, 0.0, 0.0)},  # no processing with input: inf
        3: {**COURSE_W, "o1": window(1, 0.0, 0.0), "o2": window(2, 0.0, 0.0)},  # 0/0: NaN
        4: {**COURSE_W, "o3": window(3, 2930.0, 0.0, n=2)},  # missing instance
        5: {k: v for k, v in COURSE_W.items() if k != "o2"},  # missing operator
        6: {**COURSE_W, "o2": window(2, 1000.0, 3800.0, warmup_instances=1)},
        7: {**COURSE_W, "o3": window(3, 2930.0 * 8 / 9.5, 0.0, max_parallelism=128)},
        8: {**COURSE_W, "o3": window(3, 2930.0, 0.0, max_parallelism=7)},
    }
    got = assert_agree(spark, COURSE, epochs, PolicyOptions(job_max_parallelism=128))
    assert (got[(0, "o2")]["target_parallelism"], got[(0, "o3")]["target_parallelism"]) == (4, 8)
    assert got[(0, "o3")]["optimal_parallelism"] == pytest.approx(7.78, abs=0.01)
    assert got[(2, "o2")]["target_parallelism"] == 128
    assert got[(4, "o1")]["status"] == "incomplete" and "O3 has 2 of 3 instances" in got[(4, "o1")]["reason"]
    assert "O2 has 0 of 2 instances" in got[(5, "o3")]["reason"]
    assert got[(6, "o2")]["status"] == "warmup"
    assert got[(8, "o3")]["target_parallelism"] == 7
    assert_agree(spark, COURSE, {7: epochs[7]}, PolicyOptions(align_to_key_groups=True))


def test_options_agree(spark):
    epochs = {0: COURSE_W, 1: {**COURSE_W, "o1": window(1, 0.0, 50.0, oo=20.0)}}
    for options in (
        PolicyOptions(factor=0.5),
        PolicyOptions(threshold=1.2),
        PolicyOptions(min_parallelism={"o2": 5}, max_parallelism={"O3": 6}),
        PolicyOptions(align_to_key_groups=True, job_max_parallelism=12),
    ):
        assert_agree(spark, COURSE, epochs, options)
    assert_agree(spark, COURSE, epochs, PolicyOptions(), source_rates={"o1": 4000.0})
    assert_agree(spark, COURSE, epochs, PolicyOptions(), source_rates={"o1": -1})


def test_diamond_and_two_sources(spark):
    diamond = topology([("s", "a"), ("s", "b"), ("a", "j"), ("b", "j")], {"a": 2})
    w = {"s": window(1, 0.0, 1000.0), "a": window(2, 500.0, 500.0), "b": window(1, 400.0, 800.0), "j": window(1, 1000.0, 0.0)}
    got = assert_agree(spark, diamond, {0: w})
    assert got[(0, "j")]["target_input_rate"] == pytest.approx(3000.0)
    joins = topology([("s1", "j"), ("s2", "j")], {"s1": 2, "j": 2})
    w = {"s1": window(2, 0.0, 3000.0), "s2": window(1, 0.0, 1000.0), "j": window(2, 2000.0, 0.0)}
    assert assert_agree(spark, joins, {0: w})[(0, "j")]["target_parallelism"] == 4


def test_duplicated_instance_is_incomplete(spark):
    rows = metrics_rows(COURSE, {0: COURSE_W}).to_pandas()
    dup = rows[(rows.operator_id == "o3") & (rows.instance == 1)].copy()
    rows = rows[~((rows.operator_id == "o3") & (rows.instance == 3))]
    rows = rows._append(dup)  # o3 has instances 1, 1, 2: three rows but one missing
    df = spark.createDataFrame(rows, schema=inputs.METRICS.spark_ddl())
    got = decisions.policy_decisions(inputs.conform(df), COURSE, PolicyOptions(), RUN).collect()
    assert {r["status"] for r in got} == {"incomplete"}
    assert "O3 has duplicated instances" in got[0]["reason"]


def random_case(seed: int):
    rnd = random.Random(seed)
    n = rnd.randint(3, 9)
    names = [f"op{i}" for i in range(n)]
    edges = set()
    for i in range(1, n):
        for j in rnd.sample(range(i), k=min(i, rnd.randint(1, 2))):
            if not (j == 0 and i > 1 and rnd.random() < 0.3):
                edges.add((names[j], names[i]))
        if not any(d == names[i] for _, d in edges) and rnd.random() < 0.7:
            edges.add((names[rnd.randrange(i)], names[i]))
    edges = sorted(edges)
    used = {x for e in edges for x in e}
    ops = [Operator(x, x, rnd.randint(1, 6)) for x in names if x in used]
    topo = Topology.from_edges(ops, edges)
    epochs = {}
    for epoch in range(20):
        windows = {}
        for op in topo.order:
            p = topo.operators[op].parallelism
            tp = 0.0 if topo.operators[op].is_source else rnd.choice([0.0, rnd.uniform(10, 1e5)])
            to = rnd.uniform(0, 2) * (tp or rnd.uniform(10, 1e5)) if rnd.random() > 0.1 else 0.0
            windows[op] = OperatorWindow(p, p, tp, to, to * rnd.uniform(0.3, 1.0), max_parallelism=rnd.choice([None, 128]))
        epochs[epoch] = windows
    options = PolicyOptions(
        factor=rnd.choice([0.0, 0.2]),
        threshold=rnd.choice([None, 1.1]),
        job_max_parallelism=rnd.choice([None, 64]),
        align_to_key_groups=rnd.random() < 0.5,
    )
    return topo, epochs, options


@pytest.mark.parametrize("seed", range(6))
def test_random_dags_agree_with_the_reference(spark, seed):
    assert_agree(spark, *random_case(seed))


def test_rates_log_input_gives_the_golden_values(spark):
    topo = read_topology_csv(TOPOLOGY_CSV)
    df, counts = inputs.rates_log(spark, str(RATES_LOG), topo, "wc")
    rows = {(r["epoch"], r["operator_id"]): r for r in decisions.policy_decisions(df, topo, PolicyOptions(), RUN).collect()}
    inputs.raise_for_bad_lines(counts, str(RATES_LOG), topo)
    assert rows[(0, "Splitter FlatMap")]["optimal_parallelism"] == pytest.approx(0.8950923545, rel=1e-9)
    assert rows[(0, "Splitter FlatMap")]["target_output_rate"] == pytest.approx(1114679.0183175134, rel=1e-12)
    assert rows[(0, "Count -> Latency Sink")]["optimal_parallelism"] == pytest.approx(0.6040340360, rel=1e-9)
    assert rows[(1, "Splitter FlatMap")]["optimal_parallelism"] == pytest.approx(0.9188, abs=1e-4)
    assert rows[(1, "Count -> Latency Sink")]["optimal_parallelism"] == pytest.approx(0.7143, abs=1e-4)
    assert rows[(1, "Count -> Latency Sink")]["source_rate_ratio"] == pytest.approx(1.4621134714423822, rel=1e-12)
