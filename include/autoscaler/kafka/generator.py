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

import itertools
import json
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, Producer

from autoscaler.kafka import nexmark
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
    # "lines": the test job's lines into ``topic``; "nexmark": Nexmark's events, each kind into the topic
    # ``<topic>-person``, ``<topic>-auction`` or ``<topic>-bid`` (topic is then their prefix).
    kind: str = "lines"

    def topics(self) -> list[str]:
        return [self.topic] if self.kind == "lines" else [f"{self.topic}-{k}" for k in nexmark.TOPICS]


class Generator:
    """Writes ``load`` into its topic from sequence number 0, on the schedule, until stopped."""

    TICK_S = 0.01

    def __init__(self, config: dict[str, str], load: Load, progress: Path | None = None) -> None:
        if load.kind not in ("lines", "nexmark"):
            raise KafkaSetupError(f"load kind {load.kind!r}: must be lines or nexmark")
        existing = list_topics(config, 10.0)
        self.partitions: dict[str, int] = {}
        for topic in load.topics():
            check_topic(topic)
            if topic not in existing:
                raise KafkaSetupError(f"topic {topic} does not exist")
            self.partitions[topic] = existing[topic]
        self.load, self.progress = load, progress
        self.sent_to = dict.fromkeys(self.partitions, 0)
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

    def _record(self, seq: int, now: float) -> tuple[str, bytes]:
        load = self.load
        if load.kind == "lines":
            return load.topic, line(seq, load.keys, load.words, load.skew).encode()
        kind, event = nexmark.event(seq, now)
        return f"{load.topic}-{kind}", json.dumps(event, separators=(",", ":")).encode()

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
                topic, value = self._record(self.sent, now)
                try:
                    self.producer.produce(topic, value=value, partition=self.sent_to[topic] % self.partitions[topic],
                                          on_delivery=self._delivered)  # fmt: skip
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                self.sent += 1
                self.sent_to[topic] += 1
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


def read_progress(path: Path) -> list[tuple[float, int]]:
    """A generator's progress file: (wall time, records acknowledged so far), once a second."""
    if not path.exists():
        return []
    points = (json.loads(s) for s in path.read_text().splitlines() if s.strip())
    return [(p["t"], p["acked"]) for p in points]


def acked_at(points: list[tuple[float, int]], t: float) -> float:
    """Records acknowledged by wall time ``t``, interpolated between progress points (the known truth)."""
    if not points or not points[0][0] <= t <= points[-1][0]:
        raise ValueError(f"the generator's progress does not cover {t:.1f}")
    for (t0, a0), (t1, a1) in itertools.pairwise(points):
        if t0 <= t <= t1:
            return a0 + (a1 - a0) * (t - t0) / ((t1 - t0) or 1.0)
    return float(points[-1][1])


def rate_between(points: list[tuple[float, int]], start: float, end: float) -> float:
    """The generator's rate (records acknowledged per second) between two wall times."""
    return (acked_at(points, end) - acked_at(points, start)) / (end - start)
