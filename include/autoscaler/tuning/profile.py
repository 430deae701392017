"""Profiling runs: short-lived copies of the job beside it, each on a candidate configuration, measured.

A round (:func:`run_round`):

1. takes a savepoint of the running job (it keeps running; a savepoint is the job's own and is not
   deleted under the copies as a retained checkpoint may be);
2. starts each copy on a cluster of its own (:mod:`.site`) with the candidate's memory, from that
   savepoint, with its own name, its own consumer group, at the forecast rate and without its sink
   (:func:`copy_args`);
3. measures it like an epoch: counter deltas over ``tuning.measure`` after ``tuning.warmup``, its
   checkpoints, its TaskManager's CPU and memory; then kills its TaskManager and times the restart;
4. stops every copy and disposes of the savepoint, whatever happened (``finally``), and reports the
   slot-seconds spent.

The copies of one round run at once, within ``tuning.max_slots``; a round ends by ``tuning.max_minutes``.

What a copy measures, per profile (table PROFILES):

- ``max_rate``: the source rate it could sustain, by DS2's model: each operator's capacity (the sum of its
  instances' true processing rates) over its share of the source's records (its observed input rate over
  the source's); the smallest, over operators and the source's own capacity;
- ``restart_s``: from the kill to all tasks running again; ``recovery_s``: that plus the catch-up of what the
  restart replays and what arrived meanwhile, (checkpoint age at the kill + restart) × rate ÷ (max rate − rate):
  what a failure costs, as the Flink autoscaler's catch-up term counts it.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from autoscaler.collect.snapshot import take_snapshot, window_metrics
from autoscaler.errors import InputError
from autoscaler.flink.client import FlinkError, FlinkRestClient
from autoscaler.flink.connection import FlinkConnection
from autoscaler.flink.deployment import JobDeployment, program_args, resolve_jar
from autoscaler.tuning.configuration import Configuration
from autoscaler.tuning.site import ProfilingSite, SiteError

TM_METRICS = ("Status.JVM.CPU.Load", "Status.JVM.Memory.Heap.Used", "Status.Flink.Memory.Managed.Used")
SUCCEEDED, FAILED = "succeeded", "failed"


@dataclass(frozen=True)
class CopyArgs:
    """How a copy's program arguments differ from the job's (options ``tuning.*_flag``, ``tuning.drop_flags``)."""

    name_flag: str | None = "--job-name"
    rate_flag: str | None = None
    group_flag: str | None = None
    drop_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    """What one copy measured (a row of PROFILES, with the configuration as JSON)."""

    copy_id: str
    configuration: Configuration
    rate: float | None  # the rate it was asked to run at (None: replay as fast as it can)
    outcome: str
    message: str
    max_rate: float | None = None
    observed_rate: float | None = None
    checkpoint_s: float | None = None
    checkpoint_bytes: int | None = None
    restart_s: float | None = None
    recovery_s: float | None = None
    cpu_load: float | None = None
    heap_used_mb: float | None = None
    managed_used_mb: float | None = None
    slot_seconds: float = 0.0
    job_failed: bool = False  # its cluster ran but the job did not (it failed or kept restarting at this configuration)
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        data["configuration"] = self.configuration.key()
        data["config"] = self.configuration.to_dict()
        return data


def copy_args(deployment: JobDeployment, config: Configuration, args: CopyArgs, name: str, rate: float | None) -> list[str]:
    """The copy's program arguments: the job's at the candidate parallelism, renamed, regrouped, at ``rate``, unsunk."""
    out: list[str] = []
    given = program_args(deployment, {n: p for n, p in config.operators.items() if n in deployment.parallelism_args})
    replaced = {f for f in (args.name_flag, args.group_flag, args.rate_flag) if f}
    skip = False
    for i, arg in enumerate(given):
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in args.drop_flags or flag in replaced:
            skip = "=" not in arg and i + 1 < len(given) and not given[i + 1].startswith("--")
            continue
        out.append(arg)
    if args.name_flag:
        out += [args.name_flag, name]
    if args.group_flag:
        out += [args.group_flag, name]
    if args.rate_flag and rate is not None:
        out += [args.rate_flag, f"{rate:.0f}"]
    return out


def max_sustainable_rate(rows: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """(max rate, observed source rate) from one window's metrics rows (see the module docstring)."""
    by_op: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_op.setdefault(r["operator_id"], []).append(r)
    source_rate = sum(r["observed_output_rate"] for r in rows if r["is_source"])
    if source_rate <= 0:
        return None, source_rate
    limits = []
    for instances in by_op.values():
        capacity = sum(r["true_processing_rate"] for r in instances)
        share = sum(r["observed_processing_rate"] for r in instances) / source_rate
        if instances[0]["is_source"]:
            limits.append(capacity * source_rate / max(sum(r["observed_processing_rate"] for r in instances), 1e-9)
                          if capacity > 0 else float("inf"))  # fmt: skip
        elif share > 0 and capacity > 0:
            limits.append(capacity / share)
    finite = [v for v in limits if v != float("inf")]
    return (min(finite) if finite else None), source_rate


