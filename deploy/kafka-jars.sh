#!/usr/bin/env bash
# One-shot (docker-compose.yaml's kafka-jars): Kafka's jars from Maven Central, pinned in conf/kafka/pom.xml and
# resolved as scripts/kafka.sh resolves them on a machine: the broker's into KAFKA_LIBS (the kafka service's
# classpath), the Flink SQL Kafka connector into FLINK_CONNECTOR (mounted under Flink's lib/). Idempotent: a
# folder that holds this pom's resolution is left as it is.
set -euo pipefail

POM=${DS2_CONF:-/opt/ds2/conf}/kafka/pom.xml
KAFKA_LIBS=${KAFKA_LIBS:-/opt/kafka-libs}
FLINK_CONNECTOR=${FLINK_CONNECTOR:-/opt/flink-connector}
CONNECTOR=flink-sql-connector-kafka-5.0.0-2.2.jar
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
want=$(sha256sum "$POM" | cut -d' ' -f1)
# Maven writes target/ beside its pom: it works on a copy (the pom is mounted read-only).
cp "$POM" "$WORK/pom.xml"

resolve() { # $1 profile, $2 folder the jars land in
  mvn -q -B -f "$WORK/pom.xml" -P "$1" dependency:copy-dependencies -DoutputDirectory="$WORK/$1" \
    -Dmaven.repo.local="$WORK/m2" >"$WORK/$1.log" 2>&1 || {
    cat "$WORK/$1.log" >&2
    echo "kafka-jars: mvn could not resolve the $1 jars (conf/kafka/pom.xml)" >&2
    exit 1
  }
}

# A volume's root cannot be renamed: its old jars go, the new ones come, and the stamp is written last.
install_into() { # $1 folder, then the jars
  local dir=$1
  shift
  mkdir -p "$dir"
  rm -f "$dir/.ds2-resolved" "$dir"/*.jar
  cp "$@" "$dir/"
  echo "$want" >"$dir/.ds2-resolved"
}

if [ "$(cat "$KAFKA_LIBS/.ds2-resolved" 2>/dev/null)" != "$want" ]; then
  resolve broker
  install_into "$KAFKA_LIBS" "$WORK"/broker/*.jar
  echo "kafka-jars: the broker's $(ls "$KAFKA_LIBS" | wc -l) jars in $KAFKA_LIBS"
fi
if [ "$(cat "$FLINK_CONNECTOR/.ds2-resolved" 2>/dev/null)" != "$want" ]; then
  resolve flink-connector
  install_into "$FLINK_CONNECTOR" "$WORK/flink-connector/$CONNECTOR"
  echo "kafka-jars: $CONNECTOR in $FLINK_CONNECTOR"
fi
