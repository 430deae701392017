#!/usr/bin/env bash
# The project's own Apache Kafka 4.4 broker: one combined KRaft controller+broker, from its Maven Central
# jars (conf/kafka/pom.xml, resolved once into build/kafka-4.4.0/), loopback only. Clients log in with
# SASL/SCRAM-SHA-256 as a user whose password is generated per install; the controller listener is
# broker-internal. A system Kafka, and any port already taken, are left alone.
#
#   scripts/kafka.sh install     resolve the broker's jars (and the connector, when Flink is installed)
#   scripts/kafka.sh install-connector
#                                the Flink Kafka connector into Flink's lib/ (scripts/flink.sh install calls it)
#   scripts/kafka.sh up          install, write the config and format the storage once, start the broker,
#                                wait until a SCRAM client lists its topics (idempotent; a dead broker
#                                is started again on its port, with its data)
#   scripts/kafka.sh down        stop the broker this data dir started (by its pid)
#   scripts/kafka.sh status      exit 0 running and answering, 3 stopped, 1 running but not answering
#   scripts/kafka.sh client-config
#                                print the path of the client config (bootstrap servers, SASL mechanism,
#                                user and password; owner-only) that the load generator, the tests and
#                                the Kafka-fed Flink jobs read
#
# Environment: KAFKA_DATA_DIR (data/kafka: server.properties and client.properties, mode 0600; the log
# dirs, the broker's log and pid file), KAFKA_PORT (the client listener; the first free port from 29092
# when unset, kept across restarts while it stays free; the controller takes the next free one),
# KAFKA_START_TIMEOUT (60 s), KAFKA_STOP_TIMEOUT (30 s), KAFKA_HEAP (512m).
set -euo pipefail

SCRIPT_NAME=kafka.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=conf/kafka/broker.sh
source "$ROOT/conf/kafka/broker.sh"

KAFKA_VERSION=4.4.0
FLINK_HOME=$ROOT/build/flink-2.3.0
KAFKA_HOME=$ROOT/build/kafka-$KAFKA_VERSION
CONNECTOR=flink-sql-connector-kafka-5.0.0-2.2.jar
POM=$ROOT/conf/kafka/pom.xml
DATA_DIR=$(realpath -m "${KAFKA_DATA_DIR:-$ROOT/data/kafka}")
CONF=$DATA_DIR/server.properties     # generated: conf/kafka/server.properties + this instance's settings
CLIENT=$DATA_DIR/client.properties   # what clients need to log in (librdkafka's key names)
STATE=$DATA_DIR/ds2-kafka.env        # ports, cluster id and user of this instance
PID_FILE=$DATA_DIR/kafka.pid
LOG=$DATA_DIR/kafka.log
LOG_DIRS=$DATA_DIR/logs
# Below Linux's ephemeral range, as scripts/postgres.sh's port.
DEFAULT_PORT=29092
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-60}
KAFKA_STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
check_uints KAFKA_START_TIMEOUT KAFKA_STOP_TIMEOUT
START_TIMEOUT=$KAFKA_START_TIMEOUT
STOP_TIMEOUT=$KAFKA_STOP_TIMEOUT
[ -z "${KAFKA_PORT:-}" ] || check_uints KAFKA_PORT
HEAP=${KAFKA_HEAP:-512m}
[[ $HEAP =~ ^[0-9]+[mg]$ ]] || die "KAFKA_HEAP must look like 512m or 1g, got '$HEAP'"
USER_NAME=ds2

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