class CopyRun:
    """One copy, from its start to its measurements; :meth:`run` never leaves its cluster running."""

    def __init__(self, site: ProfilingSite, copy_id: str, config: Configuration, rate: float | None, savepoint: str,
                 deployment: JobDeployment, args: CopyArgs, state_backend: str, floor_mb: int,
                 warmup_s: float, measure_s: float, deadline: float) -> None:  # fmt: skip
        self.site, self.copy_id, self.config, self.rate = site, copy_id, config, rate
        self.savepoint, self.deployment, self.args, self.state_backend = savepoint, deployment, args, state_backend
        self.floor_mb, self.warmup_s, self.measure_s, self.deadline = floor_mb, warmup_s, measure_s, deadline
        self.name = f"{deployment.job_name}-profile-{copy_id}"
        self.job_failed = False

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the round's time budget (tuning.max_minutes) ran out")
        return left

    def run(self) -> Profile:
        started, t0 = datetime.now(UTC), time.monotonic()
        fields: dict[str, Any] = {}
        outcome, message = FAILED, ""
        try:
            url = self.site.start(self.copy_id, self.config.slots, self.config.taskmanager_mb(self.config.slots, self.floor_mb),
                                  self.config.managed_fraction, self.state_backend)  # fmt: skip
            t0 = time.monotonic()  # slots are held from here
            fields = self._measure(FlinkRestClient(FlinkConnection(base_url=url)))
            outcome, message = SUCCEEDED, f"measured {self.config.key()} at {self.rate or 'replay'} records/s"
        except (SiteError, FlinkError, InputError, TimeoutError) as exc:
            message = f"copy {self.copy_id} ({self.config.key()}): {exc}"
        finally:
            slot_seconds = (time.monotonic() - t0) * self.config.slots
            try:
                self.site.stop(self.copy_id)
            except SiteError as exc:
                message += f"; its cluster could not be stopped: {exc}"
                outcome = FAILED
        return Profile(self.copy_id, self.config, self.rate, outcome, message, slot_seconds=round(slot_seconds, 1),
                       job_failed=self.job_failed, started_at=started, finished_at=datetime.now(UTC), **fields)  # fmt: skip

    def _measure(self, client: FlinkRestClient) -> dict[str, Any]:
        jar = resolve_jar(client, self.deployment)
        args = copy_args(self.deployment, self.config, self.args, self.name, self.rate)
        job_id = client.run_jar(jar, self.deployment.entry_class, args, savepoint_path=self.savepoint,
                                allow_non_restored_state=True, claim_mode="NO_CLAIM",
                                flink_configuration=self.config.flink_configuration())  # fmt: skip
        try:
            client.wait_all_running(job_id, timeout_s=min(self._left(), 120.0))
        except FlinkError:
            job = next((j for j in client.jobs() if j.id == job_id), None)
            self.job_failed = job is not None and job.state in ("FAILED", "FAILING", "RESTARTING")
            raise
        self._wait(self.warmup_s)
        first = take_snapshot(client, self.name)
        self._wait(self.measure_s)
        last = take_snapshot(client, self.name)
        rows = window_metrics(first, last, self.name, 0).to_pylist()
        max_rate, observed = max_sustainable_rate(rows)
        fields: dict[str, Any] = {"max_rate": max_rate, "observed_rate": observed}
        fields |= self._checkpoints(client, job_id)
        fields |= self._resources(client)
        fields |= self._recovery(client, job_id, max_rate, observed)
        return fields

    def _wait(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._left()
            time.sleep(min(0.5, max(end - time.monotonic(), 0)))

    def _checkpoints(self, client: FlinkRestClient, job_id: str) -> dict[str, Any]:
        """The mean duration and latest size of its completed checkpoints, waiting for one if none completed yet."""
        end = time.monotonic() + min(self.config.checkpoint_interval_s * 2 + 10, self._left())
        while True:
            data = client.checkpoints(job_id)
            latest = (data.get("latest") or {}).get("completed") or {}
            if latest or time.monotonic() >= end:
                break
            time.sleep(0.5)
        if not latest:
            return {}
        duration = ((data.get("summary") or {}).get("end_to_end_duration") or {}).get("avg")
        return {"checkpoint_s": None if duration is None else round(float(duration) / 1000, 3),
                "checkpoint_bytes": int(latest.get("state_size") or latest.get("checkpointed_size") or 0)}  # fmt: skip

    def _resources(self, client: FlinkRestClient) -> dict[str, Any]:
        tms = client.get("/taskmanagers").get("taskmanagers", [])
        if not tms:
            return {}
        values = client.taskmanager_metrics(str(tms[0]["id"]), TM_METRICS)
        mb = 1024 * 1024
        return {"cpu_load": values.get(TM_METRICS[0]),
                "heap_used_mb": None if TM_METRICS[1] not in values else round(values[TM_METRICS[1]] / mb, 1),
                "managed_used_mb": None if TM_METRICS[2] not in values else round(values[TM_METRICS[2]] / mb, 1)}  # fmt: skip

    def _recovery(self, client: FlinkRestClient, job_id: str, max_rate: float | None, rate: float | None) -> dict[str, Any]:
        latest = (client.checkpoints(job_id).get("latest") or {}).get("completed") or {}
        killed_at = time.time()
        age_s = max(killed_at - int(latest.get("latest_ack_timestamp") or killed_at * 1000) / 1000, 0.0)
        before = client.restarts(job_id) or 0
        self.site.kill_taskmanager(self.copy_id)
        end = time.monotonic() + self._left()
        while True:  # wait until Flink saw the loss (the job leaves RUNNING) and runs every task again
            job = next((j for j in client.jobs() if j.id == job_id), None)
            if job is not None and job.all_running and (client.restarts(job_id) or 0) > before:
                break
            if time.monotonic() >= end:
                raise TimeoutError(f"the copy did not recover from the lost TaskManager (last: {job})")
            time.sleep(0.2)
        restart_s = time.time() - killed_at
        out: dict[str, Any] = {"restart_s": round(restart_s, 2)}
        if max_rate and rate and max_rate > rate:
            out["recovery_s"] = round(restart_s + (age_s + restart_s) * rate / (max_rate - rate), 2)
        return out


@dataclass(frozen=True)
class Budget:
    max_slots: int
    max_minutes: int


def fit_budget(configs: Sequence[Configuration], budget: Budget) -> list[Configuration]:
    """The configurations (in the order given) that fit in the round's slots at once."""
    chosen, used = [], 0
    for config in configs:
        if used + config.slots <= budget.max_slots:
            chosen.append(config)
            used += config.slots
    return chosen


def run_round(site: ProfilingSite, client: FlinkRestClient, deployment: JobDeployment, configs: Sequence[Configuration],
              rate: float | None, round_id: str, budget: Budget, args: CopyArgs, floor_mb: int, warmup_s: float,
              measure_s: float, savepoint_dir: str, state_backend: str = "hashmap",
              on_profile: Callable[[Profile], None] | None = None) -> list[Profile]:  # fmt: skip
    """Run ``configs`` (those within ``budget``) as copies of the running job at once; see the module docstring."""
    chosen = fit_budget(configs, budget)
    if not chosen:
        raise InputError("tuning", f"no candidate fits the budget of {budget.max_slots} slots (tuning.max_slots)")
    deadline = time.monotonic() + budget.max_minutes * 60
    job = client.running_job(deployment.job_name)
    request = client.trigger_savepoint(job.id, savepoint_dir, deployment.savepoint_format)
    status = client.wait_operation(lambda: client.savepoint_status(job.id, request), 120.0, what="the profiling savepoint")
    if not status.succeeded or not status.location:
        raise FlinkError(f"the savepoint the copies start from failed: {status.failure}")
    profiles: list[Profile] = []
    try:
        runs = [CopyRun(site, f"{round_id}-{i}", c, rate, status.location, deployment, args, state_backend, floor_mb,
                        warmup_s, measure_s, deadline) for i, c in enumerate(chosen, 1)]  # fmt: skip
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(runs)) as pool:
            for profile in pool.map(lambda r: r.run(), runs):
                profiles.append(profile)
                if on_profile is not None:
                    on_profile(profile)
    finally:
        for copy_id in site.copies():  # a copy left by a crash of this round or an earlier one
            if copy_id.startswith(f"{round_id}-"):
                site.stop(copy_id)
        try:
            client.dispose_savepoint(status.location)
        except FlinkError:
            pass  # a savepoint left behind costs disk, not correctness; the round's result stands
    return profiles
