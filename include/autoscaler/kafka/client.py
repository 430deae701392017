"""The broker's client config (``scripts/kafka.sh client-config``) and the admin calls the test bed needs.

confluent-kafka (librdkafka) rather than a hand-written client: it is Confluent's maintained binding of
the C client, and it produces tens of thousands of records a second from one Python thread.
"""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

# The keys scripts/kafka.sh writes, in librdkafka's names; a Java client maps them to its own.
CLIENT_KEYS = ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password")
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class KafkaSetupError(Exception):
    """A client config, topic or broker the test bed cannot use; the message names it (never a secret)."""


def read_client_config(path: Path) -> dict[str, str]:
    """``key=value`` lines (``#`` comments) of a client config, with every key of ``CLIENT_KEYS``."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise KafkaSetupError(f"client config {path}: cannot be read ({e.strerror}); 'scripts/kafka.sh up' writes it") from None
    config: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise KafkaSetupError(f"client config {path}, line {n}: not key=value")
        config[key.strip()] = value.strip()
    missing = [k for k in CLIENT_KEYS if not config.get(k)]
    if missing:
        raise KafkaSetupError(f"client config {path}: missing {', '.join(missing)}")
    return config


def check_topic(name: str) -> str:
    if not TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise KafkaSetupError(f"topic {name!r}: Kafka topic names are 1-249 of letters, digits, '.', '_' and '-'")
    return name


def admin(config: dict[str, str]) -> AdminClient:
    return AdminClient(dict(config))


def list_topics(config: dict[str, str], timeout_s: float) -> dict[str, int]:
    """Topic -> partition count, as the broker reports them (its internal topics left out)."""
    try:
        meta = admin(config).list_topics(timeout=timeout_s)
    except KafkaException as e:
        raise KafkaSetupError(f"broker {config['bootstrap.servers']}: {e.args[0].str()}") from None
    return {t: len(m.partitions) for t, m in meta.topics.items() if not t.startswith("__")}


def ensure_topic(config: dict[str, str], name: str, partitions: int, timeout_s: float = 30.0) -> bool:
    """Create ``name`` with ``partitions`` partitions unless it exists; True when it was created.

    An existing topic with another partition count is an error: a test or run that asked for 4 partitions
    must not quietly read 8.
    """
    check_topic(name)
    if partitions < 1:
        raise KafkaSetupError(f"topic {name}: partitions must be at least 1, got {partitions}")
    existing = list_topics(config, timeout_s)
    if name in existing:
        if existing[name] != partitions:
            raise KafkaSetupError(f"topic {name} exists with {existing[name]} partitions, not {partitions}")
        return False
    client = admin(config)  # held until the future is done: a collected client cancels its requests
    future = client.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as e:
        if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise KafkaSetupError(f"topic {name}: {e.args[0].str()}") from None
        return False
    return True


def delete_topic(config: dict[str, str], name: str, timeout_s: float = 30.0) -> None:
    check_topic(name)
    client = admin(config)
    future = client.delete_topics([name], operation_timeout=timeout_s)[name]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as e:
        if e.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
            raise KafkaSetupError(f"topic {name}: {e.args[0].str()}") from None
