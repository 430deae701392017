"""The warm engine (scripts/spark.sh: a Spark Connect server from pyspark's own jars).

The same store run gives the same decisions through the Connect server as through spark-submit
(the two engines of the policy task); a server that is down is reported in one line naming the
connection and the address, at once. pyspark picks Connect or classic per process, so the
Connect client runs in a subprocess here (the Airflow task is a process of its own too).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from autoscaler.collect.ds2_files import read_rates_log, records_to_metrics
from autoscaler.engine.spark import engine
from autoscaler.engine.spark.run import COLLECT_EPOCHS
from autoscaler.store import parquet as store
from autoscaler.store.schemas import DECISIONS, METRICS
from autoscaler.topology import read_topology_csv
from tests.conftest import RATES_LOG, ROOT, TOPOLOGY_CSV

pytestmark = [pytest.mark.spark, pytest.mark.slow]
VOLATILE = {"decided_at", "run_id"}
CONNECT_RUN = """
import sys, time
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.engine.spark import engine
from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
url, store, first, last, topology, out = sys.argv[1:]
spark = engine.connect(url, what="spark_test")
t0 = time.monotonic()
decide_stored_epochs(spark, StoreRun(store, "wc", int(first), int(last), "live", "connect", topology,
                                     PolicyOptions(factor=0.1), out))