cmd_install() {
  [ $# -eq 0 ] || die "install takes no arguments"
  local stamp=$KAFKA_HOME/.ds2-resolved want
  want=$(sha256sum "$POM" | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    mkdir -p "$KAFKA_HOME"
    maven_resolve "$POM" broker "$KAFKA_HOME/libs"
    echo "$want" >"$stamp"
  fi
  [ ! -d "$FLINK_HOME/lib" ] || cmd_install_connector
}

cmd_install_connector() {
  [ $# -eq 0 ] || die "install-connector takes no arguments"
  [ -d "$FLINK_HOME/lib" ] || die "no Flink in $FLINK_HOME: 'scripts/flink.sh install' first"
  [ ! -f "$FLINK_HOME/lib/$CONNECTOR" ] || return 0
  maven_resolve "$POM" flink-connector "$KAFKA_HOME/flink-connector"
  cp "$KAFKA_HOME/flink-connector/$CONNECTOR" "$FLINK_HOME/lib/$CONNECTOR.tmp"
  mv "$FLINK_HOME/lib/$CONNECTOR.tmp" "$FLINK_HOME/lib/$CONNECTOR"
  log "installed $CONNECTOR into $FLINK_HOME/lib (a Flink cluster running now sees it after a restart)"
}

read_state() {
  RECORDED_PORT= CONTROLLER_PORT= CLUSTER_ID= PASSWORD=
  [ -f "$STATE" ] || return 0
  local k v
  while IFS='=' read -r k v; do
    case $k in
      KAFKA_PORT) RECORDED_PORT=$v ;;
      KAFKA_CONTROLLER_PORT) CONTROLLER_PORT=$v ;;
      KAFKA_CLUSTER_ID) CLUSTER_ID=$v ;;
      KAFKA_PASSWORD) PASSWORD=$v ;;
    esac
  done <"$STATE"
}

write_state() {
  (
    umask 077
    printf 'KAFKA_PORT=%s\nKAFKA_CONTROLLER_PORT=%s\nKAFKA_CLUSTER_ID=%s\nKAFKA_PASSWORD=%s\n' \
      "$RECORDED_PORT" "$CONTROLLER_PORT" "$CLUSTER_ID" "$PASSWORD" >"$STATE.tmp"
  )
  mv "$STATE.tmp" "$STATE"
}

write_confs() {
  (
    umask 077
    kafka_server_properties "scripts/kafka.sh: this instance (owner-only: it holds the inter-broker login)" \
      "$ROOT/conf/kafka/server.properties" 127.0.0.1 127.0.0.1 "$RECORDED_PORT" "$CONTROLLER_PORT" "$LOG_DIRS" \
      "$USER_NAME" "$PASSWORD" >"$CONF.tmp"
    kafka_client_properties "scripts/kafka.sh: how a client logs in to this broker (librdkafka's names; owner-only)" \
      127.0.0.1 "$RECORDED_PORT" "$USER_NAME" "$PASSWORD" >"$CLIENT.tmp"
  )
  mv "$CONF.tmp" "$CONF"
  mv "$CLIENT.tmp" "$CLIENT"
}

our_pid() { live_pid "$PID_FILE"; }

# A SCRAM client lists the broker's topics (autoscaler.kafka: the password is read from the client config).
answers() {
  "$PYTHON" -m autoscaler.kafka probe --client-config "$CLIENT" --timeout 3 >/dev/null 2>&1
}

classpath() { echo "$KAFKA_HOME/libs/*"; }

