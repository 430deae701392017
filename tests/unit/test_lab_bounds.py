"""The floor of cost (lab.bounds): the cheapest schedule that meets the lab's other targets."""

from __future__ import annotations

import math
from itertools import pairwise

from autoscaler.lab.bounds import cheapest
from autoscaler.lab.scenario import parse_scenario

PER_INSTANCE = 5_000.0  # Count's records/s per instance in these scenarios (linear)


def scenario(name: str, schedule: list[dict], initial: int = 2):
    return parse_scenario({
        "name": name, "interval": "30s", "duration": "450s",
        "operators": {"Count": {"cost_us": 175}},
        "source": {"partitions": 8, "backlog": True},
        "initial_parallelism": {"Count": initial},
        "schedule": schedule,
    }, "test")  # fmt: skip


def need(rate: float) -> dict[str, int | None]:
    return {"Parse": 1, "Count": max(1, math.ceil(rate / PER_INSTANCE)), "Sink: Writer": 1}


def capacity(sizes) -> float:
    return PER_INSTANCE * sizes["Count"]


def counts(floor) -> list[int]:
    return [s["Count"] for s in floor.sizes]


STEP = [{"at": "0s", "rate": 10_000}, {"at": "150s", "rate": 20_000}]


def test_without_the_drain_the_floor_meets_a_step_exactly_when_it_comes():
    floor = cheapest(scenario("step", STEP), need, under_epochs=0)
    assert counts(floor) == [2] * 5 + [4] * 10
    assert floor.rescales == 1 and floor.ratio == 1.0


def test_with_the_drain_the_restart_is_taken_where_its_backlog_can_drain():
    floor = cheapest(scenario("step", STEP), need, under_epochs=0, capacity=capacity)
    # At the step, 4 instances take exactly 20,000 r/s: the 70,000 records of the 3.5-s restart would
    # never drain. One epoch earlier, at 10,000 r/s, they drain at once.
    assert counts(floor) == [2] * 4 + [4] * 11
    assert floor.ratio > 1.0


def test_a_start_below_the_need_with_no_under_provisioned_epoch_allowed_has_no_schedule():
    assert cheapest(scenario("step", STEP, initial=1), need, under_epochs=0) is None
    assert counts(cheapest(scenario("step", STEP, initial=1), need, under_epochs=1))[:2] == [1, 2]


def test_spike_allows_one_rescale_in_all_so_a_size_taken_for_the_burst_is_held():
    burst = [{"at": "0s", "rate": 10_000}, {"at": "150s", "rate": 30_000}, {"at": "180s", "rate": 10_000}]
    free = cheapest(scenario("burst", burst), need, under_epochs=0)
    spike = cheapest(scenario("spike", burst), need, under_epochs=0)
    # Up for the burst, and down after the warm-up epoch, which decides nothing: one rescale per change.
    assert counts(free) == [2] * 5 + [6, 6] + [2] * 8 and free.rescales == 2
    assert counts(spike) == [2] * 5 + [6] * 10 and spike.rescales == 1


def test_diurnal_sine_allows_no_reversal_so_a_size_taken_for_the_crest_is_held():
    sine = [{"at": "0s", "rate": 18_000, "sine": {"amplitude": 10_000, "period": "450s"}}]
    held = cheapest(scenario("diurnal-sine", sine, initial=4), need, under_epochs=1)
    sizes = counts(held)
    assert all(b >= a for a, b in pairwise(sizes)) and max(sizes) == 6
