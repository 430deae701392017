"""A fleet run's stages (fleet/interval.py): jobs on one Flink cluster share its free slots; a job that collects
from Prometheus is read from it, as on the per-job path."""

from __future__ import annotations

from autoscaler.capacity.inventory import ClusterView, Inventory, TaskManager
from autoscaler.config.jobs import parse_jobs
from autoscaler.decide import history
from autoscaler.decide.rules import NOOP, RESCALE
from autoscaler.fleet import interval


def _jobs(clusters, extra=None):
    entries = [{"name": f"wc{i}", "flink_job_name": f"wordcount{i}", "jar": "build/ds2-testjob.jar", "flink_conn_id": conn,
                "parallelism_args": {"Count": "--count-parallelism"}} | (extra or {}).get(i, {})
               for i, conn in enumerate(clusters)]  # fmt: skip
    return parse_jobs({"jobs": entries}, "jobs.yaml")


def _history(store_root, job, epoch, enough):
    """Each job's Count at 2, its kind proposing 5 (3 more slots), as its stored decisions would say."""
    row = {"operator_id": "c", "operator_name": "Count", "is_source": False, "status": "ok", "current_parallelism": 2,
           "target_parallelism": 5, "target_input_rate": 20000.0, "capacity_per_instance": 4000.0,
           "reason": "needs 5"}  # fmt: skip
    return history.EpochHistory([row], None, 1, {})


def _decide(monkeypatch, clusters, free):
    monkeypatch.setattr(history, "epoch_history", _history)
    due = [interval.JobEpoch(job, 10, validation={"decidable": True}) for job in _jobs(clusters)]

    def cluster(job):
        slots = free[job.flink_conn_id]
        return None if slots is None else ClusterView(Inventory.slots_only(slots), slots_only=True)

    interval.decide_all(due, "/nonexistent", cluster)
    return [item.plan for item in due]


def test_two_jobs_on_one_cluster_are_never_planned_into_the_same_free_slots(monkeypatch):
    first, second = _decide(monkeypatch, ["flink_a", "flink_a"], {"flink_a": 3})
    assert first.action == RESCALE and first.target == {"Count": 5} and first.slots_taken == 3
    assert second.action == NOOP
    assert second.summary.startswith("blocked: 5 task slots needed, 2 available (3 free - 3 planned for other jobs + 2 held")


def test_the_slots_planned_for_one_job_count_against_the_next_ones_cores(monkeypatch):
    monkeypatch.setattr(history, "epoch_history", _history)
    due = [interval.JobEpoch(job, 10, validation={"decidable": True}) for job in _jobs(["flink_a", "flink_a"])]
    # Two TaskManagers of 4 slots and 2 cores; each job holds 2 slots (one per TaskManager), 4 are free.
    view = ClusterView(Inventory((TaskManager("a", 4, 2, 2.0), TaskManager("b", 4, 2, 2.0))))
    interval.decide_all(due, "/nonexistent", lambda job: view)
    first, second = (item.plan for item in due)
    # The cores allow 4 busy slots in all, 2 of them the other job's: the first is cut to 2 (no change), blocked.
    assert first.action == NOOP and "2 busy slots within the TaskManagers' cores" in first.summary
    assert second.action == NOOP and "2 busy with other jobs" in second.summary  # nothing was planned for the first


def test_jobs_on_other_clusters_and_plans_that_take_nothing_leave_the_slots(monkeypatch):
    plans = _decide(monkeypatch, ["flink_a", "flink_b"], {"flink_a": 3, "flink_b": 3})
    assert [p.target for p in plans] == [{"Count": 5}, {"Count": 5}]
    # A cluster whose slots cannot be read skips the check for every job on it (as for one job).
    plans = _decide(monkeypatch, ["flink_a", "flink_a"], {"flink_a": None})
    assert [p.target for p in plans] == [{"Count": 5}, {"Count": 5}]


def test_a_batched_job_with_a_prometheus_connection_is_collected_from_prometheus(monkeypatch, tmp_path):
    """The fleet path used Flink's REST API for every job, ignoring collect.prometheus_conn_id."""
    from types import SimpleNamespace

    read, rest = [], []

    def from_prometheus(reader, job_name, job, epoch, start, end, store_root):
        read.append((reader, job_name, epoch, start, end))
        return 12, 30.0, "f00d"

    def from_rest(client, job_name, job, epoch, store_root, **kw):
        rest.append((client, job_name))
        return SimpleNamespace(
            window_s=29.5, flink_job_id="beef", warmup_reason=None, failing_over=None, rows=SimpleNamespace(num_rows=8)
        )

    monkeypatch.setattr(interval.prometheus, "collect_epoch", from_prometheus)
    monkeypatch.setattr(interval, "collect_epoch_metrics", from_rest)
    jobs = _jobs(["flink_a", "flink_a"], {0: {"collect": {"prometheus_conn_id": "prom"}}})
    due = [interval.JobEpoch(job, 100) for job in jobs]
    interval.collect_all(due, lambda job: f"rest:{job.flink_conn_id}", tmp_path, lambda job: f"reader:{job.prometheus_conn_id}")
    assert read == [("reader:prom", "wordcount0", 100, jobs[0].epoch_start(100), jobs[0].epoch_start(101))]
    assert rest == [("rest:flink_a", "wordcount1")]
    assert due[0].collected["flink_job_id"] == "f00d" and due[0].collected["source"] == "prometheus"
    assert due[1].collected["flink_job_id"] == "beef" and all(item.alive for item in due)
    # A run given no reader fails that job alone, naming the option.
    due = [interval.JobEpoch(job, 100) for job in jobs]
    interval.collect_all(due, lambda job: "rest", tmp_path)
    assert due[0].failed == "collect" and "prometheus_conn_id" in due[0].error and due[1].alive