print(f"{time.monotonic() - t0:.2f}")
spark.stop()
"""


def _decisions(root):
    rows = store.read_epochs(root, DECISIONS, "wc").to_pylist()
    return sorted(({k: v for k, v in r.items() if k not in VOLATILE} for r in rows), key=lambda r: (r["epoch"], r["operator_id"]))


def test_connect_engine_decides_like_spark_submit(spark_engine, tmp_path):
    topology = read_topology_csv(TOPOLOGY_CSV)
    metrics = records_to_metrics(read_rates_log(RATES_LOG, topology), topology, "wc", "ds2-rates-log")
    store.write_epochs(tmp_path / "store", METRICS, "wc", metrics)
    epochs = metrics.column("epoch").to_pylist()
    first, last = str(min(epochs)), str(max(epochs))
    venv_bin = ROOT / ".venv" / "bin"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONF_DIR": str(ROOT / "conf" / "spark"),
           "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}", "PYSPARK_PYTHON": sys.executable,
           **spark_engine.client_env}  # fmt: skip

    submit = [
        str(venv_bin / "spark-submit"), str(ROOT / "spark_jobs" / "ds2_policy.py"),
        "--topology", str(TOPOLOGY_CSV), "--metrics-store", "--store", str(tmp_path / "store"), "--job", "wc",
        "--from-epoch", first, "--to-epoch", last, "--run-type", "live", "--factor", "0.1",
        "--decisions-store", str(tmp_path / "classic"),
    ]  # fmt: skip
    res = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    args = [spark_engine.url, str(tmp_path / "store"), first, last, str(TOPOLOGY_CSV), str(tmp_path / "connect")]
    res = subprocess.run([sys.executable, "-c", CONNECT_RUN, *args], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    classic, connect = _decisions(tmp_path / "classic"), _decisions(tmp_path / "connect")
    assert classic and connect == classic, json.dumps([classic[:2], connect[:2]], default=str)
    assert {r["run_type"] for r in connect} == {"live"}
    print(f"policy run through the warm engine: {res.stdout.strip()} s")
    # A range past COLLECT_EPOCHS is decided block by block where the blocks are stored (engine.spark.blocks):
    # through the Connect server, its Python workers read and stage the blocks themselves.
    args[3], args[5] = str(int(first) + COLLECT_EPOCHS), str(tmp_path / "connect-long")
    res = subprocess.run([sys.executable, "-c", CONNECT_RUN, *args], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _decisions(tmp_path / "connect-long") == classic
    assert spark_engine.script("status").stdout.startswith(f"spark: running (local), {spark_engine.url}")


def _server_python_processes(spark_engine) -> int:
    """The Python processes under the Connect server (its workers' daemons and idle workers)."""
    import psutil

    pid = int((spark_engine.data_dir / "pids" / "connect.pid").read_text().split()[0])
    return sum(1 for p in psutil.Process(pid).children(recursive=True) if p.name().startswith("python"))


def test_policy_runs_share_one_session_so_the_server_does_not_grow_with_each(spark_engine, tmp_path):
    # Spark 4.2 keeps a Python worker factory per Connect session until the server stops (SPARK-54055):
    # a session per run left 3 more Python processes on the server after every run.
    topology = read_topology_csv(TOPOLOGY_CSV)
    metrics = records_to_metrics(read_rates_log(RATES_LOG, topology), topology, "wc", "ds2-rates-log")
    store.write_epochs(tmp_path / "store", METRICS, "wc", metrics)
    epochs = metrics.column("epoch").to_pylist()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, **spark_engine.client_env}
    counts = []
    for k in range(3):
        args = [spark_engine.url, str(tmp_path / "store"), str(min(epochs)), str(max(epochs)), str(TOPOLOGY_CSV),
                str(tmp_path / f"out{k}")]  # fmt: skip
        res = subprocess.run([sys.executable, "-c", CONNECT_RUN, *args], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        counts.append(_server_python_processes(spark_engine))
    assert counts[0] > 0 and counts[-1] == counts[0], counts


def test_engine_down_is_one_line_naming_connection_and_address():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(engine.EngineUnavailable) as caught:
        engine.check_reachable(f"sc://127.0.0.1:{port}/;token=S3cret", what="spark_ds2")
    assert time.monotonic() - t0 < 10  # not the Connect client's minutes of retries
    message = str(caught.value)
    assert "\n" not in message and "spark_ds2" in message and f"127.0.0.1:{port}" in message, message
    assert "S3cret" not in message
    assert engine.main(["ping", f"sc://127.0.0.1:{port}"]) == 1


@pytest.mark.parametrize("url", ["sc://host", "http://h:1", "sc://h:1\n", "sc://h:99999x", "sc://a b:1"])
def test_malformed_connect_urls_are_refused(url):
    with pytest.raises(ValueError, match="not a Spark Connect URL"):
        engine.address(url)


def test_redact_hides_token_and_user():
    assert engine.redact("sc://h:1/;user_id=bob;token=abc;use_ssl=true") == "sc://h:1/;user_id=***;token=***;use_ssl=true"


def test_the_engine_lets_in_only_clients_with_its_token(spark_engine):
    """The token is given to the server in its environment (never on its command line) and to clients as the
    connection's password or SPARK_CONNECT_AUTHENTICATE_TOKEN; a client without it, or with another, is
    refused in one line."""
    pid = int((spark_engine.data_dir / "pids" / "connect.pid").read_text().split()[0])
    assert spark_engine.token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert oct((spark_engine.data_dir / "connect-token").stat().st_mode & 0o777) == "0o600"
    base = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}
    for token in (None, "not-the-token"):
        env = {**base, **({"SPARK_CONNECT_AUTHENTICATE_TOKEN": token} if token else {})}
        res = subprocess.run([sys.executable, "-m", "autoscaler.engine.spark.engine", "ping", spark_engine.url], env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert res.returncode == 1, res.stderr[-2000:]
        assert res.stderr.strip().splitlines() == [
            f"engine: error: the Spark Connect server at {spark_engine.url.removeprefix('sc://')} "
            "refused this client: its token is missing or wrong (the connection's password, or "
            "SPARK_CONNECT_AUTHENTICATE_TOKEN; 'scripts/spark.sh token-file' names the server's)"
        ], res.stderr[-2000:]
    res = subprocess.run([sys.executable, "-m", "autoscaler.engine.spark.engine", "ping", spark_engine.url],
                         env={**base, **spark_engine.client_env}, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]


@pytest.mark.cluster  # make cluster-test: the cluster mode's tests (tests/cluster drives the same cluster end to end)
def test_policy_runs_on_a_standalone_cluster(tmp_path):
    """``scripts/spark.sh up --cluster``: a master, two workers and the Connect server on that master (the
    compose topology as local processes); the policy's executors run on the workers."""
    from tests.conftest import start_spark_engine

    cluster = start_spark_engine(tmp_path / "spark", "--cluster")
    try:
        status = cluster.script("status").stdout
        assert status.startswith(f"spark: running (cluster), {cluster.url}") and "master: spark://127.0.0.1:" in status
        webui = re.search(r"web UI (http://127\.0\.0\.1:\d+)", status)[1]
        topology = read_topology_csv(TOPOLOGY_CSV)
        metrics = records_to_metrics(read_rates_log(RATES_LOG, topology), topology, "wc", "ds2-rates-log")
        store.write_epochs(tmp_path / "store", METRICS, "wc", metrics)
        epochs = metrics.column("epoch").to_pylist()
        args = [cluster.url, str(tmp_path / "store"), str(min(epochs)), str(max(epochs)), str(TOPOLOGY_CSV),
                str(tmp_path / "decisions")]  # fmt: skip
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **cluster.client_env}
        res = subprocess.run([sys.executable, "-c", CONNECT_RUN, *args], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        decisions = _decisions(tmp_path / "decisions")
        assert decisions and {d["status"] for d in decisions} == {"ok"}
        master = json.loads(urllib.request.urlopen(f"{webui}/json/", timeout=10).read())
        assert [w["state"] for w in master["workers"]] == ["ALIVE", "ALIVE"]
        assert "workers: 2 running (worker-1 worker-2)" in status
        apps = [a["name"] for a in master["activeapps"]]
        assert apps == ["ds2-spark-connect"], master["activeapps"]  # the Connect server's executors run on the worker
        assert sum(w["coresused"] for w in master["workers"]) == 2  # spark.cores.max: both workers' cores
        print(f"policy run on the standalone cluster: {res.stdout.strip()} s")
    finally:
        cluster.script("down", check=False)
    assert cluster.script("status", check=False).returncode == 3
