"""A lease per Flink job that every autoscaler deployment sees: a row in PostgreSQL with an expiry.

Inside one deployment a job's rescales never overlap: one DAG run at a time, a one-slot pool, and
the journal's lock (:mod:`.lease`). A second deployment, another Airflow with its own jobs config
pointing at the same Flink job, sees none of those. Both can then decide the same scale-up from the
same epoch and restart the job twice, or stop it while the other restarts it. So a rescale first
takes the Flink job's lease in the database every deployment is given (``lease_conn_id``); a
deployment that finds it held does not act, and its epoch records who holds it.

Why a row and not the advisory lock the journals use: one rescale spans several processes (a worker
requests the savepoint, the triggerer waits for it, a worker, maybe another, restarts the job),
and a session lock lives only as long as one process's session. The row names its holder and an
expiry set from the database's clock (no host's clock is trusted). The holder extends it at each
step, to that step's deadline and a margin: :func:`autoscaler.rescale.reconcile.stale_after`, the
time after which an unfinished action has nobody finishing it. A holder that stopped extending it
is gone when it expires, and the lease can be taken.

The lease is keyed by the Flink cluster's REST address and the job's name; two deployments that
reach one cluster by two addresses (a proxy and a direct URL) are not told apart. The holder is the
deployment (its store, which a deployment's hosts share and no two deployments do) and the action.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from autoscaler.errors import InputError
from autoscaler.rescale.lease import CONNECT_TIMEOUT_S
from autoscaler.store.delta import is_store_url

TABLE = "ds2_job_leases"
CREATE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    flink_job text PRIMARY KEY,
    holder text NOT NULL,
    action_id text NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
)"""
# Taken when free, expired, or already this holder's (a retry of the same action, on any host).
TAKE = f"""INSERT INTO {TABLE} AS l (flink_job, holder, action_id, acquired_at, expires_at)
VALUES (%(job)s, %(holder)s, %(action)s, now(), now() + make_interval(secs => %(ttl)s))
ON CONFLICT (flink_job) DO UPDATE SET holder = EXCLUDED.holder, action_id = EXCLUDED.action_id,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.action_id = EXCLUDED.action_id
                       THEN l.acquired_at ELSE now() END,
    expires_at = EXCLUDED.expires_at
WHERE l.expires_at < now() OR (l.holder = EXCLUDED.holder AND l.action_id = EXCLUDED.action_id)
RETURNING 1"""
HOLDER = f"""SELECT holder, action_id, to_char(acquired_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
    ceil(extract(epoch FROM expires_at - now())) FROM {TABLE} WHERE flink_job = %(job)s"""
EXTEND = f"""UPDATE {TABLE} SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE flink_job = %(job)s AND holder = %(holder)s AND action_id = %(action)s RETURNING 1"""
RELEASE = f"DELETE FROM {TABLE} WHERE flink_job = %(job)s AND holder = %(holder)s AND action_id = %(action)s"


@dataclass(frozen=True)
class JobLease:
    """One action's claim on one Flink job."""

    dsn: str  # libpq URI of the database every deployment is given (never printed)
    flink_job: str  # the Flink cluster's REST address and the job's name (:func:`flink_job_key`)
    holder: str  # the deployment (:func:`deployment_of`)
    action_id: str
    ttl_s: float  # how long it holds without being extended

    def __repr__(self) -> str:  # the DSN may hold a password
        return f"JobLease({self.flink_job!r}, holder={self.holder!r}, action={self.action_id!r}, ttl={self.ttl_s:g} s)"

    @property
    def _params(self) -> dict[str, object]:
        return {"job": self.flink_job, "holder": self.holder, "action": self.action_id, "ttl": float(self.ttl_s)}


def flink_job_key(base_url: str, job_name: str) -> str:
    """``scheme://host:port/path#job``: one spelling per cluster address and job, whatever the case of the host."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{host}{port}{parts.path.rstrip('/')}#{job_name}"


def deployment_of(store_root: str | Path) -> str:
    """Which deployment acts: its store's URL (shared by its hosts, never by two deployments), or, for a
    local store (one host's), the host and the folder."""
    if is_store_url(store_root):
        return str(store_root).rstrip("/")
    return f"{socket.gethostname()}:{Path(store_root).resolve()}"


def _connect(lease: JobLease):  # noqa: ANN202 - a psycopg2 connection
    import psycopg2  # on use: only a deployment given a lease database needs it

    try:
        conn = psycopg2.connect(lease.dsn, connect_timeout=CONNECT_TIMEOUT_S, application_name="ds2-job-lease")
    except psycopg2.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"the lease of {lease.flink_job}", f"cannot reach the lease database: {first}") from None
    conn.autocommit = True
    return conn


def take(lease: JobLease) -> str | None:
    """Take (or retake) the lease; None when this action holds it now, else who holds it, in words."""
    import psycopg2

    conn = _connect(lease)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(CREATE)
            except psycopg2.IntegrityError:
                pass  # another deployment created it at the same moment
            cur.execute(TAKE, lease._params)
            if cur.fetchone():
                return None
            cur.execute(HOLDER, lease._params)
            row = cur.fetchone()
            if row is None:  # released between the two statements: take it now
                cur.execute(TAKE, lease._params)
                return None if cur.fetchone() else f"the lease of {lease.flink_job} is held by another action"
            holder, action, since, left = row
            return (f"another autoscaler is rescaling this Flink job: {holder} (action {action}) holds its lease since "
                    f"{since} UTC, for {max(0, int(left))} s more unless it extends it")  # fmt: skip
    finally:
        conn.close()


def extend(lease: JobLease, ttl_s: float | None = None) -> bool:
    """Hold it ``ttl_s`` (default: its own TTL) from now; False when it was lost (it expired and was taken)."""
    conn = _connect(lease)
    try:
        with conn.cursor() as cur:
            cur.execute(EXTEND, {**lease._params, "ttl": float(ttl_s if ttl_s is not None else lease.ttl_s)})
            return cur.fetchone() is not None
    finally:
        conn.close()


def release(lease: JobLease) -> None:
    """Give it back (a lease this action no longer holds is left alone)."""
    conn = _connect(lease)
    try:
        with conn.cursor() as cur:
            cur.execute(RELEASE, lease._params)
    finally:
        conn.close()
