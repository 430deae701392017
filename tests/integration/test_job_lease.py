"""Two autoscalers on one Flink job, at the core: the Flink job's lease in a real PostgreSQL, and the rescale
that leaves alone a job someone else rescaled since its epoch was measured (a real Flink job)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from autoscaler.rescale import job_lease
from autoscaler.rescale.job_lease import JobLease, deployment_of, flink_job_key
from autoscaler.rescale.savepoint import rescale_with_savepoint
from tests.helpers import poll
from tests.integration.test_rescale import assert_runs_at, deployment, start

pytestmark = [pytest.mark.slow, pytest.mark.faults]  # make test-faults: make test stays under 30 min

JOB = flink_job_key("http://Flink.example:8081/", "orders")


@pytest.fixture
def lease_dsn(postgres_server) -> str:
    from sqlalchemy.engine import make_url

    url = postgres_server.script("url", "ds2joblease").stdout.strip().splitlines()[-1]
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def lease(dsn: str, holder: str, action: str, ttl_s: float = 60.0, job: str = JOB) -> JobLease:
    return JobLease(dsn, job, holder, action, ttl_s)


def test_one_deployment_holds_a_flink_jobs_lease_and_the_other_is_told_who(lease_dsn):
    action = "ds2_orders.run1.rescale"
    a, b = lease(lease_dsn, "host-a:/srv/store", action), lease(lease_dsn, "s3://b/ds2", action)
    assert JOB == "http://flink.example:8081#orders" and "secret" not in repr(a)
    assert job_lease.take(a) is None
    refused = job_lease.take(b)  # the same action id in another deployment is another holder
    assert refused and "host-a:/srv/store (action ds2_orders.run1.rescale) holds its lease since" in refused, refused
    assert job_lease.take(a) is None  # the same action again (a retry, on any of its hosts) retakes it
    assert job_lease.extend(a) and not job_lease.extend(b)
    assert job_lease.take(lease(lease_dsn, "s3://b/ds2", "x", job=flink_job_key("http://flink.example:8081", "other"))) is None
    job_lease.release(b)  # not b's: left alone
    assert job_lease.take(b) is not None
    job_lease.release(a)
    assert job_lease.take(b) is None and not job_lease.extend(a)  # a lost it: it knows


def test_a_lease_nobody_extends_expires_by_the_databases_clock(lease_dsn):
    gone = lease(lease_dsn, "host-a:/srv/store", "crashed", ttl_s=1.0, job=flink_job_key("http://f:8081", "expiring"))
    waiting = lease(lease_dsn, "host-b:/srv/store", "next", job=gone.flink_job)
    assert job_lease.take(gone) is None and job_lease.take(waiting) is not None
    poll("the lease nobody extended to expire", lambda: job_lease.take(waiting) is None, 15, 0.2)
    assert not job_lease.extend(gone)


def _race(dsn: str, holder: str, start, results) -> None:
    start.wait()
    results.put((holder, job_lease.take(lease(dsn, holder, "r1", job=flink_job_key("http://f:8081", "raced")))))


def test_deployments_racing_for_a_free_lease_are_one_winner(lease_dsn):
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(6), ctx.Queue()
    racers = [ctx.Process(target=_race, args=(lease_dsn, f"host-{n}:/store", start, results)) for n in range(6)]
    for p in racers:
        p.start()
    outcomes = [results.get(timeout=60) for _ in racers]
    for p in racers:
        p.join(30)
    winners = [holder for holder, refused in outcomes if refused is None]
    assert len(winners) == 1, outcomes


def test_the_deployment_is_its_store():
    assert deployment_of("s3://bucket/ds2/") == "s3://bucket/ds2"
    assert deployment_of("/srv/store").endswith(":/srv/store") and deployment_of("/srv/store") != "/srv/store"


@pytest.mark.flink
def test_a_job_rescaled_by_someone_else_since_its_epoch_was_measured_is_left_alone(flink, tmp_path: Path):
    name = "lease-measured"
    job_id = start(flink, name, count=2)  # measured at Count 1, and someone else made it 2 since
    try:
        result = rescale_with_savepoint(flink.client, deployment(name, tmp_path / "sp"), {"Count": 4}, "a1", tmp_path / "j",
                                        measured={"Count": 1, "Parse": 1})  # fmt: skip
        assert result is not None and result.outcome == "noop", result
        assert result.message.startswith("not acted: the job's parallelism changed since the epoch was measured (Count 1 → 2)")
        assert assert_runs_at(flink.client, name, {"Count": 2}) == job_id  # untouched
    finally:
        flink.client.cancel(job_id)
