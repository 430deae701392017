"""scripts/kafka.sh: a broker that is idempotent to start, comes back after a kill with its data, and
lets in only a client with this install's SCRAM password."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from autoscaler.kafka.client import KafkaSetupError, ensure_topic, list_topics, read_client_config
from tests.conftest import ROOT
from tests.helpers import free_port, poll
from tests.integration.kafka_fixtures import KAFKA_SH

pytestmark = [pytest.mark.kafka, pytest.mark.kafka_long, pytest.mark.slow]  # make test-kafka


def kafka_sh(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KAFKA_SH), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_the_broker_starts_once_comes_back_after_a_kill_and_wants_its_password(tmp_path):
    env = {**os.environ, "KAFKA_DATA_DIR": str(tmp_path / "kafka"), "KAFKA_PORT": str(free_port())}
    try:
        up = kafka_sh(env, "up")
        assert up.returncode == 0, up.stderr
        pid = (tmp_path / "kafka" / "kafka.pid").read_text().split()[0]
        again = kafka_sh(env, "up")
        assert again.returncode == 0 and "already running" in again.stderr, again.stderr
        assert (tmp_path / "kafka" / "kafka.pid").read_text().split()[0] == pid

        client = tmp_path / "kafka" / "client.properties"
        assert stat.S_IMODE(client.stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "kafka" / "server.properties").stat().st_mode) == 0o600
        config = read_client_config(client)
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert config["sasl.password"] not in args and config["sasl.password"] not in up.stderr
        assert ensure_topic(config, "kept", 3) is True and ensure_topic(config, "kept", 3) is False
        with pytest.raises(KafkaSetupError, match="exists with 3 partitions, not 4"):
            ensure_topic(config, "kept", 4)
        with pytest.raises(KafkaSetupError, match="broker"):
            list_topics({**config, "sasl.password": "wrong"}, 5)

        os.kill(int(pid), signal.SIGKILL)
        poll("the killed broker to be seen stopped", lambda: kafka_sh(env, "status").returncode == 3, 30)
        back = kafka_sh(env, "up")
        assert back.returncode == 0, back.stderr
        assert read_client_config(client)["bootstrap.servers"] == config["bootstrap.servers"]
        assert list_topics(config, 10)["kept"] == 3  # its data survived
        assert kafka_sh(env, "status").returncode == 0
    finally:
        kafka_sh(env, "down")
    assert kafka_sh(env, "status").returncode == 3
