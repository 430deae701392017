"""One rule for how rates flow through the graph (``policy.base.flow``), pinned across the kinds' two forms:
DS2 writes it over columns (every epoch at once), the other kinds call ``flow`` per epoch."""

from __future__ import annotations

import random

import pytest

from autoscaler.config.policy_options import PolicyOptions
from autoscaler.policy.base import OperatorWindow, flow, policy_for
from tests.helpers import topology

SHAPES = {
    "chain": [("src", "a"), ("a", "b"), ("b", "sink")],
    "diamond": [("src", "a"), ("src", "b"), ("a", "join"), ("b", "join"), ("join", "sink")],
    "two sources": [("s1", "a"), ("s2", "a"), ("s2", "b"), ("a", "sink"), ("b", "sink")],
}


def windows(topo, rng: random.Random) -> dict[str, OperatorWindow]:
    out = {}
    for op in topo.order:
        p = rng.randint(1, 6)
        processed = rng.uniform(1_000, 50_000)
        if topo.operators[op].is_source:
            out[op] = OperatorWindow(p, p, 0.0, rng.uniform(1_000, 40_000), rng.uniform(500, 20_000))
        else:
            out[op] = OperatorWindow(p, p, processed, processed * rng.uniform(0.1, 3.0), processed)
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(5))
def test_ds2_over_columns_and_flow_give_every_operator_the_same_input(shape, seed):
    topo = topology(SHAPES[shape], {})
    w = windows(topo, random.Random(f"{shape}-{seed}"))
    into = flow(topo, w, {op: {"arrival": w[op].true_output_rate} for op in topo.sources})
    for d in policy_for("ds2")(topo, w, PolicyOptions(kind="ds2")):
        if not d.is_source:
            assert d.target_input_rate == pytest.approx(into[d.operator_id]["arrival"], rel=1e-12), d.operator_id


def test_flow_carries_every_named_rate_and_the_factor():
    topo = topology(SHAPES["chain"], {})
    w = windows(topo, random.Random(1))
    at = {"src": {"arrival": 1_000.0, "backlog": 10.0}}
    plain, padded = flow(topo, w, at), flow(topo, w, at, factor=0.5)
    assert plain["src"] == at["src"] and set(plain["sink"]) == {"arrival", "backlog"}
    selectivity = w["a"].true_output_rate / w["a"].true_processing_rate
    assert plain["b"]["arrival"] == pytest.approx(1_000.0 * selectivity)
    assert padded["a"]["backlog"] == pytest.approx(15.0)  # each operator's input times 1 + factor