cmd_up() {
  [ $# -eq 0 ] || die "up takes no arguments"
  need_python
  cmd_install
  local java pid t0 deadline
  java=$(java_cmd)
  mkdir -p "$DATA_DIR"
  chmod 700 "$DATA_DIR"
  read_state
  pid=$(our_pid)
  if [ -n "$pid" ]; then
    deadline=$(($(date +%s) + START_TIMEOUT))
    until answers; do
      [ "$(date +%s)" -lt "$deadline" ] || die "running (pid $pid) but not answering on 127.0.0.1:$RECORDED_PORT (log: $LOG)"
      sleep 0.5
    done
    log "already running on 127.0.0.1:$RECORDED_PORT (pid $pid)"
    return 0
  fi
  if [ -f "$PID_FILE" ]; then
    # Our broker died (killed, or the machine stopped): a JVM's ports are released only once its last
    # thread has exited, a moment after its main thread is gone. Wait for them before judging a port taken.
    deadline=$(($(date +%s) + STOP_TIMEOUT))
    while { [ -n "$RECORDED_PORT" ] && port_taken "$RECORDED_PORT"; } || { [ -n "$CONTROLLER_PORT" ] && port_taken "$CONTROLLER_PORT"; }; do
      [ "$(date +%s)" -lt "$deadline" ] || break
      sleep 0.2
    done
    rm -f "$PID_FILE"
  fi
  [ -n "$PASSWORD" ] || PASSWORD=$(random_secret 32)
  # An id not yet formatted with is made again if it starts with '-': the format tool reads it as an option
  # (Kafka's own random ids never start with one, for that reason). Seen: 1 install in 64.
  if [ ! -f "$LOG_DIRS/meta.properties" ] && [[ ${CLUSTER_ID:0:1} == - ]]; then CLUSTER_ID=; fi
  [ -n "$CLUSTER_ID" ] || CLUSTER_ID=$(kafka_new_cluster_id)
  if [ -n "${KAFKA_PORT:-}" ]; then
    port_taken "$KAFKA_PORT" && die "port $KAFKA_PORT (KAFKA_PORT) is taken by something else: choose another"
    RECORDED_PORT=$KAFKA_PORT
  elif [ -z "$RECORDED_PORT" ] || port_taken "$RECORDED_PORT"; then
    RECORDED_PORT=$(first_free_port "$DEFAULT_PORT")
  fi
  if [ -z "$CONTROLLER_PORT" ] || port_taken "$CONTROLLER_PORT" || [ "$CONTROLLER_PORT" = "$RECORDED_PORT" ]; then
    CONTROLLER_PORT=$(first_free_port $((RECORDED_PORT + 1)))
  fi
  write_state
  write_confs
  local -a jvm=(-Xms"$HEAP" -Xmx"$HEAP" -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$ROOT/conf/kafka/log4j2.properties" -cp "$(classpath)")
  if [ ! -f "$LOG_DIRS/meta.properties" ]; then
    # Format once (kafka_format_args: the login goes through an owner-only file, removed after).
    local scram=$DATA_DIR/.format-args
    (
      umask 077
      kafka_format_args "$CLUSTER_ID" "$CONF" "$USER_NAME" "$PASSWORD" >"$scram"
    )
    "$java" "${jvm[@]}" "@$scram" >>"$LOG" 2>&1 || {
      rm -f "$scram"
      tail -n 20 "$LOG" >&2
      die "formatting the storage failed (log: $LOG)"
    }
    rm -f "$scram"
  fi
  t0=$(now_ms)
  echo "===== $(date -Is) kafka.Kafka $CONF" >>"$LOG"
  # A session of its own: the broker outlives the make, test or terminal that started it.
  setsid "$java" "${jvm[@]}" kafka.Kafka "$CONF" </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid $(proc_start "$pid" || die "the broker exited at once (log: $LOG)")" >"$PID_FILE"
  wait_answering "the broker" "$PID_FILE" "$LOG" answers
  log "Kafka $KAFKA_VERSION up on 127.0.0.1:$RECORDED_PORT in $(secs_since "$t0") s (pid $pid, data $DATA_DIR; client config $CLIENT)"
}

cmd_down() {
  [ $# -eq 0 ] || die "down takes no arguments"
  stop_recorded "$PID_FILE" # SIGTERM: a controlled shutdown that flushes the logs
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local pid
  pid=$(our_pid)
  read_state
  if [ -z "$pid" ]; then
    echo "kafka: stopped (data $DATA_DIR)"
    return 3
  fi
  if ! answers; then
    echo "kafka: running (pid $pid) but not answering on 127.0.0.1:$RECORDED_PORT (log: $LOG)"
    return 1
  fi
  echo "kafka: running on 127.0.0.1:$RECORDED_PORT (pid $pid, data $DATA_DIR)"
  return 0
}

cmd_client_config() {
  [ $# -eq 0 ] || die "client-config takes no arguments"
  [ -f "$CLIENT" ] || die "no client config in $DATA_DIR: 'scripts/kafka.sh up' first"
  echo "$CLIENT"
}

dispatch "$@"
