"""The warm Spark engine: a client session on a Spark Connect server, its health check and warm-up.

    python -m autoscaler.engine.spark.engine ping sc://localhost:15002      exit 0 when a query answers
    python -m autoscaler.engine.spark.engine warm-up sc://localhost:15002   one DS2 policy run on the
                                                                        bundled wordcount example

The server takes only clients with its token: in the URL (``;token=``, an Airflow connection's password)
or in ``SPARK_CONNECT_AUTHENTICATE_TOKEN``, which pyspark reads. A refused token is one line too.

``scripts/spark.sh`` starts the server and calls both. A server that does not answer is reported in
one line naming the address (and the Airflow connection, when the caller names it), quickly: the
Connect client itself would retry for minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession

from autoscaler.errors import redact_url

# Runtime SQL settings of every client session (the server's static ones are in
# conf/spark/connect-server.conf): the same as policy_session() gives a spark-submit run.
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": os.environ.get("DS2_SHUFFLE_PARTITIONS", "8"),
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.parquet.compression.codec": "snappy",
}
EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "ds2-wordcount"
_URL = re.compile(r"sc://(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>[0-9]{1,5})(?:/(?:;[^\s]*)?)?")


# The server-side session of every policy client (a version-4 UUID, as Spark Connect requires).
SHARED_SESSION = "6f1c2b7e-3d4a-4e5f-9a8b-0c1d2e3f4a5b"


class EngineUnavailable(RuntimeError):
    """The Spark Connect server does not answer."""


def address(url: str) -> tuple[str, int]:
    """``(host, port)`` of a Connect URL (``sc://host:port[/;params]``); ValueError when malformed."""
    match = _URL.fullmatch(url)
    if not match:
        raise ValueError(f"not a Spark Connect URL (sc://host:port): {redact(url)!r}")
    return match["host"].strip("[]"), int(match["port"])


def redact(url: str) -> str:
    """The URL without its token or user parameters (they are secrets)."""
    return redact_url(url)


def check_reachable(url: str, timeout_s: float = 3.0, what: str = "") -> None:
    """Fail at once with one line when nothing accepts connections at the URL's address."""
    host, port = address(url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        named = f" (connection {what})" if what else ""
        raise EngineUnavailable(
            f"the Spark Connect server{named} at {host}:{port} does not answer: {exc.strerror or exc}; "
            "start it with 'scripts/spark.sh up' or fix the connection"
        ) from None


def with_session(url: str, session_id: str = SHARED_SESSION) -> str:
    """``url`` naming the server-side session ``session_id`` (the URL's own parameters kept)."""
    if "session_id=" in url:
        return url
    return f"{url};session_id={session_id}" if "/;" in url else f"{url.rstrip('/')}/;session_id={session_id}"


def connect(url: str, what: str = "") -> SparkSession:
    """A client on the server at ``url``, in the session every policy client shares, with the policy's settings.

    The session is shared and left open when the client stops: Spark 4.2 keeps a Python worker
    factory per Connect session -- its daemon and idle workers, 3 processes and about 200 MB on this
    machine -- until the server stops, even after the session is released (SPARK-54055). A session
    per policy run grew the server by that much every run (``benchmarks/results/backfill-engine.md``).
    """
    check_reachable(url, what=what)
    # Note: this switches pyspark.sql.functions to Connect for the whole process (pyspark decides
    # per process), so a process holds either a Connect session or a classic one, never both.
    spark = SparkSession.builder.remote(with_session(url)).getOrCreate()
    spark.release_session_on_close = False  # stop() closes this client only: the session is the others' too
    try:
        for key, value in SESSION_CONF.items():
            spark.conf.set(key, value)  # the first call to the server: a refused token shows here
    except Exception as exc:  # pyspark's SparkConnectGrpcException, whose text is gRPC's debug dump
        if "UNAUTHENTICATED" not in str(exc):
            raise
        spark.stop()
        host, port = address(url)
        named = f" (connection {what})" if what else ""
        raise EngineUnavailable(
            f"the Spark Connect server{named} at {host}:{port} refused this client: its token is missing or wrong "
            "(the connection's password, or SPARK_CONNECT_AUTHENTICATE_TOKEN; 'scripts/spark.sh token-file' names "
            "the server's)"
        ) from None
    return spark


def ping(url: str) -> None:
    spark = connect(url)
    try:
        spark.range(1).collect()
    finally:
        spark.stop()


def warm_up(url: str) -> float:
    """One policy run on the bundled example through the live code path; its seconds."""
    from autoscaler.collect.ds2_files import read_rates_log, records_to_metrics
    from autoscaler.config.policy_options import PolicyOptions
    from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
    from autoscaler.store import parquet as store
    from autoscaler.store.schemas import METRICS
    from autoscaler.topology import read_topology_csv

    topology_csv = EXAMPLE / "flink_wordcount_topology.csv"
    topology = read_topology_csv(topology_csv)
    metrics = records_to_metrics(read_rates_log(EXAMPLE / "flink_rates.log", topology), topology, "warmup", "ds2-rates-log")
    work = Path(tempfile.mkdtemp(prefix="ds2-warmup-"))
    spark = connect(url)
    try:
        store.write_epochs(work, METRICS, "warmup", metrics)
        epochs = metrics.column("epoch").to_pylist()
        run = StoreRun(str(work), "warmup", min(epochs), max(epochs), "what-if", "warm-up", str(topology_csv), PolicyOptions())
        t0 = time.monotonic()
        decide_stored_epochs(spark, run, topology)
        return time.monotonic() - t0
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("ping", "warm-up"):
        print("usage: python -m autoscaler.engine.spark.engine ping|warm-up sc://HOST:PORT", file=sys.stderr)
        return 2
    command, url = argv
    try:
        if command == "ping":
            ping(url)
        else:
            print(f"warm-up policy run: {warm_up(url):.1f} s")
    except (EngineUnavailable, ValueError) as exc:
        print(f"engine: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
