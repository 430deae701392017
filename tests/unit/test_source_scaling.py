"""Sources sized as any operator (``policy.scale_sources``), where the job lets them move.

A Nexmark q1 or q2 is one task: Kafka source -> calc -> sink. Its source vertex is the whole job, and it
is the only thing to rescale. Its capacity is what it took in per busy second (collect.snapshot), its
demand its arrival plus its backlog, and it gains nothing beyond the splits it reads (its window's
``max_parallelism``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.config.jobs import parse_jobs
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.policy.base import EpochWindows, OperatorWindow, policy_for
from autoscaler.topology import Operator, Topology

QUERY = Topology.from_edges([Operator("q", "Source: bid -> Calc -> Sink", 1)], [])
PER_INSTANCE = 4_000.0  # records a busy second of one instance


def lone(p: int, arrival: float, *, splits: int | None = 8, pending: float = 0.0) -> dict[str, OperatorWindow]:
    """The one-task query at ``p`` instances, each busy all the time it does not keep up."""
    total = PER_INSTANCE * p
    taken = min(arrival, total)
    return {"q": OperatorWindow(p, p, total, arrival, taken, max_parallelism=splits, observed_processing_rate=taken,
                                observed_processing_rate_max=taken / p, busy_ratio_max=min(1.0, taken / total),
                                pending_records=pending, rate_basis="emitted+lag")}  # fmt: skip


def decide(kind: str, windows, history=(), **kw):
    options = PolicyOptions(kind=kind, **({"interval": 60.0, "restart_time": 4.0, "decision_latency": 7.0} | kw))
    return policy_for(kind)(QUERY, windows, options, None, history)[0]


KNOWN = [EpochWindows(e, lone(1, 2_000.0)) for e in range(12)]  # a flat history: the rises are known (0)


def test_ds2_plus_sizes_a_one_task_query_for_its_arrival_and_backlog():
    # 6,000 r/s on 4,000 a busy second each, no rise: 6,000 + the 11 s a change owes over 109 s = 6,606 -> 2.
    d = decide("ds2_plus", lone(1, 6_000.0), [EpochWindows(e, lone(1, 6_000.0)) for e in range(12)])
    assert d.target_parallelism == 2 and d.capacity_per_instance == pytest.approx(PER_INSTANCE)
    assert d.reason.startswith("source: arrival 6,000 r/s") and d.true_output_rate == pytest.approx(6_000.0)
    # A backlog of 600,000 records to drain in 109 s: 6,606 + 5,505 -> 4.
    assert decide("ds2_plus", lone(1, 6_000.0, pending=600_000.0), KNOWN).target_parallelism == 4


def test_a_source_gains_nothing_beyond_its_splits():
    d = decide("ds2_plus", lone(1, 6_000.0, splits=1), [EpochWindows(e, lone(1, 6_000.0, splits=1)) for e in range(12)])
    assert d.target_parallelism == 1 and "1 (the highest allowed) take 4,000 r/s" in d.reason
    # At 6 instances on 4 partitions, 2 read nothing: the source comes down to its splits.
    assert decide("ds2_plus", lone(6, 2_000.0, splits=4), KNOWN).target_parallelism <= 4


def test_utilization_sizes_a_source_as_flink_does():
    # Capacity 4,000 (input / busy fraction); 6,000 r/s at a 0.7 target with the restart term -> 3.
    d = decide("utilization", lone(1, 6_000.0))
    assert d.target_parallelism == 3 and "capacity 4000.0 r/s" in d.reason


@pytest.mark.parametrize("kind", ["ds2", "rules"])
def test_the_reference_and_rules_keep_sources_as_ds2_does(kind):
    d = decide(kind, lone(1, 6_000.0))
    assert d.target_parallelism == 1 and "never rescaled" in d.reason


def test_a_source_the_deployment_cannot_set_or_the_user_keeps_is_kept():
    windows, history = lone(1, 6_000.0), [EpochWindows(e, lone(1, 6_000.0)) for e in range(12)]
    kept = decide("ds2_plus", windows, history, movable_operators=["Parse", "Count"])
    assert kept.target_parallelism == 1 and "parallelism_args do not name it" in kept.reason
    off = decide("utilization", windows, scale_sources=False)
    assert off.target_parallelism == 1 and "scale_sources is off" in off.reason
    # A source with no busy time reported (capacity unknown) stays too.
    blind = {"q": replace(windows["q"], true_processing_rate=0.0)}
    assert decide("ds2_plus", blind, history).target_parallelism == 1


def test_the_jobs_config_derives_what_a_restart_can_set():
    base = {"name": "j", "flink_job_name": "j", "jar": "build/ds2-testjob.jar", "savepoint_dir": "/tmp/sp"}
    args = {"parallelism_args": {"Count": "--count-parallelism"}}
    (by_args,) = parse_jobs({"jobs": [base | args]}, "test")
    assert by_args.policy.movable_operators == ["Count"]
    (in_place,) = parse_jobs({"jobs": [base | args | {"mechanism": "in-place"}]}, "test")
    assert in_place.policy.movable_operators == ["Count"]  # the job names what may move, whatever the mechanism
    (free,) = parse_jobs({"jobs": [base]}, "test")
    assert free.policy.movable_operators is None and free.policy.scale_sources is True
    with pytest.raises(InputError, match="scale_sources"):
        parse_jobs({"jobs": [base | {"policy": {"scale_sources": "yes"}}]}, "test")
