"""The load generator: the test job's lines, written to a Kafka topic at a rate schedule.

Each record's value is the line the test job's own source makes for its sequence number
(``LineGenerator.line``: ``words`` keys, ``skew`` of them the hot key k0), so a Kafka-fed job carries the
same keys and costs as the built-in source. Records go to the partitions in turn (sequence number modulo
the partition count), so every partition carries the same rate.

The producer is idempotent with ``acks=all``: a retried send is never written twice, so the count the
generator reports is the number of records in the topic, the truth the tests compare a job's counts with.
It writes its progress (records acknowledged, at what time) to a JSON-lines file once a second: the
known rate that the collector's derived arrival is checked against.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, Producer

from autoscaler.kafka.client import KafkaSetupError, check_topic, list_topics
from autoscaler.kafka.schedule import RateSchedule

_MASK = (1 << 64) - 1


def key_of(n: int, keys: int, skew: float) -> int:
    """``LineGenerator.keyOf``: a well-mixed key in [0, keys) for a sequence number; with ``skew``, key 0."""
    z = (n + 0x9E3779B97F4A7C15) & _MASK  # splitmix64's finalizer, in 64-bit arithmetic as Java's long
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    if skew > 0 and (z >> 11) * 2.0**-53 < skew:
        return 0
    signed = z - (1 << 64) if z >> 63 else z
    return signed % keys  # Math.floorMod on the signed long


def line(seq: int, keys: int, words: int, skew: float) -> str:
    s = seq * words
    return " ".join(f"k{key_of(s + i, keys, skew)}" for i in range(words))


@dataclass(frozen=True)
class Load:
    topic: str
    schedule: RateSchedule
    start_s: float  # wall clock of the schedule's 0 s
    keys: int = 1000
    words: int = 1
    skew: float = 0.0
    duration_s: float | None = None  # from start_s; None: until stopped


class Generator:
    """Writes ``load`` into its topic from sequence number 0, on the schedule, until stopped."""

    TICK_S = 0.01

    def __init__(self, config: dict[str, str], load: Load, progress: Path | None = None) -> None:
        check_topic(load.topic)
        partitions = list_topics(config, 10.0).get(load.topic)
        if partitions is None:
            raise KafkaSetupError(f"topic {load.topic} does not exist")
        self.load, self.partitions, self.progress = load, partitions, progress
        self.producer = Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                  "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})  # fmt: skip
        self.sent = 0
        self.acked = 0
        self.failed: str | None = None
        self.stop = threading.Event()

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is None:
            self.acked += 1
        elif self.failed is None:
            self.failed = err.str()

    def _write_progress(self, now: float) -> None:
        if self.progress is None:
            return
        with self.progress.open("a") as f:
            f.write(json.dumps({"t": now, "acked": self.acked, "sent": self.sent}) + "\n")

    def run(self) -> int:
        """Produce until stopped or ``duration_s``; flush; return the records acknowledged."""
        load, base = self.load, self.load.schedule.cumulative(0.0)
        next_progress = 0.0
        while not self.stop.is_set():
            now = time.time()
            elapsed = now - load.start_s
            if load.duration_s is not None and elapsed >= load.duration_s:
                elapsed = load.duration_s
                self.stop.set()
            due = int(load.schedule.cumulative(max(elapsed, 0.0)) - base)
            while self.sent < due:
                value = line(self.sent, load.keys, load.words, load.skew)
                try:
                    self.producer.produce(load.topic, value=value.encode(), partition=self.sent % self.partitions,
                                          on_delivery=self._delivered)  # fmt: skip
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                self.sent += 1
            self.producer.poll(0)
            if self.failed:
                raise KafkaSetupError(f"topic {load.topic}: a send failed: {self.failed}")
            if now >= next_progress:
                self._write_progress(now)
                next_progress = now + 1.0
            self.stop.wait(self.TICK_S)
        left = self.producer.flush(60)
        self._write_progress(time.time())
        if left or self.failed:
            raise KafkaSetupError(f"topic {load.topic}: {left} records not acknowledged ({self.failed or 'timeout'})")
        return self.acked


def run_until_signalled(config: dict[str, str], load: Load, progress: Path | None) -> int:
    gen = Generator(config, load, progress)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: gen.stop.set())
    if progress is not None:
        progress.parent.mkdir(parents=True, exist_ok=True)
        progress.unlink(missing_ok=True)
    return gen.run()
