#!/usr/bin/env bash
# The kafka service of docker-compose.yaml: one combined KRaft controller+broker with conf/kafka/server.properties,
# as scripts/kafka.sh runs it on a machine. Clients log in with SASL/SCRAM-SHA-256 as user ds2 with KAFKA_PASSWORD.
# The storage is formatted once, with that user; the password reaches the format tool through a java @argument
# file (owner-only, removed after), never a command line. The clients' config (the login, owner-only, owned by
# CLIENT_UID) is written to CLIENT_CONFIG, where the Airflow services read it (a job's kafka_client_config).
#
# Environment (the container's defaults): KAFKA_PASSWORD (required), KAFKA_LIBS (/opt/kafka-libs, from kafka-jars),
# KAFKA_DATA (/var/lib/kafka), KAFKA_HOST (kafka: the name clients reach it by), KAFKA_PORT (9092),
# KAFKA_CONTROLLER_PORT (9093, loopback), CLIENT_CONFIG (/opt/ds2/data/kafka/client.properties), CLIENT_UID
# (the Airflow uid), KAFKA_HEAP (512m), DS2_CONF (/opt/ds2/conf).
set -euo pipefail

die() { echo "kafka-broker: $*" >&2; exit 1; }
PASSWORD=${KAFKA_PASSWORD:-}
# It goes into a JAAS line and a properties file: no quotes, no backslashes, no blanks.
[[ $PASSWORD =~ ^[A-Za-z0-9_-]{16,}$ ]] || die "KAFKA_PASSWORD must be at least 16 letters, digits, - or _ (see .env.example)"
[ "$PASSWORD" != change-me ] || die "KAFKA_PASSWORD is still the placeholder change-me"
CONF_DIR=${DS2_CONF:-/opt/ds2/conf}/kafka
LIBS=${KAFKA_LIBS:-/opt/kafka-libs}
DATA=${KAFKA_DATA:-/var/lib/kafka}
HOST=${KAFKA_HOST:-kafka}
PORT=${KAFKA_PORT:-9092}
CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
CLIENT=${CLIENT_CONFIG:-/opt/ds2/data/kafka/client.properties}
HEAP=${KAFKA_HEAP:-512m}
[[ $HOST =~ ^[A-Za-z0-9.-]+$ ]] || die "KAFKA_HOST must be a host name, got '$HOST'"
[[ $PORT =~ ^[0-9]+$ && $CONTROLLER_PORT =~ ^[0-9]+$ ]] || die "KAFKA_PORT and KAFKA_CONTROLLER_PORT must be numbers"
[[ $HEAP =~ ^[0-9]+[mg]$ ]] || die "KAFKA_HEAP must look like 512m or 1g, got '$HEAP'"
compgen -G "$LIBS/kafka_*.jar" >/dev/null || die "no broker jars in $LIBS: the kafka-jars service resolves them"
[ -f "$CONF_DIR/broker.sh" ] || die "no $CONF_DIR/broker.sh: conf/kafka/ is mounted there"
# shellcheck source=conf/kafka/broker.sh
source "$CONF_DIR/broker.sh"
USER_NAME=ds2
CONF=$DATA/server.properties

umask 077
mkdir -p "$DATA"
if [ ! -f "$DATA/logs/meta.properties" ] && ! grep -q '^[^-]' "$DATA/cluster-id" 2>/dev/null; then
  kafka_new_cluster_id >"$DATA/cluster-id"
fi
kafka_server_properties "deploy/kafka-broker.sh: conf/kafka/server.properties and this broker's settings (owner-only: a login)" \
  "$CONF_DIR/server.properties" 0.0.0.0 "$HOST" "$PORT" "$CONTROLLER_PORT" "$DATA/logs" "$USER_NAME" "$PASSWORD" >"$CONF"
mkdir -p "$(dirname "$CLIENT")"
[ -z "${CLIENT_UID:-}" ] || chown "$CLIENT_UID" "$(dirname "$CLIENT")"
kafka_client_properties "deploy/kafka-broker.sh: how a client logs in to the kafka service (librdkafka's names; owner-only)" \
  "$HOST" "$PORT" "$USER_NAME" "$PASSWORD" >"$CLIENT.tmp"
[ -z "${CLIENT_UID:-}" ] || chown "$CLIENT_UID" "$CLIENT.tmp"
mv "$CLIENT.tmp" "$CLIENT"

JVM=(-Xms"$HEAP" -Xmx"$HEAP" -Djava.awt.headless=true "-Dlog4j2.configurationFile=$CONF_DIR/log4j2.properties" -cp "$LIBS/*")
if [ ! -f "$DATA/logs/meta.properties" ]; then
  ARGS=$DATA/.format-args
  kafka_format_args "$(cat "$DATA/cluster-id")" "$CONF" "$USER_NAME" "$PASSWORD" >"$ARGS"
  java "${JVM[@]}" "@$ARGS" || { rm -f "$ARGS"; die "formatting the storage in $DATA/logs failed"; }
  rm -f "$ARGS"
fi
exec java "${JVM[@]}" kafka.Kafka "$CONF"
