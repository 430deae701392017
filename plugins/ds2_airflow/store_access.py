"""An object store's credentials, from an Airflow connection, for every client the store has.

The store's clients are not all fsspec: the Delta tables are written by delta-rs (Rust's object_store) and read
by Spark's S3A, both of which read the standard ``AWS_*`` environment variables. So the connection (type
``aws``: login and password are the access key and secret, extra's ``endpoint_url`` an S3-compatible server)
is resolved once, by the Amazon provider's own hook -- the one ``ObjectStoragePath`` uses -- and handed to
the task's process environment, which its subprocesses (spark-submit) inherit. Never to a command line or a
log. :func:`check_store` asks the store through ``ObjectStoragePath``, so a wrong connection fails with the
store's and the connection's names.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from autoscaler.errors import InputError


def store_environment(conn_id: str) -> dict[str, str]:
    """``AWS_*`` variables that reach the store the connection ``conn_id`` describes."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    try:
        hook = S3Hook(aws_conn_id=conn_id)
        credentials = hook.get_credentials()
        endpoint = hook.conn_config.get_service_endpoint_url(service_name="s3")
        region = hook.conn_region_name
    except Exception as exc:  # the hook raises botocore's or Airflow's own kinds; the message names the problem
        raise InputError(f"connection {conn_id!r}", f"cannot read the store's credentials: {exc}") from None
    if not credentials.access_key or not credentials.secret_key:
        raise InputError(f"connection {conn_id!r}", "has no access key and secret (login and password)")
    env = {"AWS_ACCESS_KEY_ID": credentials.access_key, "AWS_SECRET_ACCESS_KEY": credentials.secret_key,
           "AWS_REGION": region or "us-east-1"}  # fmt: skip
    if credentials.token:
        env["AWS_SESSION_TOKEN"] = credentials.token
    if endpoint:
        if urlsplit(endpoint).scheme not in ("http", "https"):
            raise InputError(f"connection {conn_id!r}", f"endpoint_url {endpoint!r} is not an http(s) URL")
        env["AWS_ENDPOINT_URL"] = endpoint
        # Plain HTTP only where the connection names such an endpoint (a server on the loopback, a lab).
        env["AWS_ALLOW_HTTP"] = "true" if urlsplit(endpoint).scheme == "http" else "false"
    return env


def lease_dsn(conn_id: str) -> str:
    """The libpq URI of the lease database, the PostgreSQL connection ``conn_id``.

    Not Airflow's own metadata database by default: Airflow 3's task processes do not reach it (their
    ``sql_alchemy_conn`` is withheld), and the lease is taken in the task that rescales.
    """
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # AirflowNotFoundException and the secrets backends' own kinds
        raise InputError(f"connection {conn_id!r}", f"cannot be read: {exc}") from None
    if conn.conn_type not in ("postgres", "postgresql"):
        raise InputError(f"connection {conn_id!r}", f"is of type {conn.conn_type!r}; the lease needs PostgreSQL")
    login = f"{quote(conn.login or '', safe='')}:{quote(conn.password or '', safe='')}@" if conn.login else ""
    return f"postgresql://{login}{conn.host or 'localhost'}:{conn.port or 5432}/{quote(conn.schema or 'postgres', safe='')}"


def check_store(url: str, conn_id: str | None) -> None:
    """The store answers with these credentials (its bucket is listed), else an error naming both."""
    from airflow.sdk import ObjectStoragePath

    bucket = "/".join(url.split("/", 3)[:3])
    via = f" with connection {conn_id!r}" if conn_id else " with the environment's credentials"
    try:
        found = ObjectStoragePath(bucket, conn_id=conn_id).exists()
    except Exception as exc:  # botocore, aiohttp or fsspec kinds
        raise InputError(f"store {url}", f"cannot be reached{via}: {type(exc).__name__}: {exc}") from None
    if not found:  # s3fs answers False for a bucket it may not see as for one that is not there
        raise InputError(f"store {url}", f"cannot be reached{via}: its bucket does not exist or is not readable")
