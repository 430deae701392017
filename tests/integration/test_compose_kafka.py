"""docker-compose.yaml's kafka service, run here: its entrypoint (``deploy/kafka-broker.sh``) starts a real broker
from the jars ``scripts/kafka.sh`` resolves from the same pom (no container engine runs here).

With the container's paths pointed at a temp folder and free loopback ports: the broker answers a SCRAM client
whose login is the client config the script wrote (owner-only, for the Airflow services); the password is on no
command line; a second start on the same data answers again (the storage is formatted once); a bad password is
refused in one line before anything starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import free_port, poll

pytestmark = [pytest.mark.kafka]
BROKER_SH = ROOT / "deploy" / "kafka-broker.sh"
PASSWORD = "compose-test-" + os.urandom(8).hex()


def answers(client: Path) -> bool:
    probe = [sys.executable, "-m", "autoscaler.kafka", "probe", "--client-config", str(client), "--timeout", "3"]
    return subprocess.run(probe, cwd=ROOT, capture_output=True).returncode == 0


def start(env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(BROKER_SH)], cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)


def test_the_compose_kafka_entrypoint_runs_a_scram_broker_and_formats_once(kafka, tmp_path):
    # The session broker (scripts/kafka.sh up) has resolved the jars this entrypoint runs from.
    libs = ROOT / "build" / "kafka-4.4.0" / "libs"
    client = tmp_path / "shared" / "client.properties"
    env = {**os.environ, "KAFKA_PASSWORD": PASSWORD, "KAFKA_LIBS": str(libs), "KAFKA_DATA": str(tmp_path / "data"),
           "KAFKA_HOST": "127.0.0.1", "KAFKA_PORT": str(free_port()), "KAFKA_CONTROLLER_PORT": str(free_port()),
           "CLIENT_CONFIG": str(client), "DS2_CONF": str(ROOT / "conf")}  # fmt: skip
    log = tmp_path / "broker.log"
    for attempt in ("first", "again"):
        broker = start(env, log)
        try:
            poll(f"the compose broker answering ({attempt})", lambda b=broker: b.poll() is None and answers(client), 90, 1)
            assert f"sasl.password={PASSWORD}" in client.read_text()
            assert client.stat().st_mode & 0o077 == 0 and (tmp_path / "data" / "server.properties").stat().st_mode & 0o077 == 0
            assert PASSWORD not in Path(f"/proc/{broker.pid}/cmdline").read_bytes().decode(errors="replace")
        finally:
            stop(broker)
    assert log.read_text().count("Formatting metadata directory") == 1 and not (tmp_path / "data" / ".format-args").exists()
    bad = subprocess.run([str(BROKER_SH)], cwd=ROOT, env={**env, "KAFKA_PASSWORD": "change-me"}, capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "KAFKA_PASSWORD" in bad.stderr
