"""A lease that every host of a deployment sees: a PostgreSQL session-level advisory lock.

The local rescale journal is guarded by ``flock``, which only processes on one host see. When the journals
live on an object store (the store is a URL: :mod:`autoscaler.store.delta`), two attempts of one action can
run on two hosts (a Celery task retried on another worker while the first still runs), so they are
excluded through PostgreSQL instead, the database every Airflow component already reaches.

Why an advisory lock, not a row: it is held by the session, so PostgreSQL releases it the moment the
holder's connection ends. A killed worker frees it, as a killed process frees a ``flock``, and no expiry
time has to be guessed. The server notices a host that vanished without closing its connection through
TCP keepalives, set here per session to about a minute (:data:`KEEPALIVE`), not the system's two hours.

``DS2_LEASE_DSN`` (a libpq URI) names the database; the Airflow side sets it from the ``lease_conn_id``
setting's PostgreSQL connection.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from autoscaler.errors import InputError

LEASE_DSN_ENV = "DS2_LEASE_DSN"
# The advisory lock's first key: this project's locks apart from any other user's of the database
# (Airflow takes single-key advisory locks, a separate key space from two-key ones).
NAMESPACE = 0x0D52
# Server-side keepalive (idle s, interval s, probes): a holder whose host vanished is released after ~1 min.
KEEPALIVE = (30, 10, 3)
CONNECT_TIMEOUT_S = 10


def lease_key(name: str) -> int:
    """A stable signed 32-bit key for ``name`` (the second key of the advisory lock)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big", signed=True)


@contextmanager
def held(name: str, what: str) -> Iterator[None]:
    """Hold the lease ``name`` for the block, or fail at once with an error naming ``what`` when another holds it."""
    dsn = os.environ.get(LEASE_DSN_ENV, "").strip()
    if not dsn:
        setting = f"set lease_conn_id (a PostgreSQL connection) or {LEASE_DSN_ENV}"
        raise InputError(what, f"needs a lease every host sees, and none is set: {setting}")
    import psycopg2  # on use: only a deployment whose journals are shared needs it

    try:
        conn = psycopg2.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, application_name="ds2-lease")
    except psycopg2.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(what, f"cannot reach the lease database: {first}") from None
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            idle, interval, count = KEEPALIVE
            cur.execute("SELECT set_config('tcp_keepalives_idle', %s, false), set_config('tcp_keepalives_interval', %s, false),"
                        " set_config('tcp_keepalives_count', %s, false)", (str(idle), str(interval), str(count)))  # fmt: skip
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", (NAMESPACE, lease_key(name)))
            if not cur.fetchone()[0]:
                raise InputError(what, f"the lease {name!r} is held by another process (on this or another host)")
        yield
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", (NAMESPACE, lease_key(name)))
    finally:
        conn.close()  # ends the session: the lock goes with it whatever happened above
