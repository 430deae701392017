"""A real Kafka 4.4 broker for the tests (``scripts/kafka.sh``), its own instance, stopped by its pid file.

``kafka`` (session): the broker on a free loopback port, in a temp data dir, with SCRAM credentials of its
own; :class:`KafkaBroker` creates topics, runs the load generator as a subprocess and reads a topic back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from autoscaler.kafka.client import ensure_topic, read_client_config
from autoscaler.kafka.generator import rate_between, read_progress
from tests.conftest import ROOT
from tests.helpers import free_port, poll

KAFKA_SH = ROOT / "scripts" / "kafka.sh"


@dataclass
class Generator:
    """A load generator subprocess (``python -m autoscaler.kafka produce``) and its progress file."""

    process: subprocess.Popen
    progress: Path

    def points(self) -> list[tuple[float, int]]:
        return read_progress(self.progress)

    def rate_between(self, start: float, end: float) -> float:
        """The records per second acknowledged between two wall times (its progress is written once a second)."""
        points = poll(f"the generator's progress past {end:.1f}", lambda: (p := self.points()) and p[-1][0] >= end and p, 10, 0.2)
        return rate_between(points, start, end)

    def finish(self, timeout_s: float = 120.0) -> int:
        """Wait for it to end (its duration, or a stop); the records acknowledged."""
        self.process.wait(timeout_s)
        if self.process.returncode != 0:
            raise AssertionError(f"the load generator failed: {self.process.stderr.read() if self.process.stderr else ''}")
        return self.points()[-1][1]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class KafkaBroker:
    data_dir: Path
    env: dict[str, str]
    client_config: Path
    generators: list[Generator] = field(default_factory=list)

    @property
    def config(self) -> dict[str, str]:
        return read_client_config(self.client_config)

    def topic(self, prefix: str, partitions: int) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        ensure_topic(self.config, name, partitions)
        return name

    def produce(self, topic: str, *args: str) -> Generator:
        progress = self.data_dir / f"{topic}.progress.jsonl"
        argv = [sys.executable, "-m", "autoscaler.kafka", "produce", "--client-config", str(self.client_config),
                "--topic", topic, "--progress", str(progress), *args]  # fmt: skip
        gen = Generator(subprocess.Popen(argv, stderr=subprocess.PIPE, text=True), progress)
        self.generators.append(gen)
        return gen

    def consumer(self, group: str | None = None) -> Consumer:
        return Consumer({**self.config, "group.id": group or f"test-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip

    def end_offsets(self, topic: str) -> dict[int, int]:
        c = self.consumer()
        try:
            meta = c.list_topics(topic, timeout=10)
            parts = sorted(meta.topics[topic].partitions)
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        finally:
            c.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory) -> Iterator[KafkaBroker]:
    """A Kafka broker of this test session (scripts/kafka.sh up in a temp data dir, on a free port)."""
    data_dir = tmp_path_factory.mktemp("kafka")
    env = {**os.environ, "KAFKA_DATA_DIR": str(data_dir), "KAFKA_PORT": str(free_port())}
    subprocess.run([str(KAFKA_SH), "up"], check=True, cwd=ROOT, env=env)
    broker = KafkaBroker(data_dir, env, data_dir / "client.properties")
    try:
        yield broker
    finally:
        for gen in broker.generators:
            gen.stop()
        subprocess.run([str(KAFKA_SH), "down"], check=False, cwd=ROOT, env=env)
