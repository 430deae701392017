"""The tuning core without Flink: configurations and candidates, a copy's arguments, DS2's max rate, the model's
recommendation and next profiles, the forecast, the options' checks, and a round that cleans up after a failure."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from autoscaler.config.fields import Fields
from autoscaler.config.sections import read_tuning
from autoscaler.errors import InputError
from autoscaler.flink.deployment import JobDeployment
from autoscaler.flink.models import OperationStatus
from autoscaler.tuning.configuration import Configuration, candidates, scaled
from autoscaler.tuning.model import Model, Observation, recovery_time
from autoscaler.tuning.profile import Budget, CopyArgs, copy_args, fit_budget, max_sustainable_rate, run_round
from autoscaler.tuning.round import forecast
from autoscaler.tuning.site import SiteError, check_copy_id

FLAGS = {"Parse": "--parse-parallelism", "Count": "--count-parallelism"}


def config(count: int, interval: float = 10, mb: int = 512, fraction: float = 0.4) -> Configuration:
    return Configuration.of({"Source": 1, "Parse": 1, "Count": count}, interval, mb, fraction)


def test_slots_memory_and_cost_count_whole_taskmanagers_at_flinks_floor():
    c = config(3, mb=256)
    assert c.slots == 3
    assert c.taskmanager_mb(4, 1024) == 1024 and c.taskmanager_mb(8, 1024) == 2048
    assert c.memory_mb(2, 1024) == 2 * 1024  # 3 slots on TaskManagers of 2: two of them
    assert config(2).cost(4, 1024) < config(3).cost(4, 1024)
    assert config(2, interval=30).cost(4, 1024) < config(2, interval=10).cost(4, 1024)  # at equal cost: less checkpoint work
    assert config(2, 30, 256, 0.2).flink_configuration() == {"execution.checkpointing.interval": "30000ms"}
    assert Configuration.from_dict(config(2).to_dict()) == config(2)


@pytest.mark.parametrize(("kwargs", "problem"), [
    ({"checkpoint_interval_s": 0.5}, "at least 1 s"), ({"managed_fraction": 1.0}, "managed fraction"),
    ({"memory_per_slot_mb": 10}, "memory per slot"), ({"parallelism": {"Count": 0}}, "integer >= 1"),
])  # fmt: skip
def test_a_bad_configuration_is_refused_naming_the_problem(kwargs, problem):
    values = {"parallelism": {"Count": 1}, "checkpoint_interval_s": 10, "memory_per_slot_mb": 512, "managed_fraction": 0.4}
    with pytest.raises(InputError, match=problem):
        Configuration.of(**{**values, **kwargs})


def test_candidates_span_doubling_steps_around_what_runs_and_keep_fixed_operators():
    in_force = config(2)
    space = candidates({"Parse": 1, "Count": 2}, {"Source": 1}, range(1, 5), in_force)
    assert {c.checkpoint_interval_s for c in space} == {5, 10, 20, 40}
    assert {c.memory_per_slot_mb for c in space} == {256, 512, 1024}
    assert {c.managed_fraction for c in space} == {0.2, 0.4, 0.6}
    assert {c.slots for c in space} == {1, 2, 3, 4}
    assert all(c.operators["Source"] == 1 for c in space)
    assert scaled({"Parse": 1, "Count": 2}, 4) == {"Parse": 2, "Count": 4}
    given = candidates({"Count": 2}, {}, range(2, 3), in_force, ("30s", "1m"), ("512",), ("0.3",))
    got = [(c.checkpoint_interval_s, c.memory_per_slot_mb, c.managed_fraction) for c in given]
    assert got == [(30, 512, 0.3), (60, 512, 0.3)]
    with pytest.raises(InputError, match=r"tuning\.checkpoint_intervals"):
        candidates({"Count": 2}, {}, range(2, 3), in_force, ("soon",))


def test_a_copy_runs_renamed_in_its_own_group_at_the_rate_without_its_sink():
    deployment = JobDeployment(job_name="wc", savepoint_dir="/sp", parallelism_args=FLAGS, jar_path="/x.jar",
                               base_args=["--job-name", "wc", "--kafka-group", "wc", "--rate-schedule", "0s:10",
                                          "--kafka-sink-topic=out", "--keys", "100"])  # fmt: skip
    args = CopyArgs(name_flag="--job-name", rate_flag="--rate", group_flag="--kafka-group",
                    drop_flags=("--rate-schedule", "--kafka-sink-topic"))  # fmt: skip
    out = copy_args(deployment, config(3), args, "wc-profile-r1-1", 2500)
    assert out == ["--keys", "100", "--parse-parallelism", "1", "--count-parallelism", "3", "--job-name", "wc-profile-r1-1",
                   "--kafka-group", "wc-profile-r1-1", "--rate", "2500"]  # fmt: skip
    assert "--rate" not in copy_args(deployment, config(3), args, "c", None)  # a replay: as fast as it can


def _row(op: str, source: bool, true_rate: float, observed_in: float, observed_out: float) -> dict:
    return {"operator_id": op, "is_source": source, "true_processing_rate": true_rate,
            "observed_processing_rate": observed_in, "observed_output_rate": observed_out}  # fmt: skip


def test_max_rate_is_the_bottleneck_capacity_over_its_share_of_the_source_records():
    rows = [_row("src", True, 50_000, 1000, 1000),
            _row("parse", False, 8_000, 1000, 2000),  # 1 line in: 2 words out; capacity 8,000 lines/s
            _row("count", False, 3_000, 2000, 2000), _row("count", False, 3_000, 2000, 2000)]  # fmt: skip
    max_rate, observed = max_sustainable_rate(rows)
    assert observed == 1000
    assert max_rate == pytest.approx(1500)  # Count: 6,000 words/s at 4 words per source record
    assert max_sustainable_rate([_row("src", True, 0, 0, 0)]) == (None, 0)


def test_the_model_recommends_the_cheapest_configuration_that_holds_the_forecast_and_recovers_in_time():
    # The job scales linearly at 1,000 records/s per slot and restarts in 5 s, whatever its memory.
    obs = [Observation(config(n, mb=mb), 1000.0 * max(n, 1), 5.0, f"profile p{n}-{mb}") for n in (1, 2, 4) for mb in (256, 512)]
    model = Model(obs, forecast_rate=2500, recovery_target_s=60, confidence=0.9)
    space = [config(n, mb=mb) for n in (1, 2, 3, 4) for mb in (256, 512)]
    best = model.recommend(model.predict(space, 4, 256))
    assert best is not None and best.configuration == config(3, mb=256), best
    assert 2800 < best.max_rate < 3200 and best.p_feasible >= 0.9
    # Too tight a recovery target: the margin over the forecast must pay for the catch-up.
    strict = Model(obs, forecast_rate=2500, recovery_target_s=7, confidence=0.9)
    tight = strict.recommend(strict.predict(space, 4, 256))
    assert tight is None or tight.configuration.slots == 4


def test_the_next_profiles_are_unprofiled_and_ranked_by_expected_improvement():
    model = Model([], forecast_rate=1000, recovery_target_s=60, confidence=0.9)
    space = [config(n) for n in (1, 2, 3)]
    first = model.next_profiles(model.predict(space, 4, 256), 2)
    assert [p.configuration.slots for p in first] == [1, 2]  # nothing known: cheapest first
    seen = Model([Observation(config(1), 400.0, 5.0, "profile a")], 1000, 60, 0.9)
    again = seen.next_profiles(seen.predict(space, 4, 256), 3)
    assert config(1) not in [p.configuration for p in again]


def test_recovery_is_restart_plus_catch_up_and_infinite_without_a_margin():
    got = recovery_time(np.array([10.0, 10.0]), np.array([2000.0, 900.0]), 1000.0, 20.0)
    assert got[0] == pytest.approx(10 + (10 + 10) * 1000 / 1000) and np.isinf(got[1])


def test_a_change_is_forecast_only_beyond_the_jobs_typical_change():
    steady = [1000, 1010, 990, 1005, 1000, 995]
    assert forecast(steady, 2)[2] is False
    ramp = [1000, 1200, 1400, 1600, 1800, 2000]
    current, ahead, change = forecast(ramp, 2)
    assert current == 2000 and ahead > 2100 and change is True
    assert forecast([], 2) == (None, None, False)


@pytest.mark.parametrize(("section", "problem"), [
    ({"rate_flag": "rate"}, "not a program argument"), ({"drop_flags": ["--x; rm -rf /"]}, "not a program argument"),
    ({"confidence": 1.0}, "below 1"), ({"site": "cloud"}, "site"), ({"max_slots": 0}, "max_slots"),
])  # fmt: skip
def test_bad_tuning_options_are_named(section, problem):
    with pytest.raises(InputError, match=problem):
        read_tuning(Fields(section, "jobs.yaml: job 'wc'", "tuning."))


def test_the_budget_takes_candidates_in_order_while_their_slots_fit():
    assert [c.slots for c in fit_budget([config(2), config(3), config(1)], Budget(3, 5))] == [2, 1]


@dataclass
class FakeSite:
    name: str = "fake"
    started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def start(self, copy_id: str, slots: int, taskmanager_mb: int, managed_fraction: float, state_backend: str) -> str:
        check_copy_id(copy_id)
        self.started.append(copy_id)
        if copy_id.endswith("-2"):
            raise SiteError("no room")
        return "http://127.0.0.1:9"  # nothing answers: the copy's measurement fails

    def kill_taskmanager(self, copy_id: str) -> None:
        raise AssertionError("never reached")

    def stop(self, copy_id: str) -> None:
        self.stopped.append(copy_id)

    def copies(self) -> list[str]:
        return sorted(set(self.started) - set(self.stopped))


class FakeClient:
    def __init__(self) -> None:
        self.disposed: list[str] = []

    def running_job(self, name):
        return type("Job", (), {"id": "0" * 32})()

    def trigger_savepoint(self, job_id, target, fmt):
        return "1" * 32

    def savepoint_status(self, job_id, request):
        return OperationStatus("COMPLETED", location="file:/sp/savepoint-1")

    def wait_operation(self, poll, deadline_s, what=""):
        return poll()

    def dispose_savepoint(self, path):
        self.disposed.append(path)


def test_a_round_whose_copies_fail_stops_every_copy_and_disposes_of_the_savepoint():
    site, client = FakeSite(), FakeClient()
    deployment = JobDeployment(job_name="wc", savepoint_dir="/sp", parallelism_args=FLAGS, jar_path="/nonexistent.jar")
    profiles = run_round(site, client, deployment, [config(1), config(1, mb=256)], 1000, "wc-7", Budget(4, 1),  # type: ignore[arg-type]
                         CopyArgs(), 1024, 0, 5, "file:///sp")  # fmt: skip
    assert [p.outcome for p in profiles] == ["failed", "failed"]
    assert "nonexistent.jar" in profiles[0].message and "no room" in profiles[1].message
    assert sorted(site.stopped) == ["wc-7-1", "wc-7-2"] and site.copies() == []
    assert client.disposed == ["file:/sp/savepoint-1"]


def test_a_configuration_the_job_failed_at_keeps_its_neighbours_from_being_recommended():
    from autoscaler.tuning.round import observation

    ok = [Observation(config(n), 1000.0 * n, 5.0, f"profile p{n}") for n in (2, 3, 4)]
    space = [config(2), config(2, mb=256), config(3), config(4)]
    trusting = Model(ok, forecast_rate=1800, recovery_target_s=60, confidence=0.9).predict(space, 4, 256)
    failed = observation(config(2, mb=256), None, None, True, "profile oom")
    assert failed.max_rate == 1.0 and failed.restart_s is None
    model = Model([*ok, failed], forecast_rate=1800, recovery_target_s=60, confidence=0.9)
    warned = {p.configuration: p for p in model.predict(space, 4, 256)}
    before = {p.configuration: p for p in trusting}
    assert warned[config(2, mb=256)].p_rate < 0.5 < before[config(2, mb=256)].p_rate
    assert model.recommend(list(warned.values())).configuration != config(2, mb=256)


def test_a_batch_of_equally_promising_profiles_spreads_over_what_is_not_known():
    model = Model([Observation(config(1, 10, 512, 0.4), 2000.0, 5.0, "profile a")], 1000, 60, 0.9)
    space = [config(1, i, mb, f) for i in (10, 40) for mb in (256, 512) for f in (0.2, 0.4)]
    batch = model.next_profiles(model.predict(space, 4, 1024), 2)  # every one-slot TaskManager costs the 1 GiB floor
    assert len(batch) == 2 and config(1, 10, 512, 0.4) not in [p.configuration for p in batch]
    first, second = (p.configuration for p in batch)
    assert first == config(1, 40, 256, 0.2)  # the farthest from the profiled one
    assert second != first and (second.checkpoint_interval_s, second.memory_per_slot_mb) != (40, 256)


def test_a_memory_flink_cannot_lay_out_is_never_a_candidate():
    from autoscaler.tuning.configuration import flink_memory_fits

    assert flink_memory_fits(1024, 0.4) and flink_memory_fits(2048, 0.6)
    assert not flink_memory_fits(1024, 0.6)  # 576 MB of Flink memory: framework 256 + network 64 + managed 346 > 576
    assert config(1, mb=512, fraction=0.6).starts(4, 1024) is False  # its copy: one slot, a TaskManager of 1 GiB
    assert config(2, mb=1024, fraction=0.6).starts(4, 1024)


def test_at_equal_cost_the_recommendation_is_the_configuration_nearest_to_what_runs():
    obs = [Observation(config(2, 20, mb, f), 2000.0, 5.0, f"profile {mb}-{f}") for mb in (256, 512) for f in (0.2, 0.4)]
    model = Model(obs, forecast_rate=1500, recovery_target_s=60, confidence=0.9)
    # Two slots on TaskManagers of 4 at the 1 GiB floor: 256 and 512 MB per slot cost the same; so do the fractions.
    space = [config(2, 20, mb, f) for mb in (256, 512) for f in (0.2, 0.4)]
    best = model.recommend(model.predict(space, 4, 2048), in_force=config(2, 20, 512, 0.4))
    assert best is not None and best.configuration == config(2, 20, 512, 0.4)
